package mesh

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// Timers an application arms must not make its object unmovable: what
// SetTimer accepts, the relocation payload must carry (docs/EMBEDDING.md
// §8, docs/RESTORE-PAYLOAD.md "timer").

const timerArmType = "test.timerarm"

type timerArmObj struct {
	mu    sync.Mutex
	fired int
}

func (o *timerArmObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Timer {
		o.mu.Lock()
		o.fired++
		o.mu.Unlock()
		return nil
	}
	var err error
	switch body := string(env.Body); {
	case body == "arm-negative-period":
		// A negative period: the runtime runs it as a one-shot timer.
		err = t.SetTimer("neg", time.Hour, -time.Second)
	case strings.HasPrefix(body, "arm-long-name "):
		n, _ := strconv.Atoi(strings.TrimPrefix(body, "arm-long-name "))
		err = t.SetTimer(strings.Repeat("x", n), time.Hour, 0)
	}
	if err != nil {
		return t.Reply([]byte("refused: " + err.Error()))
	}
	return t.Reply([]byte("armed"))
}

// A timer armed with a negative period (SetTimer accepts it and runs it
// as a one-shot timer) and a timer whose name the payload can carry
// (65,535 bytes) move with their object; a name longer than the payload
// can carry is refused by SetTimer (spot.ErrTimerName) rather than
// accepted. Before, both were accepted and every move of the object then
// failed at the payload's validation (negative duration, name above
// 65,535 bytes): the object could never move, and a drain left it to be
// removed with its state.
func TestTimersSetTimerAcceptsMoveWithTheirObject(t *testing.T) {
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: timerArmType, Kind: spot.KindActor, Policy: spot.PolicyRecreate,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) { return &timerArmObj{}, nil }}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	tests := []struct {
		id, arm string
		refused error // nil: SetTimer accepts it
	}{
		{"tm-negative-period", "arm-negative-period", nil},
		{"tm-longest-name", "arm-long-name 65535", nil},
		{"tm-too-long-name", "arm-long-name 65536", spot.ErrTimerName},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			ref, err := c.m(0).CreateActor(ctx, tc.id, timerArmType)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.m(0).RequestActor(ctx, ref, []byte(tc.arm))
			if err != nil {
				t.Fatal(err)
			}
			want := "armed"
			if tc.refused != nil {
				want = "refused: " + tc.refused.Error()
			}
			if !strings.HasPrefix(string(got), want) {
				t.Fatalf("%s: %q, want %q…", tc.arm, got, want)
			}
			src, dst := movePair(t, c, record.ObjectActor, tc.id)
			res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, tc.id, ref.ObjectGeneration))
			if res.Outcome != Moved {
				t.Fatalf("move after %s: %v (%s: %.300s), want moved", tc.arm, res.Outcome, res.Reason, res.Detail)
			}
			if ownerIndex(t, c, record.ObjectActor, tc.id) != dst {
				t.Fatalf("owner is not node %d after the move", dst)
			}
		})
	}
}

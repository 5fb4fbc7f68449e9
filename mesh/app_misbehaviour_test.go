package mesh

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// Application misbehaviour during a move (operator try-out 6): the
// snapshot adapter is application code like a handler or a factory, and
// its panic must not take the node down (spec §9.4: a failed move leaves
// the object served on its source).

const misbehaveType = "test.misbehave"

// misbehaveMode says what the snapshot adapter does for an id.
type misbehaveMode int

const (
	behave misbehaveMode = iota
	snapshotPanics
	snapshotFails
	restorePanics
	restoreNilHandler
)

// misbehaveCtl maps ids to what their adapter does; a count survives
// every restore that behaves.
type misbehaveCtl struct {
	mu    sync.Mutex
	modes map[string]misbehaveMode
}

func (c *misbehaveCtl) mode(id string) misbehaveMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.modes[id]
}

type misbehaveObj struct {
	id string
	n  int
}

func (o *misbehaveObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if string(env.Body) == "get" {
		return t.Reply([]byte(strconv.Itoa(o.n)))
	}
	o.n++
	if env.Kind == spot.Request {
		return t.Reply([]byte("ok"))
	}
	return nil
}

type misbehaveSnapshot struct{ c *misbehaveCtl }

func (a misbehaveSnapshot) Snapshot(h spot.Handler) ([]byte, error) {
	o := h.(*misbehaveObj)
	switch a.c.mode(o.id) {
	case snapshotPanics:
		panic("snapshot: nil map write in the application")
	case snapshotFails:
		return nil, errors.New("snapshot: state does not encode")
	}
	return []byte(strconv.Itoa(o.n)), nil
}

func (a misbehaveSnapshot) Restore(_ context.Context, req spot.CreateRequest, state []byte) (spot.Handler, error) {
	switch a.c.mode(req.ID) {
	case restorePanics:
		panic("restore: index out of range in the application")
	case restoreNilHandler:
		return nil, nil
	}
	n, err := strconv.Atoi(string(state))
	if err != nil {
		return nil, err
	}
	return &misbehaveObj{id: req.ID, n: n}, nil
}

// A snapshot adapter that panics, fails, or a Restore at the target that
// panics or returns no handler: the move ends NotMoved, the node is still
// up, the object stays served on its source with every accepted message
// counted once (also those sent during the move), and moving it again once
// the adapter behaves works. Before, a panic in Snapshot (source) or
// Restore (target) was not recovered and killed the process, and a nil
// handler from Restore was opened and failed every later turn.
func TestMoveWithMisbehavingSnapshotAdapterFailsCleanly(t *testing.T) {
	ctl := &misbehaveCtl{modes: map[string]misbehaveMode{}}
	f := newFixture(t)
	if err := f.reg.Register(spot.Factory{StableType: misbehaveType, Kind: spot.KindActor, Policy: spot.PolicyPreserveState,
		Snapshot: misbehaveSnapshot{ctl},
		New: func(_ context.Context, req spot.CreateRequest) (spot.Handler, error) {
			return &misbehaveObj{id: req.ID}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, clientRole0)
	tests := []struct {
		name   string
		mode   misbehaveMode
		reason relocation.Reason
		detail string // in the result's Detail
	}{
		{"snapshot panics", snapshotPanics, relocation.ReasonSnapshotFailed, "panicked: in Snapshot: snapshot: nil map write"},
		{"snapshot fails", snapshotFails, relocation.ReasonSnapshotFailed, "snapshot adapter: snapshot: state does not encode"},
		{"restore panics on the target", restorePanics, relocation.ReasonTargetFailed, "panicked: in Restore: restore: index out of range"},
		{"restore returns no handler", restoreNilHandler, relocation.ReasonTargetFailed, "Restore returned no handler"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t, 60*time.Second)
			id := fmt.Sprintf("mis-%d", i)
			ref, err := c.m(0).CreateActor(ctx, id, misbehaveType)
			if err != nil {
				t.Fatal(err)
			}
			for j := 0; j < 3; j++ {
				if err := c.m(0).SendActor(ctx, ref, []byte("add")); err != nil {
					t.Fatal(err)
				}
			}
			src, dst := movePair(t, c, record.ObjectActor, id)
			before := rowOf(t, c, record.ObjectActor, id)
			ctl.mu.Lock()
			ctl.modes[id] = tc.mode
			ctl.mu.Unlock()
			res := outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
			if res.Outcome != NotMoved || res.Reason != tc.reason.String() || !strings.Contains(res.Detail, tc.detail) {
				t.Fatalf("outcome %v (%s: %q), want notMoved (%s: …%s…)", res.Outcome, res.Reason, res.Detail, tc.reason, tc.detail)
			}
			sameOwnership(t, before, rowOf(t, c, record.ObjectActor, id))
			checkOwners(t, c, record.ObjectActor, id, src, before.Record.AuthorityOwnerGeneration, src)
			if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "3" {
				t.Fatalf("after the failed move: %q, %v; want 3", got, err)
			}
			// Its node and the target still serve the other objects.
			for _, n := range []int{src, dst} {
				if err := c.nodes[n].Ready(); err != nil {
					t.Fatalf("node %d not ready after the failed move: %v", n, err)
				}
			}
			ctl.mu.Lock()
			ctl.modes[id] = behave
			ctl.mu.Unlock()
			res = outcomeOf(t, relocateAsync(ctx, c, src, dst, record.ObjectActor, id, ref.ObjectGeneration))
			if res.Outcome != Moved {
				t.Fatalf("second move: %v (%s %s), want moved", res.Outcome, res.Reason, res.Detail)
			}
			if got, err := c.m(0).RequestActor(ctx, ref, []byte("get")); err != nil || string(got) != "3" {
				t.Fatalf("after the second move: %q, %v; want 3", got, err)
			}
		})
	}
}

package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// lifecycleType is a RecreateOnRelocation Actor implementing
// spot.Relocated; every instance writes what happens to it into a shared
// log, so the test sees the order on the instance the target built.
const lifecycleType = "test.lifecycle"

type lifecycleLog struct {
	mu     sync.Mutex
	next   int
	events []string // "<instance>:<event>"
	block  chan struct{}
	mode   string // what Relocated does: "ok", "error", "panic"
	info   spot.RelocationInfo
}

func (l *lifecycleLog) add(inst int, ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%d:%s", inst, ev))
}

// of returns instance inst's events, in order.
func (l *lifecycleLog) of(inst int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if n, ev, _ := strings.Cut(e, ":"); n == fmt.Sprint(inst) {
			out = append(out, ev)
		}
	}
	return out
}

type lifecycleObj struct {
	log  *lifecycleLog
	inst int
}

func (o *lifecycleObj) Receive(t *spot.Turn, env spot.Envelope) error {
	body := string(env.Body)
	o.log.add(o.inst, body)
	if body == "block" {
		<-o.log.block
	}
	if env.Kind == spot.Request {
		return t.Reply([]byte(fmt.Sprint(o.inst)))
	}
	return nil
}

func (o *lifecycleObj) Relocated(ctx context.Context, info spot.RelocationInfo) error {
	// Long enough that a queued message would run meanwhile if dispatch
	// were open.
	time.Sleep(100 * time.Millisecond)
	o.log.add(o.inst, "relocated")
	o.log.mu.Lock()
	o.log.info = info
	mode := o.log.mode
	o.log.mu.Unlock()
	switch mode {
	case "error":
		return errors.New("resource unavailable")
	case "panic":
		panic("callback exploded")
	}
	return ctx.Err()
}

// §1.3 step 7, §9.2: "Required lifecycle callbacks finish before application
// message processing starts." The target calls spot.Relocated on the
// instance it built after the owner change, before any moved message runs
// there; a failing or panicking callback is logged and the object, owned
// by the target whatever the callback says, serves anyway.
func TestRelocatedCallbackRunsBeforeDispatch(t *testing.T) {
	for _, mode := range []string{"ok", "error", "panic"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			lg := &lifecycleLog{block: make(chan struct{}), mode: mode}
			if err := f.reg.Register(spot.Factory{StableType: lifecycleType, Kind: spot.KindActor, Policy: spot.PolicyRecreate,
				New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
					lg.mu.Lock()
					defer lg.mu.Unlock()
					lg.next++
					return &lifecycleObj{log: lg, inst: lg.next}, nil
				}}); err != nil {
				t.Fatal(err)
			}
			c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) { clientRole0(i, cfg) })
			ctx := ctxT(t, 30*time.Second)
			ref, err := c.m(0).CreateActor(ctx, "lifecycle-"+mode, lifecycleType)
			if err != nil {
				t.Fatal(err)
			}
			// A turn in progress and two messages queued behind it: the move
			// waits for the turn, captures the two and restores them on the
			// target, where they must not run before the callback returned.
			for _, b := range []string{"block", "q1", "q2"} {
				if err := c.m(0).SendActor(ctx, ref, []byte(b)); err != nil {
					t.Fatal(err)
				}
			}
			waitUntil(t, "the blocking turn", func() bool { return len(lg.of(1)) == 1 })
			src, dst := movePair(t, c, record.ObjectActor, ref.ActorID)
			moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
			time.Sleep(20 * time.Millisecond) // let the move hold the object
			close(lg.block)
			if res := outcomeOf(t, moving); res.Outcome != Moved {
				t.Fatalf("move: %v (%s)", res.Outcome, res.Reason)
			}
			got, err := c.m(0).RequestActor(ctx, ref, []byte("after"))
			if err != nil || string(got) != "2" {
				t.Fatalf("after the move: %q, %v; want instance 2 serving", got, err)
			}
			if got := strings.Join(lg.of(2), ","); got != "relocated,q1,q2,after" {
				t.Errorf("the target's instance saw %q, want relocated,q1,q2,after", got)
			}
			if got := strings.Join(lg.of(1), ","); got != "block" {
				t.Errorf("the source's instance saw %q, want block", got)
			}
			lg.mu.Lock()
			info := lg.info
			lg.mu.Unlock()
			row := rowOf(t, c, record.ObjectActor, ref.ActorID)
			if info.ID != ref.ActorID || info.ObjectGeneration != ref.ObjectGeneration ||
				info.AuthorityOwnerGeneration != uint64(row.Record.AuthorityOwnerGeneration) || string(info.SourceNodeRID) != string(c.nodes[src].RID()) {
				t.Errorf("callback info %+v; want id %s, generation %d, owner generation %d, source %x", info, ref.ActorID,
					ref.ObjectGeneration, row.Record.AuthorityOwnerGeneration, c.nodes[src].RID())
			}
		})
	}
}

package mesh

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/spot"
)

// stuckRelocatedObj's Relocated does not return until free is closed,
// whatever its ctx says.
type stuckRelocatedObj struct {
	started chan struct{}
	once    *sync.Once
	free    chan struct{}
}

func (o *stuckRelocatedObj) Receive(t *spot.Turn, env spot.Envelope) error {
	if env.Kind == spot.Request {
		return t.Reply(nil)
	}
	return nil
}

func (o *stuckRelocatedObj) Relocated(context.Context, spot.RelocationInfo) error {
	o.once.Do(func() { close(o.started) })
	<-o.free
	return nil
}

// Found by review (2026-12-07, night). A stop that does not see a call into
// the application return names it (ApplicationStuckError.InCalls) — also a
// spot.Relocated callback, which the target runs outside any turn after
// the owner change: before, only New, Snapshot and Restore were named, and
// a Relocated that did not return left InCalls empty (Calls alone, whose
// text speaks only of a factory's New or a snapshot adapter).
func TestCloseDuringAStuckRelocatedNamesTheCall(t *testing.T) {
	f := newFixture(t)
	started, free := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var freeOnce sync.Once
	defer freeOnce.Do(func() { close(free) })
	const typ = "test.stuck-relocated"
	if err := f.reg.Register(spot.Factory{StableType: typ, Kind: spot.KindActor, Policy: spot.PolicyRecreate,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			return &stuckRelocatedObj{started: started, once: &once, free: free}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		cfg.ShutdownDeadline = time.Second
		cfg.Relocation.DrainOnShutdown = false
	})
	ctx := ctxT(t, 30*time.Second)
	ref, err := c.m(0).CreateActor(ctx, "stuck-relocated", typ)
	if err != nil {
		t.Fatal(err)
	}
	src, dst := movePair(t, c, record.ObjectActor, ref.ActorID)
	moving := relocateAsync(ctx, c, src, dst, record.ObjectActor, ref.ActorID, ref.ObjectGeneration)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("Relocated was never called")
	}
	err = closeReturns(t, c.nodes[dst], "a Relocated callback")
	freeOnce.Do(func() { close(free) })
	outcomeOfErr(t, moving)
	var st *ApplicationStuckError
	if !errors.As(err, &st) {
		t.Fatalf("Close = %v, want an *ApplicationStuckError", err)
	}
	if want := "Relocated of actor " + ref.ActorID + " (running "; len(st.InCalls) != 1 || !strings.HasPrefix(st.InCalls[0], want) ||
		!strings.Contains(err.Error(), want) {
		t.Fatalf("Close = %v (calls %q), want the callback named %q…", err, st.InCalls, want)
	}
}

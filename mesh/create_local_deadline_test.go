package mesh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// A creation placed on the caller's own node ends at the call's deadline
// like one placed on a peer, also when the factory ignores its context:
// ErrDeadlineExceeded, the factory still running, and the creation decided
// by the node once the factory returns (recorded, as a peer does: "after
// the factory it records the result whatever the caller's deadline").
// Before, the local factory ran on the caller's goroutine and the call
// waited for it past its deadline (for good, for a factory that never
// returns), then answered Created.
func TestLocalCreationEndsAtItsDeadlineWhileTheFactoryRuns(t *testing.T) {
	f := newFixture(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	if err := f.reg.Register(spot.Factory{StableType: "test.slownew", Kind: spot.KindActor, Policy: spot.PolicyDisabled,
		New: func(context.Context, spot.CreateRequest) (spot.Handler, error) {
			close(entered)
			<-release // ignores its context, as application code may
			return &typedNilObj{}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	c := newClusterOn(t, f, nil, 1, nil)
	m := c.nodes[0].Manager()

	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		ref ActorRef
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancelCall := context.WithTimeout(cctx, 200*time.Millisecond)
		defer cancelCall()
		ref, err := m.CreateActor(ctx, "slow:1", "test.slownew")
		done <- result{ref, err}
	}()
	<-entered
	var got result
	select {
	case got = <-done:
	case <-ctxT(t, 20*time.Second).Done():
		close(release)
		released = true
		got = <-done
		t.Fatalf("CreateActor still waiting for the local factory long past its deadline; once it returned: %v, %v", got.ref, got.err)
	}
	if !errors.Is(got.err, ErrDeadlineExceeded) {
		t.Fatalf("CreateActor = %v, %v; want ErrDeadlineExceeded while the factory runs", got.ref, got.err)
	}
	close(release)
	released = true
	ctx := ctxT(t, 20*time.Second)
	eventually(t, 15*time.Second, "the creation decided once the factory returned", func() bool {
		_, err := m.FindActor(ctx, "slow:1")
		return err == nil
	})
	ref, err := m.FindActor(ctx, "slow:1")
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := m.RequestActor(ctx, ref, []byte("hi")); err != nil || string(rep) != "ok" {
		t.Fatalf("request to the created object = %q, %v", rep, err)
	}
}

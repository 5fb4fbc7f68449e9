package mesh

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/chunk"
	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/mesh/relocation"
	"github.com/meshnode/meshnode/spot"
)

// A target whose source crashed in the middle of its Restore ends the
// arrival once it knows the source's node run ended — as the source's
// cancel would (§9.1 "Source terminates during Preparing or capture"): its
// assembly, its hosted entry (the temporary queue) and its slot go. The
// object stays where the record says, with the dead source, until the
// reclaim. Before, all of it stayed until the Restore deadline the source
// chose — here 10 minutes, as a host command's 5 minutes or more. Two
// points before relay-ready: the Restore request arrived and its chunk
// never does (assembling); the payload is whole and the hidden instance
// is being built (building).
func TestTargetEndsTheArrivalOfASourceThatCrashedMidRestore(t *testing.T) {
	for _, building := range []bool{false, true} {
		name := "assembling"
		if building {
			name = "building"
		}
		t.Run(name, func(t *testing.T) { sourceCrashedMidRestore(t, building) })
	}
}

func sourceCrashedMidRestore(t *testing.T, building bool) {
	f, _, _, fast := republishScene(t)
	ctx := ctxT(t, 60*time.Second)
	src := startRoundsApart(t, f, 1, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	dst := startRoundsApart(t, f, 2, 100*time.Millisecond, config.RoleServer, f.loc, fast)
	client := startRoundsApart(t, f, 0, time.Hour, config.RoleClient, f.loc, fast)
	x := createOnNode(t, ctx, client, src, "crashing", 1)[0]
	if err := client.Manager().SendActor(ctx, x, []byte("one")); err != nil {
		t.Fatal(err)
	}
	row, _, err := dst.obj.readAuthorityAt(ctx, record.ObjectActor, x.ActorID)
	if err != nil || !row.Found {
		t.Fatalf("read %s: %+v, %v", x.ActorID, row, err)
	}
	before := row.Record

	// Assembling: the source sends its Restore request and stops before
	// the first chunk, and is killed there. Building: the target's build
	// of the hidden instance waits while the source is killed. The hooks
	// are let go only when the test ends (the killed run's move then
	// finds its transport closed: it sends nothing more).
	reachedCh, release := make(chan struct{}), make(chan struct{})
	reached := sync.OnceFunc(func() { close(reachedCh) })
	t.Cleanup(sync.OnceFunc(func() { close(release) }))
	type end struct {
		state   relocation.TargetState
		failure relocation.TargetFailure
	}
	ended := make(chan end, 1)
	dstHooks := &testHooks{arrivalEnded: func(id string, s relocation.TargetState, fl relocation.TargetFailure) {
		if id == x.ActorID {
			ended <- end{s, fl}
		}
	}}
	if building {
		dstHooks.relocationStep = func(id, step string) {
			if id == x.ActorID && step == stepTargetBuild {
				reached()
				<-release
			}
		}
	} else {
		src.obj.hooks.Store(&testHooks{restoreChunk: func(id string, _ chunk.Binding, index int, data []byte) []byte {
			if id == x.ActorID && index == 0 {
				reached()
				<-release
			}
			return data
		}})
	}
	dst.obj.hooks.Store(dstHooks)
	// The move's own deadline is far beyond the test's: only the source's
	// end can end the arrival in time.
	mctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	startMoveUntil(t, mctx, src, x, dst, reachedCh)
	key := spot.Key{ID: x.ActorID}
	eventually(t, 10*time.Second, "the target to register the arrival", func() bool {
		dst.obj.mu.Lock()
		defer dst.obj.mu.Unlock()
		h, ok := dst.obj.hosted[key]
		return ok && h.state == hostIncoming
	})

	// Its transport first: the killed run's move, whose context ends with
	// the node's stop, must not get a cancel (55) out.
	_ = src.tr.Close()
	src.crash()

	var e end
	select {
	case e = <-ended:
	case <-ctx.Done():
		t.Fatal("the arrival of a source whose node run ended is still under way: it waits for the Restore deadline (10 min)")
	}
	if e.state != relocation.TgtFailed || e.failure != relocation.TgtFailSourceEnded {
		t.Fatalf("the arrival ended %s/%s, want %s/%s", e.state, e.failure, relocation.TgtFailed, relocation.TgtFailSourceEnded)
	}
	dst.obj.mu.Lock()
	h, hosted := dst.obj.hosted[key]
	arrivals := len(dst.obj.arrivals)
	dst.obj.mu.Unlock()
	if hosted {
		t.Fatalf("the target still hosts %s (%s) after its arrival ended", x.ActorID, h.state)
	}
	if arrivals != 0 {
		t.Fatalf("the target still has %d arrivals", arrivals)
	}
	// Nothing was committed: the record still names the dead source, at
	// the generation the move found (the reclaim decides from here).
	row, _, err = dst.obj.readAuthorityAt(ctx, record.ObjectActor, x.ActorID)
	if err != nil || !row.Found {
		t.Fatalf("read %s after the arrival ended: %+v, %v", x.ActorID, row, err)
	}
	if row.Record.OwnerID != before.OwnerID || row.Record.OwnerLeaseGeneration != before.OwnerLeaseGeneration ||
		row.Record.AuthorityOwnerGeneration != before.AuthorityOwnerGeneration {
		t.Fatalf("the record names owner %s/%d at generation %d, want the dead source's %s/%d at %d", row.Record.OwnerID,
			row.Record.OwnerLeaseGeneration, row.Record.AuthorityOwnerGeneration, before.OwnerID, before.OwnerLeaseGeneration,
			before.AuthorityOwnerGeneration)
	}
}

// A Restore's wire deadline is taken up to maxRestoreWait from its
// arrival, whatever the source sent: a far-future one (or one beyond any
// real time) is clamped, not refused, and one that passed is refused.
func TestRestoreWaitIsClampedToMaxRestoreWait(t *testing.T) {
	ms := func(d time.Duration) uint64 { return uint64(time.Now().Add(d).UnixMilli()) }
	for _, tc := range []struct {
		name     string
		deadline uint64
	}{
		{"an hour out", ms(time.Hour)},
		{"a year out", ms(365 * 24 * time.Hour)},
		{"beyond int64", ^uint64(0)},
		{"at 2^62 ms", 1 << 62},
	} {
		if got := restoreWait(tc.deadline); got != maxRestoreWait {
			t.Errorf("%s: %v, want maxRestoreWait (%v)", tc.name, got, maxRestoreWait)
		}
	}
	if got := restoreWait(ms(time.Minute)); got <= 0 || got > time.Minute {
		t.Errorf("a minute out: %v, want (0, 1m]", got)
	}
	if got := restoreWait(ms(-time.Second)); got > 0 {
		t.Errorf("a second ago: %v, want none left", got)
	}
	if got := restoreWait(0); got > 0 {
		t.Errorf("zero: %v, want none left", got)
	}
}

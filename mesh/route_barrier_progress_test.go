package mesh

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router/transport"
)

func TestLinkProgressMoved(t *testing.T) {
	up := func(out uint64, acked int64) linkProgress {
		return linkProgress{up: true, Progress: transport.Progress{RecordsOut: out, AckedBytes: acked}}
	}
	read := func(p linkProgress, records uint64) linkProgress {
		p.ReadRecords = records
		return p
	}
	for _, tc := range []struct {
		name      string
		prev, cur linkProgress
		want      bool
	}{
		{"records left for the peer", up(5, 100), up(6, 100), true},
		{"the peer's kernel took more", up(5, 100), up(5, 180), true},
		{"nothing moved", up(5, 100), up(5, 100), false},
		{"nothing moved, acks unknown", up(5, -1), up(5, -1), false},
		// A backlog in the kernels' buffers: nothing leaves the queue and
		// everything is acknowledged, but the peer's reader answered a
		// liveness probe lying further into it.
		{"the peer's reader read further", read(up(5, 100), 2), read(up(5, 100), 4), true},
		// The node keeping the barrier on purpose said so again
		// (route_barrier_held.go), whatever the link does.
		{"a barrier-held notice", up(5, 100), linkProgress{up: true, Progress: transport.Progress{RecordsOut: 5, AckedBytes: 100}, held: 1}, true},
		{"a barrier-held notice, link down", linkProgress{held: 1}, linkProgress{held: 2}, true},
		{"link down", up(5, 100), linkProgress{}, false},
		{"link up again: a new connection, not progress yet", linkProgress{}, up(9, 0), false},
	} {
		if got := tc.cur.moved(tc.prev); got != tc.want {
			t.Errorf("%s: moved = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// watchProgress cuts at the first slice without progress, not before, and
// not while a probe awaits the peer's answer on a link that is up; it does
// nothing once stopped.
func TestWatchProgress(t *testing.T) {
	at := func(out uint64, acked int64) linkProgress {
		return linkProgress{up: true, Progress: transport.Progress{RecordsOut: out, AckedBytes: acked}}
	}
	waiting := func(p linkProgress) linkProgress {
		p.Unanswered = true
		return p
	}
	for _, tc := range []struct {
		name      string
		looks     []linkProgress // the last repeats
		wantLooks int            // looks taken when it cut
	}{
		{"moving three slices, then stuck", []linkProgress{at(0, 0), at(1, 0), at(1, 40), at(2, 40), at(2, 40)}, 5},
		{"stuck at once", []linkProgress{at(3, 3)}, 2},
		{"link gone", []linkProgress{at(3, 3), {}}, 2},
		// Nothing moves, but a probe awaits the peer's answer: the link's
		// liveness judges it. Answered with nothing of ours taken, the
		// next slice without movement cuts.
		{"a probe unanswered two slices, then answered", []linkProgress{at(3, 3), waiting(at(3, 3)), waiting(at(3, 3)), at(3, 3)}, 4},
		{"a probe unanswered on a link gone", []linkProgress{at(3, 3), {Progress: transport.Progress{Unanswered: true}}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			look := func() linkProgress {
				mu.Lock()
				defer mu.Unlock()
				p := tc.looks[min(n, len(tc.looks)-1)]
				n++
				return p
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stop := watchProgress(ctx, cancel, time.Millisecond, look)
			defer stop()
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("never cut")
			}
			mu.Lock()
			defer mu.Unlock()
			if n != tc.wantLooks {
				t.Errorf("cut after %d looks, want %d", n, tc.wantLooks)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cut := make(chan struct{})
	stop := watchProgress(ctx, func() { close(cut) }, time.Millisecond, func() linkProgress { return linkProgress{up: true} })
	stop()
	stop() // twice is fine
	select {
	case <-cut:
		t.Fatal("a stopped watch cut")
	case <-time.After(50 * time.Millisecond):
	}
}

// A previous owner that is alive and working through a backlog of this
// node's messages is waited for: the barrier is not cut while the link
// takes more of what this node sent (here a look that always shows it
// moving, as a draining send queue does: the transport's side is
// TestPeerProgressMovesAsTheReaderReads), and the sender's order holds.
// Before 2026-12-06 the wait ended at barrierWait whatever the link did,
// and the next message overtook the held one (a flake hunt: a demo drain on
// one core, thousands of records queued on a link, reordered 5–13
// messages).
//
// Nor while a liveness probe awaits the previous owner's answer (its
// reader is held here, and nothing of the link moves: as for a backlog in
// the kernels' buffers that no probe lies inside): the link's liveness
// judges it, and the barrier waits past its own slices until the answer
// comes — here when the reader is released — or the session ends. Until
// 2026-12-06 it was cut after one slice and message 3 overtook message 2
// (the second case; the transport's side is
// TestPeerProgressShowsAnUnansweredProbe).
//
// A link on which nothing moves and no probe awaits an answer is still
// given up after one slice (the third case: no probe goes out during it).
func TestRouteSwitchWaitsForAPreviousOwnerThatMakesProgress(t *testing.T) {
	for _, mode := range []barrierLinkMode{linkBusy, probeUnanswered, nothingMoves} {
		t.Run(string(mode), func(t *testing.T) { routeSwitchWaitsWhileTheLinkMoves(t, mode) })
	}
}

// barrierLinkMode is what the link to the previous owner shows while its
// reader is held.
type barrierLinkMode string

const (
	linkBusy        barrierLinkMode = "link busy"        // a look that always moves
	probeUnanswered barrierLinkMode = "probe unanswered" // probes every 100 ms go unanswered
	nothingMoves    barrierLinkMode = "nothing moves"    // and no probe goes out
)

func routeSwitchWaitsWhileTheLinkMoves(t *testing.T, mode barrierLinkMode) {
	f := newFixture(t)
	registerSeqType(t, f)
	c := newClusterOn(t, f, nil, 3, func(i int, cfg *config.Config) {
		clientRole0(i, cfg)
		switch mode {
		case probeUnanswered:
			// Probes often, and a liveness that does not end the link
			// while the reader is held (a few slices).
			cfg.Transport.LivenessInterval, cfg.Transport.PeerTimeout = 100*time.Millisecond, 10*time.Second
		case nothingMoves:
			cfg.Transport.LivenessInterval, cfg.Transport.PeerTimeout = time.Hour, 2*time.Hour
		}
	})
	ctx := ctxT(t, 30*time.Second)
	// Longer than the probe interval: a probe goes out in the first slice.
	const slice = 300 * time.Millisecond
	c.nodes[0].obj.barrierEvery = slice
	ref, src, dst := movedAfterOne(t, ctx, c, "barrier-progress")
	if mode == linkBusy {
		var n atomic.Uint64
		c.nodes[0].obj.linkLook = func() linkProgress {
			return linkProgress{up: true, Progress: transport.Progress{RecordsOut: n.Add(1)}}
		}
	}
	held, releaseOnce := holdFirstPassOn(c.nodes[src], ref.ActorID)
	defer releaseOnce()
	if err := c.m(0).SendActor(ctx, ref, []byte("s:n0:2")); err != nil {
		t.Fatal(err)
	}
	<-held
	c.nodes[0].obj.cache.Drop(follow.Key{Kind: follow.KindActor, ID: ref.ActorID})
	done := make(chan error, 1)
	go func() { done <- c.m(0).SendActor(ctx, ref, []byte("s:n0:3")) }()

	waited := mode != nothingMoves
	if waited {
		select {
		case err := <-done:
			t.Fatalf("message 3 went out while message 2 was held (%s; err %v; barriers timed out %d)",
				mode, err, c.stats(0).RouteBarriersTimedOut)
		case <-time.After(5 * slice):
		}
		releaseOnce()
		if err := <-done; err != nil {
			t.Fatalf("message 3: %v", err)
		}
	} else {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("message 3: %v", err)
			}
		case <-ctx.Done():
			t.Fatal("a barrier on a link where nothing moved was not given up")
		}
		releaseOnce()
	}

	s := c.stats(0)
	if waited {
		st := seqStateOf(t, ctx, c, ref)
		if st.Last["n0"] != 3 || st.Gaps != 0 || st.Duplicates != 0 {
			t.Errorf("object saw last %d, %d gaps, %d duplicates; want 3, 0, 0 (in order)", st.Last["n0"], st.Gaps, st.Duplicates)
		}
		if s.RouteBarriersTimedOut != 0 {
			t.Errorf("%d barriers timed out (%s)", s.RouteBarriersTimedOut, mode)
		}
	} else if s.RouteBarriersTimedOut != 1 {
		t.Errorf("barriers timed out %d, want 1 (nothing moved on the link)", s.RouteBarriersTimedOut)
	}
	if owner := ownerIndex(t, c, record.ObjectActor, ref.ActorID); owner != dst {
		t.Errorf("owner is node %d, want %d", owner, dst)
	}
}

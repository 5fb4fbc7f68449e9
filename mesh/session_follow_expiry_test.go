package mesh

import (
	"sync/atomic"
	"testing"
	"time"
)

// A bound Session whose previous owner's follow record expires between two
// of its messages (docs/FOLLOW.md "Previous owner: a refusal behind its
// pass-ons"). The Actor moved before the Session sent anything (no command
// 44), so its message 1 goes to the previous owner, which passes it on;
// the record then expires and the previous owner refuses its Request 2
// (not hosted, no follow record). The Session takes the refusal as "not
// delivered", rebinds from the store (Session.deliver, rebind: the
// previous owner is alive, so no barrierBehindEnded) and sends 2 again,
// and then 3, straight to the new owner — while 1 may still be on the
// previous owner's connection to it. The refusal is answered only once a
// barrier of the previous owner's, behind 1 on that connection, is
// answered (follow_expiry.go, confirmPassOns), so 2 and 3 cannot overtake
// 1. The Session promises per-goroutine order across moves (session.go).
//
// Staged as TestRefusalAtFollowExpiryDoesNotOvertakeWhatWasPassedOn: the
// previous owner's follow table reads a clock the test moves past
// MessageFollowDuration right after 1 was passed on; the new owner's
// reader of that connection holds 1 at its arrival until the Request has
// been answered or 5 s passed.
func TestSessionRebindAtFollowExpiryDoesNotOvertakeWhatWasPassedOn(t *testing.T) {
	c, ctx, ref, s, src, dst := sessionOnServer(t, "sess-expiry-settle")
	clock, window := expiringFollow(t, c.nodes[src]) // before the move records anything
	var confirms atomic.Int32
	c.nodes[src].obj.hooks.Store(&testHooks{relocationStep: func(id, step string) {
		if id == ref.ActorID && step == stepRefusalConfirm {
			confirms.Add(1)
		}
	}})
	if res, err := c.m(src).RelocateActor(ctx, ref, ToNode(c.nodes[dst].RID())); err != nil || res.Outcome != Moved {
		t.Fatalf("move: %+v, %v", res, err)
	}

	// The new owner holds message 1, passed on, at its arrival.
	arrived, releaseOnce := holdFirstFollowArrival(c.nodes[dst], ref.ActorID)
	defer releaseOnce()
	if err := s.Send(ctx, []byte("s:g:1")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, arrived, "message 1 passed on to the new owner")
	clock.ahead.Store(int64(window)) // the follow record expires now
	rebinds := c.nodes[0].ObjectStats().SessionRebinds

	done := make(chan error, 1)
	go func() {
		got, err := s.Request(ctx, []byte("r:g:2"))
		if err == nil && string(got) != "ok:2" {
			t.Errorf("request 2 answered %q", got)
		}
		done <- err
	}()
	// Bounded only to choose when 1 is let go: with the confirmation the
	// previous owner's refusal of 2 waits behind 1, so 2 is not answered
	// meanwhile.
	answeredWithin(done, 5*time.Second)
	releaseOnce()
	if err := <-done; err != nil {
		t.Fatalf("request 2: %v", err)
	}
	if err := s.Send(ctx, []byte("s:g:3")); err != nil {
		t.Fatalf("message 3: %v", err)
	}
	if n := c.nodes[0].ObjectStats().SessionRebinds - rebinds; n != 1 {
		t.Errorf("%d rebinds; want 1 (request 2 refused by the previous owner)", n)
	}
	if string(s.Actor().NodeRID) != string(c.nodes[dst].RID()) {
		t.Error("the Session is not bound to the new owner")
	}
	var st seqState
	waitUntil(t, "all three messages run", func() bool {
		st = sessionState(t, ctx, s)
		return st.Last["g"] == 3 && st.Gaps == st.Duplicates
	})
	if st.Gaps != 0 || st.Duplicates != 0 {
		t.Errorf("state %+v: a message after the rebind overtook 1, which the previous owner had passed on", st)
	}
	if confirms.Load() == 0 {
		t.Error("the previous owner refused request 2 without confirming what it had passed on")
	}
}

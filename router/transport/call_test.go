package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/router"
)

// replyWith is a command-20 reply with correlation corr whose payload names
// who answered.
func replyWith(corr uint64, who string) *router.Record {
	return router.NewRecord(&router.Reply{Correlation: corr, Result: router.ResultOK, FailureCode: router.FailNone}, nil, payload([]byte(who)))
}

// inbound is a record a test handler received, with the reply function
// that answers on the connection it came on.
type inbound struct {
	rec   *router.Record
	reply func(*router.Record) error
}

// capture is a Handler that hands every record to the test and answers
// nothing by itself.
func capture(ch chan<- inbound) Handler {
	return func(_ context.Context, _ PeerInfo, rec *router.Record, reply func(*router.Record) error) {
		ch <- inbound{rec, reply}
	}
}

func receive(t *testing.T, ch <-chan inbound) inbound {
	t.Helper()
	select {
	case in := <-ch:
		return in
	case <-time.After(10 * time.Second):
		t.Fatal("handler received nothing")
		return inbound{}
	}
}

// waitReply waits for a call that must complete, returning who answered.
func waitReply(t *testing.T, c *Call) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rec, err := c.Wait(ctx)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	return string(rec.Payload.Data)
}

// TestStartWait: Start returns before the reply; Wait collects it; a second
// Wait returns the same; Cancel forgets a call (a later reply is late); a
// call fails with ErrPeerDown when its connection goes.
func TestStartWait(t *testing.T) {
	atB := make(chan inbound, 16)
	cfgB := testConfig("b", 1)
	cfgB.Handler = capture(atB)
	b := startNode(t, cfgB)
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)
	ctx := context.Background()

	c, err := a.Start(ctx, b.RID(), spotRequest(b.RID(), 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := receive(t, atB)
	if corr, _ := RequestCorrelation(in.rec); corr != c.Correlation() {
		t.Fatalf("request carries correlation %d, call has %d", corr, c.Correlation())
	}
	select {
	case <-c.Done():
		t.Fatal("call complete before any reply")
	default:
	}
	if err := in.reply(replyWith(c.Correlation(), "b")); err != nil {
		t.Fatal(err)
	}
	if got := waitReply(t, c); got != "b" {
		t.Fatalf("reply from %q", got)
	}
	if got := waitReply(t, c); got != "b" {
		t.Fatalf("second Wait: reply from %q", got)
	}

	t.Run("cancel", func(t *testing.T) {
		c, err := a.Start(ctx, b.RID(), spotRequest(b.RID(), 2, nil))
		if err != nil {
			t.Fatal(err)
		}
		in := receive(t, atB)
		c.Cancel()
		if _, err := c.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait after Cancel = %v, want context.Canceled", err)
		}
		late := a.Stats().LateReplies
		if err := in.reply(replyWith(c.Correlation(), "b")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the reply to count as late", func() bool { return a.Stats().LateReplies == late+1 })
	})
	t.Run("peer down", func(t *testing.T) {
		for _, portable := range []bool{false, true} {
			var opts []CallOption
			if portable {
				opts = append(opts, Portable())
			}
			c, err := a.Start(ctx, b.RID(), spotRequest(b.RID(), 3, nil), opts...)
			if err != nil {
				t.Fatal(err)
			}
			receive(t, atB)
			if err := a.Disconnect(b.RID()); err != nil {
				t.Fatal(err)
			}
			// Disconnect has failed the plain pending calls when it
			// returns; a portable one waits PortableGrace for an answer
			// from another node (one that the request was passed on to).
			select {
			case <-c.Done():
				if portable {
					t.Fatal("portable call failed at once, without its grace")
				}
			default:
				if !portable {
					t.Fatal("call still pending after Disconnect")
				}
			}
			if _, err := c.Wait(ctx); !errors.Is(err, ErrPeerDown) {
				t.Fatalf("portable=%v: Wait = %v, want ErrPeerDown", portable, err)
			}
			connectAndWait(t, a, b)
		}
	})
}

// TestPortableReplies (spec §7.3): a portable request, or a reply slot, is
// completed by a reply from any admitted peer — the object's new owner
// answering on its own DEALER (our ROUTER) or on its ROUTER (our DEALER
// link to it) — or locally by Complete; a plain request only by the peer it
// went to. Whatever answers first wins; every later answer is late.
func TestPortableReplies(t *testing.T) {
	atB, atC := make(chan inbound, 16), make(chan inbound, 16)
	cfgB, cfgC := testConfig("b", 1), testConfig("c", 1)
	cfgB.Handler, cfgC.Handler = capture(atB), capture(atC)
	b, c := startNode(t, cfgB), startNode(t, cfgC)
	a := startNode(t, testConfig("a", 1)) // the requester
	connectAndWait(t, a, b)
	connectAndWait(t, a, c)
	connectAndWait(t, c, a)
	ctx := context.Background()

	// C's reply function for a record from A writes on C's ROUTER, i.e. on
	// A's DEALER link to C.
	if err := a.Send(ctx, c.RID(), seqSend(c.RID(), 1, nil)); err != nil {
		t.Fatal(err)
	}
	cToADealer := receive(t, atC).reply

	type callKind int
	const (
		plain callKind = iota
		portable
		slot
	)
	answerers := map[string]func(t *testing.T, corr uint64, b inbound){
		// the new owner C on its DEALER, arriving on A's ROUTER
		"C via A's ROUTER": func(t *testing.T, corr uint64, _ inbound) {
			if err := c.Send(ctx, a.RID(), replyWith(corr, "C via A's ROUTER")); err != nil {
				t.Fatal(err)
			}
		},
		// the new owner C on its ROUTER, arriving on A's DEALER link to C
		"C via A's DEALER": func(t *testing.T, corr uint64, _ inbound) {
			if err := cToADealer(replyWith(corr, "C via A's DEALER")); err != nil {
				t.Fatal(err)
			}
		},
		// the peer the request went to
		"B": func(t *testing.T, corr uint64, atB inbound) {
			if err := atB.reply(replyWith(corr, "B")); err != nil {
				t.Fatal(err)
			}
		},
		// the handler ran on A itself
		"local": func(t *testing.T, corr uint64, _ inbound) {
			a.Complete(replyWith(corr, "local"))
		},
	}
	tests := []struct {
		name   string
		kind   callKind
		answer string
		// accepted: the answer completes the call; otherwise it is late
		// and the call stays pending until B answers.
		accepted bool
		portable bool // counted in PortableReplies
	}{
		{"portable request, new owner on its DEALER", portable, "C via A's ROUTER", true, true},
		{"portable request, new owner on its ROUTER", portable, "C via A's DEALER", true, true},
		{"portable request, original peer", portable, "B", true, false},
		{"portable request, local handler", portable, "local", true, false},
		{"plain request, other peer on its DEALER", plain, "C via A's ROUTER", false, false},
		{"plain request, other peer on its ROUTER", plain, "C via A's DEALER", false, false},
		{"plain request, local handler", plain, "local", false, false},
		{"plain request, original peer", plain, "B", true, false},
		{"reply slot, remote on its DEALER", slot, "C via A's ROUTER", true, true},
		{"reply slot, remote on its ROUTER", slot, "C via A's DEALER", true, true},
		{"reply slot, local handler", slot, "local", true, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var call *Call
			var atBReq inbound
			switch tt.kind {
			case slot:
				call = a.ExpectReply()
			default:
				var opts []CallOption
				if tt.kind == portable {
					opts = append(opts, Portable())
				}
				var err error
				call, err = a.Start(ctx, b.RID(), spotRequest(b.RID(), uint64(i+1), nil), opts...)
				if err != nil {
					t.Fatal(err)
				}
				atBReq = receive(t, atB)
			}
			before := a.Stats()
			answerers[tt.answer](t, call.Correlation(), atBReq)
			if !tt.accepted {
				waitFor(t, 10*time.Second, "the answer to count as late", func() bool {
					return a.Stats().LateReplies == before.LateReplies+1
				})
				select {
				case <-call.Done():
					rec, err := call.Wait(ctx)
					t.Fatalf("plain request completed by %s: %v %v", tt.answer, rec, err)
				default:
				}
				answerers["B"](t, call.Correlation(), atBReq)
				if got := waitReply(t, call); got != "B" {
					t.Fatalf("reply from %q, want B", got)
				}
				return
			}
			if got := waitReply(t, call); got != tt.answer {
				t.Fatalf("reply from %q, want %q", got, tt.answer)
			}
			st := a.Stats()
			wantPortable, wantLocal := before.PortableReplies, before.LocalReplies
			if tt.portable {
				wantPortable++
			}
			if tt.answer == "local" {
				wantLocal++
			}
			if st.PortableReplies != wantPortable || st.LocalReplies != wantLocal || st.LateReplies != before.LateReplies {
				t.Fatalf("stats portable %d local %d late %d, want %d %d %d",
					st.PortableReplies, st.LocalReplies, st.LateReplies, wantPortable, wantLocal, before.LateReplies)
			}
			// Exactly once: a second answer, local or remote, is late.
			if a.Complete(replyWith(call.Correlation(), "duplicate")) {
				t.Fatal("Complete accepted a second reply")
			}
			answerers["C via A's ROUTER"](t, call.Correlation(), atBReq)
			waitFor(t, 10*time.Second, "duplicates to count as late", func() bool {
				return a.Stats().LateReplies == before.LateReplies+2
			})
			if got := waitReply(t, call); got != tt.answer {
				t.Fatalf("after duplicates, reply from %q, want %q", got, tt.answer)
			}
		})
	}
}

// TestReplySlot: a reply slot has no connection — losing peers does not
// end it, only its deadline, Cancel or Close; Complete ignores records that
// are not replies.
func TestReplySlot(t *testing.T) {
	b := startNode(t, testConfig("b", 1))
	a := startNode(t, testConfig("a", 1))
	connectAndWait(t, a, b)

	s1, s2 := a.ExpectReply(), a.ExpectReply()
	if s1.Correlation() == s2.Correlation() || s1.Correlation() == 0 {
		t.Fatalf("correlations %d, %d", s1.Correlation(), s2.Correlation())
	}
	if err := a.Disconnect(b.RID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s1.Done():
		t.Fatal("reply slot ended with a peer's connection")
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s1.Wait(ctx); !errIs(err, ErrDeadlineExceeded, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want ErrDeadlineExceeded", err)
	}
	if a.Complete(replyWith(s1.Correlation(), "late")) {
		t.Fatal("Complete accepted a reply after the deadline")
	}
	if a.Complete(seqSend(b.RID(), 1, nil)) || a.Complete(nil) {
		t.Fatal("Complete accepted a record that is not a reply")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close = %v, want ErrClosed", err)
	}
	if _, err := a.ExpectReply().Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("ExpectReply after Close: Wait = %v, want ErrClosed", err)
	}
}

// TestUnawaitedReady: a relocationReady (53) that no call awaits any more —
// a target's failure sent after its relay-ready answered the Restore
// request — goes to Config.UnawaitedReady with the peer it came from, and
// is counted late only when that does not take it. A late reply (20) never
// goes there.
func TestUnawaitedReady(t *testing.T) {
	atB := make(chan inbound, 16)
	cfgB := testConfig("b", 1)
	cfgB.Handler = capture(atB)
	b := startNode(t, cfgB)
	type unawaited struct {
		from RID
		rec  *router.Record
	}
	seen := make(chan unawaited, 4)
	var take atomic.Bool
	cfgA := testConfig("a", 1)
	cfgA.UnawaitedReady = func(from RID, rec *router.Record) bool {
		// Its answer is read before the test hears of the call: read
		// after, it could be the next round's (the test sets it as soon
		// as it heard), and this round's 53 counted late (2 of 40 -race
		// runs timed out waiting for the late count).
		taken := take.Load()
		seen <- unawaited{from, rec}
		return taken
	}
	a := startNode(t, cfgA)
	connectAndWait(t, a, b)
	ctx := context.Background()

	binding := router.RelocationBinding{Relocation: router.RelocationID{High: 1, Low: 2}, TargetAttempt: 3,
		Source: router.SourceFence{SourceOwnerID: "owner-a", SourceOwnerLeaseGeneration: 1, SourceNodeRID: a.RID(), SourceNodeGeneration: 1}}
	c, err := a.Start(ctx, b.RID(), router.NewRecord(&router.RelocationPrepare{Binding: binding,
		Object: router.RelocationObject{Kind: router.StatefulActor, ObjectID: "actor-1", StableType: "T", ObjectGeneration: 1,
			ExpectedAuthorityOwnerGeneration: 1},
		TargetNodeRID: b.RID(), TargetNodeGeneration: 1, DeadlineUnixMs: uint64(time.Now().Add(time.Minute).UnixMilli())}, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	in := receive(t, atB)
	ready := func(o router.RelocationOutcome, f router.RelocationFailure) *router.Record {
		return router.NewRecord(&router.RelocationReady{Correlation: c.Correlation(), Relocation: binding.Relocation,
			TargetAttempt: binding.TargetAttempt, Outcome: o, Failure: f}, nil, nil)
	}
	if err := in.reply(ready(router.RelocationRelayReady, router.RelocationFailureNone)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if rec, err := c.Wait(wctx); err != nil || rec.Body.(*router.RelocationReady).Outcome != router.RelocationRelayReady {
		t.Fatalf("the call's answer: %v, %v; want relay-ready", rec, err)
	}
	for _, taken := range []bool{true, false} {
		take.Store(taken)
		late := a.Stats().LateReplies
		if err := in.reply(ready(router.RelocationFailed, router.RelocationFailureNotServing)); err != nil {
			t.Fatal(err)
		}
		select {
		case u := <-seen:
			if !u.from.Equal(b.RID()) || u.rec.Body.(*router.RelocationReady).Failure != router.RelocationFailureNotServing {
				t.Fatalf("UnawaitedReady got %s from %s, want the failure from %s", u.rec.Body, u.from, b.RID())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the 53 no call awaits did not reach UnawaitedReady")
		}
		want := late
		if !taken {
			want++
		}
		waitFor(t, 10*time.Second, "the late count", func() bool { return a.Stats().LateReplies == want })
	}

	// A late 20 is counted late, never handed over.
	c, err = a.Start(ctx, b.RID(), spotRequest(b.RID(), 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	in = receive(t, atB)
	c.Cancel()
	late := a.Stats().LateReplies
	if err := in.reply(replyWith(c.Correlation(), "b")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the reply to count as late", func() bool { return a.Stats().LateReplies == late+1 })
	select {
	case u := <-seen:
		t.Fatalf("UnawaitedReady got a %s", u.rec.Command)
	default:
	}
}

package spot

import (
	"errors"
	"testing"
)

// A Turn is the context of one turn: a handler that keeps it and calls
// Reply after Receive returned (an "asynchronous reply" from a goroutine it
// started) gets ErrTurnEnded, and nothing more is sent — the runtime has
// answered the request ErrNoReply already. Before, that Reply returned nil
// and sent a second answer for the same request (which the requester had
// stopped waiting for), racing the runtime's own check of the turn.
func TestReplyAfterTheTurnIsErrTurnEnded(t *testing.T) {
	rep := newReplies()
	rt := New(Options{Workers: 2, Replier: rep})
	defer rt.Close()
	kept := make(chan *Turn, 1)
	h := &recorder{onTurn: func(t *Turn, env Envelope) error {
		kept <- t
		return nil // the reply is to come "later"
	}}
	o, err := rt.Open(Spec{Key: Key{ID: "a"}, Kind: KindActor, Generation: 1, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Post(Envelope{Kind: Request, Body: []byte("ping"), ReplyRoute: []byte("r1")}); err != nil {
		t.Fatal(err)
	}
	rep.wait(t, 1)
	if got := rep.got["r1"]; !errors.Is(got.err, ErrNoReply) {
		t.Fatalf("the request's answer: %q, %v; want ErrNoReply", got.body, got.err)
	}
	turn := <-kept
	if err := turn.Reply([]byte("late")); !errors.Is(err, ErrTurnEnded) {
		t.Fatalf("Reply after the turn: %v, want ErrTurnEnded", err)
	}
	// A request after it is answered once, by its own turn: the late
	// Reply above sent nothing (one answer counted per reply call).
	h.onTurn = func(t *Turn, env Envelope) error { return t.Reply([]byte("pong")) }
	if err := o.Post(Envelope{Kind: Request, Body: []byte("again"), ReplyRoute: []byte("r2")}); err != nil {
		t.Fatal(err)
	}
	rep.wait(t, 1)
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.got) != 2 || string(rep.got["r1"].body) != "" || string(rep.got["r2"].body) != "pong" {
		t.Fatalf("answers: %v", rep.got)
	}
	select {
	case <-rep.ch:
		t.Fatal("an extra answer was sent")
	default:
	}
}

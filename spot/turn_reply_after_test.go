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
	kept := make(chan *Turn, 1)
	h := &recorder{onTurn: func(t *Turn, env Envelope) error {
		kept <- t
		return nil // the reply is to come "later"
	}}
	rep, o := openWithReplies(t, h)
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

// The two misuses of Turn.Reply a handler can meet — a second Reply to one
// request, a Reply to a one-way message or a timer firing — are errors a
// handler can match (ErrAlreadyReplied, ErrNotRequest), as ErrTurnEnded
// is. Before, they were anonymous errors only their text told apart.
func TestReplyMisusesAreMatchableErrors(t *testing.T) {
	errs := make(chan error, 4)
	h := &recorder{onTurn: func(t *Turn, env Envelope) error {
		switch env.Kind {
		case Request:
			errs <- t.Reply([]byte("first"))
			errs <- t.Reply([]byte("second"))
		default:
			errs <- t.Reply([]byte("nobody"))
		}
		return nil
	}}
	rep, o := openWithReplies(t, h)
	if err := o.Post(Envelope{Kind: Request, Body: []byte("ping"), ReplyRoute: []byte("r1")}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatalf("first Reply: %v", err)
	}
	if err := <-errs; !errors.Is(err, ErrAlreadyReplied) {
		t.Fatalf("second Reply: %v, want ErrAlreadyReplied", err)
	}
	if err := o.Post(Envelope{Kind: Send, Body: []byte("one-way")}); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; !errors.Is(err, ErrNotRequest) {
		t.Fatalf("Reply to a one-way message: %v, want ErrNotRequest", err)
	}
	rep.wait(t, 1)
	if got := rep.got["r1"]; string(got.body) != "first" || got.err != nil {
		t.Fatalf("the request's answer: %q, %v", got.body, got.err)
	}
}

// openWithReplies opens actor "a" with handler h on a runtime whose
// replies rep records; the runtime closes with the test.
func openWithReplies(t *testing.T, h Handler) (*replies, *Object) {
	t.Helper()
	rep := newReplies()
	rt := New(Options{Workers: 2, Replier: rep})
	t.Cleanup(rt.Close)
	o, err := rt.Open(Spec{Key: Key{ID: "a"}, Kind: KindActor, Generation: 1, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	return rep, o
}

package spot

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// An object whose mailbox never quite drains (every turn leaves work
// behind: a steady stream, here the handler posting itself the next
// message) keeps a bounded number of envelopes waiting, and its mailbox's
// storage stays bounded by that, not by the number of messages it ever
// processed. Until 2026-12-07 run only advanced qhead and reset the slice
// when it was empty, and Post appended at the end: the slice grew by one
// slot per turn ever run and kept its array after the queue drained.
func TestMailboxStorageBoundedByWhatWaits(t *testing.T) {
	rt := New(Options{Workers: 1})
	defer rt.Close()
	const turns = 100_000
	var n, maxWaiting, maxSlots atomic.Int64
	done := make(chan struct{})
	o, err := rt.Open(Spec{Key: Key{ID: "steady"}, Kind: KindActor, Generation: 1, Handler: handlerFunc(func(t *Turn, env Envelope) error {
		o := t.obj
		o.mu.Lock()
		if w := int64(len(o.queue) - o.qhead); w > maxWaiting.Load() {
			maxWaiting.Store(w)
		}
		if s := int64(len(o.queue)); s > maxSlots.Load() {
			maxSlots.Store(s)
		}
		o.mu.Unlock()
		switch c := n.Add(1); {
		case c < turns:
			return o.Post(send(strconv.FormatInt(c, 10)))
		case c == turns+1:
			close(done)
		}
		return nil
	})})
	must(t, err)
	must(t, o.Post(send("a")))
	must(t, o.Post(send("b")))
	<-done
	o.mu.Lock()
	slots, capacity := len(o.queue), cap(o.queue)
	o.mu.Unlock()
	t.Logf("after %d turns: at most %d envelopes waiting; mailbox slice up to %d slots, now len %d cap %d",
		turns, maxWaiting.Load(), maxSlots.Load(), slots, capacity)
	// Generous: a mailbox that compacts its consumed prefix stays within a
	// small multiple of what waits (plus a fixed slack).
	const bound = 4096
	if maxSlots.Load() > bound || capacity > bound {
		t.Fatalf("mailbox slice grew to %d slots (cap %d now) while at most %d envelopes waited: consumed slots are never reclaimed",
			maxSlots.Load(), capacity, maxWaiting.Load())
	}
}

// Runtime.Close "stops the workers after their current turn … Queued
// requests are answered with ErrRuntimeDown" (runtime.go). Until
// 2026-12-07 a worker ran the rest of its batch (up to Options.Batch turns
// per visit) after Close began: queued requests were run instead of
// answered ErrRuntimeDown, and a stopping node waited for up to Batch-1
// more application turns per worker.
func TestRuntimeCloseStartsNoTurnAfterTheCurrentOne(t *testing.T) {
	rep := newReplies()
	rt := New(Options{Workers: 1, Replier: rep})
	started, release := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	o, err := rt.Open(Spec{Key: Key{ID: "busy"}, Kind: KindActor, Generation: 1, Handler: handlerFunc(func(tn *Turn, env Envelope) error {
		if string(env.Body) == "block" {
			close(started)
			<-release
			return nil
		}
		ran.Add(1)
		return tn.Reply([]byte("ran"))
	})})
	must(t, err)
	must(t, o.Post(send("block")))
	const queued = 5
	for i := 0; i < queued; i++ {
		must(t, o.Post(Envelope{Kind: Request, ReplyRoute: []byte(strconv.Itoa(i))}))
	}
	<-started
	closed := make(chan struct{})
	go func() {
		rt.Close()
		close(closed)
	}()
	waitFor(t, "Close to begin", func() bool {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		return rt.closed
	})
	close(release)
	<-closed
	rep.wait(t, queued)
	if n := ran.Load(); n != 0 {
		t.Errorf("%d turns started after Runtime.Close began (want 0: it stops after the current turn)", n)
	}
	for i := 0; i < queued; i++ {
		if got := rep.got[strconv.Itoa(i)]; !errors.Is(got.err, ErrRuntimeDown) {
			t.Errorf("queued request %d answered (%q, %v), want ErrRuntimeDown", i, got.body, got.err)
		}
	}
}

// Append queues work accepted elsewhere past Options.MailboxLimit, in
// order behind what waits, while Post still refuses new admissions until
// the mailbox drains below the limit; a closed object refuses Append.
func TestAppendQueuesAcceptedWorkPastTheMailboxLimit(t *testing.T) {
	rt := New(Options{Workers: 1, MailboxLimit: 2})
	defer rt.Close()
	var got []string
	o, err := rt.Open(Spec{Key: Key{ID: "append"}, Kind: KindActor, Generation: 1, Held: true,
		Handler: handlerFunc(func(_ *Turn, env Envelope) error {
			got = append(got, string(env.Body))
			return nil
		})})
	must(t, err)
	must(t, o.Post(send("1")))
	must(t, o.Append(send("2"), send("3"), send("4")))
	if err := o.Post(send("5")); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("Post past the limit: %v, want ErrMailboxFull", err)
	}
	if n := o.Queued(); n != 4 {
		t.Fatalf("%d queued, want 4", n)
	}
	o.Release()
	waitFor(t, "the queue to drain", func() bool { return o.Queued() == 0 })
	o.Hold()
	if want := "1234"; strings.Join(got, "") != want {
		t.Fatalf("ran %q, want %q", strings.Join(got, ""), want)
	}
	o.Close()
	if err := o.Append(send("6")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append on a closed object: %v, want ErrClosed", err)
	}
}

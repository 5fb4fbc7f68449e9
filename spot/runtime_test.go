package spot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/internal/syncbuf"
)

// recorder is a Handler that records what it ran and checks that no two
// turns of one object overlap.
type recorder struct {
	mu      sync.Mutex
	got     []string
	active  atomic.Int32
	overlap atomic.Bool
	onTurn  func(t *Turn, env Envelope) error
}

func (r *recorder) Receive(t *Turn, env Envelope) error {
	if r.active.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.active.Add(-1)
	r.mu.Lock()
	if env.Kind == Timer {
		r.got = append(r.got, "timer:"+env.Timer)
	} else {
		r.got = append(r.got, string(env.Body))
	}
	r.mu.Unlock()
	if r.onTurn != nil {
		return r.onTurn(t, env)
	}
	return nil
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

type replies struct {
	mu  sync.Mutex
	got map[string]reply
	ch  chan struct{}
}

type reply struct {
	body []byte
	err  error
}

func newReplies() *replies { return &replies{got: map[string]reply{}, ch: make(chan struct{}, 1<<16)} }

func (r *replies) Reply(route, body []byte, err error) {
	r.mu.Lock()
	r.got[string(route)] = reply{body, err}
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *replies) wait(t *testing.T, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		select {
		case <-r.ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("timed out waiting for reply %d of %d", i+1, n)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func send(body string) Envelope { return Envelope{Kind: Send, Body: []byte(body)} }

func TestMailboxOrderAndOneTurnAtATime(t *testing.T) {
	rt := New(Options{Workers: 8, Batch: 3})
	defer rt.Close()
	const objects, msgs = 20, 500
	recs := make([]*recorder, objects)
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = &recorder{}
		o, err := rt.Open(Spec{Key: Key{ID: fmt.Sprint(i)}, Kind: KindActor, Generation: 1, Handler: recs[i]})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := 0; m < msgs; m++ {
				if err := o.Post(send(strconv.Itoa(m))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, r := range recs {
		waitFor(t, "all messages", func() bool { return len(r.seen()) == msgs })
		for m, s := range r.seen() {
			if s != strconv.Itoa(m) {
				t.Fatalf("object %d: message %d is %q, out of order", i, m, s)
			}
		}
		if r.overlap.Load() {
			t.Fatalf("object %d ran two turns at once", i)
		}
	}
}

func TestRequestReplies(t *testing.T) {
	tests := []struct {
		name     string
		onTurn   func(t *Turn, env Envelope) error
		wantBody string
		wantErr  error
	}{
		{"explicit reply", func(t *Turn, env Envelope) error { return t.Reply([]byte("pong")) }, "pong", nil},
		{"error without reply", func(*Turn, Envelope) error { return errors.New("boom") }, "", nil},
		{"no reply at all", func(*Turn, Envelope) error { return nil }, "", ErrNoReply},
		{"panic", func(*Turn, Envelope) error { panic("bad input") }, "", ErrHandlerPanic},
		{"reply then error is one reply", func(t *Turn, env Envelope) error {
			_ = t.Reply([]byte("first"))
			return errors.New("later")
		}, "first", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rep := newReplies()
			rt := New(Options{Workers: 2, Replier: rep})
			defer rt.Close()
			o, err := rt.Open(Spec{Key: Key{ID: "a"}, Kind: KindActor, Generation: 1, Handler: &recorder{onTurn: tc.onTurn}})
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Post(Envelope{Kind: Request, Body: []byte("ping"), ReplyRoute: []byte("r1")}); err != nil {
				t.Fatal(err)
			}
			rep.wait(t, 1)
			got := rep.got["r1"]
			if string(got.body) != tc.wantBody {
				t.Errorf("body = %q, want %q", got.body, tc.wantBody)
			}
			switch {
			case tc.name == "error without reply":
				if got.err == nil || got.err.Error() != "boom" {
					t.Errorf("err = %v, want boom", got.err)
				}
			case tc.wantErr != nil:
				if !errors.Is(got.err, tc.wantErr) {
					t.Errorf("err = %v, want %v", got.err, tc.wantErr)
				}
			case got.err != nil:
				t.Errorf("err = %v, want nil", got.err)
			}
			// The object survives a panic and keeps serving.
			if err := o.Post(Envelope{Kind: Request, Body: []byte("again"), ReplyRoute: []byte("r2")}); err != nil {
				t.Fatal(err)
			}
			rep.wait(t, 1)
		})
	}
}

func TestTimersFireAsTurnsInOrder(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	rt := New(Options{Workers: 2, Clock: clk})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "t"}, Kind: KindActor, Generation: 1, Handler: rec})
	if err != nil {
		t.Fatal(err)
	}
	must(t, o.SetTimer("late", 3*time.Second, 0))
	must(t, o.SetTimer("tick", time.Second, time.Second))
	must(t, o.SetTimer("cancelled", 2*time.Second, 0))
	if !o.CancelTimer("cancelled") {
		t.Fatal("CancelTimer reported nothing pending")
	}
	// A second at a time, each firing run before the next is due: a
	// periodic firing due while the previous one still waits is skipped.
	clk.Advance(time.Second)
	waitFor(t, "1 timer turn", func() bool { return len(rec.seen()) == 1 })
	clk.Advance(time.Second)
	waitFor(t, "2 timer turns", func() bool { return len(rec.seen()) == 2 })
	clk.Advance(1500 * time.Millisecond)
	waitFor(t, "4 timer turns", func() bool { return len(rec.seen()) == 4 })
	want := []string{"timer:tick", "timer:tick", "timer:late", "timer:tick"}
	got := rec.seen()
	// tick@1s, tick@2s, then late@3s and tick@3s are both due at 3s: late
	// was armed first, so it fires first.
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("timer turns = %v, want %v", got, want)
		}
	}
	o.Close()
	if n := clk.Pending(); n != 0 {
		t.Fatalf("%d timers still pending after Close", n)
	}
}

func TestHoldCaptureRestoreKeepsOrder(t *testing.T) {
	clk := NewManualClock(time.Unix(0, 0))
	rtA := New(Options{Workers: 2, Clock: clk})
	defer rtA.Close()
	gate := make(chan struct{})
	var firstDone atomic.Bool // the first turn's handler has finished
	recA := &recorder{onTurn: func(t *Turn, env Envelope) error {
		if string(env.Body) == "0" {
			<-gate // the first turn is in progress while we Hold
			firstDone.Store(true)
		}
		return nil
	}}
	a, err := rtA.Open(Spec{Key: Key{ID: "x"}, Kind: KindActor, Generation: 7, Handler: recA})
	must(t, err)
	must(t, a.Post(send("0")))
	waitFor(t, "first turn started", func() bool { return len(recA.seen()) == 1 })
	for i := 1; i <= 5; i++ {
		must(t, a.Post(send(strconv.Itoa(i))))
	}
	must(t, a.SetTimer("t", 10*time.Second, 0))
	// Hold must not return while the first turn runs. The turn ends only
	// after the gate is closed, and the gate is closed only once Hold has
	// closed dispatch (it is then waiting, or — wrongly — returning), so
	// Hold returning before the turn's handler finished is a Hold that did
	// not wait.
	held := make(chan bool, 1) // whether the turn had finished when Hold returned
	go func() { a.Hold(); held <- firstDone.Load() }()
	waitFor(t, "Hold to close dispatch", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return !a.dispatch
	})
	close(gate)
	if !<-held {
		t.Fatal("Hold returned while a turn was running")
	}
	first, err := a.Capture()
	must(t, err)
	clk.Advance(4 * time.Second)
	// Arrivals after capture queue behind it: the ingress hold.
	must(t, a.Post(send("6")))
	must(t, a.Post(send("7")))
	// Capture takes the queue of a held object with no turn running
	// (ErrNotHeld otherwise): finding both arrivals in it proves that
	// neither was dequeued for a turn, now or later.
	hold, err := a.Capture()
	must(t, err)
	if got := recA.seen(); len(got) != 1 {
		t.Fatalf("held object ran turns: %v", got)
	}
	if len(first.Queue) != 5 || len(hold.Queue) != 2 || len(first.Timers) != 1 {
		t.Fatalf("captured %d queued, %d held, %d timers", len(first.Queue), len(hold.Queue), len(first.Timers))
	}
	if first.Timers[0] != (TimerState{Name: "t", Remaining: 10 * time.Second}) {
		t.Fatalf("timer captured as %+v", first.Timers[0])
	}
	a.Close()

	// Reopen elsewhere: hidden first, a message arrives, then dispatch opens.
	rtB := New(Options{Workers: 2, Clock: clk})
	defer rtB.Close()
	recB := &recorder{}
	restored := Captured{Queue: append(first.Queue, hold.Queue...), Timers: first.Timers}
	b, err := rtB.Open(Spec{Key: Key{ID: "x"}, Kind: KindActor, Generation: 7, Handler: recB, Held: true, Restored: &restored})
	must(t, err)
	must(t, b.Post(send("8")))
	// A turn dequeues its envelope before it runs: all eight still queued
	// means none ran or is running before Release.
	if q, got := b.Queued(), recB.seen(); q != 8 || len(got) != 0 {
		t.Fatalf("hidden object: %d queued (want 8), ran turns %v", q, got)
	}
	b.Release()
	waitFor(t, "8 turns", func() bool { return len(recB.seen()) == 8 })
	clk.Advance(10 * time.Second)
	waitFor(t, "timer turn", func() bool { return len(recB.seen()) == 9 })
	want := []string{"1", "2", "3", "4", "5", "6", "7", "8", "timer:t"}
	got := recB.seen()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("restored order = %v, want %v", got, want)
		}
	}
}

func TestRequeueAfterCancelledMove(t *testing.T) {
	rt := New(Options{Workers: 2})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "r"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true})
	must(t, err)
	must(t, o.Post(send("a")))
	must(t, o.Post(send("b")))
	c, err := o.Capture()
	must(t, err)
	must(t, o.Post(send("c"))) // arrives during the (cancelled) move
	must(t, o.Requeue(c))
	o.Release()
	waitFor(t, "3 turns", func() bool { return len(rec.seen()) == 3 })
	if got := rec.seen(); got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("order after requeue = %v", got)
	}
}

func TestCaptureRequiresHold(t *testing.T) {
	rt := New(Options{Workers: 1})
	defer rt.Close()
	o, err := rt.Open(Spec{Key: Key{ID: "h"}, Kind: KindActor, Generation: 1, Handler: &recorder{}})
	must(t, err)
	if _, err := o.Capture(); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Capture on open object: %v, want ErrNotHeld", err)
	}
}

func TestMailboxLimitAndClose(t *testing.T) {
	rep := newReplies()
	rt := New(Options{Workers: 1, MailboxLimit: 3, Replier: rep})
	defer rt.Close()
	o, err := rt.Open(Spec{Key: Key{ID: "m", Spot: true}, Kind: KindUserSpot, Generation: 1, Handler: &recorder{}, Held: true})
	must(t, err)
	for i := 0; i < 3; i++ {
		must(t, o.Post(Envelope{Kind: Request, ReplyRoute: []byte(strconv.Itoa(i))}))
	}
	if err := o.Post(send("overflow")); !errors.Is(err, ErrMailboxFull) {
		t.Fatalf("4th post: %v, want ErrMailboxFull", err)
	}
	o.Close()
	rep.wait(t, 3)
	for i := 0; i < 3; i++ {
		if !errors.Is(rep.got[strconv.Itoa(i)].err, ErrClosed) {
			t.Fatalf("queued request %d answered %v, want ErrClosed", i, rep.got[strconv.Itoa(i)].err)
		}
	}
	if err := o.Post(send("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("post after close: %v", err)
	}
	if _, ok := rt.Get(Key{ID: "m", Spot: true}); ok {
		t.Fatal("closed object still registered")
	}
	if _, err := rt.Open(Spec{Key: Key{ID: "m", Spot: true}, Kind: KindUserSpot, Generation: 2, Handler: &recorder{}}); err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	if _, err := rt.Open(Spec{Key: Key{ID: "m", Spot: true}, Kind: KindUserSpot, Generation: 3, Handler: &recorder{}}); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate open: %v", err)
	}
}

// 100,000 objects must not cost a goroutine each; Close leaves none behind.
func TestManyObjectsNoGoroutineEach(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: 100k objects")
	}
	before := runtime.NumGoroutine()
	rt := New(Options{Workers: 4})
	var ran atomic.Int64
	h := handlerFunc(func(*Turn, Envelope) error { ran.Add(1); return nil })
	const n = 100_000
	for i := 0; i < n; i++ {
		o, err := rt.Open(Spec{Key: Key{ID: strconv.Itoa(i)}, Kind: KindActor, Generation: 1, Handler: h})
		must(t, err)
		if i%10 == 0 {
			must(t, o.Post(send("x")))
		}
	}
	waitFor(t, "turns", func() bool { return ran.Load() == n/10 })
	if g := runtime.NumGoroutine(); g > before+4+5 {
		t.Fatalf("%d goroutines for %d objects (before: %d)", g, n, before)
	}
	if rt.Len() != n {
		t.Fatalf("Len = %d", rt.Len())
	}
	rt.Close()
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before })
}

type handlerFunc func(*Turn, Envelope) error

func (f handlerFunc) Receive(t *Turn, env Envelope) error { return f(t, env) }

func TestFactoryValidate(t *testing.T) {
	newH := func(context.Context, CreateRequest) (Handler, error) { return handlerFunc(nil), nil }
	type snap struct{ SnapshotAdapter }
	tests := []struct {
		name string
		f    Factory
		ok   bool
	}{
		{"valid actor", Factory{StableType: "counter", Kind: KindActor, Policy: PolicyDisabled, New: newH}, true},
		{"valid snapshot", Factory{StableType: "room", Kind: KindUserSpot, Policy: PolicyPreserveState, Snapshot: snap{}, New: newH}, true},
		{"empty type", Factory{Kind: KindActor, Policy: PolicyDisabled, New: newH}, false},
		{"long type", Factory{StableType: string(make([]byte, 256)), Kind: KindActor, Policy: PolicyDisabled, New: newH}, false},
		{"bad utf8", Factory{StableType: "\xff", Kind: KindActor, Policy: PolicyDisabled, New: newH}, false},
		{"no kind", Factory{StableType: "a", Policy: PolicyDisabled, New: newH}, false},
		{"no policy", Factory{StableType: "a", Kind: KindActor, New: newH}, false},
		{"snapshot without adapter", Factory{StableType: "a", Kind: KindActor, Policy: PolicyPreserveState, New: newH}, false},
		{"adapter without snapshot", Factory{StableType: "a", Kind: KindActor, Policy: PolicyRecreate, Snapshot: snap{}, New: newH}, false},
		{"negative limit", Factory{StableType: "a", Kind: KindActor, Policy: PolicyDisabled, Limit: -1, New: newH}, false},
		{"nil New", Factory{StableType: "a", Kind: KindActor, Policy: PolicyDisabled}, false},
		// Spec §4 has no per-Actor-type limit: accepted until 2026-12-07,
		// it was never enforced (a node took any number of the type).
		{"limit on an actor type", Factory{StableType: "a", Kind: KindActor, Policy: PolicyDisabled, Limit: 1, New: newH}, false},
		{"limit on a user spot type", Factory{StableType: "a", Kind: KindUserSpot, Policy: PolicyDisabled, Limit: 1, New: newH}, true},
		{"limit on an instance spot type", Factory{StableType: "a", Kind: KindInstanceSpot, Policy: PolicyDisabled, Limit: 1, New: newH}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.f.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrFactory) {
				t.Fatalf("error %v does not match ErrFactory", err)
			}
		})
	}
	r := NewRegistry()
	must(t, r.Register(tests[0].f))
	if err := r.Register(tests[0].f); !errors.Is(err, ErrFactory) {
		t.Fatalf("duplicate register: %v", err)
	}
	if f, ok := r.Lookup("counter"); !ok || f.Kind != KindActor {
		t.Fatal("lookup failed")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Discard removes an object without running or answering its queue: the
// work belongs to someone else (a relocation target giving up, §9.4). A
// marker request on another object, answered after the discard, shows no
// answer for the discarded queue was pending.
func TestDiscardAnswersNothing(t *testing.T) {
	rep := newReplies()
	rt := New(Options{Workers: 1, Replier: rep})
	defer rt.Close()
	o, err := rt.Open(Spec{Key: Key{ID: "d"}, Kind: KindActor, Generation: 1, Handler: &recorder{}, Held: true})
	must(t, err)
	must(t, o.Post(Envelope{Kind: Request, ReplyRoute: []byte("queued")}))
	must(t, o.SetTimer("t", time.Hour, 0))
	o.Discard()
	if _, ok := rt.Get(Key{ID: "d"}); ok {
		t.Fatal("discarded object still registered")
	}
	if err := o.Post(send("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("post after discard: %v", err)
	}
	marker, err := rt.Open(Spec{Key: Key{ID: "marker"}, Kind: KindActor, Generation: 1, Handler: &recorder{}})
	must(t, err)
	must(t, marker.Post(Envelope{Kind: Request, ReplyRoute: []byte("marker")}))
	rep.wait(t, 1)
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if _, ok := rep.got["queued"]; ok || len(rep.got) != 1 {
		t.Fatalf("answers after discard: %v", rep.got)
	}
}

// Held reports closed dispatch: opened held, after Hold; not after
// Release or Close.
func TestHeld(t *testing.T) {
	rt := New(Options{Workers: 1})
	defer rt.Close()
	o, err := rt.Open(Spec{Key: Key{ID: "h"}, Kind: KindActor, Generation: 1, Handler: &recorder{}, Held: true})
	must(t, err)
	for _, step := range []struct {
		do   func()
		want bool
	}{{func() {}, true}, {o.Release, false}, {o.Hold, true}, {o.Release, false}, {o.Close, false}} {
		step.do()
		if got := o.Held(); got != step.want {
			t.Fatalf("Held() = %v, want %v", got, step.want)
		}
	}
}

// While Options.Admit refuses, no turn starts and nothing is dropped: the
// object holds itself with its envelopes queued in order; ReleaseGateHeld
// (only once Admit admits again) runs them in order. Hold takes the object
// over (ReleaseGateHeld leaves it to Hold's caller).
func TestAdmitHoldsInsteadOfStarting(t *testing.T) {
	var shut atomic.Bool
	shut.Store(true)
	errShut := errors.New("gate shut")
	rt := New(Options{Workers: 2, Admit: func() error {
		if shut.Load() {
			return errShut
		}
		return nil
	}})
	defer rt.Close()
	r := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "a"}, Kind: KindActor, Generation: 1, Handler: r})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := o.Post(send(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the object to hold itself", o.GateHeld)
	if len(r.seen()) != 0 || o.Queued() != 3 || rt.GateHeld() != 1 || !o.Held() {
		t.Fatalf("ran %v, queued %d, gate-held %d: want nothing run and all 3 kept", r.seen(), o.Queued(), rt.GateHeld())
	}
	shut.Store(false)
	if n := rt.ReleaseGateHeld(); n != 1 {
		t.Fatalf("ReleaseGateHeld = %d, want 1", n)
	}
	waitFor(t, "the kept messages", func() bool { return len(r.seen()) == 3 })
	if got := strings.Join(r.seen(), ","); got != "0,1,2" || rt.GateHeld() != 0 {
		t.Fatalf("ran %q (gate-held %d), want 0,1,2 in order", got, rt.GateHeld())
	}

	// Held by Hold: ReleaseGateHeld leaves it alone.
	shut.Store(true)
	if err := o.Post(send("3")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the object to hold itself again", o.GateHeld)
	o.Hold()
	shut.Store(false)
	if n := rt.ReleaseGateHeld(); n != 0 || !o.Held() {
		t.Fatalf("ReleaseGateHeld = %d, held %v: want the Hold kept", n, o.Held())
	}
	o.Release()
	waitFor(t, "the message after Release", func() bool { return len(r.seen()) == 4 })
}

// A handler guard that finds the gate shut just after Options.Admit let the
// turn through (the deadline fell between the two checks) returns
// ErrNotStarted: the envelope is not lost — it goes back to the head of the
// queue, the object holds itself, and after the gate reopens it runs once,
// before what came after it; a request is answered then, not before.
// Without Options.Admit nothing would release it: an ordinary error.
func TestNotStartedTurnIsKeptForTheGate(t *testing.T) {
	var shut atomic.Bool
	errShut := errors.New("gate shut")
	admit := func() error {
		if shut.Load() {
			return errShut
		}
		return nil
	}
	for _, kind := range []EnvelopeKind{Send, Request} {
		t.Run(kind.String(), func(t *testing.T) {
			shut.Store(false)
			rep := newReplies()
			rt := New(Options{Workers: 2, Admit: admit, Replier: rep})
			defer rt.Close()
			declined := atomic.Bool{}
			r := &recorder{}
			r.onTurn = func(tn *Turn, env Envelope) error {
				if env.Kind == Request {
					_ = tn.Reply(env.Body)
				}
				return nil
			}
			guard := handlerFunc(func(tn *Turn, env Envelope) error {
				if string(env.Body) == "1" && declined.CompareAndSwap(false, true) {
					shut.Store(true) // the deadline passes between the two checks
					return fmt.Errorf("guard: %w", ErrNotStarted)
				}
				return r.Receive(tn, env)
			})
			o, err := rt.Open(Spec{Key: Key{ID: "a"}, Kind: KindActor, Generation: 1, Handler: guard})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				must(t, o.Post(Envelope{Kind: kind, Body: []byte(strconv.Itoa(i)), ReplyRoute: []byte(strconv.Itoa(i))}))
			}
			waitFor(t, "the object to hold itself", o.GateHeld)
			if got := strings.Join(r.seen(), ","); got != "0" || o.Queued() != 2 {
				t.Fatalf("ran %q with %d queued, want 0 run and 1, 2 kept", got, o.Queued())
			}
			shut.Store(false)
			rt.ReleaseGateHeld()
			waitFor(t, "the kept messages", func() bool { return len(r.seen()) == 3 })
			if got := strings.Join(r.seen(), ","); got != "0,1,2" {
				t.Fatalf("ran %q, want 0,1,2 each once and in order", got)
			}
			if kind == Request {
				rep.wait(t, 3)
				for i := range 3 {
					if got := rep.got[strconv.Itoa(i)]; got.err != nil || string(got.body) != strconv.Itoa(i) {
						t.Errorf("reply %d: %q, %v", i, got.body, got.err)
					}
				}
			}
		})
	}
	t.Run("without Options.Admit", func(t *testing.T) {
		rep := newReplies()
		rt := New(Options{Workers: 1, Replier: rep})
		defer rt.Close()
		h := handlerFunc(func(*Turn, Envelope) error { return ErrNotStarted })
		o, err := rt.Open(Spec{Key: Key{ID: "b"}, Kind: KindActor, Generation: 1, Handler: h})
		if err != nil {
			t.Fatal(err)
		}
		must(t, o.Post(Envelope{Kind: Request, ReplyRoute: []byte("r")}))
		rep.wait(t, 1)
		if got := rep.got["r"]; !errors.Is(got.err, ErrNotStarted) {
			t.Fatalf("reply %v, want the handler's ErrNotStarted", got.err)
		}
	})
}

// A factory written without Kind or Policy (their zero values are invalid
// on purpose) is told which field is missing and the values to choose
// from, in the names the application writes — not "unknown relocation
// policy 0", as a try-out found following docs/EMBEDDING.md.
func TestFactoryValidateNamesTheMissingField(t *testing.T) {
	newH := func(context.Context, CreateRequest) (Handler, error) { return handlerFunc(nil), nil }
	for _, tc := range []struct {
		f    Factory
		want string
	}{
		{Factory{StableType: "a", Policy: PolicyDisabled, New: newH},
			"Kind is not set: choose spot.KindActor, spot.KindUserSpot or spot.KindInstanceSpot"},
		{Factory{StableType: "a", Kind: KindInstanceSpot, New: newH},
			"Policy is not set: choose spot.PolicyDisabled (never moves), spot.PolicyRecreate"},
		{Factory{StableType: "a", Kind: KindActor, Policy: PolicyPreserveState, New: newH},
			"(spot.PolicyPreserveState, PreserveStateWith) needs Snapshot, a SnapshotAdapter"},
	} {
		if err := tc.f.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want it to say %q", tc.f, err, tc.want)
		}
	}
}

// A turn that does not end (a handler blocked on a slow call): HoldContext
// gives up when its context ends and leaves dispatch open, so what is
// queued runs after the turn; CloseContext closes every object all the
// same and names the one whose turn still runs. Before, Hold and Close
// waited for the turn without bound.
func TestHoldAndCloseDoNotWaitForAStuckTurnBeyondTheirContext(t *testing.T) {
	rt := New(Options{Workers: 2})
	started, release := make(chan struct{}), make(chan struct{})
	var ran atomic.Int32
	o := openBlocking(t, rt, started, release, &ran)
	other, err := rt.Open(Spec{Key: Key{ID: "other"}, Kind: KindActor, Generation: 1, Handler: handlerFunc(func(*Turn, Envelope) error { return nil })})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Post(Envelope{Kind: Send, Body: []byte("block")}); err != nil {
		t.Fatal(err)
	}
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := o.HoldContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("HoldContext = %v, want context.Canceled", err)
	}
	if o.Held() {
		t.Fatal("still held after HoldContext gave up")
	}
	if err := o.Post(Envelope{Kind: Send, Body: []byte("next")}); err != nil {
		t.Fatal(err)
	}
	if stuck := rt.CloseContext(ctx); len(stuck) != 1 || stuck[0].ID != "stuck" {
		t.Fatalf("CloseContext = %v, want [stuck]", stuck)
	}
	if err := other.Post(Envelope{Kind: Send}); !errors.Is(err, ErrRuntimeDown) {
		t.Fatalf("post to a closed object: %v", err)
	}
	close(release)
	waitFor(t, "the stuck turn to end", func() bool { return ran.Load() == 1 })
	if ran.Load() != 1 {
		t.Fatalf("ran %d turns after the close, want only the stuck one", ran.Load())
	}
}

// openBlocking opens the Actor "stuck", which counts every message it
// runs in ran; "block" closes started and waits for release first.
func openBlocking(t *testing.T, rt *Runtime, started, release chan struct{}, ran *atomic.Int32) *Object {
	t.Helper()
	o, err := rt.Open(Spec{Key: Key{ID: "stuck"}, Kind: KindActor, Generation: 1, Handler: handlerFunc(func(_ *Turn, env Envelope) error {
		if string(env.Body) == "block" {
			close(started)
			<-release
		}
		ran.Add(1)
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A HoldContext that gives up (a turn still runs when its context ends)
// leaves dispatch as it found it: open again when it was open; still held
// when a Hold held the object before it, or began while it waited — that
// hold's caller releases it, and nothing queued runs meanwhile. Before,
// it reopened dispatch whatever the state had been, and the queued message
// ran while the other holder counted on the object being held.
func TestHoldContextGivingUpKeepsAnotherHold(t *testing.T) {
	const (
		none       = iota // the object was open
		holdBefore        // a Hold began before HoldContext
		holdDuring        // a Hold began while HoldContext waited
	)
	for _, tc := range []struct {
		name     string
		other    int
		wantHeld bool
	}{
		{"open before: reopened", none, false},
		{"held by a Hold before", holdBefore, true},
		{"a Hold began while it waited", holdDuring, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := New(Options{Workers: 2})
			defer rt.Close()
			started, release := make(chan struct{}), make(chan struct{})
			letGo := sync.OnceFunc(func() { close(release) })
			defer letGo() // before the runtime's Close, which waits for the turn
			var ran atomic.Int32
			o := openBlocking(t, rt, started, release, &ran)
			if err := o.Post(send("block")); err != nil {
				t.Fatal(err)
			}
			<-started
			if err := o.Post(send("next")); err != nil {
				t.Fatal(err)
			}
			holds := func() uint64 {
				o.mu.Lock()
				defer o.mu.Unlock()
				return o.holds
			}
			held := make(chan struct{}) // the other Hold returned
			hold := func(want uint64) {
				go func() { o.Hold(); close(held) }()
				waitFor(t, "the other Hold to begin", func() bool { return holds() == want })
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var err error
			switch tc.other {
			case none:
				cancel()
				err = o.HoldContext(ctx)
			case holdBefore:
				hold(1)
				cancel()
				err = o.HoldContext(ctx)
			case holdDuring:
				errc := make(chan error, 1)
				go func() { errc <- o.HoldContext(ctx) }()
				waitFor(t, "HoldContext to begin", func() bool { return holds() == 1 })
				hold(2)
				cancel()
				err = <-errc
			}
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("HoldContext = %v, want context.Canceled", err)
			}
			if o.Held() != tc.wantHeld {
				t.Fatalf("held %v after HoldContext gave up, want %v", o.Held(), tc.wantHeld)
			}
			letGo()
			if tc.wantHeld {
				select {
				case <-held:
				case <-time.After(5 * time.Second):
					t.Fatal("the other Hold did not return once the turn ended")
				}
				if n := o.Queued(); n != 1 || !o.Held() {
					t.Fatalf("after the turn: %d queued, held %v; want the next message waiting, held", n, o.Held())
				}
				o.Release()
			}
			waitFor(t, "both messages to run", func() bool { return ran.Load() == 2 })
		})
	}
}

// A periodic timer whose firings are not run as fast as they come (a held
// or busy object, a period shorter than its turn) has at most one firing
// waiting in the mailbox: 10,000 periods of a held object queue one, the
// mailbox has room for messages, and the timer fires again once that one
// ran. Before, every period queued a firing: the mailbox filled (messages
// refused ErrMailboxFull) and the queue grew past its limit without bound.
func TestPeriodicTimerThatCannotKeepUpKeepsOneFiringQueued(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	rt := New(Options{Workers: 1, Clock: clk, MailboxLimit: 100})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "storm"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true})
	if err != nil {
		t.Fatal(err)
	}
	must(t, o.SetTimer("tick", time.Millisecond, time.Millisecond))
	clk.Advance(10 * time.Second)
	must(t, o.Post(Envelope{Kind: Send, Body: []byte("m")}))
	o.Release()
	waitFor(t, "the firing and the message", func() bool { return len(rec.seen()) == 2 })
	if got := strings.Join(rec.seen(), ","); got != "timer:tick,m" {
		t.Fatalf("ran %s, want timer:tick,m", got)
	}
	clk.Advance(time.Millisecond)
	waitFor(t, "the next firing", func() bool { return len(rec.seen()) == 3 })
}

// A periodic timer re-armed (SetTimer) while its firing waits in the
// mailbox still has one firing waiting: the re-arm drops the old one
// (since 2026-12-07; before, it was kept as the re-armed timer's waiting
// one) and the re-armed timer's first period queues its own. Before the
// old one was kept, the re-armed timer started with none waiting and its
// next period queued a second.
func TestPeriodicTimerRearmedWhileItsFiringWaitsKeepsOne(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	rt := New(Options{Workers: 1, Clock: clk, MailboxLimit: 100})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "rearm"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true})
	if err != nil {
		t.Fatal(err)
	}
	must(t, o.SetTimer("tick", time.Millisecond, time.Millisecond))
	clk.Advance(time.Millisecond) // one firing waits (the object is held)
	must(t, o.SetTimer("tick", time.Millisecond, time.Millisecond))
	clk.Advance(10 * time.Millisecond)
	if n := o.Queued(); n != 1 {
		t.Fatalf("%d envelopes wait, want the one firing", n)
	}
	must(t, o.Post(Envelope{Kind: Send, Body: []byte("m")}))
	o.Release()
	waitFor(t, "the message", func() bool { s := rec.seen(); return len(s) > 0 && s[len(s)-1] == "m" })
	if got := strings.Join(rec.seen(), ","); got != "timer:tick,m" {
		t.Fatalf("ran %s, want timer:tick,m", got)
	}
}

// A handler that panics (or fails a one-way message) on every message
// writes at most 10 lines per 10 s each, the next one saying how many were
// left out; the panic's line carries its stack. Before, every failed turn
// wrote a line (10,000 messages: 10,000 ERROR lines).
func TestHandlerFailuresAreLoggedWithinABudget(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		fail      func() error
	}{
		{"panic", "handler panic", func() error { panic("nil map write") }},
		{"error", "handler error", func() error { return errors.New("no such order") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncbuf.Buffer
			clk := NewManualClock(time.Unix(1000, 0))
			rt := New(Options{Workers: 2, Clock: clk, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
			defer rt.Close()
			var ran atomic.Int32
			o, err := rt.Open(Spec{Key: Key{ID: "bad"}, Kind: KindActor, Generation: 1, Handler: handlerFunc(func(*Turn, Envelope) error {
				ran.Add(1)
				return tc.fail()
			})})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 100; i++ {
				must(t, o.Post(Envelope{Kind: Send}))
			}
			waitFor(t, "100 turns", func() bool { return ran.Load() == 100 })
			if n := strings.Count(buf.String(), "msg=\""+tc.msg+"\""); n != 10 {
				t.Fatalf("%d %q lines for 100 failed turns, want 10", n, tc.msg)
			}
			clk.Advance(10 * time.Second)
			must(t, o.Post(Envelope{Kind: Send}))
			waitFor(t, "the next line", func() bool { return strings.Contains(buf.String(), "suppressed=90") })
			if tc.name == "panic" && !strings.Contains(buf.String(), "stack=") {
				t.Fatal("the panic's line has no stack")
			}
		})
	}
}

// The one waiting firing of a periodic timer is still known as waiting
// when its envelope comes back into a mailbox by another way than the
// timer: restored on a move's target, put back by a cancelled move
// (Requeue), or put back because its turn did not start (ErrNotStarted).
// The timer then skips its next periods as before the move. Without this
// the re-armed timer queued one more firing each time — two waiting after
// one move, three after two — though EMBEDDING §8 promises at most one.
func TestPeriodicTimerKeepsOneFiringQueuedWhenItsFiringIsPutBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// putBack returns the object whose mailbox now holds the firing
		// that src had queued, held.
		putBack func(t *testing.T, rt *Runtime, src *Object) *Object
		admit   bool // the runtime has an Options.Admit gate
	}{
		{"restored on a move's target", func(t *testing.T, rt *Runtime, src *Object) *Object {
			c, err := src.Capture()
			must(t, err)
			src.Discard()
			dst, err := rt.Open(Spec{Key: Key{ID: "dst"}, Kind: KindActor, Generation: 1, Handler: &recorder{}, Held: true, Restored: &c})
			must(t, err)
			return dst
		}, false},
		{"put back by a cancelled move", func(t *testing.T, _ *Runtime, src *Object) *Object {
			c, err := src.Capture()
			must(t, err)
			must(t, src.Requeue(c))
			return src
		}, false},
		{"put back because its turn did not start", func(t *testing.T, _ *Runtime, src *Object) *Object {
			src.Release() // the firing's turn declines (ErrNotStarted) and the object holds itself
			waitFor(t, "the object to hold itself", src.GateHeld)
			return src
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewManualClock(time.Unix(1000, 0))
			var shut atomic.Bool
			opts := Options{Workers: 1, Clock: clk}
			if tc.admit {
				opts.Admit = func() error {
					if shut.Load() {
						return errors.New("gate shut")
					}
					return nil
				}
			}
			rt := New(opts)
			defer rt.Close()
			h := handlerFunc(func(*Turn, Envelope) error {
				shut.Store(true) // as the node's gate shutting between Admit and the handler's own check
				return ErrNotStarted
			})
			src, err := rt.Open(Spec{Key: Key{ID: "src"}, Kind: KindActor, Generation: 1, Handler: h, Held: true})
			must(t, err)
			must(t, src.SetTimer("tick", time.Millisecond, time.Millisecond))
			clk.Advance(10 * time.Millisecond)
			if n := src.Queued(); n != 1 {
				t.Fatalf("%d firings queued on the held object, want 1", n)
			}
			o := tc.putBack(t, rt, src)
			clk.Advance(10 * time.Millisecond)
			if n := o.Queued(); n != 1 {
				t.Fatalf("%d firings queued after 10 more periods, want 1", n)
			}
		})
	}
}

package spot

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A timer firing that already waits in the mailbox does not run after a
// turn ahead of it cancelled or re-armed that timer: a firing carries only
// its name, so the handler cannot tell the stale firing from the one it
// armed. The idle-timeout pattern (every message re-arms a one-shot "idle"
// timer) saw "idle" fire at once after re-arming it for 30 s, then again
// 30 s later, and a timeout cancelled by the reply it waited for fired
// anyway. Until 2026-12-07 CancelTimer and a re-arm left the firing in the
// queue (review F, known open until then; EMBEDDING §8).
func TestTimerFiringWaitingInTheMailboxDoesNotRunAfterCancelOrRearm(t *testing.T) {
	for _, tc := range []struct {
		name string
		// touch is what the message turn does to the "idle" timer.
		touch func(t *Turn) error
	}{
		{"re-armed one-shot", func(t *Turn) error { return t.SetTimer("idle", 30*time.Second, 0) }},
		{"cancelled one-shot", func(t *Turn) error { t.CancelTimer("idle"); return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewManualClock(time.Unix(1000, 0))
			rt := New(Options{Workers: 1, Clock: clk})
			defer rt.Close()
			var mu sync.Mutex
			var got []string
			h := handlerFunc(func(turn *Turn, env Envelope) error {
				mu.Lock()
				got = append(got, env.Kind.String()+"@"+turn.Now().Sub(time.Unix(1000, 0)).String())
				mu.Unlock()
				if env.Kind == Send {
					return tc.touch(turn)
				}
				return nil
			})
			seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
			// Held, as a busy object or one in a move: the message and
			// then the timer's firing wait in the mailbox.
			o, err := rt.Open(Spec{Key: Key{ID: "idle"}, Kind: KindActor, Generation: 1, Handler: h, Held: true})
			must(t, err)
			must(t, o.SetTimer("idle", 30*time.Second, 0))
			must(t, o.Post(Envelope{Kind: Send, Body: []byte("touch")}))
			clk.Advance(30 * time.Second) // the firing queues behind the message
			o.Release()
			// A request behind them: once it ran, so did the stale firing, if any.
			must(t, o.Post(Envelope{Kind: Request, Body: []byte("sync"), ReplyRoute: []byte("r")}))
			waitFor(t, "the sync turn", func() bool {
				for _, s := range seen() {
					if strings.HasPrefix(s, "request") {
						return true
					}
				}
				return false
			})
			for _, s := range seen() {
				if strings.HasPrefix(s, "timer") {
					t.Fatalf("turns %v: the %s timer fired after the message's turn had replaced it", seen(), tc.name)
				}
			}
		})
	}
}

// CancelTimer of a one-shot timer whose firing waits reports true: it
// cancelled that firing. Before, fire() forgot the timer as it queued the
// firing, and CancelTimer reported false ("not pending") for it.
func TestCancelTimerOfAOneShotWhoseFiringWaitsReportsTrue(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	rt := New(Options{Workers: 1, Clock: clk})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "c"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true})
	must(t, err)
	must(t, o.SetTimer("t", time.Second, 0))
	clk.Advance(time.Second)
	if n := o.Queued(); n != 1 {
		t.Fatalf("%d waiting, want the firing", n)
	}
	if !o.CancelTimer("t") {
		t.Fatal("CancelTimer of the one-shot whose firing waits reported false")
	}
	if o.CancelTimer("t") {
		t.Fatal("a second CancelTimer reported true")
	}
	if n := o.Queued(); n != 0 {
		t.Fatalf("%d waiting after the cancel, want 0", n)
	}
	must(t, o.Post(Envelope{Kind: Send, Body: []byte("m")}))
	o.Release()
	waitFor(t, "the message", func() bool { return len(rec.seen()) == 1 })
	if got := strings.Join(rec.seen(), ","); got != "m" {
		t.Fatalf("ran %s, want m", got)
	}
}

// The same holds across a move: a firing captured in the queue is still
// its timer's waiting firing on the target (a turn ahead of it there
// cancels or re-arms it, CancelTimer reports it), and a firing that was
// stale already when the object was captured does not travel.
func TestTimerFiringCapturedInTheQueueIsDroppedByCancelOrRearmOnTheTarget(t *testing.T) {
	for _, tc := range []struct {
		name  string
		touch func(t *Turn) error
	}{
		{"re-armed one-shot", func(t *Turn) error { return t.SetTimer("idle", 30*time.Second, 0) }},
		{"cancelled one-shot", func(t *Turn) error {
			if !t.CancelTimer("idle") {
				return errors.New("CancelTimer reported no timer")
			}
			return nil
		}},
		{"re-armed periodic", func(t *Turn) error { return t.SetTimer("idle", 30*time.Second, 30*time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewManualClock(time.Unix(1000, 0))
			rt := New(Options{Workers: 1, Clock: clk})
			defer rt.Close()
			src, err := rt.Open(Spec{Key: Key{ID: "src"}, Kind: KindActor, Generation: 1, Handler: &recorder{}, Held: true})
			must(t, err)
			period := time.Duration(0)
			if strings.Contains(tc.name, "periodic") {
				period = 30 * time.Second
			}
			must(t, src.SetTimer("gone", 10*time.Second, 0))
			must(t, src.SetTimer("idle", 30*time.Second, period))
			must(t, src.Post(Envelope{Kind: Send, Body: []byte("touch")}))
			clk.Advance(30 * time.Second) // both firings queue behind the message
			if !src.CancelTimer("gone") { // stale before the capture
				t.Fatal("CancelTimer(gone) reported false")
			}
			c, err := src.Capture()
			must(t, err)
			src.Discard()
			var kinds []string
			for _, env := range c.Queue {
				kinds = append(kinds, env.Kind.String()+":"+env.Timer)
			}
			if got := strings.Join(kinds, ","); got != "send:,timer:idle" {
				t.Fatalf("captured queue %s, want send:,timer:idle (the stale firing of gone left out)", got)
			}
			var turnErr atomic.Value
			rec := &recorder{}
			rec.onTurn = func(turn *Turn, env Envelope) error {
				if string(env.Body) == "touch" {
					if err := tc.touch(turn); err != nil {
						turnErr.Store(err)
					}
				}
				return nil
			}
			dst, err := rt.Open(Spec{Key: Key{ID: "dst"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true, Restored: &c})
			must(t, err)
			dst.Release()
			must(t, dst.Post(Envelope{Kind: Send, Body: []byte("sync")}))
			waitFor(t, "the sync turn", func() bool { s := rec.seen(); return len(s) > 0 && s[len(s)-1] == "sync" })
			if got := strings.Join(rec.seen(), ","); got != "touch,sync" {
				t.Fatalf("target ran %s, want touch,sync (no stale firing)", got)
			}
			if err, _ := turnErr.Load().(error); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An object has at most MaxTimers timers: SetTimer refuses a new name
// beyond with ErrTooManyTimers, re-arming a name it has still works, and
// a cancelled timer makes room. Before, a handler arming a uniquely named
// timer per message grew the object without bound, until every move of
// it failed at the payload's limit.
func TestSetTimerRefusesANewNameBeyondMaxTimers(t *testing.T) {
	clk := NewManualClock(time.Unix(1000, 0))
	rt := New(Options{Workers: 1, Clock: clk})
	defer rt.Close()
	o, err := rt.Open(Spec{Key: Key{ID: "many"}, Kind: KindActor, Generation: 1, Handler: &recorder{}, Held: true})
	must(t, err)
	for i := 0; i < MaxTimers; i++ {
		must(t, o.SetTimer("t"+strconv.Itoa(i), time.Hour, 0))
	}
	if err := o.SetTimer("one more", time.Hour, 0); !errors.Is(err, ErrTooManyTimers) {
		t.Fatalf("SetTimer of timer %d returned %v, want ErrTooManyTimers", MaxTimers+1, err)
	}
	must(t, o.SetTimer("t0", time.Minute, time.Minute)) // re-arming a name it has
	if !o.CancelTimer("t1") {
		t.Fatal("CancelTimer(t1) reported false")
	}
	must(t, o.SetTimer("one more", time.Hour, 0))
	c, err := o.Capture()
	must(t, err)
	if len(c.Timers) != MaxTimers {
		t.Fatalf("captured %d timers, want %d", len(c.Timers), MaxTimers)
	}
}

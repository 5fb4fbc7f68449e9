package spot

import (
	"sort"
	"sync"
	"testing"
	"time"
)

// lateClock is a Clock whose callbacks run late, as a real clock's do on a
// loaded machine: AdvanceTo moves the time first and then runs every
// callback that became due, each seeing the new time.
type lateClock struct {
	mu   sync.Mutex
	now  time.Time
	seq  int
	pend map[int]lateEntry
}

type lateEntry struct {
	at time.Time
	f  func()
}

func newLateClock(start time.Time) *lateClock {
	return &lateClock{now: start, pend: map[int]lateEntry{}}
}

func (c *lateClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *lateClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	id := c.seq
	c.pend[id] = lateEntry{at: c.now.Add(d), f: f}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.pend[id]
		delete(c.pend, id)
		return ok
	}
}

// AdvanceTo sets the time to to and runs the callbacks due by then,
// earliest first, including those they schedule.
func (c *lateClock) AdvanceTo(to time.Time) {
	c.mu.Lock()
	c.now = to
	for {
		var due []int
		for id, e := range c.pend {
			if !e.at.After(to) {
				due = append(due, id)
			}
		}
		if len(due) == 0 {
			break
		}
		sort.Slice(due, func(i, j int) bool { return c.pend[due[i]].at.Before(c.pend[due[j]].at) })
		e := c.pend[due[0]]
		delete(c.pend, due[0])
		c.mu.Unlock()
		e.f()
		c.mu.Lock()
	}
	c.mu.Unlock()
}

// A periodic timer keeps its phase when its clock's callback runs late: a
// 10 s tick armed at 0 whose first callback runs at 4 s past its due time
// fires next at 20 s, not at 24 s. Before, each period was counted from
// the moment the late callback ran, so every late callback (scheduling
// latency, a loaded machine, a stall) pushed all later firings back for
// good: the tick drifted by the sum of its lateness.
func TestPeriodicTimerKeepsItsPhaseWhenItsClockFiresLate(t *testing.T) {
	t0 := time.Unix(1000, 0)
	clk := newLateClock(t0)
	rt := New(Options{Workers: 1, Clock: clk})
	defer rt.Close()
	rec := &recorder{}
	o, err := rt.Open(Spec{Key: Key{ID: "tick"}, Kind: KindActor, Generation: 1, Handler: rec})
	must(t, err)
	must(t, o.SetTimer("tick", 10*time.Second, 10*time.Second))
	clk.AdvanceTo(t0.Add(14 * time.Second)) // the 10 s callback runs 4 s late
	waitFor(t, "the first firing", func() bool { return len(rec.seen()) == 1 })
	clk.AdvanceTo(t0.Add(20 * time.Second))
	waitFor(t, "the firing due at 20 s", func() bool { return len(rec.seen()) == 2 })
	// Late by more than a period: the periods missed are skipped (one
	// firing for them), and the next is on the original phase again.
	clk.AdvanceTo(t0.Add(55 * time.Second))
	waitFor(t, "the firing for 30–50 s", func() bool { return len(rec.seen()) == 3 })
	clk.AdvanceTo(t0.Add(59 * time.Second))
	clk.AdvanceTo(t0.Add(60 * time.Second))
	waitFor(t, "the firing due at 60 s", func() bool { return len(rec.seen()) == 4 })
}

// Timers put back on the node that captured them — a move cancelled
// before relay-ready (Requeue), or taken back after its target could not
// commit (mesh recoverLocal: Open with Restored) — count their remaining
// time from the capture: a one-shot timer due 10 s after the capture of a
// move that failed 30 s later fires at once, as does the periodic one.
// Before, both were re-armed with the 10 s measured at the capture and so
// fired 40 s after it: every failed move delayed the object's timers by
// its whole duration (up to the move's deadline, 30 s by default).
func TestTimersPutBackAfterAFailedMoveCountFromTheCapture(t *testing.T) {
	for _, tc := range []struct {
		name    string
		putBack func(t *testing.T, rt *Runtime, src *Object, c Captured) *Object
	}{
		{"requeued on the source", func(t *testing.T, _ *Runtime, src *Object, c Captured) *Object {
			must(t, src.Requeue(c))
			return src
		}},
		{"reopened on the source", func(t *testing.T, rt *Runtime, src *Object, c Captured) *Object {
			src.Discard()
			o, err := rt.Open(Spec{Key: Key{ID: "src"}, Kind: KindActor, Generation: 1, Handler: src.Handler(), Held: true, Restored: &c})
			must(t, err)
			return o
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewManualClock(time.Unix(1000, 0))
			rt := New(Options{Workers: 1, Clock: clk})
			defer rt.Close()
			rec := &recorder{}
			src, err := rt.Open(Spec{Key: Key{ID: "src"}, Kind: KindActor, Generation: 1, Handler: rec, Held: true})
			must(t, err)
			must(t, src.SetTimer("once", 10*time.Second, 0))
			must(t, src.SetTimer("tick", 10*time.Second, time.Minute))
			c, err := src.Capture()
			must(t, err)
			clk.Advance(30 * time.Second) // the move runs, then fails
			o := tc.putBack(t, rt, src, c)
			o.Release()
			clk.Advance(0)
			waitFor(t, "both timers, overdue since the failed move, to fire", func() bool { return len(rec.seen()) == 2 })
		})
	}
}

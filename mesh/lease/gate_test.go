package lease

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// stepClock is a minimal manual Clock for the gate's internal tests
// (leasetest.ManualClock imports this package, so it cannot be used here).
// Timers fire only from fire(), so a test can also move time without firing
// them, as a late timer would.
type stepClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers map[*stepTimer]struct{}
}

type stepTimer struct {
	c   *stepClock
	due time.Duration
	f   func()
}

func newStepClock() *stepClock { return &stepClock{timers: map[*stepTimer]struct{}{}} }

func (c *stepClock) Now() time.Duration { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *stepClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stepTimer{c: c, due: c.now + d, f: f}
	c.timers[t] = struct{}{}
	return t
}

func (t *stepTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, ok := t.c.timers[t]
	delete(t.c.timers, t)
	return ok
}

// set moves time without firing timers.
func (c *stepClock) set(now time.Duration) { c.mu.Lock(); c.now = now; c.mu.Unlock() }

// fire runs the timers due by now.
func (c *stepClock) fire() {
	c.mu.Lock()
	var due []*stepTimer
	for t := range c.timers {
		if t.due <= c.now {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.f()
	}
}

func (c *stepClock) pending() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.timers) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type closeLog struct {
	mu      sync.Mutex
	reasons []error
}

func (l *closeLog) add(err error) { l.mu.Lock(); l.reasons = append(l.reasons, err); l.mu.Unlock() }
func (l *closeLog) get() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.reasons...)
}

func TestGateClosedUntilExtended(t *testing.T) {
	c := newStepClock()
	g := newGate(c, nil)
	if err := g.Admit(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("fresh gate Admit = %v, want ErrLeaseExpired", err)
	}
	if !isClosed(g.Closing()) {
		t.Fatal("fresh gate's Closing channel is open")
	}
}

func TestGateBoundaryIsExact(t *testing.T) {
	c := newStepClock()
	var log closeLog
	g := newGate(c, log.add)
	g.extend(10 * time.Second)
	ch := g.Closing()
	steps := []struct {
		now  time.Duration
		want error
	}{
		{0, nil},
		{10*time.Second - time.Nanosecond, nil},
		{10 * time.Second, ErrLeaseExpired},
		{11 * time.Second, ErrLeaseExpired},
	}
	for _, s := range steps {
		// No timer fires: Admit must not depend on one.
		c.set(s.now)
		if err := g.Admit(); !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("at %v Admit = %v, want %v", s.now, err, s.want)
		}
		if open := g.Open(); open != (s.want == nil) {
			t.Fatalf("at %v Open = %v", s.now, open)
		}
	}
	if isClosed(ch) {
		t.Fatal("Closing closed before any timer fired or anyone asked")
	}
	c.fire()
	if !isClosed(ch) {
		t.Fatal("Closing not closed after the expiry timer fired")
	}
	if got := log.get(); len(got) != 1 || !errors.Is(got[0], ErrLeaseExpired) {
		t.Fatalf("close notifications = %v, want one ErrLeaseExpired", got)
	}
	if g.Remaining() != 0 {
		t.Fatalf("Remaining of a closed gate = %v", g.Remaining())
	}
}

func TestGateClosingWithoutTimer(t *testing.T) {
	// A late timer must not delay the channel for a caller who asks after the
	// deadline: Closing checks the clock itself.
	c := newStepClock()
	var log closeLog
	g := newGate(c, log.add)
	g.extend(time.Second)
	c.set(2 * time.Second)
	if !isClosed(g.Closing()) {
		t.Fatal("Closing after the deadline returned an open channel")
	}
	c.fire() // the late timer finds the gate already closed
	if got := log.get(); len(got) != 1 {
		t.Fatalf("notifications = %v, want exactly one", got)
	}
}

func TestGateExtendReplacesAndReopens(t *testing.T) {
	c := newStepClock()
	var log closeLog
	g := newGate(c, log.add)
	g.extend(10 * time.Second)
	g.extend(20 * time.Second)
	if g.Deadline() != 20*time.Second {
		t.Fatalf("Deadline = %v", g.Deadline())
	}
	// A later observation with less time left wins (the store is the
	// authority), even though it moves the deadline backwards.
	g.extend(15 * time.Second)
	if g.Deadline() != 15*time.Second {
		t.Fatalf("Deadline after an earlier observation = %v, want 15s", g.Deadline())
	}
	if c.pending() != 1 {
		t.Fatalf("pending timers = %d, want 1 (re-armed, not stacked)", c.pending())
	}
	c.set(15 * time.Second)
	c.fire()
	first := g.Closing()
	if !isClosed(first) || g.Open() {
		t.Fatal("gate open past its deadline")
	}
	// A successful renew after the deadline reopens the gate with a fresh
	// channel (the store never expired the record).
	g.extend(25 * time.Second)
	if !g.Open() {
		t.Fatal("gate not reopened by a later deadline")
	}
	second := g.Closing()
	if isClosed(second) {
		t.Fatal("reopened gate returned a closed channel")
	}
	// An observation that is already in the past closes an open gate.
	g.extend(15 * time.Second)
	if g.Open() || !isClosed(second) {
		t.Fatal("a deadline in the past did not close the gate")
	}
	if got := log.get(); len(got) != 2 {
		t.Fatalf("notifications = %v, want 2", got)
	}
}

func TestGateShutIsPermanent(t *testing.T) {
	tests := []struct {
		name   string
		first  error
		second error
	}{
		{"lost then released keeps lost", ErrLeaseLost, ErrLeaseReleased},
		{"released then lost keeps released", ErrLeaseReleased, ErrLeaseLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newStepClock()
			var log closeLog
			g := newGate(c, log.add)
			g.extend(10 * time.Second)
			ch := g.Closing()
			if !g.shut(tt.first) {
				t.Fatal("first shut reported no change")
			}
			if g.shut(tt.second) {
				t.Fatal("second shut reported a change")
			}
			if !isClosed(ch) {
				t.Fatal("Closing not closed by shut")
			}
			g.extend(100 * time.Second)
			if err := g.Admit(); !errors.Is(err, tt.first) {
				t.Fatalf("Admit = %v, want %v", err, tt.first)
			}
			if c.pending() != 0 {
				t.Fatalf("pending timers after shut = %d", c.pending())
			}
			if got := log.get(); len(got) != 1 || !errors.Is(got[0], tt.first) {
				t.Fatalf("notifications = %v", got)
			}
		})
	}
}

func TestGateStopCancelsTimers(t *testing.T) {
	c := newStepClock()
	g := newGate(c, nil)
	g.extend(10 * time.Second)
	g.stop()
	if c.pending() != 0 {
		t.Fatalf("pending timers after stop = %d", c.pending())
	}
	g.extend(20 * time.Second) // ignored after stop: no timer may be armed
	if c.pending() != 0 {
		t.Fatalf("stop did not prevent a new timer")
	}
}

func TestGateConcurrentAdmit(t *testing.T) {
	c := newStepClock()
	g := newGate(c, nil)
	g.extend(time.Hour)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				_ = g.Admit()
				_ = g.Closing()
			}
		}()
	}
	g.extend(2 * time.Hour)
	g.shut(ErrLeaseLost)
	wg.Wait()
	if !errors.Is(g.Admit(), ErrLeaseLost) {
		t.Fatal("gate not lost")
	}
}

package leasetest

import (
	"slices"
	"testing"
	"time"
)

func TestManualClockFiresInDueOrder(t *testing.T) {
	c := NewManualClock(10 * time.Second)
	var got []string
	var at []time.Duration
	rec := func(name string) func() {
		return func() { got = append(got, name); at = append(at, c.Now()) }
	}
	c.AfterFunc(3*time.Second, rec("c"))
	c.AfterFunc(1*time.Second, rec("a"))
	c.AfterFunc(2*time.Second, rec("b1"))
	c.AfterFunc(2*time.Second, rec("b2"))
	stopMe := c.AfterFunc(2500*time.Millisecond, rec("stopped"))
	if !stopMe.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	if stopMe.Stop() {
		t.Fatal("second Stop returned true")
	}
	c.Advance(2 * time.Second)
	if want := []string{"a", "b1", "b2"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if at[0] != 11*time.Second || at[1] != 12*time.Second {
		t.Fatalf("Now during callbacks = %v", at)
	}
	if c.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", c.Pending())
	}
	if due, ok := c.NextDue(); !ok || due != 13*time.Second {
		t.Fatalf("NextDue = %v, %v", due, ok)
	}
	// A timer registered by a callback fires within the same Advance.
	c.AfterFunc(500*time.Millisecond, func() {
		c.AfterFunc(time.Second, rec("chained"))
	})
	c.Advance(5 * time.Second)
	if !slices.Contains(got, "chained") || !slices.Contains(got, "c") {
		t.Fatalf("chained or pending timer did not fire: %v", got)
	}
	if c.Now() != 17*time.Second {
		t.Fatalf("Now = %v, want 17s", c.Now())
	}
}

func TestStoreClockFollowsAndSteps(t *testing.T) {
	c := NewManualClock(0)
	base := time.UnixMilli(1_700_000_000_000)
	s := c.StoreClock(base)
	c.Advance(1500 * time.Millisecond)
	if got := s.Now(); !got.Equal(base.Add(1500 * time.Millisecond)) {
		t.Fatalf("store now %v", got)
	}
	s.Step(-time.Second)
	if got := s.Now(); !got.Equal(base.Add(500 * time.Millisecond)) {
		t.Fatalf("stepped store now %v", got)
	}
}

func TestWaitFor(t *testing.T) {
	c := NewManualClock(0)
	done := make(chan bool)
	go func() { done <- c.WaitFor(func(n int) bool { return n >= 2 }, 10*time.Second) }()
	c.AfterFunc(time.Second, func() {})
	c.AfterFunc(time.Second, func() {})
	if !<-done {
		t.Fatal("WaitFor did not see two timers")
	}
	if c.WaitFor(func(n int) bool { return n == 5 }, 10*time.Millisecond) {
		t.Fatal("WaitFor reported an impossible condition")
	}
}

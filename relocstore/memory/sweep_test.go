package memory

import (
	"testing"
	"time"
)

// TestSweepBoundsMemory: expired payloads lose their bytes and outlived
// tombstones disappear without anyone reading them, as soon as some
// operation runs after the sweep interval.
func TestSweepBoundsMemory(t *testing.T) {
	clk := NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := New(WithClock(clk), WithTombstoneRetention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	for _, ref := range []string{"a", "b", "c"} {
		if _, err := s.Put(ctx, ref, make([]byte, 1<<20), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Put(ctx, "long", []byte("x"), 10*time.Hour); err != nil {
		t.Fatal(err)
	}

	clk.Advance(sweepInterval)
	if _, err := s.Read(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	for _, ref := range []string{"a", "b", "c"} {
		if e := s.refs[ref]; e == nil || e.live || e.data != nil {
			t.Errorf("%s after expiry: %+v, want a tombstone without bytes", ref, e)
		}
	}
	s.mu.Unlock()

	clk.Advance(time.Hour)
	if _, err := s.Read(ctx, "long"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refs) != 1 || s.refs["long"] == nil {
		t.Errorf("after the tombstone retention %d entries remain, want only the live one", len(s.refs))
	}
}

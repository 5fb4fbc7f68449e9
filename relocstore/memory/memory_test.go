package memory_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/relocstore"
	"github.com/meshnode/meshnode/relocstore/memory"
	"github.com/meshnode/meshnode/relocstore/storetest"
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// clocks gives the harness the manual clock behind each store it created.
type clocks struct {
	mu sync.Mutex
	m  map[relocstore.Store]*memory.ManualClock
}

func (c *clocks) newStore(t *testing.T, opts ...memory.Option) (*memory.Store, *memory.ManualClock) {
	t.Helper()
	clk := memory.NewManualClock(epoch)
	s, err := memory.New(append([]memory.Option{memory.WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[relocstore.Store]*memory.ManualClock{}
	}
	c.m[s] = clk
	return s, clk
}

func (c *clocks) advance(t *testing.T, s relocstore.Store, d time.Duration) {
	c.mu.Lock()
	clk, ok := c.m[s]
	c.mu.Unlock()
	if !ok {
		t.Fatal("Advance on a store the harness did not create")
	}
	clk.Advance(d)
}

func TestContract(t *testing.T) {
	var cl clocks
	storetest.Run(t, storetest.Harness{
		Name: memory.ProviderName,
		New: func(t *testing.T) relocstore.Store {
			s, _ := cl.newStore(t)
			return s
		},
		Advance:    cl.advance,
		ExpiryUnit: time.Second,
	})
}

// TestTombstoneRetention: a tombstone refuses other bytes only for the
// configured tombstone retention, counted from the delete or from the expiry.
func TestTombstoneRetention(t *testing.T) {
	var cl clocks
	ctx := t.Context()
	s, clk := cl.newStore(t, memory.WithTombstoneRetention(time.Minute))
	defer s.Close()

	mustPut := func(ref, p string, ret time.Duration, want relocstore.PutOutcome) {
		t.Helper()
		r, err := s.Put(ctx, ref, []byte(p), ret)
		if err != nil || r.Outcome != want {
			t.Fatalf("Put(%q, %q) = %v, %v; want %v", ref, p, r.Outcome, err, want)
		}
	}
	mustPut("deleted", "a", time.Hour, relocstore.Stored)
	if err := s.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
	mustPut("expired", "a", 10*time.Second, relocstore.Stored)

	// The deleted tombstone lasts until epoch+60s, the expired one until
	// epoch+10s+60s.
	clk.Advance(59 * time.Second)
	mustPut("deleted", "b", time.Hour, relocstore.Conflict)
	mustPut("expired", "b", time.Hour, relocstore.Conflict)
	clk.Advance(time.Second)
	mustPut("deleted", "b", time.Hour, relocstore.Stored)
	mustPut("expired", "b", time.Hour, relocstore.Conflict)
	clk.Advance(9 * time.Second)
	mustPut("expired", "b", time.Hour, relocstore.Conflict)
	clk.Advance(time.Second)
	mustPut("expired", "b", time.Hour, relocstore.Stored)
}

// TestCancelledContextHasNoEffect: the memory store checks the context
// before changing anything, so a call with a dead context did nothing.
func TestCancelledContextHasNoEffect(t *testing.T) {
	var cl clocks
	s, _ := cl.newStore(t)
	defer s.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, "r", []byte("x"), 0); !errors.Is(err, relocstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled context: %v", err)
	}
	r, err := s.Read(t.Context(), "r")
	if err != nil || r.Found {
		t.Fatalf("Read after cancelled Put = %+v, %v; want Missing", r, err)
	}
}

func TestOptions(t *testing.T) {
	for name, opt := range map[string]memory.Option{
		"nil clock":            memory.WithClock(nil),
		"nil logger":           memory.WithLogger(nil),
		"tombstone 0":          memory.WithTombstoneRetention(0),
		"tombstone negative":   memory.WithTombstoneRetention(-time.Second),
		"tombstone too long":   memory.WithTombstoneRetention(relocstore.MaxRetention + 1),
		"tombstone below 1 ms": memory.WithTombstoneRetention(time.Millisecond - 1),
	} {
		if _, err := memory.New(opt); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := memory.New(nil, memory.WithTombstoneRetention(time.Millisecond))
	if err != nil {
		t.Fatalf("valid options: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestManualClock(t *testing.T) {
	c := memory.NewManualClock(epoch)
	c.Advance(-time.Hour)
	if !c.Now().Equal(epoch) {
		t.Fatalf("negative Advance moved the clock to %v", c.Now())
	}
	c.Advance(time.Second)
	if got := c.Now().Sub(epoch); got != time.Second {
		t.Fatalf("Advance(1s) moved %v", got)
	}
}

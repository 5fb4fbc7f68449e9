package memory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/locstore/storetest"
)

var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// harness gives every store its own ManualClock, found again by Advance.
func harness() storetest.Harness {
	var clocks sync.Map // *memory.Store -> *memory.ManualClock
	return storetest.Harness{
		Name: memory.ProviderName,
		New: func(t *testing.T) locstore.Store {
			c := memory.NewManualClock(epoch)
			s, err := memory.New(memory.WithClock(c))
			if err != nil {
				t.Fatalf("memory.New: %v", err)
			}
			clocks.Store(s, c)
			return s
		},
		Advance: func(t *testing.T, s locstore.Store, d time.Duration) {
			c, ok := clocks.Load(s)
			if !ok {
				t.Fatalf("Advance: store %p was not made by this harness", s)
			}
			c.(*memory.ManualClock).Advance(d)
		},
		ExpiryUnit: time.Second,
	}
}

func TestContract(t *testing.T) { storetest.Run(t, harness()) }

func TestStress(t *testing.T) { storetest.RunStress(t, harness()) }

func newStore(t *testing.T, opts ...memory.Option) (*memory.Store, *memory.ManualClock) {
	t.Helper()
	c := memory.NewManualClock(epoch)
	s, err := memory.New(append([]memory.Option{memory.WithClock(c)}, opts...)...)
	if err != nil {
		t.Fatalf("memory.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

func fill(t *testing.T, s *memory.Store, prefix string, n int) {
	t.Helper()
	var req locstore.WriteRequest
	for i := range n {
		req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("%s%03d", prefix, i), []byte("v")))
	}
	if res, err := s.Write(t.Context(), req); err != nil || !res.Applied {
		t.Fatalf("fill: applied %v, err %v", res.Applied, err)
	}
}

func scan(t *testing.T, s *memory.Store, prefix, cursor string) locstore.ScanPage {
	t.Helper()
	p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: prefix, Limit: 2, Cursor: cursor})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return p
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		opt  memory.Option
	}{
		{"nil clock", memory.WithClock(nil)},
		{"zero snapshot TTL", memory.WithSnapshotTTL(0)},
		{"negative snapshot TTL", memory.WithSnapshotTTL(-time.Second)},
		{"zero max snapshots", memory.WithMaxSnapshots(0)},
		{"nil logger", memory.WithLogger(nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if s, err := memory.New(c.opt); err == nil || s != nil {
				t.Fatalf("New accepted %s", c.name)
			}
		})
	}
	if s, err := memory.New(); err != nil || s == nil {
		t.Fatalf("New with defaults: %v", err)
	}
}

// TestSnapshotTTL: a snapshot lives SnapshotTTL after its last page was read,
// by the provider clock.
func TestSnapshotTTL(t *testing.T) {
	const ttl = time.Minute
	cases := []struct {
		name    string
		waits   []time.Duration // clock advances before each further page
		expired []bool
	}{
		{"just inside the TTL, repeatedly", []time.Duration{ttl - time.Millisecond, ttl - time.Millisecond, ttl - time.Millisecond}, []bool{false, false, false}},
		{"exactly the TTL", []time.Duration{ttl}, []bool{true}},
		{"past the TTL after one page", []time.Duration{time.Second, ttl + time.Second}, []bool{false, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, clock := newStore(t, memory.WithSnapshotTTL(ttl))
			fill(t, s, "t/", 20)
			p := scan(t, s, "t/", "")
			for i, w := range c.waits {
				clock.Advance(w)
				p = scan(t, s, "t/", p.Next)
				if p.Expired != c.expired[i] {
					t.Fatalf("page %d after %v: Expired %v, want %v", i+1, w, p.Expired, c.expired[i])
				}
				if p.Expired {
					if !p.StoreNow.Equal(clock.Now()) {
						t.Errorf("Expired page StoreNow %v, clock %v", p.StoreNow, clock.Now())
					}
					return
				}
			}
		})
	}
}

// TestSnapshotEviction: at most MaxSnapshots scans are open; opening one
// more evicts the least recently used, whose cursor then reads Expired.
func TestSnapshotEviction(t *testing.T) {
	s, clock := newStore(t, memory.WithMaxSnapshots(3))
	fill(t, s, "e/", 10)
	cur := make([]string, 5)
	for i := range 3 {
		cur[i] = scan(t, s, "e/", "").Next
		clock.Advance(time.Second)
	}
	// Touch scan 0, so scan 1 is now the least recently used.
	p := scan(t, s, "e/", cur[0])
	if p.Expired {
		t.Fatal("scan 0 expired before any eviction")
	}
	cur[0] = p.Next
	clock.Advance(time.Second)
	cur[3] = scan(t, s, "e/", "").Next // evicts scan 1
	clock.Advance(time.Second)
	cur[4] = scan(t, s, "e/", "").Next // evicts scan 2
	want := []bool{false, true, true, false, false}
	for i, c := range cur {
		if got := scan(t, s, "e/", c).Expired; got != want[i] {
			t.Errorf("scan %d: Expired %v, want %v", i, got, want[i])
		}
	}
}

// TestCursorRetry: re-sending a cursor re-reads the same page (a caller
// that lost a page response can retry), until the last page released the
// snapshot.
func TestCursorRetry(t *testing.T) {
	s, _ := newStore(t)
	fill(t, s, "r/", 5)
	p1 := scan(t, s, "r/", "")
	a, b := scan(t, s, "r/", p1.Next), scan(t, s, "r/", p1.Next)
	if a.Expired || b.Expired || a.Items[0].Key != "r/002" || b.Items[0].Key != a.Items[0].Key || a.Next != b.Next {
		t.Fatalf("retried cursor: %+v vs %+v", a, b)
	}
	last := scan(t, s, "r/", a.Next)
	if last.Expired || last.Next != "" || len(last.Items) != 1 {
		t.Fatalf("last page: %+v", last)
	}
	if !scan(t, s, "r/", a.Next).Expired {
		t.Fatal("the snapshot outlived its last page")
	}
}

// TestPageByteBoundary: a page takes items while they fit MaxPageBytes
// inclusive; the item that would cross the cap begins the next page.
func TestPageByteBoundary(t *testing.T) {
	for _, extra := range []int{0, 1} {
		t.Run(fmt.Sprintf("first four items %+d bytes over the cap", extra), func(t *testing.T) {
			s, _ := newStore(t)
			sizes := 0
			for i := range 5 {
				k := fmt.Sprintf("b/%d", i)
				n := locstore.MaxPageBytes/4 - len(k) - 1 // fresh store: versions "1".."5"
				if i == 3 {
					n += extra
				}
				res, err := s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(k, make([]byte, n))}})
				if err != nil || len(res.Versions[0]) != 1 {
					t.Fatalf("put %s: %v %v", k, res.Versions, err)
				}
				if i < 4 {
					sizes += len(k) + n + len(res.Versions[0])
				}
			}
			if sizes != locstore.MaxPageBytes+extra {
				t.Fatalf("test bug: first four items encode to %d bytes", sizes)
			}
			p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "b/", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if want := 4 - extra; len(p.Items) != want {
				t.Fatalf("first page holds %d items, want %d", len(p.Items), want)
			}
		})
	}
}

// TestExpiryInstant: a value with a retention is Missing from ExpiresAt on.
func TestExpiryInstant(t *testing.T) {
	s, clock := newStore(t)
	res, err := s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring("k", []byte("v"), time.Second)}})
	if err != nil || !res.Applied {
		t.Fatal(err)
	}
	r, _ := s.Read(t.Context(), "k")
	if !r.Found || !r.ExpiresAt.Equal(epoch.Add(time.Second)) || !r.StoreNow.Equal(epoch) {
		t.Fatalf("read: %+v", r)
	}
	clock.Advance(time.Second - time.Nanosecond)
	if r, _ := s.Read(t.Context(), "k"); !r.Found {
		t.Fatal("Missing before ExpiresAt")
	}
	clock.Advance(time.Nanosecond)
	if r, _ := s.Read(t.Context(), "k"); r.Found || !r.StoreNow.Equal(epoch.Add(time.Second)) {
		t.Fatalf("at ExpiresAt: %+v, want Missing", r)
	}
	clock.Advance(-time.Hour) // ignored: the provider clock never goes back
	if r, _ := s.Read(t.Context(), "k"); r.Found {
		t.Fatal("a negative Advance moved the clock back")
	}
}

// TestReturnedBytesAreCopies: a caller scribbling on returned bytes (which
// the SPI forbids) still cannot corrupt the store, as with Redis.
func TestReturnedBytesAreCopies(t *testing.T) {
	s, _ := newStore(t)
	fill(t, s, "c/", 3)
	r, _ := s.Read(t.Context(), "c/000")
	r.Value[0] = 'X'
	p := scan(t, s, "c/", "")
	p.Items[0].Value[0] = 'Y'
	if r2, _ := s.Read(t.Context(), "c/000"); string(r2.Value) != "v" {
		t.Fatalf("store value became %q", r2.Value)
	}
	if p2 := scan(t, s, "c/", p.Next); string(p2.Items[0].Value) != "v" {
		t.Fatal("snapshot value changed")
	}
}

func TestCancelledWriteChangesNothing(t *testing.T) {
	s, _ := newStore(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
	var pe *locstore.ProviderError
	if !errors.As(err, &pe) || pe.Provider != memory.ProviderName || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want a memory ProviderError wrapping context.Canceled", err)
	}
	if r, _ := s.Read(t.Context(), "k"); r.Found {
		t.Fatal("a write with a cancelled context was applied")
	}
}

func TestCloseIdempotent(t *testing.T) {
	s, _ := newStore(t)
	fill(t, s, "z/", 1)
	for i := range 3 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	_, err := s.Read(t.Context(), "z/000")
	if !errors.Is(err, memory.ErrClosed) || !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("Read after Close: %v", err)
	}
	if !strings.Contains(err.Error(), "closed") {
		t.Errorf("error text %q does not say the store is closed", err)
	}
}

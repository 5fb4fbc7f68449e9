// Package storetest is the shared contract suite of the Location Store SPI
// (package locstore). Every provider (memory, redis, ...) runs the same test
// functions against a factory of fresh, isolated stores, so the framework can
// rely on one behaviour whatever provider is configured (STORE-SPI.md).
//
// A provider's test calls Run and RunStress with a Harness:
//
//	func TestContract(t *testing.T) { storetest.Run(t, harness) }
//	func TestStress(t *testing.T)   { storetest.RunStress(t, harness) }
//
// Subtests are named <Harness.Name>/<Check>, so `go test -v` shows which
// provider each check ran against. The suite only uses the public SPI: it
// never looks at a provider's internals.
//
// Where STORE-SPI.md leaves a detail open, the suite pins down the reading
// the framework relies on:
//   - a Found result has StoreNow before ExpiresAt (a value is Missing from
//     its ExpiresAt on), and ExpiresAt is the commit's StoreNow plus the
//     retention, within 2ms (stores count in milliseconds);
//   - versions must never repeat for one key; different keys may share one;
//   - a scan page with a Next cursor holds at least one item;
//   - a context already done when an operation is called yields an error
//     matching both locstore.ErrUnavailable and the context's error;
//   - after Close every operation fails matching locstore.ErrUnavailable;
//   - a cursor the provider did not issue for this very scan and prefix
//     (garbage, truncated, extended, edited, another store's) is Expired,
//     and does not disturb the genuine scan.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/locstore"
)

// Harness gives the suite a fresh, empty, isolated store per subtest.
type Harness struct {
	Name string // "memory", "redis"
	// New returns a store on a fresh isolated namespace. The suite closes it
	// via t.Cleanup.
	New func(t *testing.T) locstore.Store
	// Advance moves the provider clock forward by d (memory: fake clock;
	// redis: time.Sleep).
	Advance func(t *testing.T, s locstore.Store, d time.Duration)
	// ExpiryUnit is the smallest retention the suite should use for expiry
	// tests (memory: 1s with a fake clock; redis: ~300ms real time).
	ExpiryUnit time.Duration
}

func (h Harness) check(t *testing.T) {
	t.Helper()
	switch {
	case h.Name == "":
		t.Fatal("storetest: Harness.Name is empty")
	case h.New == nil:
		t.Fatal("storetest: Harness.New is nil")
	case h.Advance == nil:
		t.Fatal("storetest: Harness.Advance is nil")
	case h.ExpiryUnit < time.Millisecond:
		t.Fatalf("storetest: Harness.ExpiryUnit %v is below the SPI's 1ms retention granularity", h.ExpiryUnit)
	}
}

// open returns a fresh store that is closed at the end of the test.
func (h Harness) open(t *testing.T) locstore.Store {
	t.Helper()
	s, _ := h.openClosable(t)
	return s
}

// openClosable is open plus a close function the test may call early; the
// cleanup then does not close the store a second time (the SPI promises the
// framework calls Close exactly once, so the suite does too).
func (h Harness) openClosable(t *testing.T) (locstore.Store, func() error) {
	t.Helper()
	s := h.New(t)
	if s == nil {
		t.Fatalf("%s: Harness.New returned a nil store", h.Name)
	}
	var once sync.Once
	var closeErr error
	closeFn := func() error {
		once.Do(func() { closeErr = s.Close() })
		return closeErr
	}
	t.Cleanup(func() {
		if err := closeFn(); err != nil {
			t.Errorf("%s: Close: %v", h.Name, err)
		}
	})
	return s, closeFn
}

type check struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// contract lists every check Run performs, in the order they run.
var contract = []check{
	{"ReadMissing", testReadMissing},
	{"PutRead", testPutRead},
	{"ValueBytesNeverChangeUnderCaller", testValueStability},
	{"Versions", testVersions},
	{"Delete", testDelete},
	{"ReadIsOneObservation", testTornRead},
	{"ReadMany", testReadMany},
	{"Expiry", testExpiry},
	{"ConflictChangesNothing", testConflict},
	{"ArgumentBounds", testBounds},
	{"MaxBatch", testMaxBatch},
	{"ConcurrentCASOneWinner", testConcurrentCAS},
	{"ConcurrentCASCounter", testCASCounter},
	{"ScanOrderAndPrefix", testScanOrder},
	{"ScanPageBytes", testScanPageBytes},
	{"ScanSnapshotUnderWriters", testScanSnapshot},
	{"ScanBadCursorExpired", testScanCursors},
	{"ContextDoneBeforeStart", testCancelledBeforeStart},
	{"LostResultReconstructedByReRead", testCancellation},
	{"Isolation", testIsolation},
	{"OperationsAfterClose", testClose},
}

// Run runs the contract suite against h. Checks run in parallel with each
// other (each on its own store), which also exercises a provider serving
// several namespaces at once.
func Run(t *testing.T, h Harness) {
	t.Helper()
	h.check(t)
	t.Run(h.Name, func(t *testing.T) {
		for _, c := range contract {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.fn(t, h)
			})
		}
	})
}

// ---- helpers shared by the checks ----

func write(t *testing.T, s locstore.Store, req locstore.WriteRequest) locstore.WriteResult {
	t.Helper()
	res, err := s.Write(t.Context(), req)
	if err != nil {
		t.Fatalf("Write: unexpected error: %v", err)
	}
	if res.StoreNow.IsZero() {
		t.Fatalf("Write: result has no StoreNow")
	}
	if res.Applied && len(res.Versions) != len(req.Mutations) {
		t.Fatalf("Write: applied with %d versions for %d mutations", len(res.Versions), len(req.Mutations))
	}
	if !res.Applied && len(res.Versions) != 0 {
		t.Fatalf("Write: Conflict carries %d versions, want none", len(res.Versions))
	}
	if res.Applied {
		for i, m := range req.Mutations {
			v := res.Versions[i]
			switch m.Kind {
			case locstore.MutPut:
				checkVersion(t, v)
			case locstore.MutDelete:
				if v != "" {
					t.Fatalf("Write: delete mutations[%d] got version %q, want empty", i, v)
				}
			}
		}
	}
	return res
}

// apply writes req and fails the test unless it was applied.
func apply(t *testing.T, s locstore.Store, req locstore.WriteRequest) []string {
	t.Helper()
	res := write(t, s, req)
	if !res.Applied {
		t.Fatalf("Write: got Conflict, want Applied (conditions %d, mutations %d)", len(req.Conditions), len(req.Mutations))
	}
	return res.Versions
}

// conflict writes req and fails the test unless it was a Conflict.
func conflict(t *testing.T, s locstore.Store, req locstore.WriteRequest) {
	t.Helper()
	if res := write(t, s, req); res.Applied {
		t.Fatalf("Write: got Applied, want Conflict")
	}
}

func put(t *testing.T, s locstore.Store, key string, value []byte) string {
	t.Helper()
	return apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, value)}})[0]
}

func read(t *testing.T, s locstore.Store, key string) locstore.ReadResult {
	t.Helper()
	r, err := s.Read(t.Context(), key)
	if err != nil {
		t.Fatalf("Read %q: unexpected error: %v", key, err)
	}
	if r.StoreNow.IsZero() {
		t.Fatalf("Read %q: result has no StoreNow", key)
	}
	if r.Found {
		checkVersion(t, r.Version)
		if !r.ExpiresAt.IsZero() && !r.StoreNow.Before(r.ExpiresAt) {
			t.Fatalf("Read %q: Found although StoreNow %v is not before ExpiresAt %v", key, r.StoreNow, r.ExpiresAt)
		}
	} else if r.Version != "" || len(r.Value) != 0 {
		t.Fatalf("Read %q: Missing result carries version %q / %d value bytes", key, r.Version, len(r.Value))
	}
	return r
}

func checkVersion(t *testing.T, v string) {
	t.Helper()
	if len(v) < 1 || len(v) > locstore.MaxVersionBytes || !utf8.ValidString(v) {
		t.Fatalf("provider issued version %q (%d bytes): want valid UTF-8 of 1..%d bytes", trunc(v), len(v), locstore.MaxVersionBytes)
	}
}

// state is what a Read observed, comparable with ==.
type state struct {
	Found     bool
	Value     string
	Version   string
	ExpiresAt time.Time
}

func (st state) String() string {
	if !st.Found {
		return "Missing"
	}
	exp := "durable"
	if !st.ExpiresAt.IsZero() {
		exp = "expires " + st.ExpiresAt.String()
	}
	return fmt.Sprintf("Found{value %q, version %q, %s}", trunc(st.Value), st.Version, exp)
}

func stateOf(r locstore.ReadResult) state {
	return state{Found: r.Found, Value: string(r.Value), Version: r.Version, ExpiresAt: r.ExpiresAt.UTC()}
}

func readState(t *testing.T, s locstore.Store, keys []string) map[string]state {
	t.Helper()
	m := make(map[string]state, len(keys))
	for _, k := range keys {
		m[k] = stateOf(read(t, s, k))
	}
	return m
}

func sameStates(t *testing.T, what string, before, after map[string]state) {
	t.Helper()
	bad := 0
	for k, b := range before {
		if a := after[k]; a != b {
			bad++
			if bad <= 5 {
				t.Errorf("%s: key %q changed: before %v, after %v", what, trunc(k), b, a)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d keys changed in all", what, bad)
	}
}

func wantArgErr(t *testing.T, what string, err error) {
	t.Helper()
	var ae *locstore.ArgumentError
	switch {
	case err == nil:
		t.Errorf("%s: no error, want an argument error", what)
	case !errors.Is(err, locstore.ErrArgument) || !errors.As(err, &ae):
		t.Errorf("%s: error %v is not an *ArgumentError matching ErrArgument", what, err)
	case errors.Is(err, locstore.ErrUnavailable):
		t.Errorf("%s: argument error %v also matches ErrUnavailable", what, err)
	}
}

// wantUnavailable checks that err is a provider failure: matchable with
// ErrUnavailable and distinct from an argument error.
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: no error, want a provider error", what)
	case !errors.Is(err, locstore.ErrUnavailable):
		t.Errorf("%s: error %v does not match locstore.ErrUnavailable", what, err)
	case errors.Is(err, locstore.ErrArgument):
		t.Errorf("%s: provider error %v also matches ErrArgument", what, err)
	}
}

// scanAll reads a whole scan of prefix with the given page limit and checks
// every per-page bound of the contract on the way. It fails on Expired: the
// checks that use it keep their scans well within any snapshot lifetime.
func scanAll(t *testing.T, s locstore.Store, prefix string, limit int) (items []locstore.Item, pages int) {
	t.Helper()
	cursor := ""
	for {
		p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: prefix, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatalf("Scan %q page %d: %v", prefix, pages, err)
		}
		if p.Expired {
			t.Fatalf("Scan %q page %d: unexpected Expired", prefix, pages)
		}
		checkPage(t, p, prefix, limit)
		pages++
		for _, it := range p.Items {
			if n := len(items); n > 0 && items[n-1].Key >= it.Key {
				t.Fatalf("Scan %q page %d: key %q after %q: not in strictly increasing byte order", prefix, pages, trunc(it.Key), trunc(items[n-1].Key))
			}
			items = append(items, it)
		}
		if p.Next == "" {
			return items, pages
		}
		cursor = p.Next
	}
}

func checkPage(t *testing.T, p locstore.ScanPage, prefix string, limit int) {
	t.Helper()
	if p.StoreNow.IsZero() {
		t.Fatalf("Scan: page has no StoreNow")
	}
	if len(p.Items) > limit {
		t.Fatalf("Scan: page holds %d items, limit %d", len(p.Items), limit)
	}
	size := 0
	for i, it := range p.Items {
		size += it.EncodedSize()
		if !strings.HasPrefix(it.Key, prefix) {
			t.Fatalf("Scan: item %q does not start with prefix %q", trunc(it.Key), trunc(prefix))
		}
		if i > 0 && p.Items[i-1].Key >= it.Key {
			t.Fatalf("Scan: items %q, %q not in strictly increasing byte order", trunc(p.Items[i-1].Key), trunc(it.Key))
		}
		checkVersion(t, it.Version)
	}
	if size > locstore.MaxPageBytes {
		t.Fatalf("Scan: page encodes to %d bytes, limit %d", size, locstore.MaxPageBytes)
	}
	if len(p.Next) > locstore.MaxCursorBytes {
		t.Fatalf("Scan: cursor is %d bytes, limit %d", len(p.Next), locstore.MaxCursorBytes)
	}
	if p.Next != "" && len(p.Items) == 0 {
		t.Fatalf("Scan: empty page with a Next cursor (a page is 1..limit items)")
	}
}

func trunc(s string) string {
	if len(s) <= 48 {
		return s
	}
	return fmt.Sprintf("%s...(%d bytes)", s[:40], len(s))
}

func equalBytes(a []byte, b string) bool { return bytes.Equal(a, []byte(b)) }

// ctxDone returns a context that is already cancelled.
func ctxDone(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

package query

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/memory"
	"github.com/meshnode/meshnode/mesh/record"
)

// TestListStates is the §7.4 state table, "Paged list" column, on both
// providers: one cycle over rows in every state.
func TestListStates(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		putLease(t, b.store, "o-live", 5, 0)
		putLease(t, b.store, "o-restarted", 6, 0)
		b.expireLease(t, "o-expired", 5)
		rows := []struct {
			obj  obj
			want State // "" = no entry
		}{
			{obj{id: "creating", state: record.AllocationReserved, owner: "o-live"}, StateCreating},
			{obj{id: "creating-dead-owner", state: record.AllocationReserved, owner: "o-none"}, StateCreating},
			{obj{id: "ready", owner: "o-live"}, StateReady},
			{obj{id: "ready-2", owner: "o-live", objGen: 7, aog: 3, mesh: "other", rid: []byte{0xff}}, StateReady},
			{obj{id: "unavailable-missing", owner: "o-none"}, StateUnavailable},
			{obj{id: "unavailable-expired", owner: "o-expired"}, StateUnavailable},
			{obj{id: "unavailable-generation", owner: "o-restarted"}, StateUnavailable},
		}
		var objs []obj
		for _, r := range rows {
			objs = append(objs, r.obj)
		}
		// "No record": a row that existed and was deleted before the cycle
		// started, and a spot (other kind) — neither gives an entry.
		gone := obj{id: "deleted"}
		objs = append(objs, gone, obj{id: "ready", kind: record.ObjectUserSpot, typ: "Room", owner: "o-live"})
		seed(t, b.store, objs...)
		write(t, b.store, []locstore.Mutation{locstore.Delete(gone.key(t))})

		for _, limit := range []int{1, 3, 1000} {
			t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
				got := keysOf(t, collect(t, Reader{Store: b.store}, ListRequest{Kind: record.ObjectActor, Limit: limit}))
				if len(got) != len(rows) {
					t.Fatalf("%d entries, want %d: %v", len(got), len(rows), got)
				}
				for _, r := range rows {
					e, ok := got[r.obj.key(t)]
					if !ok {
						t.Fatalf("%s: no entry", r.obj.id)
					}
					if want := r.obj.want(t, r.want); !reflect.DeepEqual(e, want) {
						t.Fatalf("%s:\ngot  %+v\nwant %+v", r.obj.id, e, want)
					}
				}
				if _, ok := got[gone.key(t)]; ok {
					t.Fatal("deleted row listed")
				}
			})
		}
	})
}

// TestListStoreFailure: the fifth row — any failed store call (a scan page
// at any point, an owner-lease read) ends the whole page as an error with
// no partial entries.
func TestListStoreFailure(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	// One actor per 10 rows: filling a page of 30 actors takes several
	// store pages, so a failure can hit the middle of a page.
	var objs []obj
	for i := range 600 {
		if i%10 == 0 {
			objs = append(objs, obj{id: fmt.Sprintf("a%04d", i)})
		} else {
			objs = append(objs, obj{id: fmt.Sprintf("s%04d", i), kind: record.ObjectUserSpot, typ: "Room"})
		}
	}
	seed(t, b.store, objs...)
	req := ListRequest{Kind: record.ObjectActor, Limit: 30}

	// Calibrate: how many scan calls does the first page take?
	probe := &faultyStore{Store: b.store}
	first, err := Reader{Store: probe}.List(context.Background(), req)
	if err != nil || len(first.Entries) != 30 || first.Next == "" {
		t.Fatalf("probe: %d entries, next %q, %v", len(first.Entries), first.Next, err)
	}
	if probe.scans < 3 {
		t.Fatalf("a page took %d scan calls; the test needs several", probe.scans)
	}
	tests := []struct {
		name string
		fs   *faultyStore
		cont bool
	}{
		{"first scan", &faultyStore{failScan: func(n int, _ locstore.ScanRequest) bool { return n == 1 }}, false},
		{"mid-page scan", &faultyStore{failScan: func(n int, _ locstore.ScanRequest) bool { return n == 2 }}, false},
		{"last scan of the page", &faultyStore{failScan: func(n int, _ locstore.ScanRequest) bool { return n == probe.scans }}, false},
		{"owner lease read", &faultyStore{failRead: func(int, string) bool { return true }}, false},
		{"continuation page scan", &faultyStore{failScan: func(n int, r locstore.ScanRequest) bool { return r.Cursor != "" }}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fs.Store = b.store
			r := Reader{Store: tc.fs}
			q := req
			if tc.cont {
				q.Continuation = first.Next
			}
			p, err := r.List(context.Background(), q)
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, errInjected) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			if !reflect.DeepEqual(p, Page{}) {
				t.Fatalf("partial page returned with the error: %d entries, next %q", len(p.Entries), p.Next)
			}
		})
	}
	// After the failure the same continuation still works: nothing was
	// consumed that the caller did not get.
	p, err := Reader{Store: b.store}.List(context.Background(), ListRequest{Kind: record.ObjectActor, Limit: 30, Continuation: first.Next})
	if err != nil || len(p.Entries) != 30 || p.Number != 2 {
		t.Fatalf("retry of page 2: %d entries, page %d, %v", len(p.Entries), p.Number, err)
	}
}

// TestListPaging: 2,500 matching rows (plus other kinds around them) read
// with several page limits: every row exactly once, every page within its
// limit, non-final pages full, one snapshot time per cycle.
func TestListPaging(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("user", 2500) {
		objs = append(objs, obj{id: id})
	}
	for _, id := range ids("room", 400) {
		objs = append(objs, obj{id: id, kind: record.ObjectUserSpot, typ: "Room"})
	}
	all := seed(t, b.store, objs...)
	checkPaging(t, b.store, all, 2500, []int{1, 7, 100, 999, 1000})
}

func checkPaging(t *testing.T, st locstore.Store, all map[string]string, wantN int, limits []int) {
	for _, limit := range limits {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			pages := collect(t, Reader{Store: st}, ListRequest{Kind: record.ObjectActor, Limit: limit})
			got := keysOf(t, pages)
			if len(got) != wantN {
				t.Fatalf("%d entries, want %d", len(got), wantN)
			}
			for k, e := range got {
				if all[k] != e.ID || e.Kind != record.ObjectActor || e.State != StateReady {
					t.Fatalf("entry %+v (seeded id %q)", e, all[k])
				}
			}
			if want := (wantN + limit - 1) / limit; len(pages) != want {
				t.Fatalf("%d pages, want %d", len(pages), want)
			}
			for i, p := range pages {
				if len(p.Entries) == 0 || len(p.Entries) > limit || (p.Next != "" && len(p.Entries) != limit) {
					t.Fatalf("page %d: %d entries, limit %d, next %v", i+1, len(p.Entries), limit, p.Next != "")
				}
				if p.Number != i+1 || !p.SnapshotAt.Equal(pages[0].SnapshotAt) || p.SnapshotAt.IsZero() {
					t.Fatalf("page %d: number %d, snapshot %v (first %v)", i+1, p.Number, p.SnapshotAt, pages[0].SnapshotAt)
				}
				if len(p.Next) > specMaxNextBytes {
					t.Fatalf("page %d: token of %d bytes", i+1, len(p.Next))
				}
				if n := p.EncodedSize(); n > MaxPageBytes {
					t.Fatalf("page %d: %d bytes", i+1, n)
				}
			}
		})
	}
}

// TestListByteCap: rows whose text fields are at their limits and escape
// six-fold in JSON make 1,000 entries larger than 4 MiB. Pages stay within
// 4 MiB, end no earlier than one worst-case entry before it, and together
// still hold every row once.
func TestListByteCap(t *testing.T) {
	b := memoryBackend(t)
	big := strings.Repeat("\x01", record.MaxNameBytes)
	owner := strings.Repeat("\x02", record.MaxNameBytes)
	putLease(t, b.store, owner, 5, 0)
	var objs []obj
	for i := range 1100 {
		id := fmt.Sprintf("%04d", i) + strings.Repeat("<", record.MaxIDBytes-4)
		objs = append(objs, obj{id: id, kind: record.ObjectInstanceSpot, typ: big, mesh: big, owner: owner,
			rid: []byte(strings.Repeat("r", record.MaxRoutingIDBytes))})
	}
	all := seed(t, b.store, objs...)
	pages := collect(t, Reader{Store: b.store}, ListRequest{Kind: record.ObjectInstanceSpot, Limit: MaxLimit})
	got := keysOf(t, pages)
	if len(got) != len(all) {
		t.Fatalf("%d entries, want %d", len(got), len(all))
	}
	if len(pages) < 2 {
		t.Fatalf("%d page(s): the byte cap never applied", len(pages))
	}
	for i, p := range pages {
		n := p.EncodedSize()
		if n > MaxPageBytes {
			t.Fatalf("page %d: %d bytes > %d", i+1, n, MaxPageBytes)
		}
		if p.Next != "" {
			if len(p.Entries) >= MaxLimit {
				t.Fatalf("page %d: %d entries; the byte cap should have cut it", i+1, len(p.Entries))
			}
			// Not cut early: one more worst-case entry would not surely fit.
			if n+2*maxEntryBytes+MaxContinuationBytes < MaxPageBytes {
				t.Fatalf("page %d: %d bytes, cut earlier than needed", i+1, n)
			}
		}
	}
	if e := pages[0].Entries[0]; e.StableType != big || e.OwnerID != owner || e.State != StateReady {
		t.Fatalf("entry fields lost: %+v", e)
	}
}

// TestListFilters: kind is required; stable type and mesh narrow it; the
// filters are checked against the decoded record.
func TestListFilters(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	kinds := []record.ObjectKind{record.ObjectActor, record.ObjectUserSpot, record.ObjectInstanceSpot}
	types := []string{"A", "B", "Bb"}
	meshes := []string{"east", "west"}
	n := 0
	for _, k := range kinds {
		for _, ty := range types {
			for _, m := range meshes {
				for range 5 {
					n++
					objs = append(objs, obj{id: fmt.Sprintf("o%03d", n), kind: k, typ: ty, mesh: m})
				}
			}
		}
	}
	seed(t, b.store, objs...)
	tests := []ListRequest{
		{Kind: record.ObjectActor},
		{Kind: record.ObjectUserSpot},
		{Kind: record.ObjectInstanceSpot, StableType: "B"},
		{Kind: record.ObjectUserSpot, MeshName: "west"},
		{Kind: record.ObjectActor, StableType: "Bb", MeshName: "east"},
		{Kind: record.ObjectActor, StableType: "b"}, // case-sensitive: nothing
		{Kind: record.ObjectActor, MeshName: "north"},
	}
	for _, req := range tests {
		t.Run(fmt.Sprintf("%s/%s/%s", req.Kind, req.StableType, req.MeshName), func(t *testing.T) {
			want := map[string]bool{}
			for _, o := range objs {
				if o.kind == req.Kind && (req.StableType == "" || o.typ == req.StableType) && (req.MeshName == "" || o.mesh == req.MeshName) {
					want[o.key(t)] = true
				}
			}
			req.Limit = 4
			got := keysOf(t, collect(t, Reader{Store: b.store}, req))
			if len(got) != len(want) {
				t.Fatalf("%d entries, want %d", len(got), len(want))
			}
			for k := range got {
				if !want[k] {
					t.Fatalf("unexpected entry %+v", got[k])
				}
			}
		})
	}
	bad := []ListRequest{
		{Limit: 10},
		{Kind: "entrySpot", Limit: 10},
		{Kind: "Actor", Limit: 10},
		{Kind: record.ObjectActor, Limit: 0},
		{Kind: record.ObjectActor, Limit: 1001},
		{Kind: record.ObjectActor, Limit: -1},
		{Kind: record.ObjectActor, Limit: 1, StableType: "a\x00"},
		{Kind: record.ObjectActor, Limit: 1, MeshName: strings.Repeat("m", 256)},
	}
	for _, req := range bad {
		if _, err := List(context.Background(), b.store, req); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%+v: err = %v, want ErrInvalidArgument", req, err)
		}
	}
	if _, err := (Reader{}).List(context.Background(), ListRequest{Kind: record.ObjectActor, Limit: 1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no store: %v", err)
	}
}

// TestListLeaseReadsPerOwner: one owner-lease read per distinct owner per
// page, however many rows that owner has.
func TestListLeaseReadsPerOwner(t *testing.T) {
	b := memoryBackend(t)
	owners := []string{"o1", "o2", "o3"}
	var objs []obj
	for i := range 60 {
		objs = append(objs, obj{id: fmt.Sprintf("x%02d", i), owner: owners[i%3]})
	}
	objs = append(objs, obj{id: "reserved", owner: "o4", state: record.AllocationReserved})
	seed(t, b.store, objs...)
	for _, o := range owners {
		putLease(t, b.store, o, 5, 0)
	}
	fs := &faultyStore{Store: b.store}
	for _, tc := range []struct {
		limit, pages, reads int
	}{
		{1000, 1, 3}, // o4's row is Reserved: Creating needs no lease
		{61, 1, 3},
		{10, 7, 3*6 + 1},
	} {
		fs.reads = 0
		fs.readKeys = nil
		pages := collect(t, Reader{Store: fs}, ListRequest{Kind: record.ObjectActor, Limit: tc.limit})
		if len(pages) != tc.pages {
			t.Fatalf("limit %d: %d pages", tc.limit, len(pages))
		}
		if fs.reads > tc.reads {
			t.Fatalf("limit %d: %d lease reads, want at most %d", tc.limit, fs.reads, tc.reads)
		}
		if fs.reads < 3 {
			t.Fatalf("limit %d: only %d lease reads", tc.limit, fs.reads)
		}
	}
}

// TestListSnapshotUnderWriters: rows created, changed and deleted while a
// cycle is read do not disturb it — no duplicate, nothing new, nothing
// lost, values as of the first page — and the next cycle shows them.
func TestListSnapshotUnderWriters(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		putLease(t, b.store, "node-1", 5, 0)
		var objs []obj
		for _, id := range ids("u", 2500) {
			objs = append(objs, obj{id: id})
		}
		initial := seed(t, b.store, objs...)
		req := ListRequest{Kind: record.ObjectActor, Limit: 100}
		r := Reader{Store: b.store}

		page, err := r.List(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		pages := []Page{page}
		step := 0
		for page.Next != "" {
			// Between pages: delete 5 rows, create 5, and move 5 to a new
			// owner generation — spread over the whole key range, so some
			// were already listed and some were not.
			step++
			var muts []locstore.Mutation
			for i := range 5 {
				victim := objs[(step*37+i*501)%len(objs)]
				muts = append(muts, locstore.Delete(victim.key(t)))
				changed := objs[(step*53+i*499+7)%len(objs)]
				changed.aog = 99
				v, _ := changed.authority().Encode()
				muts = append(muts, locstore.Put(changed.key(t), v))
				fresh := obj{id: fmt.Sprintf("new-%d-%d", step, i)}
				v, _ = fresh.authority().Encode()
				muts = append(muts, locstore.Put(fresh.key(t), v))
			}
			write(t, b.store, dedupe(muts))
			req.Continuation = page.Next
			if page, err = r.List(context.Background(), req); err != nil {
				t.Fatalf("page %d: %v", len(pages)+1, err)
			}
			pages = append(pages, page)
		}
		got := keysOf(t, pages)
		if len(got) != len(initial) {
			t.Fatalf("cycle returned %d rows, the snapshot had %d", len(got), len(initial))
		}
		for k, e := range got {
			if _, ok := initial[k]; !ok {
				t.Fatalf("row created during the cycle listed: %s", e.ID)
			}
			if e.AuthorityOwnerGeneration != 1 {
				t.Fatalf("%s shows a change made during the cycle (owner gen %d)", e.ID, e.AuthorityOwnerGeneration)
			}
		}
		// The next cycle sees every change.
		req.Continuation = ""
		next := keysOf(t, collect(t, r, req))
		changed := 0
		for k, e := range next {
			if _, ok := initial[k]; !ok && !strings.HasPrefix(e.ID, "new-") {
				t.Fatalf("unexpected %s", e.ID)
			}
			if e.AuthorityOwnerGeneration == 99 {
				changed++
			}
		}
		if changed == 0 || len(next) == len(initial) && reflect.DeepEqual(keySet(next), keySet(got)) {
			t.Fatalf("next cycle does not show the changes (%d changed, %d rows)", changed, len(next))
		}
	})
}

// TestListConcurrentWriters: the same with a writer goroutine running
// freely during the cycle (run with -race).
func TestListConcurrentWriters(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("u", 1500) {
		objs = append(objs, obj{id: id})
	}
	initial := seed(t, b.store, objs...)
	r := Reader{Store: b.store}
	req := ListRequest{Kind: record.ObjectActor, Limit: 50}
	page, err := r.List(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	pages := []Page{page}

	var stop atomic.Bool
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			o := objs[(i*131)%len(objs)]
			var m locstore.Mutation
			switch i % 3 {
			case 0:
				m = locstore.Delete(o.key(t))
			case 1:
				o.aog = 50
				v, _ := o.authority().Encode()
				m = locstore.Put(o.key(t), v)
			default:
				f := obj{id: fmt.Sprintf("late-%d", i)}
				v, _ := f.authority().Encode()
				m = locstore.Put(f.key(t), v)
			}
			if _, err := b.store.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{m}}); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	for page.Next != "" {
		req.Continuation = page.Next
		if page, err = r.List(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, page)
	}
	stop.Store(true)
	wg.Wait()
	got := keysOf(t, pages)
	if len(got) != len(initial) {
		t.Fatalf("cycle returned %d rows, snapshot had %d (%d concurrent writes)", len(got), len(initial), writes.Load())
	}
	for k := range got {
		if _, ok := initial[k]; !ok {
			t.Fatalf("row from after the snapshot listed")
		}
	}
}

func dedupe(muts []locstore.Mutation) []locstore.Mutation {
	seen := map[string]bool{}
	var out []locstore.Mutation
	for _, m := range muts {
		if !seen[m.Key] {
			seen[m.Key] = true
			out = append(out, m)
		}
	}
	return out
}

func keySet(m map[string]Entry) map[string]bool {
	s := make(map[string]bool, len(m))
	for k := range m {
		s[k] = true
	}
	return s
}

// TestListContinuationTampering: a token List did not issue for this
// request is ErrInvalidContinuation before the store is asked; a token
// whose store cursor was edited (checksum recomputed) is refused by the
// store and reported as ErrScanExpired.
func TestListContinuationTampering(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("u", 30) {
		objs = append(objs, obj{id: id})
	}
	seed(t, b.store, objs...)
	req := ListRequest{Kind: record.ObjectActor, StableType: "Player", Limit: 10}
	first, err := List(context.Background(), b.store, req)
	if err != nil || first.Next == "" {
		t.Fatal(first.Next, err)
	}
	tok := first.Next
	fp := fingerprint(req)
	parsed, err := parseToken(tok, fp)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string, i int) string {
		c := byte('A')
		if s[i] == 'A' {
			c = 'B'
		}
		return s[:i] + string(c) + s[i+1:]
	}
	editedCursor := parsed
	editedCursor.cursor = flip(parsed.cursor, len(parsed.cursor)/2)
	otherFormat := []byte(parsed.encode())
	tests := []struct {
		name  string
		token string
		req   func(ListRequest) ListRequest
		want  error
	}{
		{"one character changed", flip(tok, len(tok)/2), nil, ErrInvalidContinuation},
		{"first character changed", flip(tok, 0), nil, ErrInvalidContinuation},
		{"cut short", tok[:len(tok)-3], nil, ErrInvalidContinuation},
		{"extended", tok + "AAAA", nil, ErrInvalidContinuation},
		{"not base64url", "!!!" + tok, nil, ErrInvalidContinuation},
		{"padded", tok + "=", nil, ErrInvalidContinuation},
		{"too long", strings.Repeat("A", MaxContinuationBytes+4), nil, ErrInvalidContinuation},
		{"header only", token{fingerprint: fp}.encode(), nil, ErrInvalidContinuation},
		{"other stable type", tok, func(r ListRequest) ListRequest { r.StableType = "Other"; return r }, ErrInvalidContinuation},
		{"other kind", tok, func(r ListRequest) ListRequest { r.Kind = record.ObjectUserSpot; return r }, ErrInvalidContinuation},
		{"filter dropped", tok, func(r ListRequest) ListRequest { r.StableType = ""; return r }, ErrInvalidContinuation},
		{"unknown format", reformat(t, otherFormat), nil, ErrInvalidContinuation},
		{"store cursor edited", editedCursor.encode(), nil, ErrScanExpired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := req
			if tc.req != nil {
				q = tc.req(q)
			}
			q.Continuation = tc.token
			p, err := List(context.Background(), b.store, q)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if len(p.Entries) != 0 || p.Next != "" {
				t.Fatal("entries returned with the error")
			}
		})
	}
	// A limit change keeps the cycle: the token belongs to the filters.
	q := req
	q.Limit, q.Continuation = 1000, tok
	if p, err := List(context.Background(), b.store, q); err != nil || len(p.Entries) != 20 || p.Next != "" {
		t.Fatalf("limit change: %d entries, %v", len(p.Entries), err)
	}
}

// reformat rewrites a token's format byte and fixes its checksum.
func reformat(t *testing.T, tok []byte) string {
	t.Helper()
	raw := mustDecode(t, string(tok))
	raw[0] = 9
	body := raw[:len(raw)-checksumBytes]
	return encodeWithChecksum(body)
}

// TestListScanExpired: a continuation whose snapshot the store dropped is
// ErrScanExpired (the caller restarts); a first page whose snapshot expires
// while it is filled is restarted transparently, a bounded number of times.
func TestListScanExpired(t *testing.T) {
	b := memoryBackend(t, memory.WithSnapshotTTL(time.Minute))
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	for i := range 200 {
		if i%4 == 0 {
			objs = append(objs, obj{id: fmt.Sprintf("a%03d", i)})
		} else {
			objs = append(objs, obj{id: fmt.Sprintf("s%03d", i), kind: record.ObjectUserSpot, typ: "Room"})
		}
	}
	seed(t, b.store, objs...)
	req := ListRequest{Kind: record.ObjectActor, Limit: 10}

	t.Run("continuation after the snapshot TTL", func(t *testing.T) {
		first, err := List(context.Background(), b.store, req)
		if err != nil || first.Next == "" {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Minute)
		q := req
		q.Continuation = first.Next
		p, err := List(context.Background(), b.store, q)
		if !errors.Is(err, ErrScanExpired) || len(p.Entries) != 0 {
			t.Fatalf("err = %v, %d entries; want ErrScanExpired", err, len(p.Entries))
		}
		if !strings.Contains(err.Error(), "restart from the first page") {
			t.Fatalf("message does not say what to do: %v", err)
		}
		// Restarting works.
		if p, err := List(context.Background(), b.store, req); err != nil || len(p.Entries) != 10 {
			t.Fatalf("restart: %v", err)
		}
	})
	t.Run("a continuation never starts a new snapshot", func(t *testing.T) {
		first, err := List(context.Background(), b.store, req)
		if err != nil || first.Next == "" {
			t.Fatal(err)
		}
		fs := &faultyStore{Store: b.store, expire: func(_ int, r locstore.ScanRequest) bool { return r.Cursor != "" }}
		q := req
		q.Continuation = first.Next
		if _, err := (Reader{Store: fs, FirstPageAttempts: 5}).List(context.Background(), q); !errors.Is(err, ErrScanExpired) {
			t.Fatalf("err = %v, want ErrScanExpired", err)
		}
		// Restarting here would hand out rows of a second snapshot after
		// rows of the first: duplicates within one cycle.
		if n := countFirstScans(fs); n != 0 {
			t.Fatalf("%d new snapshots started for a continuation", n)
		}
	})
	t.Run("first page restarts transparently", func(t *testing.T) {
		once := true
		fs := &faultyStore{Store: b.store, expire: func(_ int, r locstore.ScanRequest) bool {
			if r.Cursor != "" && once {
				once = false
				return true
			}
			return false
		}}
		p, err := Reader{Store: fs}.List(context.Background(), req)
		if err != nil || len(p.Entries) != 10 {
			t.Fatalf("%d entries, %v", len(p.Entries), err)
		}
		if once {
			t.Fatal("the expiry was never injected: the page did not need a second scan call")
		}
		got := keysOf(t, collect(t, Reader{Store: b.store}, ListRequest{Kind: record.ObjectActor, Limit: 10, Continuation: p.Next}))
		if len(got)+len(p.Entries) != 50 {
			t.Fatalf("cycle after the restart: %d + %d rows, want 50", len(p.Entries), len(got))
		}
	})
	t.Run("first page gives up", func(t *testing.T) {
		fs := &faultyStore{Store: b.store, expire: func(_ int, r locstore.ScanRequest) bool { return r.Cursor != "" }}
		p, err := Reader{Store: fs, FirstPageAttempts: 2}.List(context.Background(), req)
		if !errors.Is(err, ErrScanExpired) || len(p.Entries) != 0 {
			t.Fatalf("err = %v", err)
		}
		if starts := countFirstScans(fs); starts != 2 {
			t.Fatalf("%d snapshot starts, want 2", starts)
		}
	})
}

// countFirstScans: every attempt begins a new snapshot with a cursor-less
// scan.
func countFirstScans(fs *faultyStore) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.firstScans
}

// TestListUndecodable: rows that do not decode, have an unknown
// recordVersion, or sit under another object's key are skipped and
// counted; the rest of the page is unaffected.
func TestListUndecodable(t *testing.T) {
	b := memoryBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	all := seed(t, b.store, obj{id: "a"}, obj{id: "b"}, obj{id: "c"})
	v, _ := obj{id: "elsewhere"}.authority().Encode()
	putRaw(t, b.store, obj{id: "misfiled"}.key(t), v)
	putRaw(t, b.store, "authority:"+strings.Repeat("0", 64), []byte("{not json"))
	putRaw(t, b.store, "authority:"+strings.Repeat("1", 64), []byte(`{"recordVersion":2,"objectId":"x"}`))
	var logged bytes.Buffer
	r := Reader{Store: b.store, Logger: slog.New(slog.NewTextHandler(&logged, nil))}
	pages := collect(t, r, ListRequest{Kind: record.ObjectActor, Limit: 1000})
	if n := strings.Count(logged.String(), "undecodable authority record skipped"); n != 3 {
		t.Fatalf("%d warnings logged, want 3:\n%s", n, logged.String())
	}
	if len(pages) != 1 || pages[0].Undecodable != 3 {
		t.Fatalf("%d pages, undecodable %d; want 1 page, 3 skipped", len(pages), pages[0].Undecodable)
	}
	got := keysOf(t, pages)
	if len(got) != len(all) {
		t.Fatalf("%d entries, want %d", len(got), len(all))
	}
}

func mustDecode(t *testing.T, tok string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeWithChecksum(body []byte) string {
	sum := sha256.Sum256(body)
	return base64.RawURLEncoding.EncodeToString(append(append([]byte(nil), body...), sum[:checksumBytes]...))
}

// TestListCancelled: a cancelled context ends the page as an error that
// names the cancellation; no entries.
func TestListCancelled(t *testing.T) {
	b := memoryBackend(t)
	seed(t, b.store, obj{id: "a"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := List(ctx, b.store, ListRequest{Kind: record.ObjectActor, Limit: 10})
	if !errors.Is(err, context.Canceled) || len(p.Entries) != 0 {
		t.Fatalf("err = %v, %d entries", err, len(p.Entries))
	}
	if _, _, err := Locate(ctx, b.store, record.IdentityActor, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("locate: %v", err)
	}
}

// TestListRequestValidate: Validate refuses, without a store, what List
// refuses before asking one — and accepts a token the same request issued.
func TestListRequestValidate(t *testing.T) {
	req := ListRequest{Kind: record.ObjectActor, Limit: 10}
	issued := token{format: tokenCursor, fingerprint: fingerprint(req), snapshotAt: time.UnixMilli(1), page: 2, cursor: "c"}.encode()
	other := req
	other.StableType = "Npc"
	tests := []struct {
		name string
		req  ListRequest
		want error
	}{
		{"first page", req, nil},
		{"its continuation", ListRequest{Kind: record.ObjectActor, Limit: 500, Continuation: issued}, nil},
		{"limit 0", ListRequest{Kind: record.ObjectActor}, ErrInvalidArgument},
		{"no kind", ListRequest{Limit: 1}, ErrInvalidArgument},
		{"garbage token", ListRequest{Kind: record.ObjectActor, Limit: 1, Continuation: "%%%"}, ErrInvalidContinuation},
		{"another request's token", ListRequest{Kind: other.Kind, StableType: other.StableType, Limit: 10, Continuation: issued}, ErrInvalidContinuation},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Validate() = %v, want %v", err, tc.want)
			}
		})
	}
}

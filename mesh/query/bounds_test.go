package query

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// specMaxNextBytes is §12's bound on a list read's next-page value (and
// §6.2's on the provider's): 4,096 bytes. Written out, not taken from a
// constant of the package under test.
const specMaxNextBytes = 4096

// TestListNoEmptyPage: §7.4 "One page returns 1..1000 entries". When every
// row after a full page fails the filters (other kind, other stable type,
// other mesh, undecodable), that page ends the cycle instead of handing out
// a continuation to an empty page; non-matching rows between matches never
// produce an empty page either. Undecodable rows are counted once per
// cycle, although the look-ahead reads some rows twice.
func TestListNoEmptyPage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		putLease(t, b.store, "node-1", 5, 0)
		match := func(i int) obj { return obj{id: fmt.Sprintf("m%02d", i)} }
		var matches []obj
		last := ""
		for i := range 6 {
			o := match(i)
			matches = append(matches, o)
			last = max(last, o.key(t))
		}
		// Rows sorting after the last match, one set per filter that
		// rejects them, so the tail of the scan holds no match.
		tail := append(after(t, last, 3, func(i int) obj {
			return obj{id: fmt.Sprintf("spot%d", i), kind: record.ObjectUserSpot, typ: "Room"}
		}), after(t, last, 3, func(i int) obj { return obj{id: fmt.Sprintf("type%d", i), typ: "Other"} })...)
		tail = append(tail, after(t, last, 3, func(i int) obj { return obj{id: fmt.Sprintf("mesh%d", i), mesh: "other"} })...)
		// And non-matching rows anywhere, gaps between matches included.
		var gaps []obj
		for i := range 40 {
			gaps = append(gaps, obj{id: fmt.Sprintf("gap%02d", i), kind: record.ObjectInstanceSpot, typ: "Room"})
		}
		all := seed(t, b.store, append(append(matches, tail...), gaps...)...)
		// An undecodable row sorting last.
		putRaw(t, b.store, "authority:"+strings.Repeat("f", 64), []byte("{not json"))
		req := ListRequest{Kind: record.ObjectActor, StableType: "Player", MeshName: "game"}
		for _, limit := range []int{1, 2, 3, 4, 6, 1000} {
			t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
				q := req
				q.Limit = limit
				pages := collect(t, Reader{Store: b.store}, q)
				got := keysOf(t, pages)
				if len(got) != len(matches) {
					t.Fatalf("%d entries, want %d", len(got), len(matches))
				}
				undecodable := 0
				for i, p := range pages {
					if len(p.Entries) == 0 {
						t.Fatalf("page %d of %d is empty (next %v)", i+1, len(pages), p.Next != "")
					}
					undecodable += p.Undecodable
				}
				if want := (len(matches) + limit - 1) / limit; len(pages) != want {
					t.Fatalf("%d pages, want %d", len(pages), want)
				}
				if undecodable != 1 {
					t.Fatalf("undecodable rows counted %d times in the cycle, want once", undecodable)
				}
				for k, e := range got {
					if all[k] != e.ID {
						t.Fatalf("entry %+v was not a match", e)
					}
				}
			})
		}
		// No match at all: the cycle is one empty page without a
		// continuation (the empty list), never a continuation to nothing.
		q := ListRequest{Kind: record.ObjectActor, StableType: "Nobody", Limit: 2}
		p, err := List(context.Background(), b.store, q)
		if err != nil || len(p.Entries) != 0 || p.Next != "" || p.Undecodable != 1 {
			t.Fatalf("empty listing: %d entries, next %q, undecodable %d, %v", len(p.Entries), p.Next, p.Undecodable, err)
		}
	})
}

// after returns n rows built by mk whose keys sort after key.
func after(t testing.TB, key string, n int, mk func(i int) obj) []obj {
	t.Helper()
	var out []obj
	for i := 0; len(out) < n; i++ {
		if i > 100000 {
			t.Fatal("no candidate keys after the last match")
		}
		if o := mk(i); o.key(t) > key {
			out = append(out, o)
		}
	}
	return out
}

// longCursorStore pads every cursor its store hands out to size bytes and
// strips the padding when it comes back: a conforming provider whose
// cursors are as long as the SPI allows (locstore.MaxCursorBytes). Both
// providers' cursors are base64url, which never holds the pad byte. It is
// stateless, so a padded cursor works from any instance on the same store.
type longCursorStore struct {
	locstore.Store
	size int
}

const cursorPad = "~"

func (s longCursorStore) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	req.Cursor = strings.TrimRight(req.Cursor, cursorPad)
	p, err := s.Store.Scan(ctx, req)
	if p.Next != "" && len(p.Next) < s.size {
		p.Next += strings.Repeat(cursorPad, s.size-len(p.Next))
	}
	return p, err
}

// TestListContinuationBound: §12 "The next-page value for a list read is
// at most 4,096 bytes", in the worst case: provider cursors of every length
// up to the SPI's 4,096 bytes (around the length where the query's token
// stops carrying the cursor itself) and both optional filters at their
// longest. Every token stays within 4,096 bytes and the cycle is complete,
// each row once.
func TestListContinuationBound(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		longType := strings.Repeat("\xea\xb0\x80", record.MaxNameBytes/3) // 255 bytes, multi-byte UTF-8
		longMesh := strings.Repeat("\x7f", record.MaxNameBytes)           // 255 bytes, escaped in JSON
		putLease(t, b.store, "node-1", 5, 0)
		var objs []obj
		for i := range 25 {
			objs = append(objs, obj{id: fmt.Sprintf("long%02d", i), kind: record.ObjectInstanceSpot, typ: longType, mesh: longMesh})
			objs = append(objs, obj{id: fmt.Sprintf("other%02d", i), kind: record.ObjectInstanceSpot, typ: "Room"})
		}
		all := seed(t, b.store, objs...)
		req := ListRequest{Kind: record.ObjectInstanceSpot, StableType: longType, MeshName: longMesh, Limit: 4}
		if err := req.validate(); err != nil {
			t.Fatalf("the longest filters are refused: %v", err)
		}
		// 0: the provider's own cursors. 3,035 is the longest cursor a
		// 4,096-character token can carry inline (3,072 bytes less the
		// token's own 37); 3,036 and 4,096 cannot be carried.
		for _, size := range []int{0, 3035, 3036, locstore.MaxCursorBytes} {
			t.Run(fmt.Sprint("cursor ", size), func(t *testing.T) {
				r := Reader{Store: longCursorStore{Store: b.store, size: size}}
				pages := collect(t, r, req)
				for i, p := range pages {
					if len(p.Next) > specMaxNextBytes {
						t.Fatalf("page %d: continuation of %d bytes > %d", i+1, len(p.Next), specMaxNextBytes)
					}
				}
				got := keysOf(t, pages)
				if len(got) != 25 || len(pages) != 7 {
					t.Fatalf("%d entries in %d pages, want 25 in 7", len(got), len(pages))
				}
				for k, e := range got {
					if !strings.HasPrefix(all[k], "long") || e.StableType != longType || e.MeshName != longMesh {
						t.Fatalf("entry %+v", e)
					}
				}
			})
		}
	})
}

// keptKeys lists the continuation state List kept in the store.
func keptKeys(t testing.TB, st locstore.Store) []string {
	t.Helper()
	var keys []string
	for cursor := ""; ; {
		p, err := st.Scan(context.Background(), locstore.ScanRequest{Prefix: keptPrefix, Limit: 1000, Cursor: cursor})
		if err != nil || p.Expired {
			t.Fatalf("scan kept state: %v (expired %v)", err, p.Expired)
		}
		for _, it := range p.Items {
			keys = append(keys, it.Key)
		}
		if cursor = p.Next; cursor == "" {
			return keys
		}
	}
}

// tailRows returns n actor rows in key order, every one in mesh "game"
// except those at the positions in other (mesh "other"), so a listing of
// mesh "game" sees matches and non-matches exactly where a test wants them.
func tailRows(t testing.TB, n int, other ...int) []obj {
	t.Helper()
	rows := make([]obj, n)
	for i := range rows {
		rows[i] = obj{id: fmt.Sprintf("row%d", i), owner: "o-live"}
	}
	slices.SortFunc(rows, func(a, b obj) int { return strings.Compare(a.key(t), b.key(t)) })
	for i := range rows {
		rows[i].mesh = "game"
		if slices.Contains(other, i) {
			rows[i].mesh = "other"
		}
	}
	return rows
}

// TestListKeptRows: when the first row after a full page lies on the
// snapshot's last scan page — which the store releases once it has served
// it — the look-ahead keeps that scan page's matching rows in the store and
// the next pages list them from there: as they were in the snapshot, with
// owner leases judged when each page is built, paged by the caller's
// limit, undecodable rows counted once. With no last-page match, nothing is
// kept (the listing writes nothing).
func TestListKeptRows(t *testing.T) {
	bad := "authority:" + strings.Repeat("f", 64) // sorts after every digest key
	tests := []struct {
		name  string
		rows  []obj
		bad   bool  // an undecodable row sorting last
		pages []int // entries per page: the first with limit 4, then limit 1
		kept  bool
	}{
		// m m m m | x m m: the look-ahead reads x (one row), then the last
		// two (the snapshot's last scan page): both kept.
		{"two kept rows", tailRows(t, 7, 4), false, []int{4, 1, 1}, true},
		// m m m m | x m bad: one kept row; the undecodable one is counted
		// on the first page and never again.
		{"kept row before an undecodable one", tailRows(t, 6, 4), true, []int{4, 1}, true},
		// m m m m | m m x: the next row is a match on a page the store can
		// serve again: the next page reads it again, nothing is kept.
		{"next scan page served again", tailRows(t, 7, 6), false, []int{4, 1, 1}, false},
		// m m m m | x x: nothing after the full page matches: it is the last.
		{"no later match", tailRows(t, 6, 4, 5), false, []int{4}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b backend) {
				st := b.store
				putLease(t, st, "o-live", 5, 0)
				seed(t, st, tc.rows...)
				if tc.bad {
					putRaw(t, st, bad, []byte("{not json"))
				}
				r := Reader{Store: st}
				req := ListRequest{Kind: record.ObjectActor, MeshName: "game", Limit: 4}
				first, err := r.List(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if kept := len(keptKeys(t, st)) > 0; kept != tc.kept {
					t.Fatalf("state kept in the store: %v, want %v", kept, tc.kept)
				}
				pages := []Page{first}
				// Change the snapshot's rows and end the owner's lease: the
				// rest of the cycle still lists the rows as they were, but
				// judges the owner's lease now.
				var muts []locstore.Mutation
				for _, o := range tc.rows {
					muts = append(muts, locstore.Delete(o.key(t)))
				}
				write(t, st, muts)
				write(t, st, []locstore.Mutation{locstore.Delete(leaseKey(t, "o-live"))})
				if first.Next != "" {
					req.Limit, req.Continuation = 1, first.Next
					pages = append(pages, collect(t, r, req)...)
				}
				var sizes []int
				undecodable := 0
				for i, p := range pages {
					sizes = append(sizes, len(p.Entries))
					undecodable += p.Undecodable
					if p.Number != i+1 || !p.SnapshotAt.Equal(first.SnapshotAt) || len(p.Next) > specMaxNextBytes {
						t.Fatalf("page %d: number %d, snapshot %v (first %v), next %d bytes", i+1, p.Number, p.SnapshotAt, first.SnapshotAt, len(p.Next))
					}
					for _, e := range p.Entries {
						want := StateReady
						if i > 0 {
							want = StateUnavailable
						}
						if e.State != want || e.MeshName != "game" {
							t.Fatalf("page %d: %+v, want state %s", i+1, e, want)
						}
					}
				}
				if !slices.Equal(sizes, tc.pages) {
					t.Fatalf("entries per page %v, want %v", sizes, tc.pages)
				}
				if want := map[bool]int{true: 1}[tc.bad]; undecodable != want {
					t.Fatalf("undecodable counted %d times, want %d", undecodable, want)
				}
				got := keysOf(t, pages)
				for _, o := range tc.rows {
					if _, ok := got[o.key(t)]; ok != (o.mesh == "game") {
						t.Fatalf("%s (mesh %s): listed %v", o.id, o.mesh, ok)
					}
				}
			})
		})
	}
}

// TestListKeptStateFailures: kept continuation state that is gone or
// altered ends the cycle with ErrScanExpired (restart); a failed write or
// read of it fails the page with ErrUnavailable and returns nothing.
func TestListKeptStateFailures(t *testing.T) {
	keptRows := func(t *testing.T) (backend, ListRequest, Page) {
		b := memoryBackend(t)
		putLease(t, b.store, "o-live", 5, 0)
		seed(t, b.store, tailRows(t, 7, 4)...) // as "two kept rows" above
		req := ListRequest{Kind: record.ObjectActor, MeshName: "game", Limit: 4}
		p, err := List(context.Background(), b.store, req)
		if err != nil || len(keptKeys(t, b.store)) != 1 {
			t.Fatalf("%v, kept %v", err, keptKeys(t, b.store))
		}
		req.Continuation = p.Next
		return b, req, p
	}
	keptCursor := func(t *testing.T) (backend, ListRequest, Page) {
		b := memoryBackend(t)
		putLease(t, b.store, "node-1", 5, 0)
		seed(t, b.store, obj{id: "a"}, obj{id: "b"}, obj{id: "c"})
		req := ListRequest{Kind: record.ObjectActor, Limit: 1}
		p, err := Reader{Store: longCursorStore{Store: b.store, size: locstore.MaxCursorBytes}}.List(context.Background(), req)
		if err != nil || len(keptKeys(t, b.store)) != 1 {
			t.Fatalf("%v, kept %v", err, keptKeys(t, b.store))
		}
		req.Continuation = p.Next
		b.store = longCursorStore{Store: b.store, size: locstore.MaxCursorBytes}
		return b, req, p
	}
	for _, setup := range []struct {
		name string
		f    func(t *testing.T) (backend, ListRequest, Page)
	}{{"kept rows", keptRows}, {"kept cursor", keptCursor}} {
		t.Run(setup.name, func(t *testing.T) {
			tests := []struct {
				name   string
				change func(t *testing.T, b backend) locstore.Store
				want   error
			}{
				{"retention over", func(t *testing.T, b backend) locstore.Store {
					b.clock.Advance(KeptRetention)
					return b.store
				}, ErrScanExpired},
				{"deleted", func(t *testing.T, b backend) locstore.Store {
					write(t, b.store, []locstore.Mutation{locstore.Delete(keptKeys(t, b.store)[0])})
					return b.store
				}, ErrScanExpired},
				{"altered", func(t *testing.T, b backend) locstore.Store {
					putRaw(t, b.store, keptKeys(t, b.store)[0], []byte("other"))
					return b.store
				}, ErrScanExpired},
				{"read fails", func(t *testing.T, b backend) locstore.Store {
					return &faultyStore{Store: b.store, failRead: func(_ int, key string) bool { return strings.HasPrefix(key, keptPrefix) }}
				}, ErrUnavailable},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					b, req, _ := setup.f(t)
					p, err := List(context.Background(), tc.change(t, b), req)
					if !errors.Is(err, tc.want) || !reflect.DeepEqual(p, Page{}) {
						t.Fatalf("err = %v, page %+v; want %v and no page", err, p, tc.want)
					}
				})
			}
			t.Run("write fails", func(t *testing.T) {
				// The first page again (same limit), now unable to keep.
				b, req, _ := setup.f(t)
				fs := &faultyStore{Store: b.store, failWrite: func(locstore.WriteRequest) bool { return true }}
				req.Continuation = ""
				p, err := List(context.Background(), fs, req)
				if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errInjected) || !reflect.DeepEqual(p, Page{}) {
					t.Fatalf("err = %v, page %+v; want ErrUnavailable and no page", err, p)
				}
			})
		})
	}
}

// TestKeptRowsFit: the rows one look-ahead scan page can keep always fit
// in one store value, however long their fields.
func TestKeptRowsFit(t *testing.T) {
	rows := make([]heldRow, maxLookAhead)
	for i := range rows {
		rows[i] = heldRow{Entry: worstEntry(), Active: true}
	}
	v, err := encodeRows(rows)
	if err != nil || len(v) > locstore.MaxValueBytes {
		t.Fatalf("%d rows encode to %d bytes (limit %d): %v", maxLookAhead, len(v), locstore.MaxValueBytes, err)
	}
	back, err := decodeRows(v)
	if err != nil || !reflect.DeepEqual(back, rows) {
		t.Fatalf("round trip: %v", err)
	}
}

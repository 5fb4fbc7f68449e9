package storetest

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// orderKeys sort differently by bytes than by strings.ToLower, by runes of
// a locale, or by length; NUL and multi-byte runes included.
var orderKeys = []string{
	"o/B", "o/a", "o/Z", "o/z", "o/b", "o/A", "o/é", "o/e", "o/E", "o/ä", "o/日本", "o/日",
	"o/𝄞", "o/Ａ", "o/~", "o/\x7f", "o/\x00", "o/a\x00", "o/a/b", "o/ab", "o/a b", "o/\uffff",
	"o/10", "o/9", "o/a\u0301", "o/É",
}

func testScanOrder(t *testing.T, h Harness) {
	s := h.open(t)
	var req locstore.WriteRequest
	for _, k := range orderKeys {
		req.Mutations = append(req.Mutations, locstore.Put(k, []byte("value of "+k)))
	}
	req.Mutations = append(req.Mutations, locstore.Put("n/outside", []byte("x")), locstore.Put("o", []byte("shorter than the prefix")))
	vs := apply(t, s, req)
	version := map[string]string{}
	for i, m := range req.Mutations {
		version[m.Key] = vs[i]
	}
	filter := func(prefix string) []string {
		var out []string
		for _, k := range orderKeys {
			if strings.HasPrefix(k, prefix) {
				out = append(out, k)
			}
		}
		slices.Sort(out) // Go orders strings by bytes
		return out
	}

	cases := []struct {
		prefix string
		limit  int
		want   []string
	}{
		{"o/", 3, filter("o/")},
		{"o/", 1, filter("o/")},
		{"o/", locstore.MaxPageItems, filter("o/")},
		{"o/a", 2, filter("o/a")}, // includes the key equal to the prefix
		{"o/日", 10, []string{"o/日", "o/日本"}},
		{"", 7, append([]string{"n/outside", "o"}, filter("o/")...)},
		{"p/", 5, nil},
		{"o/zz", 5, nil},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("prefix %q limit %d", c.prefix, c.limit), func(t *testing.T) {
			items, pages := scanAll(t, s, c.prefix, c.limit)
			var got []string
			for _, it := range items {
				got = append(got, it.Key)
				if string(it.Value) != "value of "+it.Key && it.Key != "n/outside" && it.Key != "o" {
					t.Errorf("item %q has value %q", it.Key, it.Value)
				}
				if it.Version != version[it.Key] || !it.ExpiresAt.IsZero() {
					t.Errorf("item %q: version %q expires %v, want %q durable", it.Key, it.Version, it.ExpiresAt, version[it.Key])
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("keys %q, want %q (byte order, prefix filtered)", got, c.want)
			}
			if wantPages := max(1, (len(c.want)+c.limit-1)/c.limit); pages < wantPages {
				t.Errorf("%d pages for %d items with limit %d", pages, len(c.want), c.limit)
			}
		})
	}
}

// testScanPageBytes: large values force pages capped by MaxPageBytes (by
// Item.EncodedSize) before the item limit is reached.
func testScanPageBytes(t *testing.T, h Harness) {
	s := h.open(t)
	const n, size = 9, 1_000_000 // five of these exceed 4 MiB, four do not
	want := map[string]string{}
	for i := range n {
		k := fmt.Sprintf("pb/%d", i)
		v := strings.Repeat(string(rune('a'+i)), size)
		put(t, s, k, []byte(v))
		want[k] = v
	}
	for _, limit := range []int{locstore.MaxPageItems, 3} {
		items, pages := scanAll(t, s, "pb/", limit)
		if len(items) != n {
			t.Fatalf("limit %d: %d items, want %d", limit, len(items), n)
		}
		for _, it := range items {
			if string(it.Value) != want[it.Key] {
				t.Fatalf("limit %d: item %q has the wrong value", limit, it.Key)
			}
		}
		if minPages := max((n+3)/4, (n+limit-1)/limit); pages < minPages {
			t.Fatalf("limit %d: %d pages, at least %d needed to respect the byte cap", limit, pages, minPages)
		}
		t.Logf("%s: %d items of %d bytes, limit %d -> %d pages", h.Name, n, size, limit, pages)
	}
}

// testScanSnapshot: every page comes from the snapshot the first request
// fixed, although writers update, delete and insert keys under the prefix
// while the scan pages. Between pages the test also changes exactly the
// keys the next page is about to return.
func testScanSnapshot(t *testing.T, h Harness) {
	s := h.open(t)
	const n, limit = 150, 7
	var req locstore.WriteRequest
	for i := range n {
		req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("sn/%03d", i), fmt.Appendf(nil, "orig %d", i)))
	}
	req.Mutations = append(req.Mutations, locstore.Put("sn0/outside", []byte("x")))
	vs := apply(t, s, req)
	type kv struct{ value, version string }
	snap := map[string]kv{}
	var keys []string
	for i, m := range req.Mutations[:n] {
		snap[m.Key] = kv{string(m.Value), vs[i]}
		keys = append(keys, m.Key)
	}

	page, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "sn/", Limit: limit})
	if err != nil || page.Expired {
		t.Fatalf("first page: expired %v, err %v", page.Expired, err)
	}

	// Background writers start only after the snapshot is fixed.
	stop := make(chan struct{})
	var writes atomic.Int64
	var writersOut atomic.Int32 // writers that stopped (error or cap)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 3 {
		wg.Go(func() {
			defer writersOut.Add(1)
			for i := 0; ; i++ {
				if i == 2000 { // bound the keys inserted; the paging loop below also writes
					<-stop
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				var m locstore.Mutation
				k := keys[(i*7+g*31)%n]
				switch i % 3 {
				case 0:
					m = locstore.Put(k, fmt.Appendf(nil, "w%d-%d", g, i))
				case 1:
					m = locstore.Delete(k)
				default:
					m = locstore.Put(fmt.Sprintf("sn/%03d+w%d-%d", (i*13)%n, g, i), []byte("inserted"))
				}
				if _, err := s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{m}}); err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
		})
	}

	// waitWrites lets the background writers make progress between pages,
	// so that every page is read while concurrent writes have changed the
	// keyspace (a fast provider could otherwise finish paging before the
	// writers are even scheduled). It waits for progress, not for time.
	waitWrites := func(target int64) {
		for writes.Load() < target && writersOut.Load() == 0 {
			time.Sleep(50 * time.Microsecond)
		}
	}
	var got []locstore.Item
	pages := 0
	for {
		checkPage(t, page, "sn/", limit)
		pages++
		got = append(got, page.Items...)
		if page.Next == "" {
			break
		}
		waitWrites(int64(pages) * 5)
		// Touch what the next page should hold: delete the next key,
		// rewrite the one after, insert a key right between them.
		if next := len(got); next+1 < n {
			apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
				locstore.Delete(keys[next]),
				locstore.Put(keys[next+1], []byte("rewritten")),
				locstore.Put(keys[next]+"~inserted", []byte("inserted")),
				locstore.Put("sn/", []byte("the prefix itself, inserted")),
			}})
		}
		page, err = s.Scan(t.Context(), locstore.ScanRequest{Prefix: "sn/", Limit: limit, Cursor: page.Next})
		if err != nil || page.Expired {
			t.Fatalf("page %d: expired %v, err %v", pages, page.Expired, err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("background writer: %v", err)
	}

	if len(got) != n {
		t.Errorf("the scan returned %d items, the snapshot held %d", len(got), n)
	}
	for i, it := range got {
		if i > 0 && got[i-1].Key >= it.Key {
			t.Fatalf("items %q, %q out of byte order across pages", got[i-1].Key, it.Key)
		}
		want, ok := snap[it.Key]
		if !ok {
			t.Fatalf("item %q was not in the snapshot (written after the first page)", it.Key)
		}
		if string(it.Value) != want.value || it.Version != want.version {
			t.Fatalf("item %q: %q version %q, snapshot held %q version %q", it.Key, it.Value, it.Version, want.value, want.version)
		}
	}
	t.Logf("%s: %d pages from one snapshot while %d concurrent writes ran", h.Name, pages, writes.Load())

	// A new scan sees the present, which matches exact reads.
	items, _ := scanAll(t, s, "sn/", 100)
	present := map[string]bool{}
	for _, it := range items {
		present[it.Key] = true
		if r := read(t, s, it.Key); string(r.Value) != string(it.Value) || r.Version != it.Version {
			t.Fatalf("fresh scan item %q (version %q) differs from Read %v", it.Key, it.Version, stateOf(r))
		}
	}
	for _, k := range keys {
		if r := read(t, s, k); r.Found != present[k] {
			t.Fatalf("key %q: Read found %v, fresh scan listed it %v", k, r.Found, present[k])
		}
	}
}

// testScanCursors: a cursor that the provider did not issue for this very
// scan (garbage, truncated, edited, another prefix, another store) is
// Expired, never a page from the wrong place; the genuine cursor still works.
func testScanCursors(t *testing.T, h Harness) {
	s := h.open(t)
	other := h.open(t)
	for _, st := range []locstore.Store{s, other} {
		var req locstore.WriteRequest
		for i := range 10 {
			req.Mutations = append(req.Mutations,
				locstore.Put(fmt.Sprintf("cur/%02d", i), []byte("c")),
				locstore.Put(fmt.Sprintf("alt/%02d", i), []byte("a")))
		}
		apply(t, st, req)
	}
	first := func(st locstore.Store, prefix string) string {
		p, err := st.Scan(t.Context(), locstore.ScanRequest{Prefix: prefix, Limit: 3})
		if err != nil || p.Next == "" {
			t.Fatalf("first page of %q: next %q, err %v", prefix, p.Next, err)
		}
		return p.Next
	}
	c := first(s, "cur/")
	foreign := first(other, "cur/") // a genuine cursor of another store, same prefix

	random := make([]byte, 48)
	_, _ = rand.Read(random)
	mid := len(c) / 2
	repl := byte('A')
	if c[mid] == 'A' {
		repl = 'B'
	}
	flipped := c[:mid] + string(repl) + c[mid+1:]
	bad := []struct {
		name, prefix, cursor string
	}{
		{"garbage", "cur/", "not-a-cursor"},
		{"random base64", "cur/", base64.RawURLEncoding.EncodeToString(random)},
		{"invalid UTF-8", "cur/", "\xff\xfe\x00\x01"},
		{"truncated by one", "cur/", c[:len(c)-1]},
		{"truncated to half", "cur/", c[:mid]},
		{"extended", "cur/", c + "A"},
		{"one character edited", "cur/", flipped},
		{"other prefix", "alt/", c},
		{"empty prefix", "", c},
		{"longer prefix", "cur/0", c},
		{"shorter prefix", "cu", c},
		{"another store's cursor", "cur/", foreign},
		{"4096 bytes of junk", "cur/", strings.Repeat("z", locstore.MaxCursorBytes)},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: b.prefix, Limit: 3, Cursor: b.cursor})
			if err != nil {
				t.Fatalf("error %v, want ScanPage{Expired: true}", err)
			}
			if !p.Expired || len(p.Items) != 0 || p.Next != "" {
				t.Fatalf("got expired %v, %d items, next %q; want Expired only", p.Expired, len(p.Items), p.Next)
			}
		})
	}
	// The genuine cursor still continues its own scan.
	p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cur/", Limit: 3, Cursor: c})
	if err != nil || p.Expired || len(p.Items) == 0 || p.Items[0].Key != "cur/03" {
		t.Fatalf("the genuine cursor after the bad ones: expired %v, err %v, items %v", p.Expired, err, p.Items)
	}
}

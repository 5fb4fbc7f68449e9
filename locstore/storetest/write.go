package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// testConflict: one false condition among many is a Conflict with zero
// mutations and zero version changes, wherever it sits and whatever kind it
// is. A final control run with the false condition made true applies, which
// proves the batch failed only because of that one condition.
func testConflict(t *testing.T, h Harness) {
	s := h.open(t)
	const n = 40
	keys := make([]string, n)
	var setup []locstore.Mutation
	for i := range keys {
		keys[i] = fmt.Sprintf("cf/%02d", i)
		setup = append(setup, locstore.Put(keys[i], []byte("v1-"+keys[i])))
	}
	setup = append(setup, locstore.Put("cf/x", []byte("x1")), locstore.Put("cf/gone", []byte("g")))
	vs := apply(t, s, locstore.WriteRequest{Mutations: setup})
	versions := vs[:n]
	xOld, goneV := vs[n], vs[n+1]
	xNow := put(t, s, "cf/x", []byte("x2"))
	apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete("cf/gone")}})

	trueConds := []locstore.Condition{locstore.IfMissing("cf/new/0")}
	for i, k := range keys {
		trueConds = append(trueConds, locstore.IfVersion(k, versions[i]))
	}
	trueConds = append(trueConds, locstore.IfMissing("cf/new/1"))
	var muts []locstore.Mutation
	for i, k := range keys {
		if i%5 == 0 {
			muts = append(muts, locstore.Delete(k))
		} else {
			muts = append(muts, locstore.Put(k, []byte("v2-"+k)))
		}
	}
	muts = append(muts,
		locstore.Put("cf/x", []byte("x3")),
		locstore.PutExpiring("cf/new/0", []byte("n0"), time.Hour),
		locstore.Put("cf/new/1", []byte("n1")),
		locstore.Put("cf/absent", []byte("a")),
		locstore.Put("cf/gone", []byte("back")),
	)
	watch := append(append([]string{}, keys...), "cf/x", "cf/gone", "cf/absent", "cf/new/0", "cf/new/1")

	falseConds := []struct {
		name string
		c    locstore.Condition
	}{
		{"stale version", locstore.IfVersion("cf/x", xOld)},
		{"Missing on a present key", locstore.IfMissing("cf/x")},
		{"version on an absent key", locstore.IfVersion("cf/absent", xNow)},
		{"version of another key", locstore.IfVersion("cf/x", versions[3])},
		{"version of a deleted key", locstore.IfVersion("cf/gone", goneV)},
		{"4096-byte version never issued", locstore.IfVersion("cf/x", strings.Repeat("v", locstore.MaxVersionBytes))},
	}
	positions := []struct {
		name string
		at   int
	}{{"first", 0}, {"middle", len(trueConds) / 2}, {"last", len(trueConds)}}

	for _, fc := range falseConds {
		for _, pos := range positions {
			t.Run(fc.name+"/"+pos.name, func(t *testing.T) {
				conds := append(append(append([]locstore.Condition{}, trueConds[:pos.at]...), fc.c), trueConds[pos.at:]...)
				before := readState(t, s, watch)
				conflict(t, s, locstore.WriteRequest{Conditions: conds, Mutations: muts})
				sameStates(t, "after Conflict", before, readState(t, s, watch))
			})
		}
	}

	// Control: the same batch with the false condition made true applies,
	// and every mutation took effect.
	conds := append(append([]locstore.Condition{}, trueConds...), locstore.IfVersion("cf/x", xNow))
	got := apply(t, s, locstore.WriteRequest{Conditions: conds, Mutations: muts})
	for i, m := range muts {
		r := read(t, s, m.Key)
		switch m.Kind {
		case locstore.MutDelete:
			if r.Found {
				t.Errorf("control batch: deleted %q still %v", m.Key, stateOf(r))
			}
		case locstore.MutPut:
			if !r.Found || string(r.Value) != string(m.Value) || r.Version != got[i] {
				t.Errorf("control batch: %q is %v, want %q version %q", m.Key, stateOf(r), m.Value, got[i])
			}
		}
	}
}

// sentinel is put by every invalid request in testBounds: if it appears,
// the provider touched storage for a request it should have rejected.
const sentinel = "bounds/sentinel"

// padTo grows the value of the last mutation of req so that its encoded
// size is exactly size.
func padTo(t *testing.T, req locstore.WriteRequest, size int) locstore.WriteRequest {
	t.Helper()
	last := &req.Mutations[len(req.Mutations)-1]
	n := len(last.Value) + size - req.EncodedSize()
	if n < 0 {
		t.Fatalf("test bug: cannot pad request to %d bytes", size)
	}
	last.Value = make([]byte, n)
	if got := req.EncodedSize(); got != size {
		t.Fatalf("test bug: padded request encodes to %d bytes, want %d", got, size)
	}
	return req
}

func testBounds(t *testing.T, h Harness) {
	s := h.open(t)
	ctx := t.Context()
	long := strings.Repeat("k", locstore.MaxKeyBytes+1)
	badUTF8 := "bad\xff\xfekey"
	val := []byte("v")
	sput := locstore.Put(sentinel, []byte("must never be stored"))
	muts := func(m ...locstore.Mutation) locstore.WriteRequest {
		return locstore.WriteRequest{Mutations: append([]locstore.Mutation{sput}, m...)}
	}
	conds := func(c ...locstore.Condition) locstore.WriteRequest {
		return locstore.WriteRequest{Conditions: c, Mutations: []locstore.Mutation{sput}}
	}
	manyKeys := func(n int) locstore.WriteRequest {
		req := muts()
		for i := range n - 1 { // the sentinel is one of the n keys
			req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("bounds/many/%04d", i), val))
		}
		return req
	}
	mixedKeys := func() locstore.WriteRequest {
		// 1,025 condition-only keys + 1,024 mutated keys = 2,049 distinct.
		req := muts()
		for i := range 1025 {
			req.Conditions = append(req.Conditions, locstore.IfMissing(fmt.Sprintf("bounds/cond/%04d", i)))
		}
		for i := range 1023 {
			req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("bounds/mut/%04d", i), val))
		}
		return req
	}
	tooBig := func() locstore.WriteRequest {
		req := muts()
		for i := range 4 {
			req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("bounds/big/%d", i), nil))
		}
		for i := range 3 {
			req.Mutations[1+i].Value = make([]byte, locstore.MaxValueBytes)
		}
		return padTo(t, req, locstore.MaxBatchBytes+1)
	}

	writes := []struct {
		name string
		req  locstore.WriteRequest
	}{
		{"no conditions and no mutations", locstore.WriteRequest{}},
		{"empty key in a mutation", muts(locstore.Put("", val))},
		{"empty key in a condition", conds(locstore.IfMissing(""))},
		{"1025-byte key in a mutation", muts(locstore.Put(long, val))},
		{"1025-byte key in a condition", conds(locstore.IfMissing(long))},
		{"1025-byte key in a delete", muts(locstore.Delete(long))},
		{"invalid UTF-8 key in a mutation", muts(locstore.Put(badUTF8, val))},
		{"invalid UTF-8 key in a condition", conds(locstore.IfVersion(badUTF8, "1"))},
		{"value of 1 MiB + 1", muts(locstore.Put("bounds/v", make([]byte, locstore.MaxValueBytes+1)))},
		{"version of 4097 bytes", conds(locstore.IfVersion("bounds/k", strings.Repeat("v", locstore.MaxVersionBytes+1)))},
		{"empty version", conds(locstore.IfVersion("bounds/k", ""))},
		{"invalid UTF-8 version", conds(locstore.IfVersion("bounds/k", "v\xff"))},
		{"Missing condition with a version", conds(locstore.Condition{Kind: locstore.CondMissing, Key: "bounds/k", Version: "1"})},
		{"unknown condition kind", conds(locstore.Condition{Kind: 0, Key: "bounds/k"})},
		{"unknown mutation kind", muts(locstore.Mutation{Kind: 9, Key: "bounds/k"})},
		{"negative retention", muts(locstore.PutExpiring("bounds/k", val, -time.Second))},
		{"retention beyond the maximum", muts(locstore.PutExpiring("bounds/k", val, locstore.MaxRetention+time.Millisecond))},
		{"retention below 1ms", muts(locstore.PutExpiring("bounds/k", val, 500*time.Microsecond))},
		{"delete carrying a value", muts(locstore.Mutation{Kind: locstore.MutDelete, Key: "bounds/k", Value: val})},
		{"delete carrying a retention", muts(locstore.Mutation{Kind: locstore.MutDelete, Key: "bounds/k", Retention: time.Second})},
		{"duplicate key among conditions", conds(locstore.IfMissing("bounds/d"), locstore.IfMissing("bounds/e"), locstore.IfVersion("bounds/d", "1"))},
		{"duplicate key among mutations (put, put)", muts(locstore.Put("bounds/d", val), locstore.Put("bounds/d", val))},
		{"duplicate key among mutations (put, delete)", muts(locstore.Put("bounds/d", val), locstore.Delete("bounds/d"))},
		{"duplicate key among mutations (delete, delete)", muts(locstore.Delete("bounds/d"), locstore.Delete("bounds/d"))},
		{"2,049 distinct keys among mutations", manyKeys(locstore.MaxBatchKeys + 1)},
		{"2,049 distinct keys across conditions and mutations", mixedKeys()},
		{"encoded size 4 MiB + 1", tooBig()},
	}
	for _, c := range writes {
		t.Run("write/"+c.name, func(t *testing.T) {
			_, err := s.Write(ctx, c.req)
			wantArgErr(t, "Write", err)
			if r := read(t, s, sentinel); r.Found {
				t.Fatalf("a rejected request stored %q", sentinel)
			}
		})
	}
	if r := read(t, s, "bounds/many/0000"); r.Found {
		t.Errorf("the 2,049-key batch stored its first key")
	}

	for _, k := range []struct{ name, key string }{{"empty", ""}, {"1025 bytes", long}, {"invalid UTF-8", badUTF8}} {
		t.Run("read/"+k.name+" key", func(t *testing.T) {
			_, err := s.Read(ctx, k.key)
			wantArgErr(t, "Read", err)
		})
	}

	scans := []struct {
		name string
		req  locstore.ScanRequest
	}{
		{"limit 0", locstore.ScanRequest{Limit: 0}},
		{"limit -1", locstore.ScanRequest{Limit: -1}},
		{"limit 1001", locstore.ScanRequest{Limit: locstore.MaxPageItems + 1}},
		{"prefix of 1025 bytes", locstore.ScanRequest{Prefix: long, Limit: 10}},
		{"invalid UTF-8 prefix", locstore.ScanRequest{Prefix: badUTF8, Limit: 10}},
		{"cursor of 4097 bytes", locstore.ScanRequest{Limit: 10, Cursor: strings.Repeat("c", locstore.MaxCursorBytes+1)}},
	}
	for _, c := range scans {
		t.Run("scan/"+c.name, func(t *testing.T) {
			_, err := s.Scan(ctx, c.req)
			wantArgErr(t, "Scan", err)
		})
	}

	// The bounds themselves are accepted.
	t.Run("accepted at the bounds", func(t *testing.T) {
		k1024 := strings.Repeat("b", locstore.MaxKeyBytes)
		v := apply(t, s, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfMissing(k1024)},
			Mutations: []locstore.Mutation{
				locstore.Put(k1024, make([]byte, locstore.MaxValueBytes)),
				locstore.PutExpiring("bounds/ok/1ms", val, time.Millisecond),
				locstore.PutExpiring("bounds/ok/max", val, locstore.MaxRetention),
			},
		})
		// A key may appear once among conditions and once among mutations.
		apply(t, s, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(k1024, v[0])},
			Mutations:  []locstore.Mutation{locstore.Delete(k1024)},
		})
		if r := read(t, s, "bounds/ok/max"); !r.Found || r.ExpiresAt.Sub(r.StoreNow) < locstore.MaxRetention-time.Hour {
			t.Errorf("maximum retention: %v", stateOf(r))
		}
		for _, lim := range []int{1, locstore.MaxPageItems} {
			if _, err := s.Scan(ctx, locstore.ScanRequest{Prefix: strings.Repeat("p", locstore.MaxPrefixBytes), Limit: lim}); err != nil {
				t.Errorf("Scan with a 1024-byte prefix and limit %d: %v", lim, err)
			}
		}
	})
}

// testMaxBatch: the largest legal batches (2,048 distinct keys, exactly
// 4 MiB by WriteRequest.EncodedSize) apply as one commit; one more key or
// one more byte is an argument error that stores nothing.
func testMaxBatch(t *testing.T, h Harness) {
	s := h.open(t)

	verify := func(t *testing.T, prefix string, req locstore.WriteRequest, versions []string) {
		t.Helper()
		want := map[string]string{}
		for i, m := range req.Mutations {
			if versions[i] == "" {
				t.Fatalf("mutation %d (%q) got no version", i, m.Key)
			}
			want[m.Key] = versions[i]
		}
		items, pages := scanAll(t, s, prefix, locstore.MaxPageItems)
		if len(items) != len(req.Mutations) {
			t.Fatalf("scan of %q lists %d keys, the batch put %d", prefix, len(items), len(req.Mutations))
		}
		for i, it := range items {
			m := req.Mutations[i] // mutations were built in key order
			if it.Key != m.Key || it.Version != want[it.Key] || string(it.Value) != string(m.Value) {
				t.Fatalf("item %d: %q version %q (%d bytes), want %q version %q (%d bytes)",
					i, it.Key, it.Version, len(it.Value), m.Key, want[m.Key], len(m.Value))
			}
		}
		for i := 0; i < len(req.Mutations); i += 97 {
			m := req.Mutations[i]
			if r := read(t, s, m.Key); !r.Found || r.Version != versions[i] || string(r.Value) != string(m.Value) {
				t.Fatalf("Read %q after the max batch: %v", m.Key, stateOf(r))
			}
		}
		t.Logf("%s: %d keys, %d bytes applied in one commit; read back in %d scan pages", h.Name, len(items), req.EncodedSize(), pages)
	}

	t.Run("2048 puts of exactly 4 MiB", func(t *testing.T) {
		var req locstore.WriteRequest
		for i := range locstore.MaxBatchKeys {
			k := fmt.Sprintf("mb/a/%04d", i)
			v := []byte(strings.Repeat(string(rune('a'+i%26)), locstore.MaxBatchBytes/locstore.MaxBatchKeys-len(k)))
			req.Mutations = append(req.Mutations, locstore.Put(k, v))
		}
		if req.EncodedSize() != locstore.MaxBatchBytes || req.Validate() != nil {
			t.Fatalf("test bug: size %d, validate %v", req.EncodedSize(), req.Validate())
		}
		verify(t, "mb/a/", req, apply(t, s, req))
	})

	t.Run("2048 keys with conditions, exactly 4 MiB", func(t *testing.T) {
		const half = locstore.MaxBatchKeys / 2
		existing := make([]string, half)
		for b := 0; b < half; b += 256 {
			var pre locstore.WriteRequest
			for i := b; i < b+256; i++ {
				pre.Mutations = append(pre.Mutations, locstore.Put(fmt.Sprintf("mb/b/%04d", i), []byte("old")))
			}
			copy(existing[b:], apply(t, s, pre))
		}
		var req locstore.WriteRequest
		for i := range locstore.MaxBatchKeys {
			k := fmt.Sprintf("mb/b/%04d", i)
			if i < half {
				req.Conditions = append(req.Conditions, locstore.IfVersion(k, existing[i]))
			} else {
				req.Conditions = append(req.Conditions, locstore.IfMissing(k))
			}
			req.Mutations = append(req.Mutations, locstore.Put(k, nil))
		}
		rest := locstore.MaxBatchBytes - req.EncodedSize()
		if rest < locstore.MaxBatchKeys {
			t.Fatalf("provider versions are so long (%d bytes) that the test cannot build its batch", len(existing[0]))
		}
		for i := range req.Mutations {
			n := rest / locstore.MaxBatchKeys
			if i < rest%locstore.MaxBatchKeys {
				n++
			}
			req.Mutations[i].Value = []byte(strings.Repeat(string(rune('A'+i%26)), n))
		}
		if req.EncodedSize() != locstore.MaxBatchBytes || req.Validate() != nil {
			t.Fatalf("test bug: size %d, validate %v", req.EncodedSize(), req.Validate())
		}
		verify(t, "mb/b/", req, apply(t, s, req))
	})

	t.Run("2048 keys of 4 MiB + 1", func(t *testing.T) {
		var req locstore.WriteRequest
		for i := range locstore.MaxBatchKeys {
			k := fmt.Sprintf("mb/c/%04d", i)
			req.Mutations = append(req.Mutations, locstore.Put(k, make([]byte, locstore.MaxBatchBytes/locstore.MaxBatchKeys-len(k))))
		}
		req = padTo(t, req, locstore.MaxBatchBytes+1)
		_, err := s.Write(t.Context(), req)
		wantArgErr(t, "4 MiB + 1", err)
		if items, _ := scanAll(t, s, "mb/c/", 10); len(items) != 0 {
			t.Errorf("rejected batch stored %d keys", len(items))
		}
	})

	t.Run("2049 keys", func(t *testing.T) {
		var req locstore.WriteRequest
		for i := range locstore.MaxBatchKeys + 1 {
			req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("mb/d/%04d", i), []byte("x")))
		}
		_, err := s.Write(t.Context(), req)
		wantArgErr(t, "2049 keys", err)
		if items, _ := scanAll(t, s, "mb/d/", 10); len(items) != 0 {
			t.Errorf("rejected batch stored %d keys", len(items))
		}
	})
}

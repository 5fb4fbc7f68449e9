package storetest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

func testReadMissing(t *testing.T, h Harness) {
	s := h.open(t)
	for _, k := range []string{"absent", "a", strings.Repeat("k", locstore.MaxKeyBytes), "ключ\x00"} {
		if r := read(t, s, k); r.Found {
			t.Errorf("Read %q on an empty store: Found %v", trunc(k), stateOf(r))
		}
	}
}

func testPutRead(t *testing.T, h Harness) {
	s := h.open(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	big := make([]byte, locstore.MaxValueBytes)
	for i := range big {
		big[i] = byte(i*7 + i>>9)
	}
	cases := []struct {
		name, key string
		value     []byte
	}{
		{"ascii", "k/plain", []byte("hello")},
		{"every byte value", "k/bytes", all},
		{"empty value", "k/empty", []byte{}},
		{"nil value", "k/nil", nil},
		{"1 MiB value", "k/big", big},
		{"1024-byte key", strings.Repeat("é", locstore.MaxKeyBytes/2), []byte("long key")},
		{"non-ASCII and NUL in key", "k/日本\x00語/𝄞", []byte("unicode key")},
		{"case differs", "k/PLAIN", []byte("upper")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := write(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(c.key, c.value)}})
			if !res.Applied {
				t.Fatalf("unconditional Put: Conflict")
			}
			r := read(t, s, c.key)
			if !r.Found || !equalBytes(r.Value, string(c.value)) || r.Version != res.Versions[0] || !r.ExpiresAt.IsZero() {
				t.Fatalf("Read after Put: %v, want value of %d bytes, version %q, durable", stateOf(r), len(c.value), res.Versions[0])
			}
			if r.StoreNow.Before(res.StoreNow) {
				t.Errorf("Read StoreNow %v is before the StoreNow %v of the write it observed", r.StoreNow, res.StoreNow)
			}
		})
	}
	// Exact byte comparison: "k/plain" and "k/PLAIN" are distinct keys.
	if r := read(t, s, "k/plain"); string(r.Value) != "hello" {
		t.Errorf("k/plain reads %q after k/PLAIN was written: keys must compare exactly", r.Value)
	}
}

// testValueStability: the provider copies what it keeps (the caller may
// reuse its buffer) and bytes it returned never change afterwards.
func testValueStability(t *testing.T, h Harness) {
	s := h.open(t)
	buf := []byte("original")
	put(t, s, "v/k", buf)
	copy(buf, "CHANGED!")
	r1 := read(t, s, "v/k")
	if string(r1.Value) != "original" {
		t.Fatalf("stored value changed with the caller's buffer: %q", r1.Value)
	}
	p1, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "v/", Limit: 10})
	if err != nil || len(p1.Items) != 1 {
		t.Fatalf("Scan: %v, %d items", err, len(p1.Items))
	}
	put(t, s, "v/k", []byte("replaced"))
	apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete("v/k")}})
	put(t, s, "v/k", []byte("XXXXXXXXXXXXXXXX"))
	if string(r1.Value) != "original" {
		t.Errorf("a Read's Value changed under the caller to %q", r1.Value)
	}
	if string(p1.Items[0].Value) != "original" {
		t.Errorf("a scanned Item's Value changed under the caller to %q", p1.Items[0].Value)
	}
}

// testVersions: versions are issued per commit and never reused for a key,
// even when the same bytes are written again or the key is deleted and
// recreated.
func testVersions(t *testing.T, h Harness) {
	s := h.open(t)
	seen := map[string]int{}
	record := func(step int, v string) {
		t.Helper()
		if prev, dup := seen[v]; dup {
			t.Fatalf("step %d: version %q was already issued at step %d", step, v, prev)
		}
		seen[v] = step
		if r := read(t, s, "ver/k"); r.Version != v {
			t.Fatalf("step %d: Read version %q, the write returned %q", step, r.Version, v)
		}
	}
	step := 0
	for range 5 {
		step++
		record(step, put(t, s, "ver/k", []byte("same bytes")))
	}
	for range 3 {
		apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete("ver/k")}})
		step++
		v := apply(t, s, locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfMissing("ver/k")},
			Mutations:  []locstore.Mutation{locstore.Put("ver/k", []byte("same bytes"))},
		})[0]
		record(step, v)
	}

	// Versions line up with mutations; deletes get an empty entry.
	put(t, s, "ver/b", []byte("b"))
	vs := apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.Put("ver/a", []byte("a")),
		locstore.Delete("ver/b"),
		locstore.PutExpiring("ver/c", []byte("c"), time.Hour),
	}})
	if vs[1] != "" {
		t.Errorf("delete got version %q", vs[1])
	}
	if r := read(t, s, "ver/a"); r.Version != vs[0] {
		t.Errorf("ver/a: Read version %q, write returned %q", r.Version, vs[0])
	}
	if r := read(t, s, "ver/c"); r.Version != vs[2] {
		t.Errorf("ver/c: Read version %q, write returned %q", r.Version, vs[2])
	}
	if r := read(t, s, "ver/b"); r.Found {
		t.Errorf("ver/b still present after delete: %v", stateOf(r))
	}

	// A conditions-only write applies without changing any version.
	before := readState(t, s, []string{"ver/a", "ver/c", "ver/k"})
	res := write(t, s, locstore.WriteRequest{Conditions: []locstore.Condition{
		locstore.IfVersion("ver/a", vs[0]), locstore.IfMissing("ver/b"),
	}})
	if !res.Applied || len(res.Versions) != 0 {
		t.Fatalf("conditions-only write with true conditions: Applied %v, %d versions", res.Applied, len(res.Versions))
	}
	sameStates(t, "conditions-only write", before, readState(t, s, []string{"ver/a", "ver/c", "ver/k"}))
}

func testDelete(t *testing.T, h Harness) {
	s := h.open(t)
	v := put(t, s, "del/k", []byte("x"))
	apply(t, s, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("del/k", v)},
		Mutations:  []locstore.Mutation{locstore.Delete("del/k")},
	})
	if r := read(t, s, "del/k"); r.Found {
		t.Fatalf("deleted key reads %v", stateOf(r))
	}
	// Deleting an absent key is not an error and not a Conflict.
	apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete("del/k"), locstore.Delete("del/never")}})
	// The deleted version no longer satisfies a Version condition...
	conflict(t, s, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("del/k", v)},
		Mutations:  []locstore.Mutation{locstore.Put("del/k", []byte("resurrected"))},
	})
	if r := read(t, s, "del/k"); r.Found {
		t.Fatalf("a conflicted write recreated the key: %v", stateOf(r))
	}
	// ...but Missing does.
	apply(t, s, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("del/k")}})
}

// testTornRead: a Read is one observation of one commit. Writers store
// values whose every byte derives from a tag; readers check each value is
// internally consistent and is exactly the value its version was committed
// with.
func testTornRead(t *testing.T, h Harness) {
	s := h.open(t)
	const key = "torn/k"
	const writers, readers = 4, 4
	rounds := 60
	if testing.Short() {
		rounds = 20
	}
	value := func(tag string) []byte {
		return []byte(strings.Repeat(tag+"|", 8192/(len(tag)+1)))
	}
	var mu sync.Mutex
	committed := map[string]string{} // version -> tag
	commit := func(tag string) error {
		res, err := s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, value(tag))}})
		if err != nil || !res.Applied {
			return fmt.Errorf("unconditional put %s: applied %v, err %v", tag, res.Applied, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if prev, dup := committed[res.Versions[0]]; dup {
			return fmt.Errorf("version %q issued for %s and %s", res.Versions[0], prev, tag)
		}
		committed[res.Versions[0]] = tag
		return nil
	}
	if err := commit("init"); err != nil {
		t.Fatal(err)
	}

	done := make(chan struct{})
	errs := make(chan error, writers+readers)
	observed := make([]map[string]string, readers) // per reader: version -> tag
	var wgW, wgR sync.WaitGroup
	for g := range writers {
		wgW.Go(func() {
			for n := range rounds {
				if err := commit(fmt.Sprintf("w%d-%d", g, n)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for g := range readers {
		observed[g] = map[string]string{}
		wgR.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				r, err := s.Read(t.Context(), key)
				if err != nil || !r.Found {
					errs <- fmt.Errorf("read: found %v, err %v", r.Found, err)
					return
				}
				tag, _, _ := strings.Cut(string(r.Value), "|")
				if string(r.Value) != string(value(tag)) {
					errs <- fmt.Errorf("torn value: %q", trunc(string(r.Value)))
					return
				}
				if prev, ok := observed[g][r.Version]; ok && prev != tag {
					errs <- fmt.Errorf("version %q read with %s and with %s", r.Version, prev, tag)
					return
				}
				observed[g][r.Version] = tag
			}
		})
	}
	wgW.Wait()
	close(done)
	wgR.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	for g := range readers {
		for v, tag := range observed[g] {
			n++
			if want, ok := committed[v]; !ok || want != tag {
				t.Errorf("reader %d saw version %q with value %s; that version was committed with %q (known %v)", g, v, tag, want, ok)
			}
		}
	}
	t.Logf("%s: %d commits, readers saw %d distinct (version, value) pairs, all consistent", h.Name, len(committed), n)
}

// testExpiry: an expired value is Missing (and satisfies a Missing
// condition) by the provider clock, its ExpiresAt is reported, and durable
// values stay.
func testExpiry(t *testing.T, h Harness) {
	s := h.open(t)
	unit := h.ExpiryUnit
	// Tolerance between the reported ExpiresAt and StoreNow+retention: the
	// SPI counts retention in milliseconds.
	const slack = 2 * time.Millisecond

	dv := put(t, s, "exp/durable", []byte("d"))
	res := write(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.PutExpiring("exp/short", []byte("s"), unit),
		// A long retention, so the durable Put below surely finds it alive.
		locstore.PutExpiring("exp/made-durable", []byte("m"), time.Hour),
	}})
	if !res.Applied {
		t.Fatal("unconditional expiring puts: Conflict")
	}
	sv := res.Versions[0]
	wantExp := res.StoreNow.Add(unit)
	apply(t, s, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("exp/made-durable", res.Versions[1])},
		Mutations:  []locstore.Mutation{locstore.Put("exp/made-durable", []byte("m2"))},
	})

	// Right after the write the short value may or may not still be there
	// (Redis runs on real time); whichever, it must agree with StoreNow.
	r := read(t, s, "exp/short")
	if r.Found {
		if d := r.ExpiresAt.Sub(wantExp); d < -slack || d > slack {
			t.Errorf("ExpiresAt %v, want commit StoreNow + %v = %v", r.ExpiresAt, unit, wantExp)
		}
		if r.Version != sv {
			t.Errorf("version %q, write returned %q", r.Version, sv)
		}
		p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "exp/short", Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) == 1 && !p.Items[0].ExpiresAt.Equal(r.ExpiresAt) {
			t.Errorf("scanned ExpiresAt %v, read %v", p.Items[0].ExpiresAt, r.ExpiresAt)
		}
	} else if r.StoreNow.Before(wantExp.Add(-slack)) {
		t.Errorf("expiring value Missing at StoreNow %v, before its expiry %v", r.StoreNow, wantExp)
	}
	if r := read(t, s, "exp/made-durable"); !r.Found || !r.ExpiresAt.IsZero() {
		t.Errorf("a durable Put over an expiring value: %v, want durable", stateOf(r))
	}

	h.Advance(t, s, 2*unit)

	r = read(t, s, "exp/short")
	if r.Found {
		t.Fatalf("value with retention %v still Found after Advance(%v): %v", unit, 2*unit, stateOf(r))
	}
	if r.StoreNow.Before(wantExp.Add(-slack)) {
		t.Errorf("Missing at StoreNow %v although it expires at %v: the provider clock did not advance", r.StoreNow, wantExp)
	}
	if r := read(t, s, "exp/durable"); !r.Found || r.Version != dv || !r.ExpiresAt.IsZero() {
		t.Errorf("durable value after Advance: %v, want version %q, durable", stateOf(r), dv)
	}
	if r := read(t, s, "exp/made-durable"); !r.Found || string(r.Value) != "m2" {
		t.Errorf("value made durable, after Advance: %v", stateOf(r))
	}
	items, _ := scanAll(t, s, "exp/", 10)
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	if strings.Join(keys, ",") != "exp/durable,exp/made-durable" {
		t.Errorf("scan after expiry lists %q, want the two durable keys only", keys)
	}
	// An expired value no longer satisfies its Version condition...
	conflict(t, s, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("exp/short", sv)},
		Mutations:  []locstore.Mutation{locstore.Put("exp/short", []byte("stale writer"))},
	})
	// ...a durable one still does, and is not Missing...
	conflict(t, s, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("exp/durable")}})
	apply(t, s, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("exp/durable", dv)}})
	// ...and the expired key is Missing for conditions, recreated with a new version.
	nv := apply(t, s, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfMissing("exp/short")},
		Mutations:  []locstore.Mutation{locstore.Put("exp/short", []byte("again"))},
	})[0]
	if nv == sv {
		t.Errorf("recreated expired key got its old version %q again", nv)
	}
	if r := read(t, s, "exp/short"); !r.Found || string(r.Value) != "again" || !r.ExpiresAt.IsZero() {
		t.Errorf("recreated key: %v", stateOf(r))
	}
}

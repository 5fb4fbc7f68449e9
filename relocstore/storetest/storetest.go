// Package storetest is the contract suite every Relocation Store provider
// runs (shared design STORE-SPI.md, spec §1.2, §7.1, §9.3, §10): one set of
// test functions taking a provider factory, so the memory and Redis providers
// are held to exactly the same observable behaviour.
//
// Besides the SPI text, the suite fixes the choices this project made where
// the SPI leaves room (docs/store-relocation.md): an expiry instant is
// already expired; Renew and a Put of the same bytes only ever extend the
// expiry; a deleted or expired reference keeps a tombstone, so other bytes
// are Conflict and the same bytes are Stored again.
package storetest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/relocstore"
)

// Harness adapts one provider to the suite.
type Harness struct {
	// Name labels the subtests ("memory", "redis").
	Name string
	// New returns an empty store on a fresh isolated namespace. The suite
	// closes it (exactly once) via t.Cleanup.
	New func(t *testing.T) relocstore.Store
	// Advance moves the provider clock of s forward by d.
	Advance func(t *testing.T, s relocstore.Store, d time.Duration)
	// ExpiryUnit is the retention granularity the expiry tests use; every
	// retention and clock step there is a small multiple of it. It must be
	// a whole number of milliseconds, at least 1ms, and long enough that the
	// real time a few operations take is small against it (providers whose
	// Advance adds to a real clock).
	ExpiryUnit time.Duration
}

// Run runs the whole suite under a subtest named h.Name.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Advance == nil || h.ExpiryUnit < time.Millisecond || h.ExpiryUnit%time.Millisecond != 0 {
		t.Fatalf("storetest: incomplete harness %q (New, Advance and a whole-millisecond ExpiryUnit are required)", h.Name)
	}
	t.Run(h.Name, func(t *testing.T) {
		for _, tc := range []struct {
			name string
			fn   func(*testing.T, Harness)
		}{
			{"PutOutcomes", testPutOutcomes},
			{"ExactReferences", testExactReferences},
			{"LargePayload", testLargePayload},
			{"Arguments", testArguments},
			{"Retention", testRetention},
			{"Expiry", testExpiry},
			{"Renew", testRenew},
			{"Delete", testDelete},
			{"CallerBuffers", testCallerBuffers},
			{"LostResults", testLostResults},
			{"ConcurrentPut", testConcurrentPut},
			{"Close", testClose},
		} {
			t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
		}
	})
}

// open returns a store from the harness and closes it at cleanup unless the
// test closed it itself (Close is called exactly once).
func open(t *testing.T, h Harness) relocstore.Store {
	t.Helper()
	s := h.New(t)
	if s == nil {
		t.Fatal("harness New returned nil")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// payload returns n deterministic pseudo-random bytes distinct per seed.
// Beyond 64 KiB the random block repeats (with a per-block counter mixed
// in, so no two blocks are equal): generating 64 MiB of fresh randomness
// under the race detector would dominate the suite's run time, and the
// comparisons under test do not care.
func payload(seed uint64, n int) []byte {
	const block = 64 << 10
	b := make([]byte, n)
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	key[31] = 0xA5
	_, _ = rand.NewChaCha8(key).Read(b[:min(n, block)]) // ChaCha8.Read never fails
	for off := block; off < n; off += block {
		copy(b[off:], b[:block])
		if off+8 <= n {
			binary.LittleEndian.PutUint64(b[off:], uint64(off))
		}
	}
	return b
}

func put(t *testing.T, s relocstore.Store, ref string, p []byte, ret time.Duration, want relocstore.PutOutcome) relocstore.PutResult {
	t.Helper()
	r, err := s.Put(t.Context(), ref, p, ret)
	if err != nil {
		t.Fatalf("Put(%.40q, %d bytes, %v): %v", ref, len(p), ret, err)
	}
	checkPut(t, r)
	if r.Outcome != want {
		t.Fatalf("Put(%.40q, %d bytes, %v) = %v, want %v", ref, len(p), ret, r.Outcome, want)
	}
	return r
}

// checkPut asserts the shape every PutResult has.
func checkPut(t *testing.T, r relocstore.PutResult) {
	t.Helper()
	if r.StoreNow.IsZero() {
		t.Errorf("PutResult %v without StoreNow", r.Outcome)
	}
	switch r.Outcome {
	case relocstore.Stored, relocstore.AlreadyStored:
		if !r.ExpiresAt.After(r.StoreNow) {
			t.Errorf("PutResult %v: ExpiresAt %v not after StoreNow %v", r.Outcome, r.ExpiresAt, r.StoreNow)
		}
	case relocstore.Conflict:
		if !r.ExpiresAt.IsZero() {
			t.Errorf("Conflict with ExpiresAt %v", r.ExpiresAt)
		}
	default:
		t.Errorf("unknown outcome %v", r.Outcome)
	}
}

// mustRead reads ref and asserts it is Found with exactly want (or Missing
// when want is nil).
func mustRead(t *testing.T, s relocstore.Store, ref string, want []byte) relocstore.ReadResult {
	t.Helper()
	r, err := s.Read(t.Context(), ref)
	if err != nil {
		t.Fatalf("Read(%.40q): %v", ref, err)
	}
	if r.StoreNow.IsZero() {
		t.Errorf("ReadResult without StoreNow")
	}
	switch {
	case want == nil && r.Found:
		t.Fatalf("Read(%.40q) = Found (%d bytes, expires %v at %v), want Missing", ref, len(r.Bytes), r.ExpiresAt, r.StoreNow)
	case want == nil:
		if r.Bytes != nil || !r.ExpiresAt.IsZero() {
			t.Errorf("Missing with bytes or expiry: %d bytes, %v", len(r.Bytes), r.ExpiresAt)
		}
	case !r.Found:
		t.Fatalf("Read(%.40q) = Missing at %v, want %d bytes", ref, r.StoreNow, len(want))
	case r.Bytes == nil:
		t.Fatalf("Read(%.40q) = Found with nil bytes", ref)
	case !bytes.Equal(r.Bytes, want):
		t.Fatalf("Read(%.40q) = %d bytes differing from the %d stored", ref, len(r.Bytes), len(want))
	case !r.ExpiresAt.After(r.StoreNow):
		t.Errorf("Found with ExpiresAt %v not after StoreNow %v", r.ExpiresAt, r.StoreNow)
	}
	return r
}

func renew(t *testing.T, s relocstore.Store, ref string, ret time.Duration, want bool) relocstore.RenewResult {
	t.Helper()
	r, err := s.Renew(t.Context(), ref, ret)
	if err != nil {
		t.Fatalf("Renew(%.40q, %v): %v", ref, ret, err)
	}
	if r.StoreNow.IsZero() {
		t.Errorf("RenewResult without StoreNow")
	}
	if r.Renewed != want {
		t.Fatalf("Renew(%.40q, %v).Renewed = %v, want %v (expires %v, now %v)", ref, ret, r.Renewed, want, r.ExpiresAt, r.StoreNow)
	}
	if r.Renewed && !r.ExpiresAt.After(r.StoreNow) {
		t.Errorf("Renewed with ExpiresAt %v not after StoreNow %v", r.ExpiresAt, r.StoreNow)
	}
	if !r.Renewed && !r.ExpiresAt.IsZero() {
		t.Errorf("Missing renew with ExpiresAt %v", r.ExpiresAt)
	}
	return r
}

func del(t *testing.T, s relocstore.Store, ref string) {
	t.Helper()
	if err := s.Delete(t.Context(), ref); err != nil {
		t.Fatalf("Delete(%.40q): %v", ref, err)
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x01
	return c
}

// testPutOutcomes: same bytes are AlreadyStored, any difference in content
// or length is Conflict, and a Conflict leaves the stored bytes alone.
func testPutOutcomes(t *testing.T, h Harness) {
	s := open(t, h)
	base := payload(1, 1000)
	cases := []struct {
		name          string
		first, second []byte
		want          relocstore.PutOutcome
	}{
		{"same bytes", base, bytes.Clone(base), relocstore.AlreadyStored},
		{"first byte differs", base, flip(base, 0), relocstore.Conflict},
		{"middle byte differs", base, flip(base, 500), relocstore.Conflict},
		{"last byte differs", base, flip(base, len(base)-1), relocstore.Conflict},
		{"prefix", base, base[:len(base)-1], relocstore.Conflict},
		{"extra trailing zero", base, append(bytes.Clone(base), 0), relocstore.Conflict},
		{"empty after bytes", base, []byte{}, relocstore.Conflict},
		{"nil after bytes", base, nil, relocstore.Conflict},
		{"bytes after empty", []byte{}, []byte{0}, relocstore.Conflict},
		{"empty after empty", []byte{}, nil, relocstore.AlreadyStored},
		{"unrelated bytes", base, payload(2, 1000), relocstore.Conflict},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ref := fmt.Sprintf("outcome/%d", i)
			st := put(t, s, ref, tc.first, time.Hour, relocstore.Stored)
			if got := st.ExpiresAt.Sub(st.StoreNow); got != time.Hour {
				t.Errorf("Stored: ExpiresAt-StoreNow = %v, want the retention 1h", got)
			}
			r := put(t, s, ref, tc.second, time.Hour, tc.want)
			if r.Outcome == relocstore.AlreadyStored && r.ExpiresAt.Before(st.ExpiresAt) {
				t.Errorf("AlreadyStored shortened the expiry: %v < %v", r.ExpiresAt, st.ExpiresAt)
			}
			// The stored bytes are still the first ones, whatever happened.
			mustRead(t, s, ref, tc.first)
			// A third Put of the first bytes is still recognised.
			put(t, s, ref, tc.first, time.Hour, relocstore.AlreadyStored)
		})
	}
}

// testExactReferences: references are compared byte for byte, without case
// folding, Unicode normalisation or trimming.
func testExactReferences(t *testing.T, h Harness) {
	s := open(t, h)
	long := strings.Repeat("r", relocstore.MaxRefBytes-1)
	pairs := []struct{ name, a, b string }{
		{"case", "case/a", "case/A"},
		{"unicode normalisation", "caf\u00e9", "cafe\u0301"},
		{"trailing space", "space", "space "},
		{"embedded NUL", "nul", "nul\x00"},
		{"last byte of a maximal ref", long + "a", long + "b"},
		{"prefix", "prefix/1", "prefix/10"},
	}
	for i, tc := range pairs {
		t.Run(tc.name, func(t *testing.T) {
			pa, pb := payload(uint64(100+2*i), 64), payload(uint64(101+2*i), 64)
			put(t, s, tc.a, pa, time.Hour, relocstore.Stored)
			put(t, s, tc.b, pb, time.Hour, relocstore.Stored)
			mustRead(t, s, tc.a, pa)
			mustRead(t, s, tc.b, pb)
			del(t, s, tc.a)
			mustRead(t, s, tc.a, nil)
			mustRead(t, s, tc.b, pb)
		})
	}
}

// testLargePayload: a payload of exactly the 64 MiB limit is compared in
// full, down to a one-byte difference at its very end, both against live
// bytes and against the tombstone a Delete leaves. One buffer is flipped in
// place to keep memory use to a few copies of 64 MiB.
func testLargePayload(t *testing.T, h Harness) {
	s := open(t, h)
	const ref = "large"
	buf := payload(7, relocstore.MaxPayloadBytes)
	last := len(buf) - 1
	put(t, s, ref, buf, time.Hour, relocstore.Stored)

	buf[last] ^= 0x80
	put(t, s, ref, buf, time.Hour, relocstore.Conflict)
	put(t, s, ref, buf[:last], time.Hour, relocstore.Conflict)
	buf[last] ^= 0x80
	put(t, s, ref, buf, time.Hour, relocstore.AlreadyStored)
	mustRead(t, s, ref, buf)

	del(t, s, ref)
	mustRead(t, s, ref, nil)
	buf[last] ^= 0x01
	put(t, s, ref, buf, time.Hour, relocstore.Conflict)
	buf[last] ^= 0x01
	put(t, s, ref, buf, time.Hour, relocstore.Stored)
	mustRead(t, s, ref, buf)
}

// testArguments: input outside the SPI bounds is an *ArgumentError on every
// operation, distinct from a provider failure, and stores nothing; the
// bounds themselves are accepted.
func testArguments(t *testing.T, h Harness) {
	s := open(t, h)
	ctx := t.Context()
	okRef := "arg/ok"
	small := []byte("x")
	badRefs := []struct{ name, ref string }{
		{"empty", ""},
		{"4097 bytes", strings.Repeat("a", relocstore.MaxRefBytes+1)},
		{"4097 bytes of multibyte UTF-8", strings.Repeat("\u00e9", relocstore.MaxRefBytes/2) + "a"},
		{"invalid UTF-8", "ref\xff"},
		{"truncated UTF-8 sequence", "ref\xc3"},
		{"surrogate half", "ref\xed\xa0\x80"},
	}
	badRetentions := []time.Duration{-time.Second, -1, 1, time.Millisecond - 1, relocstore.MaxRetention + 1}

	type call struct {
		name string
		fn   func() error
	}
	var calls []call
	for _, br := range badRefs {
		calls = append(calls,
			call{"put ref " + br.name, func() error { _, err := s.Put(ctx, br.ref, small, 0); return err }},
			call{"read ref " + br.name, func() error { _, err := s.Read(ctx, br.ref); return err }},
			call{"renew ref " + br.name, func() error { _, err := s.Renew(ctx, br.ref, 0); return err }},
			call{"delete ref " + br.name, func() error { return s.Delete(ctx, br.ref) }},
		)
	}
	for _, d := range badRetentions {
		calls = append(calls,
			call{fmt.Sprintf("put retention %v", d), func() error { _, err := s.Put(ctx, okRef, small, d); return err }},
			call{fmt.Sprintf("renew retention %v", d), func() error { _, err := s.Renew(ctx, okRef, d); return err }},
		)
	}
	calls = append(calls, call{"put payload 64 MiB + 1", func() error {
		_, err := s.Put(ctx, okRef, make([]byte, relocstore.MaxPayloadBytes+1), 0)
		return err
	}})
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			err := c.fn()
			var ae *relocstore.ArgumentError
			switch {
			case err == nil:
				t.Fatal("accepted")
			case !errors.Is(err, relocstore.ErrArgument) || !errors.As(err, &ae):
				t.Fatalf("error %v (%T) is not an *ArgumentError", err, err)
			case errors.Is(err, relocstore.ErrUnavailable):
				t.Fatalf("argument error %v also matches ErrUnavailable", err)
			}
		})
	}
	// Nothing reached the store: okRef was only ever used in rejected calls.
	mustRead(t, s, okRef, nil)

	// The bounds themselves are valid.
	bounds := []struct {
		name string
		ref  string
		ret  time.Duration
	}{
		{"1-byte ref", "a", time.Hour},
		{"4096-byte ref", strings.Repeat("b", relocstore.MaxRefBytes), time.Hour},
		{"4096-byte multibyte ref", strings.Repeat("\u00e9", relocstore.MaxRefBytes/2), time.Hour},
		{"retention 1ms", "ret/min", time.Millisecond},
		{"retention MaxRetention", "ret/max", relocstore.MaxRetention},
		{"retention 0 (default)", "ret/default", 0},
	}
	for i, b := range bounds {
		t.Run("valid "+b.name, func(t *testing.T) {
			p := payload(uint64(200+i), 16)
			r := put(t, s, b.ref, p, b.ret, relocstore.Stored)
			if b.ret >= time.Hour {
				mustRead(t, s, b.ref, p)
				renew(t, s, b.ref, b.ret, true)
			}
			if b.ret == relocstore.MaxRetention {
				if got := r.ExpiresAt.Sub(r.StoreNow); got != relocstore.MaxRetention {
					t.Errorf("ExpiresAt-StoreNow = %v, want %v", got, relocstore.MaxRetention)
				}
			}
			del(t, s, b.ref)
		})
	}
}

// testRetention: ExpiresAt is StoreNow plus the retention (0 meaning the
// 24 h default); a Put of the same bytes never shortens the expiry and
// extends it when asked for more.
func testRetention(t *testing.T, h Harness) {
	s := open(t, h)
	u := h.ExpiryUnit

	r := put(t, s, "ret/default", []byte("d"), 0, relocstore.Stored)
	if got := r.ExpiresAt.Sub(r.StoreNow); got != relocstore.DefaultRetention {
		t.Errorf("retention 0: ExpiresAt-StoreNow = %v, want %v", got, relocstore.DefaultRetention)
	}

	const ref = "ret/already"
	p := []byte("payload")
	first := put(t, s, ref, p, 10*u, relocstore.Stored)
	if got := first.ExpiresAt.Sub(first.StoreNow); got != 10*u {
		t.Errorf("ExpiresAt-StoreNow = %v, want %v", got, 10*u)
	}
	again := put(t, s, ref, p, u, relocstore.AlreadyStored)
	if !again.ExpiresAt.Equal(first.ExpiresAt) {
		t.Errorf("AlreadyStored with a shorter retention moved the expiry %v -> %v", first.ExpiresAt, again.ExpiresAt)
	}
	h.Advance(t, s, 2*u)
	if rr := mustRead(t, s, ref, p); !rr.ExpiresAt.Equal(first.ExpiresAt) {
		t.Errorf("Read ExpiresAt %v, want %v", rr.ExpiresAt, first.ExpiresAt)
	}
	longer := put(t, s, ref, p, 20*u, relocstore.AlreadyStored)
	if got := longer.ExpiresAt.Sub(longer.StoreNow); got != 20*u {
		t.Errorf("AlreadyStored with a longer retention: ExpiresAt-StoreNow = %v, want %v", got, 20*u)
	}
	h.Advance(t, s, 9*u) // past the first expiry, before the extended one
	mustRead(t, s, ref, p)
}

// testExpiry: expiry is judged by the provider clock; from ExpiresAt on the
// payload is Missing, cannot be renewed, and its reference refuses other
// bytes while accepting the same bytes again.
func testExpiry(t *testing.T, h Harness) {
	s := open(t, h)
	u := h.ExpiryUnit
	const ref = "exp/a"
	p := payload(300, 2048)
	st := put(t, s, ref, p, 3*u, relocstore.Stored)

	h.Advance(t, s, 2*u)
	rr := mustRead(t, s, ref, p)
	if !rr.ExpiresAt.Equal(st.ExpiresAt) {
		t.Errorf("ExpiresAt changed by Read: %v -> %v", st.ExpiresAt, rr.ExpiresAt)
	}
	if rr.StoreNow.Before(st.StoreNow.Add(2 * u)) {
		t.Errorf("StoreNow %v did not follow the provider clock (Put at %v, advanced %v)", rr.StoreNow, st.StoreNow, 2*u)
	}

	h.Advance(t, s, u)
	gone := mustRead(t, s, ref, nil)
	if gone.StoreNow.Before(st.ExpiresAt) {
		t.Errorf("Missing at StoreNow %v before ExpiresAt %v", gone.StoreNow, st.ExpiresAt)
	}
	renew(t, s, ref, time.Hour, false)
	mustRead(t, s, ref, nil)
	put(t, s, ref, flip(p, len(p)-1), time.Hour, relocstore.Conflict)
	again := put(t, s, ref, p, 3*u, relocstore.Stored)
	if got := again.ExpiresAt.Sub(again.StoreNow); got != 3*u {
		t.Errorf("re-Stored: ExpiresAt-StoreNow = %v, want %v", got, 3*u)
	}
	mustRead(t, s, ref, p)

	// Other references keep their own expiry.
	put(t, s, "exp/long", p, 100*u, relocstore.Stored)
	h.Advance(t, s, 3*u)
	mustRead(t, s, ref, nil)
	mustRead(t, s, "exp/long", p)
}

// testRenew: Renew extends to StoreNow+retention, never shortens, is
// repeatable, keeps a payload past its original expiry, never changes the
// bytes, and is Missing for absent, deleted and expired references.
func testRenew(t *testing.T, h Harness) {
	s := open(t, h)
	u := h.ExpiryUnit
	const ref = "renew/a"
	p := payload(400, 4096)

	renew(t, s, "renew/absent", time.Hour, false)
	mustRead(t, s, "renew/absent", nil) // Renew created nothing

	st := put(t, s, ref, p, 2*u, relocstore.Stored)
	h.Advance(t, s, u)
	r1 := renew(t, s, ref, 3*u, true)
	if got := r1.ExpiresAt.Sub(r1.StoreNow); got != 3*u {
		t.Errorf("Renew: ExpiresAt-StoreNow = %v, want %v", got, 3*u)
	}
	if !r1.ExpiresAt.After(st.ExpiresAt) {
		t.Errorf("Renew did not extend: %v -> %v", st.ExpiresAt, r1.ExpiresAt)
	}
	for i := 0; i < 3; i++ {
		r := renew(t, s, ref, u, true) // shorter than what is left: no change
		if !r.ExpiresAt.Equal(r1.ExpiresAt) {
			t.Fatalf("Renew with a shorter retention moved the expiry %v -> %v", r1.ExpiresAt, r.ExpiresAt)
		}
	}
	if rr := mustRead(t, s, ref, p); !rr.ExpiresAt.Equal(r1.ExpiresAt) {
		t.Errorf("Read ExpiresAt %v, want renewed %v", rr.ExpiresAt, r1.ExpiresAt)
	}
	h.Advance(t, s, 2*u) // past the original expiry
	mustRead(t, s, ref, p)
	h.Advance(t, s, u) // at the renewed expiry
	mustRead(t, s, ref, nil)
	renew(t, s, ref, time.Hour, false)

	// Renew with retention 0 means the default retention.
	put(t, s, "renew/default", p, u, relocstore.Stored)
	rd := renew(t, s, "renew/default", 0, true)
	if got := rd.ExpiresAt.Sub(rd.StoreNow); got != relocstore.DefaultRetention {
		t.Errorf("Renew(0): ExpiresAt-StoreNow = %v, want %v", got, relocstore.DefaultRetention)
	}
	// Renew of a deleted reference is Missing and does not bring it back.
	del(t, s, "renew/default")
	renew(t, s, "renew/default", time.Hour, false)
	mustRead(t, s, "renew/default", nil)
}

// testDelete: Delete is idempotent (also when absent); the bytes are gone
// at once; the reference then refuses other bytes and takes the same bytes
// again as Stored.
func testDelete(t *testing.T, h Harness) {
	s := open(t, h)
	u := h.ExpiryUnit
	del(t, s, "del/absent")
	del(t, s, "del/absent")
	mustRead(t, s, "del/absent", nil)
	// Nothing was remembered for a reference that never held bytes.
	put(t, s, "del/absent", []byte("anything"), time.Hour, relocstore.Stored)

	const ref = "del/a"
	p := payload(500, 3000)
	put(t, s, ref, p, time.Hour, relocstore.Stored)
	del(t, s, ref)
	mustRead(t, s, ref, nil)
	del(t, s, ref)
	mustRead(t, s, ref, nil)
	put(t, s, ref, flip(p, 0), time.Hour, relocstore.Conflict)
	put(t, s, ref, p[:len(p)-1], time.Hour, relocstore.Conflict)
	mustRead(t, s, ref, nil)
	put(t, s, ref, p, time.Hour, relocstore.Stored)
	put(t, s, ref, p, time.Hour, relocstore.AlreadyStored)
	mustRead(t, s, ref, p)

	// Deleting an expired reference keeps its tombstone.
	put(t, s, "del/expired", p, u, relocstore.Stored)
	h.Advance(t, s, u)
	del(t, s, "del/expired")
	put(t, s, "del/expired", flip(p, 1), time.Hour, relocstore.Conflict)
	put(t, s, "del/expired", p, time.Hour, relocstore.Stored)

	// Deleting one reference leaves others alone.
	put(t, s, "del/b", p, time.Hour, relocstore.Stored)
	del(t, s, ref)
	mustRead(t, s, "del/b", p)
}

// testCallerBuffers: the store keeps its own bytes. Changing the buffer
// given to Put, or a slice returned by Read, changes nothing stored, and two
// Reads never share memory.
func testCallerBuffers(t *testing.T, h Harness) {
	s := open(t, h)
	for _, n := range []int{0, 1, 1000, 1 << 20} {
		t.Run(fmt.Sprintf("%d bytes", n), func(t *testing.T) {
			ref := fmt.Sprintf("buf/%d", n)
			orig := payload(uint64(600+n), n)
			buf := bytes.Clone(orig)
			put(t, s, ref, buf, time.Hour, relocstore.Stored)
			for i := range buf {
				buf[i] ^= 0xFF
			}
			r1 := mustRead(t, s, ref, orig)
			r2 := mustRead(t, s, ref, orig)
			for i := range r1.Bytes {
				r1.Bytes[i] ^= 0x55
			}
			if !bytes.Equal(r2.Bytes, orig) {
				t.Fatal("changing one Read result changed another")
			}
			mustRead(t, s, ref, orig)
			// The reused buffer, now other bytes, is a Conflict, and the
			// original (from a fresh buffer) is still AlreadyStored.
			if n > 0 {
				put(t, s, ref, buf, time.Hour, relocstore.Conflict)
			}
			put(t, s, ref, bytes.Clone(orig), time.Hour, relocstore.AlreadyStored)
			// Renew and Delete never touch the bytes either.
			renew(t, s, ref, 2*time.Hour, true)
			mustRead(t, s, ref, orig)
		})
	}
}

// testLostResults: a Put whose context ends (deadline or cancel) at a random
// point in flight has
// an unknown outcome (§10). Putting the same bytes again must then converge:
// Stored or AlreadyStored, never Conflict, and a Read made in between tells
// which: once Found, the retry is AlreadyStored. Afterwards the bytes are
// exactly the payload. Deletes with the same treatment converge to Missing.
//
// When the Read in between says Missing, the retry may still be
// AlreadyStored: a command the client gave up on can reach the server after
// that Read. That is what "outcome unknown" means, so the suite allows it.
func testLostResults(t *testing.T, h Harness) {
	s := open(t, h)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5EED))
	sizes := []int{64, 300 << 10, 3 << 20}
	iterations := 24
	if testing.Short() {
		iterations = 8
	}
	var failed, foundAfter, storedOnRetry int
	for i := 0; i < iterations; i++ {
		ref := fmt.Sprintf("lost/%d", i)
		p := payload(seed+uint64(i), sizes[i%len(sizes)])
		// 0 is a context already done before the call; the rest end
		// somewhere in flight, alternately by deadline and by cancel.
		d := time.Duration(rng.Int64N(int64(3 * time.Millisecond)))
		if i%6 == 0 {
			d = 0
		}
		var (
			ctx    context.Context
			cancel context.CancelFunc
		)
		if i%2 == 0 {
			ctx, cancel = context.WithTimeout(t.Context(), d)
		} else {
			ctx, cancel = context.WithCancel(t.Context())
			if d == 0 {
				cancel()
			} else {
				stop := time.AfterFunc(d, cancel).Stop
				cancelNow := cancel
				cancel = func() { stop(); cancelNow() }
			}
		}
		res, err := s.Put(ctx, ref, p, time.Hour)
		cancel()
		if err == nil {
			checkPut(t, res)
			if res.Outcome != relocstore.Stored {
				t.Fatalf("%s: first Put = %v, want Stored", ref, res.Outcome)
			}
		} else {
			failed++
			if !errors.Is(err, relocstore.ErrUnavailable) || errors.Is(err, relocstore.ErrArgument) {
				t.Fatalf("%s: interrupted Put error %v is not a provider failure", ref, err)
			}
		}

		between, rerr := s.Read(t.Context(), ref)
		if rerr != nil {
			t.Fatalf("%s: Read: %v", ref, rerr)
		}
		if between.Found {
			foundAfter++
			if !bytes.Equal(between.Bytes, p) {
				t.Fatalf("%s: Read after interrupted Put returned other bytes", ref)
			}
		} else if err == nil {
			t.Fatalf("%s: Put reported Stored but Read says Missing", ref)
		}

		again, aerr := s.Put(t.Context(), ref, p, time.Hour)
		if aerr != nil {
			t.Fatalf("%s: retried Put: %v", ref, aerr)
		}
		checkPut(t, again)
		switch {
		case again.Outcome == relocstore.Conflict:
			t.Fatalf("%s: retried Put of the same bytes = Conflict", ref)
		case between.Found && again.Outcome != relocstore.AlreadyStored:
			t.Fatalf("%s: Read found the bytes but the retried Put = %v, want AlreadyStored", ref, again.Outcome)
		case again.Outcome == relocstore.Stored:
			storedOnRetry++
		}
		mustRead(t, s, ref, p)
		put(t, s, ref, flip(p, len(p)-1), time.Hour, relocstore.Conflict)
	}
	t.Logf("%d of %d Puts interrupted; %d found before the retry, %d stored by the retry", failed, iterations, foundAfter, storedOnRetry)
}

// testConcurrentPut: racing Puts of different bytes to one reference have
// exactly one winner and Conflict for everyone else; racing Puts of the same
// bytes have exactly one Stored and AlreadyStored for the rest.
func testConcurrentPut(t *testing.T, h Harness) {
	s := open(t, h)
	const n = 8
	for _, size := range []int{100, 512 << 10} {
		for _, same := range []bool{false, true} {
			name := fmt.Sprintf("%d bytes, same=%v", size, same)
			t.Run(name, func(t *testing.T) {
				for round := 0; round < 3; round++ {
					ref := fmt.Sprintf("conc/%d/%v/%d", size, same, round)
					payloads := make([][]byte, n)
					for i := range payloads {
						seed := uint64(700 + size + round*n + i)
						if same {
							seed = uint64(700 + size + round*n)
						}
						payloads[i] = payload(seed, size)
					}
					results := make([]relocstore.PutResult, n)
					errs := make([]error, n)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for i := 0; i < n; i++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							results[i], errs[i] = s.Put(context.Background(), ref, payloads[i], time.Hour)
						}()
					}
					close(start)
					wg.Wait()
					winner := -1
					others := relocstore.Conflict
					if same {
						others = relocstore.AlreadyStored
					}
					for i := 0; i < n; i++ {
						if errs[i] != nil {
							t.Fatalf("Put %d: %v", i, errs[i])
						}
						checkPut(t, results[i])
						switch results[i].Outcome {
						case relocstore.Stored:
							if winner >= 0 {
								t.Fatalf("Puts %d and %d both Stored", winner, i)
							}
							winner = i
						case others:
						default:
							t.Fatalf("Put %d = %v, want Stored or %v", i, results[i].Outcome, others)
						}
					}
					if winner < 0 {
						t.Fatal("no Put Stored")
					}
					mustRead(t, s, ref, payloads[winner])
				}
			})
		}
	}
}

// testClose: after Close every operation fails as a provider failure.
func testClose(t *testing.T, h Harness) {
	s := h.New(t)
	put(t, s, "close/a", []byte("x"), time.Hour, relocstore.Stored)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := t.Context()
	ops := map[string]func() error{
		"put":    func() error { _, err := s.Put(ctx, "close/a", []byte("x"), 0); return err },
		"read":   func() error { _, err := s.Read(ctx, "close/a"); return err },
		"renew":  func() error { _, err := s.Renew(ctx, "close/a", 0); return err },
		"delete": func() error { return s.Delete(ctx, "close/a") },
	}
	for name, fn := range ops {
		if err := fn(); !errors.Is(err, relocstore.ErrUnavailable) {
			t.Errorf("%s after Close: %v, want an error matching ErrUnavailable", name, err)
		}
	}
}

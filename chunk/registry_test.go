package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
)

func newReg(t testing.TB, lim Limits) *Registry {
	t.Helper()
	r, err := NewRegistry(lim)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustBegin(t *testing.T, r *Registry, b Binding, d Declaration, want BeginStatus) Begun {
	t.Helper()
	g, err := r.Begin(b, d)
	if err != nil || g.Status != want {
		t.Fatalf("begin %v: %+v %v, want %v", b, g, err, want)
	}
	return g
}

func addAll(t *testing.T, r *Registry, b Binding, tr Transfer, from int) {
	t.Helper()
	for i := from; i < len(tr.Chunks); i++ {
		if _, err := r.Add(b, uint32(i), tr.Chunks[i]); err != nil {
			t.Fatalf("add %d: %v", i, err)
		}
	}
}

// §9.1: "The target puts into assembly only chunks whose binding values
// match the Restore request" — each binding field, changed alone, makes a
// chunk a stranger to the assembly.
func TestChunkBindingMustMatchExactly(t *testing.T) {
	payload, tr := split3(t)
	b := testBinding(1, 1)
	variants := map[string]func(x *Binding){
		"relocation high":  func(x *Binding) { x.Relocation.High++ },
		"relocation low":   func(x *Binding) { x.Relocation.Low++ },
		"target attempt":   func(x *Binding) { x.TargetAttempt++ },
		"source owner id":  func(x *Binding) { x.Source.OwnerID += "x" },
		"source lease gen": func(x *Binding) { x.Source.LeaseGeneration++ },
		"source node rid":  func(x *Binding) { x.Source.NodeRID += "x" },
		"source node gen":  func(x *Binding) { x.Source.NodeGeneration++ },
	}
	for name, mutate := range variants {
		r := newReg(t, Limits{})
		mustBegin(t, r, b, tr.Declaration, Started)
		x := b
		mutate(&x)
		want := DiscardMismatch // same relocation id, other attempt or fence
		if x.Relocation != b.Relocation {
			want = DiscardUnknown
		}
		for i, c := range tr.Chunks {
			if _, err := r.Add(x, uint32(i), c); DiscardReasonOf(err) != want {
				t.Fatalf("%s: chunk %d: %v, want discard %v", name, i, err, want)
			}
		}
		if p, _ := r.Progress(b); p.Received != 0 {
			t.Fatalf("%s: a stranger's chunk was linked: %+v", name, p)
		}
		if _, err := r.Complete(x); !errors.Is(err, ErrUnknownBinding) {
			t.Fatalf("%s: complete of the stranger: %v", name, err)
		}
		addAll(t, r, b, tr, 0)
		if out, err := r.Complete(b); err != nil || !bytes.Equal(out, payload) {
			t.Fatalf("%s: complete: %v", name, err)
		}
		if s := r.Stats(); s.DiscardedBy(want) != 3 {
			t.Fatalf("%s: discard count %+v", name, s.Discarded)
		}
	}
}

// §9.1: "A retransmitted Restore with the same binding values reuses the
// existing assembly state only when the declared length and checksum equal
// the first values."
func TestRetransmittedRestoreReuses(t *testing.T) {
	payload, tr := split3(t)
	b := testBinding(1, 1)
	r := newReg(t, Limits{})
	mustBegin(t, r, b, tr.Declaration, Started)
	addAll(t, r, b, Transfer{Chunks: tr.Chunks[:2]}, 0)
	g := mustBegin(t, r, b, tr.Declaration, Reused)
	if g.Progress.Received != 2 {
		t.Fatalf("reuse lost progress: %+v", g.Progress)
	}
	// The source resends everything after the retransmitted Restore.
	for i, c := range tr.Chunks {
		_, err := r.Add(b, uint32(i), c)
		if i < 2 && DiscardReasonOf(err) != DiscardDuplicate || i == 2 && err != nil {
			t.Fatalf("chunk %d after reuse: %v", i, err)
		}
	}
	out, err := r.Complete(b)
	if err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("complete: %v", err)
	}
	// A Restore retransmitted after completion reports it, reassembles nothing.
	mustBegin(t, r, b, tr.Declaration, AlreadyCompleted)
	if s := r.Stats(); s.Open != 0 || s.InFlightBytes != 0 {
		t.Fatalf("completed binding reopened: %+v", s)
	}
	if _, err := r.Add(b, 0, tr.Chunks[0]); DiscardReasonOf(err) != DiscardCompleted {
		t.Fatalf("late chunk after completion: %v", err)
	}
	if _, err := r.Complete(b); !errors.Is(err, ErrCompleted) {
		t.Fatalf("second complete: %v", err)
	}
}

// §9.1: "If a different length or checksum arrives for the same binding
// values, the existing assembly state is neither reused nor overwritten —
// it ends as an explicit conflict failure."
func TestConflictingRestore(t *testing.T) {
	_, tr := split3(t)
	d := tr.Declaration
	changes := map[string]Declaration{
		"length":   {Length: d.Length - 1, Count: d.Count, CRC32C: d.CRC32C},
		"checksum": {Length: d.Length, Count: d.Count, CRC32C: d.CRC32C + 1},
		"count":    {Length: d.Length, Count: d.Count - 1, CRC32C: d.CRC32C},
	}
	for name, d2 := range changes {
		b := testBinding(1, 1)
		r := newReg(t, Limits{})
		mustBegin(t, r, b, d, Started)
		r.Add(b, 0, tr.Chunks[0])
		if _, err := r.Begin(b, d2); !errors.Is(err, ErrConflict) {
			t.Fatalf("%s: %v", name, err)
		}
		// Not overwritten: the new declaration did not start anything, and
		// not reused: the old assembly is gone with its bytes.
		if s := r.Stats(); s.Open != 0 || s.InFlightBytes != 0 || s.FailedConflict != 1 {
			t.Fatalf("%s: stats %+v", name, s)
		}
		if _, err := r.Add(b, 1, tr.Chunks[1]); DiscardReasonOf(err) != DiscardFailed {
			t.Fatalf("%s: chunk after conflict: %v", name, err)
		}
		if _, err := r.Complete(b); !errors.Is(err, ErrConflict) {
			t.Fatalf("%s: complete after conflict: %v", name, err)
		}
		// Neither declaration can revive it.
		for _, again := range []Declaration{d, d2} {
			if _, err := r.Begin(b, again); !errors.Is(err, ErrConflict) {
				t.Fatalf("%s: begin after conflict: %v", name, err)
			}
		}
	}
	// After completion, a different declaration is a conflict and the
	// completed record is kept.
	b := testBinding(2, 1)
	r := newReg(t, Limits{})
	mustBegin(t, r, b, d, Started)
	addAll(t, r, b, tr, 0)
	if _, err := r.Complete(b); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Begin(b, changes["checksum"]); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict after completion: %v", err)
	}
	mustBegin(t, r, b, d, AlreadyCompleted)
}

// §9.1: "Even for the same RelocationId, a different target attempt
// doesn't use a previous attempt's temporary queue or assembly state", and
// §8.2: re-preparing on the same target replaces the attempt; late chunks
// and Restores of the previous attempt never mix in.
func TestNewTargetAttempt(t *testing.T) {
	payload, tr := split3(t)
	old, cur := testBinding(1, 100), testBinding(1, 7) // attempts are not ordered
	r := newReg(t, Limits{})
	mustBegin(t, r, old, tr.Declaration, Started)
	r.Add(old, 0, tr.Chunks[0])
	r.Add(old, 1, tr.Chunks[1])

	g := mustBegin(t, r, cur, tr.Declaration, Started)
	if g.Superseded == nil || *g.Superseded != old {
		t.Fatalf("superseded: %v", g.Superseded)
	}
	if g.Progress.Received != 0 {
		t.Fatalf("new attempt inherited progress: %+v", g.Progress)
	}
	// The new attempt needs chunk 0 itself: the old attempt's chunks 0 and
	// 1 are not usable, and chunk 2 alone is a gap.
	if _, err := r.Add(cur, 2, tr.Chunks[2]); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("new attempt used old chunks: %v", err)
	}
	cur2 := testBinding(1, 8)
	mustBegin(t, r, cur2, tr.Declaration, Started)
	// Late chunks and Restores of the earlier attempts are discarded.
	if _, err := r.Add(old, 2, tr.Chunks[2]); DiscardReasonOf(err) != DiscardSuperseded {
		t.Fatalf("late chunk of the previous attempt: %v", err)
	}
	if _, err := r.Begin(old, tr.Declaration); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("late Restore of the previous attempt: %v", err)
	}
	if _, err := r.Complete(old); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("complete of the previous attempt: %v", err)
	}
	if p, _ := r.Progress(cur2); p.Received != 0 {
		t.Fatalf("late chunks leaked into the current attempt: %+v", p)
	}
	addAll(t, r, cur2, tr, 0)
	if out, err := r.Complete(cur2); err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("current attempt: %v", err)
	}
	if s := r.Stats(); s.Superseded != 1 || s.Open != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A RelocationId open for one source cannot be claimed by another source:
// the open attempt is left alone.
func TestOtherSourceForOpenRelocation(t *testing.T) {
	payload, tr := split3(t)
	b := testBinding(1, 1)
	x := b
	x.Source.NodeGeneration++ // the same owner after a process restart
	r := newReg(t, Limits{})
	mustBegin(t, r, b, tr.Declaration, Started)
	r.Add(b, 0, tr.Chunks[0])
	if _, err := r.Begin(x, tr.Declaration); !errors.Is(err, ErrConflict) {
		t.Fatalf("other source: %v", err)
	}
	addAll(t, r, b, tr, 1)
	if out, err := r.Complete(b); err != nil || !bytes.Equal(out, payload) {
		t.Fatalf("open attempt disturbed: %v", err)
	}
}

// §9.1: "If the assembled payload's checksum differs from the declared
// value ... it responds with an explicit failure and never restores from a
// partially assembled payload"; §9.1 failure table: "No retry".
func TestChecksumMismatchEndsTheBinding(t *testing.T) {
	_, tr := split3(t)
	b := testBinding(1, 1)
	r := newReg(t, Limits{})
	d := tr.Declaration
	d.CRC32C ^= 0x8000
	mustBegin(t, r, b, d, Started)
	if _, err := r.Complete(b); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("complete before the chunks: %v", err)
	}
	addAll(t, r, b, tr, 0)
	out, err := r.Complete(b)
	if !errors.Is(err, ErrChecksum) || out != nil {
		t.Fatalf("complete: %v %d bytes", err, len(out))
	}
	if _, err := r.Begin(b, d); !errors.Is(err, ErrChecksum) {
		t.Fatalf("retransmitted Restore resumed a failed assembly: %v", err)
	}
	if _, err := r.Add(b, 0, tr.Chunks[0]); DiscardReasonOf(err) != DiscardFailed {
		t.Fatalf("chunk after failure: %v", err)
	}
	if _, err := r.Complete(b); !errors.Is(err, ErrChecksum) {
		t.Fatalf("second complete: %v", err)
	}
	if s := r.Stats(); s.FailedChecksum != 1 || s.Open != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestTerminalAddFailureEndsTheBinding(t *testing.T) {
	_, tr := split3(t)
	c := tr.Chunks
	cases := []struct {
		name  string
		index uint32
		data  []byte
		want  error
		count func(Stats) uint64
	}{
		{"gap", 2, c[2], ErrOutOfOrder, func(s Stats) uint64 { return s.FailedOutOfOrder }},
		{"wrong size", 1, c[1][:5], ErrLength, func(s Stats) uint64 { return s.FailedLength }},
		{"differing duplicate", 0, c[1][:len(c[0])], ErrConflict, func(s Stats) uint64 { return s.FailedConflict }},
	}
	for _, tc := range cases {
		b := testBinding(1, 1)
		r := newReg(t, Limits{})
		mustBegin(t, r, b, tr.Declaration, Started)
		r.Add(b, 0, c[0])
		if _, err := r.Add(b, tc.index, tc.data); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := r.Add(b, 1, c[1]); DiscardReasonOf(err) != DiscardFailed {
			t.Fatalf("%s: after failure: %v", tc.name, err)
		}
		if _, err := r.Begin(b, tr.Declaration); !errors.Is(err, tc.want) {
			t.Fatalf("%s: begin after failure: %v", tc.name, err)
		}
		if s := r.Stats(); tc.count(s) != 1 || s.Open != 0 || s.InFlightBytes != 0 || s.DiscardedBy(DiscardFailed) != 1 {
			t.Fatalf("%s: stats %+v", tc.name, s)
		}
	}
}

// §9.4 step 4: cancellation cleans up the target's in-progress chunk
// assembly staging; nothing about the binding comes back to life.
func TestAbort(t *testing.T) {
	_, tr := split3(t)
	b := testBinding(1, 1)
	r := newReg(t, Limits{})
	mustBegin(t, r, b, tr.Declaration, Started)
	r.Add(b, 0, tr.Chunks[0])
	if !r.Abort(b) {
		t.Fatal("abort did not find the open assembly")
	}
	if s := r.Stats(); s.Open != 0 || s.InFlightBytes != 0 || s.Aborted != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := r.Add(b, 1, tr.Chunks[1]); DiscardReasonOf(err) != DiscardAborted {
		t.Fatalf("late chunk: %v", err)
	}
	if _, err := r.Begin(b, tr.Declaration); !errors.Is(err, ErrAborted) {
		t.Fatalf("late Restore: %v", err)
	}
	if _, err := r.Complete(b); !errors.Is(err, ErrAborted) {
		t.Fatalf("complete: %v", err)
	}
	if r.Abort(b) {
		t.Fatal("second abort found an assembly")
	}

	// A cancel that overtakes its Restore still prevents the Restore.
	early := testBinding(2, 1)
	if r.Abort(early) {
		t.Fatal("abort of an unknown binding found an assembly")
	}
	if _, err := r.Begin(early, tr.Declaration); !errors.Is(err, ErrAborted) {
		t.Fatalf("Restore after its cancel: %v", err)
	}

	// A completed binding becomes aborted; a failed one stays failed.
	done := testBinding(3, 1)
	mustBegin(t, r, done, tr.Declaration, Started)
	addAll(t, r, done, tr, 0)
	if _, err := r.Complete(done); err != nil {
		t.Fatal(err)
	}
	r.Abort(done)
	if _, err := r.Begin(done, tr.Declaration); !errors.Is(err, ErrAborted) {
		t.Fatalf("completed then aborted: %v", err)
	}
	bad := testBinding(4, 1)
	mustBegin(t, r, bad, tr.Declaration, Started)
	r.Add(bad, 1, tr.Chunks[1])
	r.Abort(bad)
	if _, err := r.Begin(bad, tr.Declaration); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("failed then aborted: %v", err)
	}
	// An invalid binding is not remembered.
	before := r.Stats().Remembered
	r.Abort(Binding{})
	if r.Stats().Remembered != before {
		t.Fatal("invalid binding remembered")
	}
}

// Ended bindings are remembered up to Limits.Remember, oldest forgotten
// first; a forgotten binding's late chunk is merely unknown, never linked.
func TestRememberIsBounded(t *testing.T) {
	_, tr := split3(t)
	r := newReg(t, Limits{Remember: 3})
	for i := uint64(1); i <= 5; i++ {
		b := testBinding(i, 1)
		mustBegin(t, r, b, tr.Declaration, Started)
		r.Abort(b)
	}
	if s := r.Stats(); s.Remembered != 3 {
		t.Fatalf("remembered %d", s.Remembered)
	}
	for i, want := range map[uint64]DiscardReason{1: DiscardUnknown, 2: DiscardUnknown, 3: DiscardAborted, 4: DiscardAborted, 5: DiscardAborted} {
		if _, err := r.Add(testBinding(i, 1), 0, tr.Chunks[0]); DiscardReasonOf(err) != want {
			t.Fatalf("binding %d: %v, want %v", i, err, want)
		}
	}
	if s := r.Stats(); s.Open != 0 {
		t.Fatalf("a chunk created state: %+v", s)
	}
}

func TestBeginRejections(t *testing.T) {
	_, tr := split3(t)
	r := newReg(t, Limits{MaxPayload: 8 << 10, MaxInFlight: 8 << 10, MaxOpen: 2})
	if _, err := r.Begin(Binding{}, tr.Declaration); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero binding: %v", err)
	}
	bad := testBinding(1, 1)
	bad.Source.OwnerID = ""
	if _, err := r.Begin(bad, tr.Declaration); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad fence: %v", err)
	}
	if _, err := r.Begin(testBinding(1, 1), Declaration{Length: 8<<10 + 1, Count: 9}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("above MaxPayload: %v", err)
	}
	if _, err := r.Begin(testBinding(1, 1), Declaration{Length: 5, Count: 0}); !errors.Is(err, ErrLength) {
		t.Fatalf("inconsistent: %v", err)
	}
	// Capacity: 2 open at most, 8 KiB in flight at most.
	mustBegin(t, r, testBinding(1, 1), Declaration{Length: 6 << 10, Count: 6}, Started)
	if _, err := r.Begin(testBinding(2, 1), Declaration{Length: 3 << 10, Count: 3}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("in-flight bytes: %v", err)
	}
	mustBegin(t, r, testBinding(2, 1), Declaration{Length: 2 << 10, Count: 2}, Started)
	if _, err := r.Begin(testBinding(3, 1), Declaration{}); !errors.Is(err, ErrCapacity) {
		t.Fatalf("open count: %v", err)
	}
	// Refusals create and remember nothing: once space is free it works.
	r.Abort(testBinding(1, 1))
	mustBegin(t, r, testBinding(3, 1), Declaration{Length: 3 << 10, Count: 3}, Started)
	if s := r.Stats(); s.Rejected != 6 || s.Open != 2 || s.InFlightBytes != 5<<10 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := NewRegistry(Limits{MaxOpen: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad limits: %v", err)
	}
}

// A declared length within limits is reserved, not allocated, at Begin; a
// declared length above them is refused before any allocation.
func TestBeginAllocatesNothingSizedByTheDeclaration(t *testing.T) {
	r := newReg(t, Limits{MaxPayload: 1 << 30, MaxInFlight: 1 << 30})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := r.Begin(testBinding(1, 1), Declaration{Length: 512 << 20, Count: 2048}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Begin(testBinding(2, 1), Declaration{Length: 2 << 30, Count: 4096}); !errors.Is(err, ErrTooLarge) {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("Begin allocated %d bytes", d)
	}
}

// Round trips through the registry: random payloads, many chunk sizes,
// including 0-length state, empty queues and payloads that are an exact
// multiple of the chunk size.
func TestRegistryRoundTrips(t *testing.T) {
	rng := newRand(99)
	r := newReg(t, Limits{})
	n := 150
	if testing.Short() {
		n = 40
	}
	sizes := []int{MinChunkSize, MinChunkSize + 1, 1500, 4096, 10000, 64 << 10, DefaultChunkSize}
	for i := 0; i < n; i++ {
		p := randPayload(rng)
		o := allEncodings[rng.IntN(len(allEncodings))]
		enc, err := Encode(p, o)
		if err != nil {
			t.Fatal(err)
		}
		size := sizes[i%len(sizes)]
		tr, err := Split(enc, size)
		if err != nil {
			t.Fatal(err)
		}
		b := testBinding(uint64(i+1), uint64(rng.IntN(3)+1))
		mustBegin(t, r, b, tr.Declaration, Started)
		for j, c := range tr.Chunks {
			p, err := r.Add(b, uint32(j), c)
			if err != nil || p.Ready != (j == len(tr.Chunks)-1) {
				t.Fatalf("case %d chunk %d: %+v %v", i, j, p, err)
			}
		}
		out, err := r.Complete(b)
		if err != nil || !bytes.Equal(out, enc) {
			t.Fatalf("case %d: complete %v", i, err)
		}
		got, err := Decode(out, Limits{})
		if err != nil {
			t.Fatalf("case %d: decode %v", i, err)
		}
		equalPayload(t, p, got)
	}
	if s := r.Stats(); s.Completed != uint64(n) || s.Open != 0 || s.InFlightBytes != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// Concurrent assemblies of different bindings, and aborts racing with
// adds and completes on the same binding (run with -race). Whatever the
// interleaving, Complete returns either the exact payload or an error.
func TestRegistryConcurrent(t *testing.T) {
	rng := newRand(5)
	payload := randBytes(rng, 300<<10)
	tr, err := Split(payload, 16<<10)
	if err != nil {
		t.Fatal(err)
	}
	r := newReg(t, Limits{})
	const workers = 8
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := 0; w < workers; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for k := 0; k < rounds; k++ {
				b := testBinding(uint64(w*1000+k+1), 1)
				if _, err := r.Begin(b, tr.Declaration); err != nil {
					if !errors.Is(err, ErrAborted) { // the aborter may have come first
						errs <- fmt.Errorf("begin: %w", err)
					}
					continue
				}
				for i, c := range tr.Chunks {
					_, err := r.Add(b, uint32(i), c)
					if err != nil && !errors.Is(err, ErrDiscarded) {
						errs <- fmt.Errorf("add: %w", err)
						return
					}
				}
				out, err := r.Complete(b)
				if err == nil && !bytes.Equal(out, payload) {
					errs <- errors.New("complete returned wrong bytes")
					return
				}
				if err != nil && !errors.Is(err, ErrAborted) {
					errs <- fmt.Errorf("complete: %w", err)
					return
				}
			}
		}()
		go func() { // aborts the odd rounds of this worker at arbitrary points
			defer wg.Done()
			for k := 1; k < rounds; k += 2 {
				runtime.Gosched()
				r.Abort(testBinding(uint64(w*1000+k+1), 1))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := r.Stats(); s.Open != 0 || s.InFlightBytes != 0 {
		t.Fatalf("leftover state: %+v", s)
	}
}

package chunk

import (
	"bytes"
	"errors"
	"testing"
)

// split3 is a 3-chunk transfer of 2.5 KiB in 1 KiB chunks.
func split3(t *testing.T) ([]byte, Transfer) {
	t.Helper()
	payload := randBytes(newRand(5), 2560)
	tr, err := Split(payload, MinChunkSize)
	if err != nil || tr.Count != 3 {
		t.Fatalf("split: %+v %v", tr.Declaration, err)
	}
	return payload, tr
}

// step is one action on an assembly with its expected outcome.
type step struct {
	index uint32
	data  []byte
	want  error // nil = accepted; ErrDiscarded; or a terminal sentinel
	why   DiscardReason
}

func TestAssemblyRules(t *testing.T) {
	payload, tr := split3(t)
	c := tr.Chunks
	other := func(b []byte) []byte { x := append([]byte(nil), b...); x[0] ^= 1; return x }
	cases := []struct {
		name     string
		steps    []step
		complete error // nil = Complete must return payload; else its error
	}{
		{"in order", []step{{0, c[0], nil, 0}, {1, c[1], nil, 0}, {2, c[2], nil, 0}}, nil},
		{"identical retransmission ignored", []step{{0, c[0], nil, 0}, {0, c[0], ErrDiscarded, DiscardDuplicate}, {1, c[1], nil, 0},
			{0, c[0], ErrDiscarded, DiscardDuplicate}, {1, c[1], ErrDiscarded, DiscardDuplicate}, {2, c[2], nil, 0}}, nil},
		{"gap is terminal", []step{{0, c[0], nil, 0}, {2, c[2], ErrOutOfOrder, 0}, {1, c[1], ErrDiscarded, DiscardFailed}}, ErrOutOfOrder},
		{"first chunk missing", []step{{1, c[1], ErrOutOfOrder, 0}}, ErrOutOfOrder},
		{"retransmission with other bytes", []step{{0, c[0], nil, 0}, {0, other(c[0]), ErrConflict, 0}}, ErrConflict},
		{"retransmission with other size", []step{{0, c[0], nil, 0}, {1, c[1], nil, 0}, {0, c[0][:10], ErrConflict, 0}}, ErrConflict},
		{"index past count", []step{{3, c[0], ErrLength, 0}}, ErrLength},
		{"empty chunk", []step{{0, nil, ErrLength, 0}}, ErrLength},
		{"chunk 0 too small for the count", []step{{0, c[0][:512], ErrLength, 0}}, ErrLength},
		{"chunk 0 too large for the count", []step{{0, append(append([]byte(nil), c[0]...), c[1]...), ErrLength, 0}}, ErrLength},
		{"middle chunk of another size", []step{{0, c[0], nil, 0}, {1, c[1][:1000], ErrLength, 0}}, ErrLength},
		{"last chunk too short", []step{{0, c[0], nil, 0}, {1, c[1], nil, 0}, {2, c[2][:100], ErrLength, 0}}, ErrLength},
		{"last chunk too long", []step{{0, c[0], nil, 0}, {1, c[1], nil, 0}, {2, append(c[2][:len(c[2]):len(c[2])], 0), ErrLength, 0}}, ErrLength},
		{"incomplete", []step{{0, c[0], nil, 0}, {1, c[1], nil, 0}}, ErrIncomplete},
	}
	for _, tc := range cases {
		a, err := NewAssembly(tr.Declaration, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range tc.steps {
			_, err := a.Add(s.index, s.data)
			switch {
			case s.want == nil && err != nil:
				t.Fatalf("%s: step %d: %v", tc.name, i, err)
			case s.want != nil && !errors.Is(err, s.want):
				t.Fatalf("%s: step %d: err %v, want %v", tc.name, i, err, s.want)
			case s.why != 0 && DiscardReasonOf(err) != s.why:
				t.Fatalf("%s: step %d: reason %v, want %v", tc.name, i, DiscardReasonOf(err), s.why)
			}
		}
		out, err := a.Complete()
		if tc.complete == nil {
			if err != nil || !bytes.Equal(out, payload) {
				t.Fatalf("%s: complete: %v (len %d)", tc.name, err, len(out))
			}
			continue
		}
		if !errors.Is(err, tc.complete) || out != nil {
			t.Fatalf("%s: complete: %v with %d bytes, want %v and none", tc.name, err, len(out), tc.complete)
		}
	}
}

func TestAssemblyChecksumIsTerminal(t *testing.T) {
	_, tr := split3(t)
	d := tr.Declaration
	d.CRC32C ^= 1
	a, err := NewAssembly(d, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range tr.Chunks {
		p, err := a.Add(uint32(i), c)
		if err != nil {
			t.Fatal(err)
		}
		if p.Ready != (i == len(tr.Chunks)-1) {
			t.Fatalf("chunk %d: ready %v", i, p.Ready)
		}
	}
	if out, err := a.Complete(); !errors.Is(err, ErrChecksum) || out != nil {
		t.Fatalf("complete: %v %d bytes", err, len(out))
	}
	// Not resumable: the bytes are gone, every later call sees the failure.
	if out, err := a.Complete(); !errors.Is(err, ErrChecksum) || out != nil {
		t.Fatalf("second complete: %v", err)
	}
	if _, err := a.Add(0, tr.Chunks[0]); DiscardReasonOf(err) != DiscardFailed {
		t.Fatalf("add after failure: %v", err)
	}
	if p := a.Progress(); p.Bytes != 0 || p.Ready {
		t.Fatalf("failed assembly still holds bytes: %+v", p)
	}
	if !errors.Is(a.Err(), ErrChecksum) {
		t.Fatalf("Err: %v", a.Err())
	}
}

// Corrupting any single byte of the transmitted chunks, in any way, or any
// bit of the declared checksum, fails with ErrChecksum and returns nothing.
func TestCorruptionAnywhereIsChecksumFailure(t *testing.T) {
	_, tr := split3(t)
	masks := []byte{0x01, 0x80, 0xff, 0x5a}
	total := 0
	for ci := range tr.Chunks {
		for pos := range tr.Chunks[ci] {
			for _, m := range masks {
				a, err := NewAssembly(tr.Declaration, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				for i, c := range tr.Chunks {
					if i == ci {
						c = append([]byte(nil), c...)
						c[pos] ^= m
					}
					if _, err := a.Add(uint32(i), c); err != nil {
						t.Fatalf("chunk %d pos %d: add: %v", ci, pos, err)
					}
				}
				if out, err := a.Complete(); !errors.Is(err, ErrChecksum) || out != nil {
					t.Fatalf("chunk %d pos %d mask %02x: %v", ci, pos, m, err)
				}
				total++
			}
		}
	}
	for bit := 0; bit < 32; bit++ {
		d := tr.Declaration
		d.CRC32C ^= 1 << bit
		a, _ := NewAssembly(d, Limits{})
		for i, c := range tr.Chunks {
			if _, err := a.Add(uint32(i), c); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := a.Complete(); !errors.Is(err, ErrChecksum) {
			t.Fatalf("declared crc bit %d: %v", bit, err)
		}
	}
	if total != 2560*len(masks) {
		t.Fatalf("covered %d corruptions", total)
	}
}

func TestAssemblyZeroLength(t *testing.T) {
	a, err := NewAssembly(Declaration{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Progress().Ready {
		t.Fatal("an empty declaration is ready at once")
	}
	if _, err := a.Add(0, []byte("x")); !errors.Is(err, ErrLength) {
		t.Fatalf("chunk for an empty payload: %v", err)
	}
	a, _ = NewAssembly(Declaration{}, Limits{})
	if out, err := a.Complete(); err != nil || out == nil || len(out) != 0 {
		t.Fatalf("complete: %v %v", out, err)
	}
	a, _ = NewAssembly(Declaration{CRC32C: 1}, Limits{})
	if _, err := a.Complete(); !errors.Is(err, ErrChecksum) {
		t.Fatalf("empty payload with a nonzero crc: %v", err)
	}
}

func TestAssemblyAbortAndCompleted(t *testing.T) {
	payload, tr := split3(t)
	a, _ := NewAssembly(tr.Declaration, Limits{})
	a.Add(0, tr.Chunks[0])
	a.Abort()
	if _, err := a.Add(1, tr.Chunks[1]); DiscardReasonOf(err) != DiscardAborted {
		t.Fatalf("add after abort: %v", err)
	}
	if _, err := a.Complete(); !errors.Is(err, ErrAborted) {
		t.Fatalf("complete after abort: %v", err)
	}

	a, _ = NewAssembly(tr.Declaration, Limits{})
	for i, c := range tr.Chunks {
		a.Add(uint32(i), c)
	}
	out, err := a.Complete()
	if err != nil || !bytes.Equal(out, payload) {
		t.Fatal(err)
	}
	a.Abort() // no effect once completed
	if _, err := a.Complete(); !errors.Is(err, ErrCompleted) {
		t.Fatalf("second complete: %v", err)
	}
	if _, err := a.Add(2, tr.Chunks[2]); DiscardReasonOf(err) != DiscardCompleted {
		t.Fatalf("late chunk: %v", err)
	}
	// The caller owns the payload: the assembly must not touch it again.
	if !bytes.Equal(out, payload) {
		t.Fatal("payload changed after completion")
	}
}

func TestNewAssemblyRejectsBeforeAllocating(t *testing.T) {
	if _, err := NewAssembly(Declaration{Length: 1 << 40, Count: 4096}, Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("huge declaration: %v", err)
	}
	// A valid but large declaration allocates nothing until chunk 0.
	a, err := NewAssembly(Declaration{Length: 200 << 20, Count: 800}, Limits{})
	if err != nil || cap(a.buf) != 0 {
		t.Fatalf("%v cap %d", err, cap(a.buf))
	}
}

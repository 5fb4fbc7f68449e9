package chunk

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
)

func TestSplit(t *testing.T) {
	rng := newRand(11)
	for _, size := range []int{MinChunkSize, MinChunkSize + 1, 3000, 4096, 64 << 10, DefaultChunkSize, MaxChunkSize} {
		for _, n := range []int{0, 1, size - 1, size, size + 1, 3*size - 7, 5 * size} {
			if n > 40<<20 {
				continue
			}
			payload := randBytes(rng, n)
			tr, err := Split(payload, size)
			if err != nil {
				t.Fatalf("size %d n %d: %v", size, n, err)
			}
			wantCount := (n + size - 1) / size
			if tr.Length != uint64(n) || int(tr.Count) != wantCount || len(tr.Chunks) != wantCount {
				t.Fatalf("size %d n %d: declaration %+v with %d chunks, want count %d", size, n, tr.Declaration, len(tr.Chunks), wantCount)
			}
			if tr.CRC32C != crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli)) {
				t.Fatalf("size %d n %d: crc %08x", size, n, tr.CRC32C)
			}
			for i, c := range tr.Chunks {
				last := i == len(tr.Chunks)-1
				if !last && len(c) != size || last && (len(c) == 0 || len(c) > size) {
					t.Fatalf("size %d n %d: chunk %d has %d bytes", size, n, i, len(c))
				}
			}
			if got := bytes.Join(tr.Chunks, nil); !bytes.Equal(got, payload) {
				t.Fatalf("size %d n %d: chunks do not concatenate to the payload", size, n)
			}
			if err := tr.Validate(Limits{}); err != nil {
				t.Fatalf("size %d n %d: Split's declaration does not validate: %v", size, n, err)
			}
		}
	}
}

func TestSplitErrors(t *testing.T) {
	for _, size := range []int{-1, 1, MinChunkSize - 1, MaxChunkSize + 1} {
		if _, err := Split([]byte("x"), size); !errors.Is(err, ErrInvalid) {
			t.Errorf("chunk size %d: %v", size, err)
		}
	}
	if tr, err := Split(make([]byte, 10), 0); err != nil || tr.Count != 1 {
		t.Errorf("chunk size 0 means the default: %+v %v", tr.Declaration, err)
	}
	if _, err := Split(make([]byte, MaxChunkCount*MinChunkSize+1), MinChunkSize); !errors.Is(err, ErrTooLarge) {
		t.Errorf("more than MaxChunkCount chunks: %v", err)
	}
	if tr, err := Split(make([]byte, MaxChunkCount*MinChunkSize), MinChunkSize); err != nil || tr.Count != MaxChunkCount {
		t.Errorf("exactly MaxChunkCount chunks: %+v %v", tr.Declaration, err)
	}
}

func TestDeclarationValidate(t *testing.T) {
	lim := Limits{MaxPayload: 64 << 20}
	cases := []struct {
		name string
		d    Declaration
		want error
	}{
		{"empty", Declaration{}, nil},
		{"empty with crc", Declaration{CRC32C: 5}, nil}, // fails later, at Complete, as a checksum mismatch
		{"one byte", Declaration{Length: 1, Count: 1}, nil},
		{"max chunk", Declaration{Length: MaxChunkSize, Count: 1}, nil},
		{"max payload", Declaration{Length: 64 << 20, Count: 4}, nil},
		{"count without length", Declaration{Count: 1}, ErrLength},
		{"length without count", Declaration{Length: 1}, ErrLength},
		{"more chunks than bytes", Declaration{Length: 3, Count: 4}, ErrLength},
		{"chunks above MaxChunkSize", Declaration{Length: MaxChunkSize + 1, Count: 1}, ErrLength},
		{"above MaxPayload", Declaration{Length: 64<<20 + 1, Count: 5}, ErrTooLarge},
		{"above MaxChunkCount", Declaration{Length: 1 << 20, Count: MaxChunkCount + 1}, ErrTooLarge},
	}
	for _, c := range cases {
		err := c.d.Validate(lim)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

func TestCheckChunkSize(t *testing.T) {
	cases := []struct {
		size int
		lim  Limits
		ok   bool
	}{
		{0, Limits{}, true},
		{DefaultChunkSize, Limits{}, true},
		{MinChunkSize, Limits{}, false}, // 256 MiB needs 262144 chunks of 1 KiB
		{MinChunkSize, Limits{MaxPayload: 4 << 20}, true},
		{32 << 10, Limits{}, false},
		{64 << 10, Limits{}, true}, // exactly 4096 chunks of 64 KiB
		{32 << 10, Limits{MaxPayload: 128 << 20}, true},
		{MaxChunkSize, Limits{MaxPayload: MaxPayloadBound}, true},
		{MaxChunkSize + 1, Limits{}, false},
		{MinChunkSize - 1, Limits{}, false},
	}
	for _, c := range cases {
		if err := CheckChunkSize(c.size, c.lim); (err == nil) != c.ok {
			t.Errorf("size %d limits %+v: %v", c.size, c.lim, err)
		}
	}
}

// ChunkSizeRange is the sizes Split takes that carry a MaxPayload payload in
// at most MaxChunkCount chunks; CheckChunkSize refuses exactly the sizes
// outside it.
func TestChunkSizeRange(t *testing.T) {
	cases := []struct {
		lim    Limits
		lo, hi int
	}{
		{Limits{}, 64 << 10, MaxChunkSize}, // 256 MiB / 4096
		{Limits{MaxPayload: 4 << 20}, MinChunkSize, MaxChunkSize},
		{Limits{MaxPayload: 256<<20 + 1}, 64<<10 + 1, MaxChunkSize},
		{Limits{MaxPayload: MaxPayloadBound}, MaxChunkSize, MaxChunkSize},
	}
	for _, c := range cases {
		lo, hi, err := ChunkSizeRange(c.lim)
		if err != nil || lo != c.lo || hi != c.hi {
			t.Errorf("limits %+v: %d..%d, %v; want %d..%d", c.lim, lo, hi, err, c.lo, c.hi)
			continue
		}
		for _, s := range []int{lo - 1, lo, hi, hi + 1} {
			if err := CheckChunkSize(s, c.lim); (err == nil) != (s >= lo && s <= hi) {
				t.Errorf("limits %+v: CheckChunkSize(%d) = %v", c.lim, s, err)
			}
		}
	}
	if _, _, err := ChunkSizeRange(Limits{MaxPayload: MaxPayloadBound + 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invalid limits: %v", err)
	}
}

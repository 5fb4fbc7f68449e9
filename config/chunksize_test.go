package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/chunk"
)

// The relocation.chunk_size problems: the range and why a value is out of
// it; the tests append "got <value>".
const (
	chunkLow  = "must be 65536..16777216 bytes (64 KiB..16 MiB; below 64 KiB a payload of 256 MiB, the largest a move carries, needs more than 4096 chunks), "
	chunkHigh = "must be 65536..16777216 bytes (64 KiB..16 MiB; a source cannot split a payload into chunks above 16 MiB), "
)

// relocation.chunk_size is accepted exactly when a move's source can split
// every payload it may encode with it: chunk.Split takes the size
// (chunk.MinChunkSize..chunk.MaxChunkSize, 1 KiB..16 MiB) and the largest
// payload (256 MiB) fits in chunk.MaxChunkCount (4096) chunks. Until
// 2026-12-07 startup took 1 KiB..64 MiB: 32 MiB failed every move the node
// sourced, 4 KiB every move of an object above 16 MiB. A refusal is a
// *ValidationError with one Problem naming the key, the range and the value.
func TestRelocationChunkSize(t *testing.T) {
	for _, tc := range []struct {
		size int
		want string // "" = accepted, else the problem's message
	}{
		{-1, chunkLow + "got -1"},
		{0, chunkLow + "got 0"}, // not chunk.Split's "0 = default": the default is 1 MiB
		{chunk.MinChunkSize, chunkLow + "got 1024"},
		{4 << 10, chunkLow + "got 4096"},
		{64<<10 - 1, chunkLow + "got 65535"},
		{64 << 10, ""}, // 4096 chunks of 64 KiB are exactly 256 MiB
		{64<<10 + 1, ""},
		{chunk.DefaultChunkSize, ""},
		{1 << 20, ""}, // the default
		{16 << 20, ""},
		{16<<20 + 1, chunkHigh + "got 16777217"},
		{32 << 20, chunkHigh + "got 33554432"},
		{64 << 20, chunkHigh + "got 67108864"}, // the wire's bound, accepted until 2026-12-07
	} {
		t.Run(strconv.Itoa(tc.size), func(t *testing.T) {
			c := valid()
			c.Relocation.ChunkSize = tc.size
			err := c.Validate(nil)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// What startup accepts, the source can split: the size
				// itself, and the largest payload in at most 4096 chunks.
				if _, err := chunk.Split([]byte{1}, tc.size); err != nil {
					t.Errorf("accepted, but chunk.Split refuses it: %v", err)
				}
				if err := chunk.CheckChunkSize(tc.size, chunk.Limits{}); err != nil {
					t.Errorf("accepted, but chunk.CheckChunkSize refuses it: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v (%T), want a *ValidationError", err, err)
			}
			if len(ve.Problems) != 1 || ve.Problems[0] != p("relocation.chunk_size", tc.want) {
				t.Fatalf("problems %q, want only\n%q", ve.Problems, tc.want)
			}
			if tc.size != 0 && chunk.CheckChunkSize(tc.size, chunk.Limits{}) == nil {
				t.Errorf("refused, but chunk.CheckChunkSize accepts it")
			}
		})
	}
}

// The range is package chunk's (config cannot import it: it sits below
// chunk in the package layers), and the key's help (docs/OPERATIONS.md)
// states it.
func TestRelocationChunkRange(t *testing.T) {
	lo, hi := RelocationChunkRange()
	clo, chi, err := chunk.ChunkSizeRange(chunk.Limits{})
	if err != nil || lo != clo || hi != chi {
		t.Fatalf("RelocationChunkRange() = %d..%d, chunk.ChunkSizeRange = %d..%d, %v", lo, hi, clo, chi, err)
	}
	if relocationMaxPayload != chunk.DefaultMaxPayload || relocationMaxChunks != chunk.MaxChunkCount {
		t.Errorf("the refusal's reason names %d-byte payloads in %d chunks; package chunk: %d, %d",
			relocationMaxPayload, relocationMaxChunks, chunk.DefaultMaxPayload, chunk.MaxChunkCount)
	}
	if lo != 64<<10 || hi != chunk.MaxChunkSize {
		t.Errorf("range %d..%d, want 65536..16777216", lo, hi)
	}
	for _, k := range Keys() {
		if k.Key == "relocation.chunk_size" {
			if want := strconv.Itoa(lo) + ".." + strconv.Itoa(hi); !strings.Contains(k.Help, want) {
				t.Errorf("help %q does not state %s", k.Help, want)
			}
			return
		}
	}
	t.Error("no key relocation.chunk_size")
}

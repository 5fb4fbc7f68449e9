package chunk

import (
	"fmt"

	"github.com/meshnode/meshnode/router"
)

// Declaration is what a Restore request declares about the payload that
// follows it in chunks (§1.3 step 4, §9.1): record 40's totalLength,
// chunkCount and crc32c.
type Declaration struct {
	Length uint64 // total payload bytes
	Count  uint32 // number of chunks
	CRC32C uint32 // CRC-32C (Castagnoli) of the whole payload
}

// Validate checks the declaration's internal consistency and bounds against
// the limits, before anything sized by it is allocated: Count is 0 exactly
// when Length is 0, at most MaxChunkCount, every chunk carries 1 to
// MaxChunkSize bytes, and Length is at most lim.MaxPayload. Errors wrap
// ErrTooLarge or ErrLength.
func (d Declaration) Validate(lim Limits) error {
	lim, err := lim.Normalize()
	if err != nil {
		return err
	}
	n := uint64(d.Count)
	switch {
	case d.Length > lim.MaxPayload:
		return fmt.Errorf("%w: declared length %d above MaxPayload %d", ErrTooLarge, d.Length, lim.MaxPayload)
	case d.Count > MaxChunkCount:
		return fmt.Errorf("%w: declared chunk count %d above %d", ErrTooLarge, d.Count, MaxChunkCount)
	case (n == 0) != (d.Length == 0):
		return fmt.Errorf("%w: chunk count %d with length %d (zero exactly together)", ErrLength, d.Count, d.Length)
	case n > d.Length:
		return fmt.Errorf("%w: %d chunks cannot carry %d bytes (every chunk has at least one)", ErrLength, d.Count, d.Length)
	case d.Length > n*MaxChunkSize:
		return fmt.Errorf("%w: %d bytes need chunks above %d bytes with %d chunks", ErrLength, d.Length, MaxChunkSize, d.Count)
	}
	return nil
}

// Transfer is a split payload: the declaration for the Restore request and
// the chunks to send after it, in index order. Chunks alias the payload.
type Transfer struct {
	Declaration
	Chunks [][]byte
}

// Split cuts payload into chunks of chunkSize bytes (the last one may be
// shorter) and computes the declaration. chunkSize 0 means
// DefaultChunkSize; otherwise it must be MinChunkSize..MaxChunkSize. A
// payload that would need more than MaxChunkCount chunks is ErrTooLarge.
// The chunks share memory with payload, which must not change until they
// are sent.
func Split(payload []byte, chunkSize int) (Transfer, error) {
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	if chunkSize < MinChunkSize || chunkSize > MaxChunkSize {
		return Transfer{}, fmt.Errorf("%w: chunk size %d outside %d..%d", ErrInvalid, chunkSize, MinChunkSize, MaxChunkSize)
	}
	count := (uint64(len(payload)) + uint64(chunkSize) - 1) / uint64(chunkSize)
	if count > MaxChunkCount {
		return Transfer{}, fmt.Errorf("%w: %d bytes in chunks of %d need %d chunks, at most %d", ErrTooLarge, len(payload), chunkSize, count, MaxChunkCount)
	}
	t := Transfer{Declaration: Declaration{Length: uint64(len(payload)), Count: uint32(count), CRC32C: router.CRC32C(payload)}}
	if count > 0 {
		t.Chunks = make([][]byte, 0, count)
	}
	for off := 0; off < len(payload); off += chunkSize {
		end := min(off+chunkSize, len(payload))
		t.Chunks = append(t.Chunks, payload[off:end:end])
	}
	return t, nil
}

// ChunkSizeRange is the range of chunk sizes a node with limits lim may be
// configured with: Split accepts them (MinChunkSize..MaxChunkSize) and a
// payload of lim.MaxPayload bytes fits in MaxChunkCount chunks of them, so
// Split never fails on a payload Encode accepted. With the default limits
// (256 MiB payloads) it is 64 KiB..16 MiB. It is the one source of these
// bounds: CheckChunkSize and the node configuration's
// relocation.chunk_size rule both use it.
func ChunkSizeRange(lim Limits) (lo, hi int, err error) {
	lim, err = lim.Normalize()
	if err != nil {
		return 0, 0, err
	}
	need := (lim.MaxPayload + MaxChunkCount - 1) / MaxChunkCount // ≤ MaxChunkSize: MaxPayload ≤ MaxPayloadBound
	return max(MinChunkSize, int(need)), MaxChunkSize, nil
}

// CheckChunkSize validates a configured chunk size against the limits at
// startup: the size is in ChunkSizeRange(lim) (0 means DefaultChunkSize).
// Errors wrap ErrInvalid.
func CheckChunkSize(chunkSize int, lim Limits) error {
	lim, err := lim.Normalize()
	if err != nil {
		return err
	}
	lo, hi, err := ChunkSizeRange(lim)
	if err != nil {
		return err
	}
	if chunkSize == 0 {
		chunkSize = DefaultChunkSize
	}
	if chunkSize < lo || chunkSize > hi {
		return fmt.Errorf("%w: chunk size %d outside %d..%d (Split takes %d..%d, and MaxPayload %d must fit in %d chunks)",
			ErrInvalid, chunkSize, lo, hi, MinChunkSize, MaxChunkSize, lim.MaxPayload, MaxChunkCount)
	}
	return nil
}

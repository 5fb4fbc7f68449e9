package chunk

import (
	"bytes"
	"fmt"

	"github.com/meshnode/meshnode/router"
)

// Progress is an assembly's state as seen by the coordinator.
type Progress struct {
	Received uint32 // chunks accepted so far (the next expected index)
	Count    uint32 // declared chunk count
	Bytes    uint64 // payload bytes accepted so far
	// Ready: every declared chunk arrived; Complete verifies and hands out
	// the payload.
	Ready bool
}

type assemblyState uint8

const (
	stateOpen assemblyState = iota
	stateCompleted
	stateFailed
	stateAborted
)

// Assembly reassembles one Restore payload for one binding (§1.3 step 5,
// §9.1). It is a state machine:
//
//	open --Add×Count--> ready --Complete ok--> completed
//	  |                    `--Complete CRC bad--> failed (ErrChecksum)
//	  `--gap / bad size / bad index / differing duplicate--> failed
//	open or ready --Abort--> aborted
//
// Chunks must arrive in index order: they travel on one ordered connection
// (§1.3 step 4), so a gap can only mean a lost chunk and fails the assembly
// at once instead of at the deadline. A chunk whose index was already
// received is a retransmission: ignored if its bytes are identical, a
// conflict if they differ. Every chunk but the last has the size of chunk
// 0, and chunk 0 fixes that size so that the declared count is exactly
// ceil(length/size) — the shape Split produces.
//
// The buffer is allocated once, at the first chunk, with the declared
// length, which Validate bounded by the limits. The CRC-32C is computed as
// chunks arrive, so Complete costs no extra pass. Complete never returns a
// payload that is not whole and verified.
//
// An Assembly is not safe for concurrent use; Registry serialises access.
type Assembly struct {
	decl     Declaration
	chunkLen uint64 // size of every chunk but the last, fixed by chunk 0
	buf      []byte
	next     uint32
	crc      uint32
	state    assemblyState
	err      error // the terminal failure, in stateFailed
}

// NewAssembly starts an assembly for a validated declaration. Nothing is
// allocated for the payload yet.
func NewAssembly(d Declaration, lim Limits) (*Assembly, error) {
	if err := d.Validate(lim); err != nil {
		return nil, err
	}
	return &Assembly{decl: d}, nil
}

// Declaration returns what the Restore request declared.
func (a *Assembly) Declaration() Declaration { return a.decl }

// Progress reports how far the assembly got.
func (a *Assembly) Progress() Progress {
	return Progress{Received: a.next, Count: a.decl.Count, Bytes: uint64(len(a.buf)),
		Ready: a.state == stateOpen && a.next == a.decl.Count}
}

// Add links chunk index to the assembly. It returns nil when the chunk was
// accepted; a *DiscardError (ErrDiscarded) for a retransmitted identical
// chunk or when the assembly has ended; or a terminal failure (ErrLength,
// ErrOutOfOrder, ErrConflict) after which the assembly is failed and its
// memory released. data is copied.
func (a *Assembly) Add(index uint32, data []byte) (Progress, error) {
	switch a.state {
	case stateCompleted:
		return a.Progress(), &DiscardError{Reason: DiscardCompleted, Index: index}
	case stateFailed:
		return a.Progress(), &DiscardError{Reason: DiscardFailed, Index: index}
	case stateAborted:
		return a.Progress(), &DiscardError{Reason: DiscardAborted, Index: index}
	}
	d := a.decl
	switch {
	case index >= d.Count:
		return a.fail(fmt.Errorf("%w: chunk index %d, declared count %d", ErrLength, index, d.Count))
	case index < a.next:
		off := uint64(index) * a.chunkLen
		want := a.sizeOf(index)
		if uint64(len(data)) != want || !bytes.Equal(a.buf[off:off+want], data) {
			return a.fail(fmt.Errorf("%w: chunk %d retransmitted with different bytes", ErrConflict, index))
		}
		return a.Progress(), &DiscardError{Reason: DiscardDuplicate, Index: index}
	case index > a.next:
		return a.fail(fmt.Errorf("%w: chunk %d arrived, chunk %d expected (a chunk was lost)", ErrOutOfOrder, index, a.next))
	}
	n := uint64(len(data))
	if n == 0 || n > MaxChunkSize {
		return a.fail(fmt.Errorf("%w: chunk %d has %d bytes, outside 1..%d", ErrLength, index, n, MaxChunkSize))
	}
	if index == 0 {
		// Chunk 0 fixes the chunk size; the declared count must be exactly
		// ceil(length/size): (count-1)*size < length <= count*size.
		c := uint64(d.Count)
		if (c-1)*n >= d.Length || d.Length > c*n {
			return a.fail(fmt.Errorf("%w: chunk size %d does not give %d chunks for %d bytes", ErrLength, n, d.Count, d.Length))
		}
		a.chunkLen = n
	}
	// This also holds chunk 0 of a one-chunk payload to the exact length,
	// so the buffer never grows past the declared length.
	if want := a.sizeOf(index); n != want {
		return a.fail(fmt.Errorf("%w: chunk %d has %d bytes, %d expected", ErrLength, index, n, want))
	}
	if a.buf == nil {
		a.buf = make([]byte, 0, d.Length)
	}
	a.buf = append(a.buf, data...)
	a.crc = router.UpdateCRC32C(a.crc, data)
	a.next++
	return a.Progress(), nil
}

// sizeOf is the size chunk index must have once chunk 0 fixed chunkLen.
func (a *Assembly) sizeOf(index uint32) uint64 {
	if index == a.decl.Count-1 {
		return a.decl.Length - uint64(a.decl.Count-1)*a.chunkLen
	}
	return a.chunkLen
}

func (a *Assembly) fail(err error) (Progress, error) {
	a.state, a.err, a.buf = stateFailed, err, nil
	return a.Progress(), err
}

// Complete hands out the verified payload once every chunk has arrived:
// the length equals the declared length and the CRC-32C equals the
// declared checksum. Before that it returns ErrIncomplete and stays open. A
// checksum mismatch is terminal (ErrChecksum): the bytes are dropped and
// the assembly cannot be resumed. After success the caller owns the
// returned slice and the assembly holds nothing.
func (a *Assembly) Complete() ([]byte, error) {
	switch a.state {
	case stateCompleted:
		return nil, ErrCompleted
	case stateFailed:
		return nil, a.err
	case stateAborted:
		return nil, ErrAborted
	}
	if a.next != a.decl.Count {
		return nil, fmt.Errorf("%w: %d of %d chunks", ErrIncomplete, a.next, a.decl.Count)
	}
	if uint64(len(a.buf)) != a.decl.Length {
		_, err := a.fail(fmt.Errorf("%w: assembled %d bytes, declared %d", ErrLength, len(a.buf), a.decl.Length))
		return nil, err
	}
	if a.crc != a.decl.CRC32C {
		_, err := a.fail(fmt.Errorf("%w: assembled CRC-32C %08x, declared %08x", ErrChecksum, a.crc, a.decl.CRC32C))
		return nil, err
	}
	out := a.buf
	if out == nil {
		out = []byte{}
	}
	a.state, a.buf = stateCompleted, nil
	return out, nil
}

// Abort drops the assembly's bytes (§9.4 step 4). Later chunks are
// discarded. Aborting an ended assembly changes nothing.
func (a *Assembly) Abort() {
	if a.state == stateOpen {
		a.state, a.buf = stateAborted, nil
	}
}

// Err returns the terminal failure of a failed assembly, else nil.
func (a *Assembly) Err() error { return a.err }

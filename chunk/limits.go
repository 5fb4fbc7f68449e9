package chunk

import "fmt"

// Fixed bounds. MaxChunkCount is the wire's bound on a Restore request's
// chunk count (router.RelocationChunkCount); the chunk size bounds are this
// package's and sit inside the wire's 1 B..64 MiB per chunk.
const (
	// MinChunkSize is the smallest chunk size Split accepts.
	MinChunkSize = 1 << 10
	// MaxChunkSize is the largest chunk size Split accepts, and the largest
	// chunk the assembler accepts.
	MaxChunkSize = 16 << 20
	// DefaultChunkSize is Split's chunk size when given 0.
	DefaultChunkSize = 256 << 10
	// MaxChunkCount is the most chunks one payload may have.
	MaxChunkCount = 4096

	// DefaultMaxPayload is Limits.MaxPayload when unset.
	DefaultMaxPayload = 256 << 20
	// MaxPayloadBound is the largest MaxPayload a configuration may set:
	// MaxChunkCount chunks of MaxChunkSize (64 GiB).
	MaxPayloadBound = uint64(MaxChunkCount) * MaxChunkSize
	// DefaultMaxInFlight is Limits.MaxInFlight when unset.
	DefaultMaxInFlight = 1 << 30
	// DefaultMaxOpen is Limits.MaxOpen when unset.
	DefaultMaxOpen = 1024
	// DefaultRemember is Limits.Remember when unset.
	DefaultRemember = 4096
)

// Limits bound what the package accepts and allocates. The zero value of
// each field means its default; Normalize applies them. Source and target
// must agree on MaxPayload and MaxBody (they come from the same node
// configuration), so that a source never encodes what a target refuses.
type Limits struct {
	// MaxPayload bounds an encoded payload, which is also the total length
	// a Restore request may declare. Default 256 MiB, at most 64 GiB.
	MaxPayload uint64
	// MaxBody bounds the uncompressed body (state + queue + timers) that
	// Encode produces and Decode accepts. Default: MaxPayload.
	MaxBody uint64
	// MaxInFlight bounds the sum of the declared lengths of a registry's
	// open assemblies (memory that may be held at once). Default 1 GiB,
	// at least MaxPayload.
	MaxInFlight uint64
	// MaxOpen bounds a registry's open assemblies. Default 1024.
	MaxOpen int
	// Remember bounds how many ended bindings (completed, failed, aborted,
	// superseded) a registry remembers so that late chunks and
	// retransmitted Restores of them are recognised. Default 4096.
	Remember int
}

// Normalize returns l with defaults applied, or an error wrapping
// ErrInvalid when a set value is out of range.
func (l Limits) Normalize() (Limits, error) {
	if l.MaxPayload == 0 {
		l.MaxPayload = DefaultMaxPayload
	}
	if l.MaxBody == 0 {
		l.MaxBody = l.MaxPayload
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = max(DefaultMaxInFlight, l.MaxPayload)
	}
	if l.MaxOpen == 0 {
		l.MaxOpen = DefaultMaxOpen
	}
	if l.Remember == 0 {
		l.Remember = DefaultRemember
	}
	switch {
	case l.MaxPayload > MaxPayloadBound:
		return l, fmt.Errorf("%w: limits: MaxPayload %d above %d", ErrInvalid, l.MaxPayload, MaxPayloadBound)
	case l.MaxBody > MaxPayloadBound:
		return l, fmt.Errorf("%w: limits: MaxBody %d above %d", ErrInvalid, l.MaxBody, MaxPayloadBound)
	case l.MaxInFlight < l.MaxPayload:
		return l, fmt.Errorf("%w: limits: MaxInFlight %d below MaxPayload %d", ErrInvalid, l.MaxInFlight, l.MaxPayload)
	case l.MaxOpen < 0:
		return l, fmt.Errorf("%w: limits: MaxOpen %d negative", ErrInvalid, l.MaxOpen)
	case l.Remember < 0:
		return l, fmt.Errorf("%w: limits: Remember %d negative", ErrInvalid, l.Remember)
	}
	return l, nil
}

package chunk

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Codec is how the body of a payload is stored; the payload header records
// it so that Decode knows (docs/RESTORE-PAYLOAD.md §2).
type Codec uint8

// Body codecs.
const (
	// CodecRaw stores the body as is.
	CodecRaw Codec = 0
	// CodecS2 stores the body as one S2 block (klauspost/compress/s2),
	// whose leading varint is the body length.
	CodecS2 Codec = 1
	// CodecZstd stores the body as one zstd frame (SpeedFastest, no frame
	// checksum: the Restore request's CRC-32C covers the whole payload).
	CodecZstd Codec = 2
)

func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecS2:
		return "s2"
	case CodecZstd:
		return "zstd"
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

// Compression is the source's choice of body codec. Measurements
// (BenchmarkCodec, docs/RESTORE-PAYLOAD.md §6) show that compressing only
// shortens a handoff on links slower than the compressor, so the default
// is no compression and the others are opt-in per deployment.
type Compression uint8

// Compression choices. A compressing choice tries its codec on a body of
// at least AutoMinBody bytes and keeps the result only when it saves at
// least 1/8 of the body (or when only the compressed form fits
// MaxPayload); otherwise the body is stored raw.
const (
	// CompressNone stores every body raw. The default.
	CompressNone Compression = iota
	// CompressS2 uses S2: ~2.6× smaller JSON-like bodies; it shortened a
	// handoff only on links below ~1.2–1.4 Gbit/s in the measurements.
	CompressS2
	// CompressZstd uses zstd: ~4× smaller JSON-like bodies at less than
	// half of S2's speed; it shortened a handoff only on links below
	// ~0.55–0.6 Gbit/s.
	CompressZstd
)

func (c Compression) String() string {
	switch c {
	case CompressNone:
		return "none"
	case CompressS2:
		return "s2"
	case CompressZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// AutoMinBody is the smallest body a compressing choice tries: below it
// the bytes saved are too few to matter next to a record's overhead.
const AutoMinBody = 4 << 10

// zstdWindow is the encoder's window and the largest window the decoder
// accepts, which bounds the decoder's memory for any input.
const zstdWindow = 8 << 20

// zstdMaxRatio bounds how many body bytes one input byte of a zstd frame can
// produce: a block yields at most 128 KiB and costs at least 4 bytes (an RLE
// block). A declared body length above len(frame)*zstdMaxRatio cannot be
// genuine, so Decode rejects it before allocating the body.
const zstdMaxRatio = (128 << 10) / 4

// The zstd encoder and decoder are built once: both are safe for concurrent
// EncodeAll / DecodeAll and are costly to create.
var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(zstdWindow),
			zstd.WithEncoderCRC(false),
			zstd.WithZeroFrames(true),
		)
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxWindow(zstdWindow),
			zstd.WithDecoderMaxMemory(MaxPayloadBound),
			// DecodeAll never writes past cap(dst), which Decode sets to the
			// checked body length: output can neither grow nor reallocate.
			zstd.WithDecodeAllCapLimit(true),
		)
	})
)

// compress returns header followed by body in codec c, in a new buffer.
// ok is false when the codec cannot take a body this large (S2 blocks stop
// at 4 GiB); the caller then keeps the raw form.
func compress(c Codec, header, body []byte) (out []byte, ok bool, err error) {
	switch c {
	case CodecS2:
		n := s2.MaxEncodedLen(len(body))
		if n < 0 {
			return nil, false, nil
		}
		out = make([]byte, len(header)+n)
		copy(out, header)
		z := s2.Encode(out[len(header):], body)
		return out[:len(header)+len(z)], true, nil
	case CodecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, false, fmt.Errorf("chunk: zstd encoder: %w", err)
		}
		out = make([]byte, len(header), len(header)+len(body)/2)
		copy(out, header)
		return enc.EncodeAll(body, out), true, nil
	}
	return nil, false, nil
}

// decompress decodes a compressed body into a fresh buffer of exactly n
// bytes. n has been checked against the limits; before the buffer is
// allocated, the length the compressed form itself declares must equal n.
func decompress(c Codec, src []byte, n uint64, off int) ([]byte, error) {
	ferr := func(detail string) error {
		return &FormatError{Kind: ErrCorrupt, Field: "body", Offset: off, Detail: c.String() + ": " + detail}
	}
	switch c {
	case CodecS2:
		dl, err := s2.DecodedLen(src)
		if err != nil {
			return nil, ferr(err.Error())
		}
		if uint64(dl) != n {
			return nil, ferr(fmt.Sprintf("block length %d differs from body length %d", dl, n))
		}
		out, err := s2.Decode(make([]byte, n), src)
		if err != nil {
			return nil, ferr(err.Error())
		}
		return out, nil
	case CodecZstd:
		var h zstd.Header
		if err := h.Decode(src); err != nil {
			return nil, ferr("frame header: " + err.Error())
		}
		// A frame may omit its content size (zstd does for bodies below
		// 256 bytes); when it declares one, it must be the body length.
		if h.Skippable || h.HasFCS && h.FrameContentSize != n {
			return nil, ferr(fmt.Sprintf("frame content size %d differs from body length %d", h.FrameContentSize, n))
		}
		if n > uint64(len(src))*zstdMaxRatio {
			return nil, ferr(fmt.Sprintf("body length %d impossible from a %d-byte frame", n, len(src)))
		}
		dec, err := zstdDecoder()
		if err != nil {
			return nil, fmt.Errorf("chunk: zstd decoder: %w", err)
		}
		out, err := dec.DecodeAll(src, make([]byte, 0, n))
		if err != nil {
			return nil, ferr(err.Error())
		}
		if uint64(len(out)) != n {
			return nil, ferr(fmt.Sprintf("decoded %d bytes, body length is %d", len(out), n))
		}
		return out, nil
	}
	return nil, ferr("not a compressed codec")
}

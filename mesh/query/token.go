package query

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"
)

// Continuation token layout (before unpadded base64url):
//
//	format (1 byte): tokenCursor, tokenKeptCursor or tokenKeptRows
//	request fingerprint (16 bytes): SHA-256 of the filters, so a token is
//	    refused for another Kind / StableType / MeshName
//	snapshot time (8 bytes, big-endian int64 Unix ms): Page.SnapshotAt
//	page number (4 bytes, big-endian): of the page the token leads to
//	then, by format:
//	    tokenCursor: the store cursor (1..maxInlineCursor bytes, verbatim)
//	    tokenKeptCursor: SHA-256 of the store cursor (32 bytes), which List
//	        kept in the Location Store (see kept.go)
//	    tokenKeptRows: SHA-256 of the kept rows (32 bytes), then the index
//	        of the first row of the next page (4 bytes, big-endian)
//	checksum (8 bytes): SHA-256 of everything before it
//
// The checksum catches a token that was cut, edited or mistyped before
// anything is sent to the store. It is not a secret-keyed MAC and need not
// be: the only state the store trusts is its own cursor, which the
// providers authenticate themselves (an edited cursor is ScanExpired), and
// the rest only selects what this process reports. Kept state is found by
// its digest and checked against it.
const (
	tokenCursor     = 1
	tokenKeptCursor = 2
	tokenKeptRows   = 3

	fingerprintBytes = 16
	checksumBytes    = 8
	tokenHeaderBytes = 1 + fingerprintBytes + 8 + 4
	digestBytes      = sha256.Size
)

// MaxContinuationBytes bounds a continuation token, whatever the store's
// cursor: §6.2 and §12 bound a list read's next-page value at 4,096 bytes.
// Real tokens are far shorter (about 110 characters on the memory
// provider, at most about 1,930 on Redis), because the providers' cursors
// are.
const MaxContinuationBytes = 4096

// maxInlineCursor is the longest store cursor a token carries itself: the
// bytes MaxContinuationBytes base64url characters hold (3,072) less the
// token's own 37. A longer cursor — the SPI allows 4,096 bytes — is kept in
// the store instead (tokenKeptCursor), so the token stays within the bound.
const maxInlineCursor = MaxContinuationBytes*6/8 - tokenHeaderBytes - checksumBytes // 3,035

type token struct {
	format      byte
	fingerprint [fingerprintBytes]byte
	snapshotAt  time.Time
	page        uint32
	// cursor is the store cursor (tokenCursor; tokenKeptCursor once
	// recalled, see List).
	cursor string
	// digest names the kept value (tokenKeptCursor, tokenKeptRows).
	digest [digestBytes]byte
	// next is the index in the kept rows of the next page's first row
	// (tokenKeptRows).
	next uint32
}

// encode writes the token. The caller keeps a tokenCursor cursor within
// maxInlineCursor (Reader.continuation).
func (t token) encode() string {
	b := make([]byte, 0, tokenHeaderBytes+len(t.cursor)+digestBytes+4+checksumBytes)
	b = append(b, t.format)
	b = append(b, t.fingerprint[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(t.snapshotAt.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, t.page)
	switch t.format {
	case tokenCursor:
		b = append(b, t.cursor...)
	case tokenKeptCursor:
		b = append(b, t.digest[:]...)
	case tokenKeptRows:
		b = append(b, t.digest[:]...)
		b = binary.BigEndian.AppendUint32(b, t.next)
	}
	sum := sha256.Sum256(b)
	b = append(b, sum[:checksumBytes]...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseToken checks a token and that it belongs to the request with
// fingerprint fp. Every refusal is ErrInvalidContinuation.
func parseToken(s string, fp [fingerprintBytes]byte) (token, error) {
	bad := func(reason string) (token, error) {
		return token{}, fmt.Errorf("%w: %s", ErrInvalidContinuation, reason)
	}
	if len(s) > MaxContinuationBytes {
		return bad(fmt.Sprintf("%d bytes, limit %d", len(s), MaxContinuationBytes))
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return bad("not unpadded base64url")
	}
	if len(b) < tokenHeaderBytes+1+checksumBytes {
		return bad("too short")
	}
	body, sum := b[:len(b)-checksumBytes], b[len(b)-checksumBytes:]
	want := sha256.Sum256(body)
	if !bytes.Equal(sum, want[:checksumBytes]) {
		return bad("checksum mismatch (the token was altered or cut)")
	}
	t := token{format: body[0]}
	copy(t.fingerprint[:], body[1:1+fingerprintBytes])
	if t.fingerprint != fp {
		return bad("issued for another list request (kind, type or mesh differ)")
	}
	rest := body[1+fingerprintBytes:]
	t.snapshotAt = time.UnixMilli(int64(binary.BigEndian.Uint64(rest[:8]))).UTC()
	t.page = binary.BigEndian.Uint32(rest[8:12])
	tail := rest[12:]
	switch t.format {
	case tokenCursor:
		t.cursor = string(tail)
	case tokenKeptCursor:
		if len(tail) != digestBytes {
			return bad("wrong length")
		}
		copy(t.digest[:], tail)
	case tokenKeptRows:
		if len(tail) != digestBytes+4 {
			return bad("wrong length")
		}
		copy(t.digest[:], tail)
		t.next = binary.BigEndian.Uint32(tail[digestBytes:])
	default:
		return bad(fmt.Sprintf("unknown format %d", t.format))
	}
	return t, nil
}

// fingerprint identifies a list request's filters. Names never contain NUL
// (record rules), so the NUL-joined form is unambiguous; an absent optional
// filter is the empty string, which no valid name is.
func fingerprint(r ListRequest) [fingerprintBytes]byte {
	h := sha256.New()
	h.Write([]byte("meshnode-query-list-v1\x00"))
	h.Write([]byte(r.Kind))
	h.Write([]byte{0})
	h.Write([]byte(r.StableType))
	h.Write([]byte{0})
	h.Write([]byte(r.MeshName))
	var fp [fingerprintBytes]byte
	copy(fp[:], h.Sum(nil))
	return fp
}

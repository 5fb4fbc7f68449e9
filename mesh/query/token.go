package query

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// Continuation token layout (before unpadded base64url):
//
//	format (1 byte, tokenFormat)
//	request fingerprint (16 bytes): SHA-256 of the filters, so a token is
//	    refused for another Kind / StableType / MeshName
//	snapshot time (8 bytes, big-endian int64 Unix ms): Page.SnapshotAt
//	page number (4 bytes, big-endian): of the page the token leads to
//	store cursor (1..locstore.MaxCursorBytes bytes, verbatim)
//	checksum (8 bytes): SHA-256 of everything before it
//
// The checksum catches a token that was cut, edited or mistyped before
// anything is sent to the store. It is not a secret-keyed MAC and need not
// be: the only state the store trusts is its own cursor, which the
// providers authenticate themselves (an edited cursor is ScanExpired), and
// the rest only selects what this process reports.
const (
	tokenFormat      = 1
	fingerprintBytes = 16
	checksumBytes    = 8
	tokenHeaderBytes = 1 + fingerprintBytes + 8 + 4
)

// MaxContinuationBytes bounds a continuation token: the store's cursor
// bound (locstore.MaxCursorBytes = 4,096) plus this package's 37 bytes,
// base64url-encoded. Real tokens are far shorter (about 110 characters on
// the memory provider, 250-350 on Redis), because the providers' cursors
// are.
const MaxContinuationBytes = ((tokenHeaderBytes+locstore.MaxCursorBytes+checksumBytes)*8 + 5) / 6 // unpadded base64 length: 5,511

type token struct {
	fingerprint [fingerprintBytes]byte
	snapshotAt  time.Time
	page        uint32
	cursor      string
}

func (t token) encode() string {
	b := make([]byte, 0, tokenHeaderBytes+len(t.cursor)+checksumBytes)
	b = append(b, tokenFormat)
	b = append(b, t.fingerprint[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(t.snapshotAt.UnixMilli()))
	b = binary.BigEndian.AppendUint32(b, t.page)
	b = append(b, t.cursor...)
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
	if body[0] != tokenFormat {
		return bad(fmt.Sprintf("unknown format %d", body[0]))
	}
	var t token
	copy(t.fingerprint[:], body[1:1+fingerprintBytes])
	if t.fingerprint != fp {
		return bad("issued for another list request (kind, type or mesh differ)")
	}
	rest := body[1+fingerprintBytes:]
	t.snapshotAt = time.UnixMilli(int64(binary.BigEndian.Uint64(rest[:8]))).UTC()
	t.page = binary.BigEndian.Uint32(rest[8:12])
	t.cursor = string(rest[12:])
	if len(t.cursor) > locstore.MaxCursorBytes {
		return bad("store cursor too long")
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

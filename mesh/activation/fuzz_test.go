package activation

import (
	"bytes"
	"testing"
)

// FuzzDecode checks that an activation record (a stored first message,
// read back by recovery) never panics on arbitrary bytes — a corrupt value
// is ErrMalformed or ErrTooLarge — and that what decodes encodes to bytes
// that decode to the same encoding. `go test` runs the seeds; `go test
// -fuzz FuzzDecode` explores further.
func FuzzDecode(f *testing.F) {
	good, err := sample().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add(good[:len(magic)+4])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		enc, err := r.Encode()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		enc2, err := again.Encode()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the encoding (%v)", err)
		}
	})
}

package curve

// Z85 (ZeroMQ RFC 32): 4 bytes ↔ 5 printable characters, big endian.

const z85Alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

// z85Value maps a character to its value, or 0xFF when it is not in the
// alphabet.
var z85Value = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for i := 0; i < len(z85Alphabet); i++ {
		t[z85Alphabet[i]] = byte(i)
	}
	return t
}()

// Z85Encode encodes b, whose length must be a multiple of 4.
func Z85Encode(b []byte) (string, error) {
	if len(b)%4 != 0 {
		return "", malformed("z85: %d bytes is not a multiple of 4", len(b))
	}
	out := make([]byte, 0, len(b)/4*5)
	for i := 0; i < len(b); i += 4 {
		v := uint32(b[i])<<24 | uint32(b[i+1])<<16 | uint32(b[i+2])<<8 | uint32(b[i+3])
		var chunk [5]byte
		for j := 4; j >= 0; j-- {
			chunk[j] = z85Alphabet[v%85]
			v /= 85
		}
		out = append(out, chunk[:]...)
	}
	return string(out), nil
}

// Z85Decode decodes s, whose length must be a multiple of 5. A group whose
// value exceeds 2^32-1 (possible with "#####") is refused rather than
// wrapped, so every string has at most one meaning.
func Z85Decode(s string) ([]byte, error) {
	if len(s)%5 != 0 {
		return nil, malformed("z85: %d characters is not a multiple of 5", len(s))
	}
	out := make([]byte, 0, len(s)/5*4)
	for i := 0; i < len(s); i += 5 {
		var v uint64
		for j := range 5 {
			d := z85Value[s[i+j]]
			if d == 0xFF {
				// The position only: the text may be a secret key, and
				// this error may reach a log.
				return nil, malformed("z85: invalid character at %d", i+j)
			}
			v = v*85 + uint64(d)
		}
		if v > 0xFFFFFFFF {
			return nil, malformed("z85: group at %d overflows 32 bits", i)
		}
		out = append(out, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
	return out, nil
}

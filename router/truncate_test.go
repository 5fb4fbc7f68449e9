package router

import (
	"errors"
	"testing"
)

// TestEveryFrameRejectsTruncationAndTrailingBytes: for random valid records
// of every spoken command, each frame cut short at every length, and each
// frame with one byte more, is refused with a typed *ProtocolError — never
// a panic, never a record. The one exception is frame 0 of an ok reply,
// whose request-specific tail is the rest of the frame (its length is
// checked when the requester resolves it, TestResolveReplyTail).
func TestEveryFrameRejectsTruncationAndTrailingBytes(t *testing.T) {
	for _, cmd := range Commands() {
		t.Run(cmd.String(), func(t *testing.T) {
			g := newGen(uint64(cmd) * 104729)
			for i := range 40 {
				s := g.record(cmd)
				frames, err := Encode(s.rec)
				if err != nil {
					t.Fatal(err)
				}
				openTail := false
				if rep, ok := s.rec.Body.(*Reply); ok && rep.Result == ResultOK {
					openTail = true
				}
				for fi := range frames {
					if fi == 0 && openTail {
						continue
					}
					check := func(what string, f []byte, want ...ErrorKind) {
						t.Helper()
						mod := append([][]byte(nil), frames...)
						mod[fi] = f
						r, err := Decode(mod)
						var pe *ProtocolError
						if r != nil || !errors.As(err, &pe) {
							t.Fatalf("#%d frame %d %s: got %v, %v", i, fi, what, r, err)
						}
						for _, k := range want {
							if pe.Kind == k {
								return
							}
						}
						if len(want) > 0 {
							t.Fatalf("#%d frame %d %s: kind %s (%v), want one of %v", i, fi, what, pe.Kind, pe, want)
						}
					}
					f := frames[fi]
					for n := range len(f) {
						check("cut to "+itoa(n), f[:n:n])
					}
					check("one byte more", append(append([]byte(nil), f...), 0), TrailingBytes, BoundExceeded)
				}
			}
		})
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestEverySingleByteChangeIsTypedOrCanonical: boundary values (0, 1, max,
// ±1, high bit flipped) of every byte of every frame of valid records of each command either fails to decode with
// a typed *ProtocolError or decodes to a record that encodes back to exactly
// the changed frames (so an undefined enum, a zero generation or a bad
// length never slips through as a record the node then cannot send again).
func TestEverySingleByteChangeIsTypedOrCanonical(t *testing.T) {
	for _, cmd := range Commands() {
		t.Run(cmd.String(), func(t *testing.T) {
			s := newGen(uint64(cmd) * 15485863).record(cmd)
			frames, err := Encode(s.rec)
			if err != nil {
				t.Fatal(err)
			}
			for fi, f := range frames {
				if len(f) > 1024 {
					f = f[:1024] // the head and fixed fields are what matter
				}
				for pos := range f {
					orig := frames[fi][pos]
					for _, v := range []byte{0, 1, 2, 3, 8, 0x7f, 0x80, 0xfe, 0xff, orig + 1, orig - 1, orig ^ 0x80} {
						if v == orig {
							continue
						}
						mod := append([][]byte(nil), frames...)
						mod[fi] = append([]byte(nil), frames[fi]...)
						mod[fi][pos] = v
						r, err := Decode(mod)
						if err != nil {
							var pe *ProtocolError
							if r != nil || !errors.As(err, &pe) {
								t.Fatalf("frame %d byte %d = %d: %T %v", fi, pos, v, err, err)
							}
							continue
						}
						again, err := Encode(r)
						if err != nil || !framesEqual(again, mod) {
							t.Fatalf("frame %d byte %d = %d: accepted but re-encodes to %x, %v", fi, pos, v, again, err)
						}
					}
				}
			}
		})
	}
}

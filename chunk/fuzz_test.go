package chunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// FuzzDecode: Decode never panics, and whatever it accepts is a payload
// Encode accepts too and that decodes again to the same thing.
func FuzzDecode(f *testing.F) {
	g, _ := Encode(goldenPayload(), EncodeOptions{})
	f.Add(g)
	f.Add([]byte{})
	f.Add([]byte(Magic))
	f.Add(g[:gHeaderLen])
	if sg, err := Encode(sessionsPayload(), EncodeOptions{}); err == nil {
		f.Add(sg)
	}
	rng := newRand(17)
	for i := 0; i < 12; i++ {
		p := randPayload(rng)
		if i%3 == 0 {
			p.State = append(p.State, bytes.Repeat([]byte("redundant "), 600)...)
			p.Policy = spot.PolicyPreserveState
		}
		b, err := Encode(p, allEncodings[i%len(allEncodings)])
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	lim := Limits{MaxPayload: 1 << 20, MaxBody: 4 << 20}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b, lim)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		again, err := Encode(p, EncodeOptions{Limits: lim})
		if err != nil {
			t.Fatalf("decoded payload does not encode: %v", err)
		}
		q, err := Decode(again, lim)
		if err != nil {
			t.Fatalf("re-encoded payload does not decode: %v", err)
		}
		equalPayload(t, p, q)
	})
}

// Operations of FuzzAssembler, one byte each plus an argument byte.
const (
	opBegin = iota
	opBeginOther
	opAdd
	opAddCorrupt
	opAddShort
	opComplete
	opAbort
	opAddPrevious
	numOps
)

// FuzzAssembler feeds a registry arbitrary sequences of Restores, chunks
// (true, corrupted, short, repeated, misplaced, under four bindings),
// completions and aborts. It must never panic, never hand out bytes whose
// length and CRC-32C differ from what that binding declared, hand out
// exactly the payload whenever only true chunks were linked, and never
// exceed or leak its memory budget.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0, 0x10, 0x00, opBegin, 0, opAdd, 0, opAdd, 1, opAdd, 2, opComplete, 0})
	f.Add([]byte{1, 0x08, 0x01, opBegin, 0, opAdd, 0, opBegin, 1, opAdd, 1, opAdd, 0, opAbort, 1, opComplete, 1})
	f.Add([]byte{2, 0x20, 0x00, opBegin, 0, opAddCorrupt, 0, opAdd, 1, opComplete, 0, opBegin, 0})
	f.Add([]byte{0, 0x00, 0x00, opBegin, 2, opComplete, 2, opBeginOther, 2, opAddPrevious, 1})
	f.Add([]byte{3, 0xff, 0x1f, opBegin, 3, opBegin, 0, opBegin, 1, opBegin, 2, opAddShort, 0, opAdd, 0, opAdd, 1})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 3 {
			return
		}
		sizes := []int{MinChunkSize, 1500, 4096, 3333}
		size := sizes[int(in[0])%len(sizes)]
		n := int(binary.LittleEndian.Uint16(in[1:3])) % (12 << 10)
		payload := randBytes(newRand(uint64(n)), n)
		tr, err := Split(payload, size)
		if err != nil {
			t.Fatal(err)
		}
		bindings := []Binding{testBinding(1, 1), testBinding(1, 2), testBinding(2, 1), testBinding(1, 1)}
		bindings[3].Source.LeaseGeneration++
		other := func(d Declaration, k byte) Declaration {
			switch k % 3 {
			case 0:
				d.CRC32C ^= 1
			case 1:
				d.Length++
			default:
				d.Count++
			}
			return d
		}
		lim := Limits{MaxPayload: 64 << 10, MaxInFlight: 64 << 10, MaxOpen: 3, Remember: 2}
		r := newReg(t, lim)
		declared := map[Binding]Declaration{}
		tainted := map[Binding]bool{}
		chunk := func(i int) []byte {
			if len(tr.Chunks) == 0 {
				return []byte{1}
			}
			return tr.Chunks[i%len(tr.Chunks)]
		}
		ops := in[3:]
		for k := 0; k+1 < len(ops); k += 2 {
			op, arg := ops[k]%numOps, ops[k+1]
			b := bindings[arg%4]
			idx := int(arg >> 2)
			switch op {
			case opBegin, opBeginOther:
				d := tr.Declaration
				if op == opBeginOther {
					d = other(d, arg>>2)
				}
				g, err := r.Begin(b, d)
				if err == nil && g.Status == Started {
					declared[b] = d
					tainted[b] = d != tr.Declaration
				}
			case opAdd, opAddCorrupt, opAddShort, opAddPrevious:
				c := chunk(idx)
				switch op {
				case opAddCorrupt:
					c = append([]byte(nil), c...)
					c[int(arg)%len(c)] ^= 1 << (arg % 8)
				case opAddShort:
					c = c[:len(c)/2]
				case opAddPrevious:
					c = chunk(idx + len(tr.Chunks) - 1)
				}
				_, err := r.Add(b, uint32(idx), c)
				if err == nil && op != opAdd {
					tainted[b] = true
				}
			case opComplete:
				out, err := r.Complete(b)
				if err != nil {
					if out != nil {
						t.Fatalf("Complete returned bytes with an error: %v", err)
					}
					break
				}
				d := declared[b]
				if uint64(len(out)) != d.Length || router.CRC32C(out) != d.CRC32C {
					t.Fatalf("unverified payload handed out: %d bytes crc %08x, declared %+v", len(out), router.CRC32C(out), d)
				}
				if !tainted[b] && !bytes.Equal(out, payload) {
					t.Fatal("only true chunks were linked but the payload differs")
				}
			case opAbort:
				r.Abort(b)
			}
			if s := r.Stats(); s.InFlightBytes > lim.MaxInFlight || s.Open > lim.MaxOpen || s.Remembered > lim.Remember {
				t.Fatalf("budget exceeded: %+v", s)
			}
		}
		for _, b := range bindings {
			r.Abort(b)
		}
		if s := r.Stats(); s.Open != 0 || s.InFlightBytes != 0 {
			t.Fatalf("state left after aborting every binding: %+v", s)
		}
	})
}

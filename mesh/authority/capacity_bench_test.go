package authority

import (
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// BenchmarkDecodeCapacity decodes the capacity rows a creation reads: the
// node-wide actors counter and a per-(Spot kind, stable type) counter.
func BenchmarkDecodeCapacity(b *testing.B) {
	node := Node{MeshName: "game", RoutingID: []byte{0x00, 0x6b, 0x8b, 0x45, 0x67}, LifecycleGeneration: 1}
	cases := []struct {
		name string
		id   CounterID
	}{
		{"actors", actorsOf(node)},
		{"spotType", spotTypeOf(node, record.ObjectUserSpot, "Room")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			v, err := EncodeCapacity(c.id, MeasureSecured, 1210)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(v)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, _, err := DecodeCapacity(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCapacityFastPathAgrees pins DecodeCapacity's fast path to the strict
// one: it takes the canonical values, and whatever it accepts (among
// single-byte edits of them) the strict path accepts with the same result.
func TestCapacityFastPathAgrees(t *testing.T) {
	node := Node{MeshName: "game", RoutingID: []byte{0x0a, 0x01}, LifecycleGeneration: 3}
	ids := []CounterID{actorsOf(node), spotsOf(node), spotTypeOf(node, record.ObjectInstanceSpot, "Room"),
		spotTypeOf(Node{MeshName: "é", RoutingID: []byte{0xff}, LifecycleGeneration: 1<<63 - 1}, record.ObjectUserSpot, "a\"b")}
	edits := []byte{'0', '1', '9', 'a', 'A', '"', '\\', ' ', 'n', ':', ',', '}', 0x00, 0xff}
	for _, id := range ids {
		for _, u := range []struct {
			m Measure
			n int
		}{{MeasureSecured, 0}, {MeasureActive, 1207}, {MeasureSecured, record.MaxSlots}} {
			want, err := EncodeCapacity(id, u.m, u.n)
			if err != nil {
				t.Fatal(err)
			}
			plain := id.StableType != "a\"b" && id.Node.LifecycleGeneration < 1e18
			if _, _, _, ok := decodeCanonicalCapacity(want); ok != plain {
				t.Errorf("fast path on %s: ok=%v, want %v", want, ok, plain)
			}
			for i := range want {
				for _, e := range append(edits, 0) { // 0 with i: delete byte i
					v := append([]byte(nil), want...)
					if e == 0 {
						v = append(v[:i], v[i+1:]...)
					} else {
						v[i] = e
					}
					fid, fm, fn, ok := decodeCanonicalCapacity(v)
					if !ok {
						continue
					}
					sid, sm, sn, err := decodeCapacityStrict(v)
					if err != nil || !sid.equal(fid) || sm != fm || sn != fn {
						t.Fatalf("%s: fast path %v %v %d, strict path %v %v %d %v", v, fid, fm, fn, sid, sm, sn, err)
					}
				}
			}
		}
	}
}

// BenchmarkReservationCodec encodes and decodes the reservation a move of
// an Actor secures (one encode on the source's SecureCapacity, one decode
// per read of the row: the target's NewOwner and the source's release).
func BenchmarkReservationCodec(b *testing.B) {
	r := reservationOf(Object{ID: "h-4711", Kind: record.ObjectActor, StableType: "Blob"}, 1207, "1733400000000-42")
	v, err := r.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeReservation(v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

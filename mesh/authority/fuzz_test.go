package authority

import (
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// FuzzDecodeStoredRows checks that the package's own stored rows — the
// creation terminal record, the relocation reservation and a capacity row —
// never panic on arbitrary bytes (a corrupt or foreign value in the store
// must be a typed error), and that what decodes encodes again and decodes
// to the same encoding. `go test` runs the seeds; `go test -fuzz
// FuzzDecodeStoredRows` explores further.
func FuzzDecodeStoredRows(f *testing.F) {
	term, err := TerminalRecord{Operation: sampleOperation(), RequestSHA256: [32]byte{1}, ID: "user:42", ObjectKind: record.ObjectActor,
		StableType: "Player", Outcome: OutcomeCreated, Reply: []byte("hi"), Deadline: 1752000010000, RecordedAt: 1752000000000,
		Ref: &CreatedRef{ObjectGeneration: 101, AuthorityOwnerGeneration: 1, MeshName: "game", RoutingID: []byte{0x0a, 0x01}}}.Encode()
	if err != nil {
		f.Fatal(err)
	}
	res, err := reservationOf(Object{ID: "user:42", Kind: record.ObjectActor, StableType: "Player"}, 7, "v1").Encode()
	if err != nil {
		f.Fatal(err)
	}
	capRow, err := EncodeCapacity(actorsOf(nodeA), MeasureSecured, 3)
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range [][]byte{term, res, capRow} {
		for kind := range uint8(3) {
			f.Add(kind, v)
			f.Add(kind, v[:len(v)/2])
		}
	}
	f.Add(uint8(0), []byte("null"))
	f.Add(uint8(1), []byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, kind uint8, value []byte) {
		switch kind % 3 {
		case 0:
			r, err := DecodeTerminal(value)
			if err != nil {
				return
			}
			roundTrip(t, "terminal", r.Encode, func(b []byte) (func() ([]byte, error), error) {
				again, err := DecodeTerminal(b)
				return again.Encode, err
			})
		case 1:
			r, err := DecodeReservation(value)
			if err != nil {
				return
			}
			roundTrip(t, "reservation", r.Encode, func(b []byte) (func() ([]byte, error), error) {
				again, err := DecodeReservation(b)
				return again.Encode, err
			})
		case 2:
			id, m, n, err := DecodeCapacity(value)
			if err != nil {
				return
			}
			enc := func() ([]byte, error) { return EncodeCapacity(id, m, n) }
			roundTrip(t, "capacity", enc, func(b []byte) (func() ([]byte, error), error) {
				id, m, n, err := DecodeCapacity(b)
				return func() ([]byte, error) { return EncodeCapacity(id, m, n) }, err
			})
		}
	})
}

// roundTrip encodes a decoded row, decodes that encoding and checks that
// it encodes to the same bytes again.
func roundTrip(t *testing.T, what string, encode func() ([]byte, error), decode func([]byte) (func() ([]byte, error), error)) {
	t.Helper()
	b, err := encode()
	if err != nil {
		t.Fatalf("decoded %s row does not encode: %v", what, err)
	}
	again, err := decode(b)
	if err != nil {
		t.Fatalf("re-encoded %s row does not decode: %v\n%s", what, err, b)
	}
	b2, err := again()
	if err != nil || string(b2) != string(b) {
		t.Fatalf("%s round trip changed the encoding (%v):\n%s\n%s", what, err, b, b2)
	}
}

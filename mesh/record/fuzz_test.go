package record_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// FuzzDecode checks, for every record kind, that decoding arbitrary bytes
// never panics and that whatever decodes re-encodes to a canonical value
// that decodes to the same record. `go test` runs the seeds (the fixture's
// values and rejects); `go test -fuzz FuzzDecode` explores further.
func FuzzDecode(f *testing.F) {
	fx := loadFixture(f)
	kinds := []record.Kind{record.KindMeshNode, record.KindOwnerLease, record.KindClientServer, record.KindFanoutPublisher, record.KindAuthority, record.KindCounter}
	kindIndex := map[string]uint8{}
	for i, k := range kinds {
		kindIndex[string(k)] = uint8(i)
	}
	for _, r := range fx.Records {
		f.Add(kindIndex[r.Kind], []byte(r.Value))
	}
	for _, r := range fx.RejectedValues {
		f.Add(kindIndex[r.Kind], r.bytes(f))
	}
	for _, r := range fx.NonCanonicalValues {
		f.Add(kindIndex[r.Kind], []byte(r.Value))
	}
	f.Fuzz(func(t *testing.T, k uint8, value []byte) {
		kind := string(kinds[int(k)%len(kinds)])
		rec, err := decodeAny(kind, value)
		if err != nil {
			return
		}
		enc, err := reEncode(rec)
		if err != nil {
			t.Fatalf("decoded %s record does not encode: %v\nvalue %q", kind, err, value)
		}
		if err := record.CheckCanonical(record.Kind(kind), enc); err != nil {
			t.Fatalf("re-encoded value is not canonical: %v\n%s", err, enc)
		}
		again, err := decodeAny(kind, enc)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v\n%s", err, enc)
		}
		if !reflect.DeepEqual(normalize(again), normalize(rec)) {
			t.Fatalf("round trip changed the record\n before %#v\n after  %#v", rec, again)
		}
	})
}

func reEncode(rec any) ([]byte, error) {
	switch r := rec.(type) {
	case record.MeshNodeDescriptor:
		return r.Encode()
	case record.OwnerLease:
		return r.Encode()
	case record.ClientServerDescriptor:
		return r.Encode()
	case record.FanoutPublisherDescriptor:
		return r.Encode()
	case record.Authority:
		return r.Encode()
	case record.Counter:
		return r.Encode()
	}
	return nil, fmt.Errorf("unknown record type %T", rec)
}

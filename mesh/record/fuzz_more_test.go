package record_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

// FuzzDecodeJournalAndRemoved covers the two kinds FuzzDecode leaves out:
// the descriptor journal and the removed-MeshNode record. Decoding arbitrary
// bytes never panics, fails only with the package's typed errors, and what
// decodes re-encodes canonically to a value that decodes to the same record.
func FuzzDecodeJournalAndRemoved(f *testing.F) {
	k1, _ := record.MeshNodeKey("m", []byte{1})
	k2, _ := record.MeshNodeKey("m", []byte{2})
	j, err := record.DescriptorJournal{}.Append(5, k1).Append(6, k2).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), j)
	f.Add(uint8(0), []byte(`{"changes":[],"recordVersion":1}`))
	rm, err := validRemoved().Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(1), rm)
	f.Add(uint8(1), rm[:len(rm)/2])
	f.Fuzz(func(t *testing.T, k uint8, value []byte) {
		var (
			kind   record.Kind
			rec    any
			err    error
			encode func(any) ([]byte, error)
			decode func([]byte) (any, error)
		)
		if k%2 == 0 {
			kind = record.KindDescriptorJournal
			decode = func(b []byte) (any, error) { return record.DecodeDescriptorJournal(b) }
			encode = func(r any) ([]byte, error) { return r.(record.DescriptorJournal).Encode() }
		} else {
			kind = record.KindRemovedMeshNode
			decode = func(b []byte) (any, error) { return record.DecodeRemovedMeshNode(b) }
			encode = func(r any) ([]byte, error) { return r.(record.RemovedMeshNode).Encode() }
		}
		rec, err = decode(value)
		if err != nil {
			for _, e := range []error{record.ErrInvalidField, record.ErrMalformed, record.ErrUnknownVersion, record.ErrMismatch, record.ErrLimit} {
				if errors.Is(err, e) {
					return
				}
			}
			t.Fatalf("untyped error %T %v", err, err)
		}
		enc, err := encode(rec)
		if err != nil {
			t.Fatalf("decoded %s does not encode: %v\nvalue %q", kind, err, value)
		}
		if err := record.CheckCanonical(kind, enc); err != nil {
			t.Fatalf("re-encoded value is not canonical: %v\n%s", err, enc)
		}
		again, err := decode(enc)
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v\n%s", err, enc)
		}
		if r, ok := rec.(record.RemovedMeshNode); ok {
			r.Descriptor = normalize(r.Descriptor).(record.MeshNodeDescriptor)
			rec = r
			a := again.(record.RemovedMeshNode)
			a.Descriptor = normalize(a.Descriptor).(record.MeshNodeDescriptor)
			again = a
		}
		if !reflect.DeepEqual(again, rec) {
			t.Fatalf("round trip changed the record\n before %#v\n after  %#v", rec, again)
		}
	})
}

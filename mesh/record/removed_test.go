package record_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/mesh/record"
)

func validRemoved() record.RemovedMeshNode {
	return record.RemovedMeshNode{Descriptor: validMeshNode(), RemovedAt: 1_700_000_000_123,
		RemovedByOwnerID: "owner-w", RemovedByRoutingID: []byte{0x0c}}
}

// The removal record nests the removed descriptor record as stored and
// round-trips canonically; its key is the descriptor's inputs under its
// own kind, outside the "mesh-node:" prefix discovery scans.
func TestRemovedMeshNodeCodec(t *testing.T) {
	r := validRemoved()
	v, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	desc, err := r.Descriptor.Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"descriptorRecord":` + string(desc) + `,"recordVersion":1,"removedAtEpochMs":"1700000000123","removedByOwnerId":"owner-w","removedByRoutingIdHex":"0c","trimmed":false}`
	if string(v) != want {
		t.Fatalf("encoding\n%s\nwant\n%s", v, want)
	}
	back, err := record.DecodeRemovedMeshNode(v)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip\n%+v\nwant\n%+v", back, r)
	}
	if err := record.CheckCanonical(record.KindRemovedMeshNode, v); err != nil {
		t.Fatal(err)
	}
	key, err := record.RemovedMeshNodeKey("game", []byte{0xab, 0x01})
	if err != nil || !strings.HasPrefix(key, "removed-mesh-node:") || strings.HasPrefix(key, record.KindPrefix(record.KindMeshNode)) {
		t.Fatalf("key %q %v", key, err)
	}
	if pre, _ := r.Preimage(); record.Key(pre) != key {
		t.Fatalf("Preimage key %s, want %s", record.Key(pre), key)
	}

	bad := []struct {
		name, value string
		want        error
	}{
		{"other version", strings.Replace(want, `"recordVersion":1,"removedAt`, `"recordVersion":2,"removedAt`, 1), record.ErrUnknownVersion},
		{"nested descriptor of another version", strings.Replace(want, `"ownerId":"owner-1","recordVersion":1}`, `"ownerId":"owner-1","recordVersion":2}`, 1), record.ErrUnknownVersion},
		{"nested copies disagree", strings.Replace(want, `"descriptorRevision":"9","leaseGeneration"`, `"descriptorRevision":"8","leaseGeneration"`, 1), record.ErrMismatch},
		{"no remover", strings.Replace(want, `"removedByOwnerId":"owner-w"`, `"removedByOwnerId":""`, 1), record.ErrInvalidField},
		{"remover rid not hex", strings.Replace(want, `"removedByRoutingIdHex":"0c"`, `"removedByRoutingIdHex":"0C"`, 1), record.ErrInvalidField},
		{"no descriptor", `{"recordVersion":1,"removedAtEpochMs":"1","removedByOwnerId":"w","removedByRoutingIdHex":"0c","trimmed":false}`, record.ErrInvalidField},
		{"unknown member", strings.Replace(want, `"trimmed":false}`, `"trimmed":false,"x":1}`, 1), record.ErrInvalidField},
	}
	for _, c := range bad {
		if _, err := record.DecodeRemovedMeshNode([]byte(c.value)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Errors inside the nested descriptor name the member by its path.
	_, err = record.DecodeRemovedMeshNode([]byte(strings.Replace(want, `"limit":10,"objectKind":"userSpot","policy"`, `"limit":"10","objectKind":"userSpot","policy"`, 1)))
	var fe *record.FieldError
	if !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, "descriptorRecord.descriptor.objectCapabilities[1]") {
		t.Fatalf("nested field error %v", err)
	}
}

// A descriptor near the value bound does not fit with the removal's own
// members: Encode says so (ErrLimit) and Trim leaves the lists out, which
// is what the writer then stores.
func TestRemovedMeshNodeTrim(t *testing.T) {
	r := validRemoved()
	r.Descriptor.ChannelWeights = map[string]int{}
	// Each weight is 256 bytes of JSON: fill to within 256 bytes of the
	// bound, counting from the encoded size.
	for i := 0; ; i++ {
		v, err := r.Descriptor.Encode()
		if err != nil {
			t.Fatal(err)
		}
		room := (record.MaxValueBytes - len(v)) / 256
		if room == 0 {
			break
		}
		for j := range room {
			r.Descriptor.ChannelWeights[fmt.Sprintf("%03d-%0246d", i, j)] = 1
		}
	}
	if _, err := r.Encode(); !errors.Is(err, record.ErrLimit) {
		t.Fatalf("a removal of a descriptor at the bound: %v, want ErrLimit", err)
	}
	trimmed := r.Trim()
	v, err := trimmed.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeRemovedMeshNode(v)
	if err != nil || !back.Trimmed || back.Descriptor.ChannelWeights != nil || back.Descriptor.ObjectCapabilities != nil ||
		back.Descriptor.Capacity.SpotTypes != nil || back.Descriptor.Endpoint != r.Descriptor.Endpoint {
		t.Fatalf("trimmed %+v %v", back, err)
	}
	if len(r.Descriptor.ChannelWeights) == 0 {
		t.Fatal("Trim changed its receiver")
	}
}

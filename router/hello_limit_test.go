package router

import (
	"errors"
	"strings"
	"testing"
)

// TestHelloMaxFrameBytes: the largest hello the codec accepts encodes to
// exactly HelloMaxFrameBytes in one frame, and one byte more is refused by
// both Encode and Decode.
func TestHelloMaxFrameBytes(t *testing.T) {
	base := &RouteMeshAdmission{
		MeshName: "m", SecurityIdentity: "s", LifecycleGeneration: 1, DescriptorRevision: 1,
		AdvertisedEndpoint: "tcp://127.0.0.1:1",
		Extension: DescriptorExtension{
			RuntimeState:         RuntimeServing,
			ProtocolCapabilities: []string{RequiredProtocolCapability},
			ObjectRole:           ObjectRoleServer,
			PlacementWeight:      WeightMax,
			ActiveCapacityLimit:  ObjectTypeCapacityMaximum,
		},
	}
	hello := func(pad int) *Record {
		a := *base
		// An unknown extension field (id 200) is kept verbatim: the
		// cheapest way to grow a valid hello byte by byte.
		a.Extension.Unknown = []ExtensionField{{ID: 200, Value: []byte(strings.Repeat("x", pad))}}
		return NewRecord(&Hello{Admission: ServiceAdmission{Topology: TopologyRouteMesh, RouteMesh: &a}}, nil, nil)
	}
	small, err := Encode(hello(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(small) != 1 {
		t.Fatalf("hello has %d frames, want 1", len(small))
	}
	pad := HelloMaxFrameBytes - len(small[0])
	largest, err := Encode(hello(pad))
	if err != nil {
		t.Fatalf("largest hello: %v", err)
	}
	if len(largest[0]) != HelloMaxFrameBytes {
		t.Fatalf("largest hello is %d bytes, want %d", len(largest[0]), HelloMaxFrameBytes)
	}
	if _, err := Decode(largest); err != nil {
		t.Fatalf("decode largest hello: %v", err)
	}
	if _, err := Encode(hello(pad + 1)); !errors.Is(err, ErrProtocol) {
		t.Fatalf("hello one byte over: %v, want a protocol error", err)
	}
	// The same frame grown by one byte inside the declared lengths cannot
	// be decoded either (the declared union length exceeds the bound).
	over := append([]byte(nil), largest[0]...)
	over = append(over, 0)
	if _, err := Decode([][]byte{over}); err == nil {
		t.Fatal("decode of an oversized hello succeeded")
	}
}

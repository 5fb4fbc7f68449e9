package router

import (
	"errors"
	"testing"
)

// TestErrorFieldPaths: an error inside nested objects, vectors and frames
// names the whole path to the field (the path is built on the way out of
// each scope, only when a walk fails). Truncations and byte edits of
// generated records must reach these nested fields with their full paths.
func TestErrorFieldPaths(t *testing.T) {
	want := map[string]bool{
		"admission.routeMesh.advertisedEndpoint":           false, // object in an object in a union
		"admission.clientServer.server.advertisedEndpoint": false,
		"admission.routeMesh.channels.channelName":         false, // vector item
		"binding.source.sourceOwnerId":                     false,
		"payload.packetName":                               false, // payload frame
		"metadata.entries.value":                           false, // metadata frame, vector item
		"reservation.expectedStoreVersion":                 false,
	}
	g := newGen(77)
	for _, cmd := range Commands() {
		for range 6 {
			frames, err := Encode(g.record(cmd).rec)
			if err != nil {
				t.Fatal(err)
			}
			for fi, f := range frames {
				for cut := range len(f) {
					for mode := range 3 {
						cp := append([][]byte(nil), frames...)
						nf := append([]byte(nil), f...)
						switch mode {
						case 0:
							nf = nf[:cut]
						case 1:
							nf[cut] ^= 0xff
						case 2:
							nf[cut] = 0
						}
						cp[fi] = nf
						var pe *ProtocolError
						if _, err := Decode(cp); errors.As(err, &pe) {
							if _, ok := want[pe.Field]; ok {
								want[pe.Field] = true
							}
						}
					}
				}
			}
		}
	}
	for path, seen := range want {
		if !seen {
			t.Errorf("no decode error named the field %q", path)
		}
	}
}

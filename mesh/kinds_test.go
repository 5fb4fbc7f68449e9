package mesh

import (
	"testing"

	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// TestKindMapping pins the one mapping between the four spellings of an
// object kind, both ways.
func TestKindMapping(t *testing.T) {
	tests := []struct {
		rec    record.ObjectKind
		spot   spot.ObjectKind
		wire   router.StatefulObjectKind
		follow follow.Kind
	}{
		{record.ObjectActor, spot.KindActor, router.StatefulActor, follow.KindActor},
		{record.ObjectUserSpot, spot.KindUserSpot, router.StatefulUserSpot, follow.KindSpot},
		{record.ObjectInstanceSpot, spot.KindInstanceSpot, router.StatefulInstanceSpot, follow.KindSpot},
	}
	for _, tc := range tests {
		if got := objectKind(tc.spot); got != tc.rec {
			t.Errorf("objectKind(%v) = %v, want %v", tc.spot, got, tc.rec)
		}
		if got := spotKind(tc.rec); got != tc.spot {
			t.Errorf("spotKind(%v) = %v, want %v", tc.rec, got, tc.spot)
		}
		if got := wireKind(tc.rec); got != tc.wire {
			t.Errorf("wireKind(%v) = %v, want %v", tc.rec, got, tc.wire)
		}
		if got, ok := kindFromWire(tc.wire); !ok || got != tc.rec {
			t.Errorf("kindFromWire(%v) = %v, %v, want %v", tc.wire, got, ok, tc.rec)
		}
		if got := followKey(tc.rec, "x"); got != (follow.Key{Kind: tc.follow, ID: "x"}) {
			t.Errorf("followKey(%v) = %v", tc.rec, got)
		}
	}
	if _, ok := kindFromWire(router.StatefulObjectKind(9)); ok {
		t.Error("kindFromWire accepted an unknown kind")
	}
}

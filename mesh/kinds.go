package mesh

import (
	"github.com/meshnode/meshnode/follow"
	"github.com/meshnode/meshnode/mesh/record"
	"github.com/meshnode/meshnode/router"
	"github.com/meshnode/meshnode/spot"
)

// One object kind has four spellings: the authority record's (§3.4), the
// spot runtime's, the wire's stateful-object-kind and the route cache's
// key kind. This table is the one mapping between them; everything else
// converts through it.
var kindTable = []struct {
	rec    record.ObjectKind
	spot   spot.ObjectKind
	wire   router.StatefulObjectKind
	follow follow.Kind
}{
	{record.ObjectActor, spot.KindActor, router.StatefulActor, follow.KindActor},
	{record.ObjectUserSpot, spot.KindUserSpot, router.StatefulUserSpot, follow.KindSpot},
	{record.ObjectInstanceSpot, spot.KindInstanceSpot, router.StatefulInstanceSpot, follow.KindSpot},
}

// objectKind is the record kind of a spot runtime kind (Actor when unknown:
// the runtime has exactly the three kinds).
func objectKind(k spot.ObjectKind) record.ObjectKind {
	for _, r := range kindTable {
		if r.spot == k {
			return r.rec
		}
	}
	return record.ObjectActor
}

// kindFromWire is the record kind of a wire kind; false for a value the
// codec would not have accepted.
func kindFromWire(k router.StatefulObjectKind) (record.ObjectKind, bool) {
	for _, r := range kindTable {
		if r.wire == k {
			return r.rec, true
		}
	}
	return "", false
}

// wireKind is the wire kind of a record kind.
func wireKind(k record.ObjectKind) router.StatefulObjectKind {
	for _, r := range kindTable {
		if r.rec == k {
			return r.wire
		}
	}
	return router.StatefulActor
}

// spotKind is the spot runtime kind of a record kind.
func spotKind(k record.ObjectKind) spot.ObjectKind {
	for _, r := range kindTable {
		if r.rec == k {
			return r.spot
		}
	}
	return spot.KindActor
}

// followKey is the route cache / Message Follow key of an object.
func followKey(k record.ObjectKind, id string) follow.Key {
	for _, r := range kindTable {
		if r.rec == k {
			return follow.Key{Kind: r.follow, ID: id}
		}
	}
	return follow.Key{Kind: follow.KindActor, ID: id}
}

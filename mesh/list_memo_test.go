package mesh

import (
	"slices"
	"testing"

	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// The host runs a list shows alive are looked up, not scanned for, and a
// new list replaces them.
func TestListMemoListedAlive(t *testing.T) {
	snap, _ := placementMesh(3, 0)
	snap.Entries[2].LeaseValid = false
	var memo listMemo
	alive := authority.Owner{ID: "owner-1", LeaseGeneration: 2}
	for _, tc := range []struct {
		owner authority.Owner
		want  bool
	}{
		{alive, true},
		{authority.Owner{ID: "owner-1", LeaseGeneration: 3}, false},
		{authority.Owner{ID: "owner-2", LeaseGeneration: 2}, false}, // lease not valid
		{authority.Owner{ID: "owner-9", LeaseGeneration: 2}, false},
	} {
		if got := memo.listedAlive(1, snap, tc.owner); got != tc.want {
			t.Errorf("%+v listed alive = %v, want %v", tc.owner, got, tc.want)
		}
	}
	if memo.listedAlive(2, directory.Snapshot{Entries: snap.Entries[2:]}, alive) {
		t.Fatal("a new list without the owner still shows it alive")
	}
}

// A node run's owner comes from its descriptor (no store read); a run the
// list does not name, or names without an owner, is not found.
func TestListMemoRunOwner(t *testing.T) {
	snap, _ := placementMesh(3, 0)
	snap.Entries[1].Descriptor.OwnerID = ""
	var memo listMemo
	rid := func(i int) []byte { return snap.Entries[i].Descriptor.RoutingID }
	tests := []struct {
		name string
		rid  []byte
		gen  uint64
		want authority.Owner
		ok   bool
	}{
		{"listed run", rid(2), 3, authority.Owner{ID: "owner-2", LeaseGeneration: 2}, true},
		{"another run of the node", rid(2), 4, authority.Owner{}, false},
		{"descriptor without an owner", rid(1), 3, authority.Owner{}, false},
		{"unknown node", []byte("nobody"), 3, authority.Owner{}, false},
	}
	for _, tc := range tests {
		if got, ok := memo.runOwner(1, snap, tc.rid, tc.gen); got != tc.want || ok != tc.ok {
			t.Errorf("%s: runOwner = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// §7.1's type rule sees the Instance Spot types of the mesh's serving
// server nodes with a valid lease, one entry per offering node.
func TestListMemoOfferedInstanceTypes(t *testing.T) {
	entry := func(mesh string, edit func(*directory.Entry), types ...string) directory.Entry {
		e := directory.Entry{LeaseValid: true, Descriptor: record.MeshNodeDescriptor{MeshName: mesh, State: record.StateServing,
			ObjectRole: record.RoleServer}}
		for _, ty := range types {
			e.Descriptor.ObjectCapabilities = append(e.Descriptor.ObjectCapabilities,
				record.ObjectCapability{ObjectKind: record.ObjectInstanceSpot, StableType: ty})
		}
		e.Descriptor.ObjectCapabilities = append(e.Descriptor.ObjectCapabilities,
			record.ObjectCapability{ObjectKind: record.ObjectActor, StableType: "not-a-spot"})
		if edit != nil {
			edit(&e)
		}
		return e
	}
	snap := directory.Snapshot{Entries: []directory.Entry{
		entry("a", nil, "cart"),
		entry("a", nil, "cart", "wishlist"),
		entry("a", func(e *directory.Entry) { e.LeaseValid = false }, "stale"),
		entry("a", func(e *directory.Entry) { e.Descriptor.State = record.StateDraining }, "draining"),
		entry("a", func(e *directory.Entry) { e.Descriptor.ObjectRole = record.RoleClient }, "client"),
		entry("b", nil, "other-mesh"),
	}}
	var memo listMemo
	if got, want := memo.offeredInstanceTypes(1, snap, "a"), []string{"cart", "cart", "wishlist"}; !slices.Equal(got, want) {
		t.Fatalf("mesh a offers %q, want %q", got, want)
	}
	if got := memo.offeredInstanceTypes(1, snap, "c"); len(got) != 0 {
		t.Fatalf("an unknown mesh offers %q", got)
	}
	if got := memo.offeredInstanceTypes(2, directory.Snapshot{Entries: snap.Entries[5:]}, "a"); len(got) != 0 {
		t.Fatalf("a new list without mesh a still offers %q", got)
	}
}

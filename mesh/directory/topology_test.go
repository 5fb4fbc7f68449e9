package directory_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

func topologySnapshot() directory.Snapshot {
	one := descriptor("a", []byte{0x01}, "tcp://h1:1")
	one.State, one.ObjectRole, one.PlacementWeight = record.StateServing, record.RoleServer, 100
	entry := "entry:1"
	one.EntrySpotID = &entry
	one.Capacity = record.NodeCapacity{
		Actors: record.SlotUsage{Active: 3, Reserved: 1, Limit: 100},
		Spots:  record.SlotUsage{Active: 2},
		SpotTypes: []record.SpotTypeUsage{
			{ObjectKind: record.ObjectUserSpot, StableType: "Room"},
			{ObjectKind: record.ObjectInstanceSpot, StableType: "Match"},
		},
	}
	two := descriptor("a", []byte{0x02, 0x00}, "tcp://host-two:5555")
	two.State, two.PlacementWeight, two.Capacity = record.StateDraining, 0, record.NodeCapacity{}
	three := descriptor("b\tx", []byte{0xff}, "tcp://h3:1")
	three.State, three.ObjectRole, three.PlacementWeight, three.Capacity = record.StatePreparing, record.RoleNone, 10000, record.NodeCapacity{}
	checked := storeBase.Add(2500 * time.Millisecond)
	return directory.Snapshot{Complete: true, Entries: []directory.Entry{
		{Descriptor: three, LeaseValid: false, LeaseCheckedAt: checked},
		{Descriptor: two, LeaseValid: false, LeaseCheckedAt: checked},
		{Descriptor: one, LeaseValid: true, LeaseExpiresAt: storeBase.Add(15 * time.Second), LeaseCheckedAt: checked},
	}}
}

func TestRows(t *testing.T) {
	rows := directory.Rows(topologySnapshot())
	if len(rows) != 3 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	want := directory.Row{
		Mesh: "a", RID: "01", Endpoint: "tcp://h1:1", State: "serving", Role: "server", Weight: 100,
		Capacity: "actors 3+1/100 spots 2/∞ types 2", Lease: "in 12.5s",
		LeaseValid: true, LeaseExpiresAt: storeBase.Add(15 * time.Second),
	}
	if r != want {
		t.Fatalf("row 0 = %+v\nwant    %+v", r, want)
	}
	if rows[1].RID != "0200" || rows[1].Lease != "expired" || rows[1].LeaseValid || rows[2].Mesh != "b\tx" {
		t.Fatalf("rows 1, 2: %+v %+v", rows[1], rows[2])
	}
}

// A client (or a node of role none) hosts nothing: its capacity is "-",
// not "actors 0/∞ spots 0/∞", which reads as room without bound. A server
// with nothing and no limits still shows its unbounded room, and counts a
// non-server did publish are shown.
func TestCapacityOfANodeWithoutObjects(t *testing.T) {
	for _, tc := range []struct {
		name string
		role record.ObjectRole
		c    record.NodeCapacity
		want string
	}{
		{"client", record.RoleClient, record.NodeCapacity{}, "-"},
		{"client with limits set", record.RoleClient, record.NodeCapacity{Actors: record.SlotUsage{Limit: 5}}, "-"},
		{"none", record.RoleNone, record.NodeCapacity{}, "-"},
		{"empty server", record.RoleServer, record.NodeCapacity{}, "actors 0/∞ spots 0/∞"},
		{"client that counts objects", record.RoleClient, record.NodeCapacity{Spots: record.SlotUsage{Active: 1}}, "actors 0/∞ spots 1/∞"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := descriptor("a", []byte{0x01}, "tcp://h1:1")
			d.ObjectRole, d.Capacity = tc.role, tc.c
			if tc.role == record.RoleServer {
				entry := "entry:1"
				d.EntrySpotID = &entry
			}
			rows := directory.Rows(directory.Snapshot{Complete: true, Entries: []directory.Entry{{Descriptor: d}}})
			if len(rows) != 1 || rows[0].Capacity != tc.want {
				t.Fatalf("rows = %+v, want capacity %q", rows, tc.want)
			}
		})
	}
}

func TestRenderTable(t *testing.T) {
	var b bytes.Buffer
	if err := directory.RenderTable(&b, directory.Rows(topologySnapshot())); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"MESH  RID   ENDPOINT             STATE      ROLE    WEIGHT  CAPACITY                          LEASE\n" +
		"a     01    tcp://h1:1           serving    server  100     actors 3+1/100 spots 2/∞ types 2  in 12.5s\n" +
		"a     0200  tcp://host-two:5555  draining   client  0       -                                 expired\n" +
		`b\tx  ff    tcp://h3:1           preparing  none    10000   -                                 expired` + "\n"
	if b.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	// Every column starts at the same rune offset on every line.
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, col := range []string{"RID", "ENDPOINT", "CAPACITY", "LEASE"} {
		at := strings.Index(lines[0], col)
		for _, l := range lines[1:] {
			runes := []rune(l)
			if at >= len(runes) || runes[at-1] != ' ' || runes[at] == ' ' {
				t.Fatalf("column %s not aligned in %q", col, l)
			}
		}
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") || !utf8.ValidString(l) {
			t.Fatalf("line %q", l)
		}
	}

	// Header only for an empty topology.
	b.Reset()
	if err := directory.RenderTable(&b, nil); err != nil || strings.Count(b.String(), "\n") != 1 || !strings.HasPrefix(b.String(), "MESH") {
		t.Fatalf("empty table %q, %v", b.String(), err)
	}
	// A failing writer is reported.
	if err := directory.RenderTable(failWriter{}, nil); err == nil {
		t.Fatal("write error not returned")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A removal record adds a row, state removed with the removal's age, for
// a run the list does not have; a run listed again (it published since, or
// a new run took its RoutingID over) shows by its descriptor alone, and a
// listing of one mesh leaves other meshes' removals out. The table then
// ends with RemovedNote.
func TestRowsWithRemoved(t *testing.T) {
	snap := topologySnapshot()
	snap.StoreNow = storeBase.Add(90 * time.Second)
	removal := func(mesh string, rid []byte) directory.Removed {
		d := descriptor(mesh, rid, "tcp://gone:1")
		d.State = record.StateServing
		return directory.Removed{RemovedMeshNode: record.RemovedMeshNode{Descriptor: d, RemovedAt: record.EpochMillisOf(storeBase),
			RemovedByOwnerID: "owner-w", RemovedByRoutingID: []byte{0x0c}}}
	}
	tests := []struct {
		name    string
		mesh    string
		removed []directory.Removed
		want    []string // mesh/rid state lease of every row
	}{
		{name: "none", want: []string{"a/01 serving in 12.5s", "a/0200 draining expired", "b\tx/ff preparing expired"}},
		{name: "a run not listed", removed: []directory.Removed{removal("a", []byte{0x03})},
			want: []string{"a/01 serving in 12.5s", "a/0200 draining expired", "a/03 removed ended (removed 1m30s ago)", "b\tx/ff preparing expired"}},
		{name: "a run listed again", removed: []directory.Removed{removal("a", []byte{0x01}), removal("a", []byte{0x02, 0x00})},
			want: []string{"a/01 serving in 12.5s", "a/0200 draining expired", "b\tx/ff preparing expired"}},
		{name: "another mesh than the one listed", mesh: "a", removed: []directory.Removed{removal("c", []byte{0x03})},
			want: []string{"a/01 serving in 12.5s", "a/0200 draining expired", "b\tx/ff preparing expired"}},
		{name: "every mesh listed", removed: []directory.Removed{removal("c", []byte{0x03})},
			want: []string{"a/01 serving in 12.5s", "a/0200 draining expired", "b\tx/ff preparing expired", "c/03 removed ended (removed 1m30s ago)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := snap
			s.MeshName = tt.mesh
			rows := directory.Rows(s, tt.removed...)
			var got []string
			removed := false
			for _, r := range rows {
				got = append(got, r.Mesh+"/"+r.RID+" "+r.State+" "+r.Lease)
				if r.Removed {
					removed = true
					if r.RemovedBy != "0c" || !r.RemovedAt.Equal(storeBase) || r.Endpoint != "tcp://gone:1" || r.LeaseValid {
						t.Fatalf("removed row %+v", r)
					}
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			var b bytes.Buffer
			if err := directory.RenderTable(&b, rows); err != nil {
				t.Fatal(err)
			}
			if note := strings.HasSuffix(b.String(), "\n"+directory.RemovedNote+"\n"); note != removed {
				t.Fatalf("note under the table: %v, want %v:\n%s", note, removed, b.String())
			}
		})
	}
}

package directory

import (
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/meshnode/meshnode/internal/textable"
	"github.com/meshnode/meshnode/mesh/record"
)

// Row is one MeshNode of the topology table ("meshnode ctl topology", the
// demo). Text fields are ready to print; LeaseValid and LeaseExpiresAt keep
// the raw verdict for machine output.
type Row struct {
	Mesh     string
	RID      string // lowercase hex
	Endpoint string
	State    string
	Role     string
	Weight   int
	// Capacity is "actors A[+R]/L spots A[+R]/L" (+R: reserved, shown when
	// non-zero; L: limit, "∞" when 0 = unlimited), plus " types N" when the
	// descriptor lists per-type Spot usage; "-" for a node that hosts no
	// objects (role client or none) and counts none.
	Capacity string
	// Lease is "in 14.2s" (time left when the list was read, by the store's
	// clock) or "expired" (missing, expired or another generation).
	Lease          string
	LeaseValid     bool
	LeaseExpiresAt time.Time
	// Removed: the row is a removal record's (State "removed"): the run's
	// watchers found its owner lease ended while its links were up and
	// removed its descriptor at RemovedAt; RemovedBy is the watcher's RID
	// (hex). The other fields are the removed descriptor's.
	Removed   bool
	RemovedAt time.Time
	RemovedBy string
}

// StateRemoved is the State of a removed run's row.
const StateRemoved = "removed"

// Rows turns a snapshot into table rows ordered by mesh, then routing id.
// Each of removed (ListRemoved) adds a row, as StateRemoved, when its mesh
// is the snapshot's (or the snapshot lists every mesh) and the snapshot
// has no descriptor of its mesh and RoutingID: a run that published again
// since, or a new run that took the RoutingID over, is shown by its
// descriptor alone.
func Rows(s Snapshot, removed ...Removed) []Row {
	rows := make([]Row, 0, len(s.Entries)+len(removed))
	listed := make(map[string]bool, len(s.Entries))
	for _, e := range s.Entries {
		d := e.Descriptor
		r := descriptorRow(d)
		r.Lease = "expired"
		if e.LeaseValid {
			r.LeaseValid, r.LeaseExpiresAt = true, e.LeaseExpiresAt
			r.Lease = leaseLeft(e.LeaseExpiresAt, e.LeaseCheckedAt)
		}
		rows = append(rows, r)
		listed[r.Mesh+"\x00"+r.RID] = true
	}
	for _, rm := range removed {
		d := rm.Descriptor
		r := descriptorRow(d)
		if (s.MeshName != "" && d.MeshName != s.MeshName) || listed[r.Mesh+"\x00"+r.RID] {
			continue
		}
		listed[r.Mesh+"\x00"+r.RID] = true // one row per run, were a record given twice
		r.State, r.Lease = StateRemoved, "ended"
		r.Removed, r.RemovedAt, r.RemovedBy = true, rm.RemovedAt.Time(), hex.EncodeToString(rm.RemovedByRoutingID)
		if ago := s.StoreNow.Sub(r.RemovedAt); !s.StoreNow.IsZero() && ago >= 0 {
			r.Lease = "ended (removed " + ago.Round(time.Second).String() + " ago)"
		}
		rows = append(rows, r)
	}
	// Lowercase hex keeps byte order digit by digit and keeps prefixes, so
	// comparing the hex strings compares the routing id bytes.
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Mesh != rows[j].Mesh {
			return rows[i].Mesh < rows[j].Mesh
		}
		return rows[i].RID < rows[j].RID
	})
	return rows
}

// descriptorRow is the row of what d says, without the lease columns.
func descriptorRow(d record.MeshNodeDescriptor) Row {
	return Row{
		Mesh:     d.MeshName,
		RID:      hex.EncodeToString(d.RoutingID),
		Endpoint: d.Endpoint,
		State:    string(d.State),
		Role:     string(d.ObjectRole),
		Weight:   d.PlacementWeight,
		Capacity: capacitySummary(d.ObjectRole, d.Capacity),
	}
}

func leaseLeft(expires, checked time.Time) string {
	if expires.IsZero() {
		return "no expiry"
	}
	left := expires.Sub(checked)
	if left <= 0 {
		return "expired"
	}
	return "in " + left.Round(100*time.Millisecond).String()
}

func capacitySummary(role record.ObjectRole, c record.NodeCapacity) string {
	// A client or a node without objects hosts nothing: its limits are no
	// capacity ("actors 0/∞" read as room without bound). Counts it did
	// publish all the same are shown.
	if role != record.RoleServer && empty(c) {
		return "-"
	}
	s := "actors " + slots(c.Actors) + " spots " + slots(c.Spots)
	if n := len(c.SpotTypes); n > 0 {
		s += " types " + strconv.Itoa(n)
	}
	return s
}

// empty reports whether c counts no object, active or reserved.
func empty(c record.NodeCapacity) bool {
	return c.Actors.Active == 0 && c.Actors.Reserved == 0 && c.Spots.Active == 0 && c.Spots.Reserved == 0 &&
		len(c.SpotTypes) == 0
}

func slots(u record.SlotUsage) string {
	s := strconv.Itoa(u.Active)
	if u.Reserved > 0 {
		s += "+" + strconv.Itoa(u.Reserved)
	}
	if u.Limit == 0 {
		return s + "/∞"
	}
	return s + "/" + strconv.Itoa(u.Limit)
}

// tableHeader is the header line's cells.
var tableHeader = []string{"MESH", "RID", "ENDPOINT", "STATE", "ROLE", "WEIGHT", "CAPACITY", "LEASE"}

// RemovedNote is the line RenderTable writes under a table that has a
// removed row: what the state means and what happens next.
const RemovedNote = "removed: its watchers found its owner lease ended while its links were up (paused past lease.ttl, " +
	"or cut off from the store) and removed its descriptor, so no node uses it; it publishes it again when it runs again"

// RenderTable writes rows as a plain-text table: a header line, then one
// line per row, in the given order, columns left-aligned and separated by
// two spaces, no trailing spaces. Widths count runes. Control and other
// non-printable characters in a cell (names may contain them) are written
// escaped, Go-style, so that a cell can never break the layout. When a row
// is Removed, RemovedNote follows the table on a line of its own.
func RenderTable(w io.Writer, rows []Row) error {
	lines := make([][]string, 0, len(rows))
	removed := false
	for _, r := range rows {
		lines = append(lines, []string{
			cell(r.Mesh), cell(r.RID), cell(r.Endpoint), cell(r.State), cell(r.Role),
			strconv.Itoa(r.Weight), cell(r.Capacity), cell(r.Lease),
		})
		removed = removed || r.Removed
	}
	if err := textable.Write(w, tableHeader, lines); err != nil {
		return fmt.Errorf("directory: render topology: %w", err)
	}
	if removed {
		if _, err := io.WriteString(w, RemovedNote+"\n"); err != nil {
			return fmt.Errorf("directory: render topology: %w", err)
		}
	}
	return nil
}

// cell escapes what would break a table line.
func cell(s string) string { return textable.Cell(s) }

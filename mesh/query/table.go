package query

import (
	"encoding/hex"
	"fmt"
	"io"

	"github.com/meshnode/meshnode/internal/textable"
)

// tableHeader is the header line's cells.
var tableHeader = []string{"ID", "KIND", "GEN", "STATE", "TYPE", "MESH", "NODE RID", "OWNER", "OWNER GEN", "KEY"}

// RenderTable writes entries as a plain-text table ("meshnode ctl locate",
// "meshnode ctl list"): a header line, then one line per entry in the given
// order, columns left-aligned and two spaces apart, no trailing spaces,
// widths in runes. GEN is the ObjectGeneration; OWNER is
// "ownerId@ownerLeaseGeneration"; OWNER GEN is the
// AuthorityOwnerGeneration; KEY is the authority store key (for "ctl
// record"). Control and other non-printable characters are written escaped, Go
// style, so a cell can never break the layout.
func RenderTable(w io.Writer, entries []Entry) error {
	lines := make([][]string, 0, len(entries))
	for _, e := range entries {
		lines = append(lines, []string{
			cell(e.ID), cell(string(e.Kind)), e.ObjectGeneration.String(), cell(string(e.State)),
			cell(e.StableType), cell(e.MeshName), hex.EncodeToString(e.NodeRID),
			cell(e.OwnerID) + "@" + e.OwnerLeaseGeneration.String(),
			e.AuthorityOwnerGeneration.String(), cell(e.Key),
		})
	}
	if err := textable.Write(w, tableHeader, lines); err != nil {
		return fmt.Errorf("query: render table: %w", err)
	}
	return nil
}

// cell escapes what would break a table line.
func cell(s string) string { return textable.Cell(s) }

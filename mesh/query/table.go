package query

import (
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	lines := make([][]string, 0, len(entries)+1)
	lines = append(lines, tableHeader)
	for _, e := range entries {
		lines = append(lines, []string{
			cell(e.ID), cell(string(e.Kind)), e.ObjectGeneration.String(), cell(string(e.State)),
			cell(e.StableType), cell(e.MeshName), hex.EncodeToString(e.NodeRID),
			cell(e.OwnerID) + "@" + e.OwnerLeaseGeneration.String(),
			e.AuthorityOwnerGeneration.String(), cell(e.Key),
		})
	}
	widths := make([]int, len(tableHeader))
	for _, l := range lines {
		for i, c := range l {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for _, l := range lines {
		for i, c := range l {
			b.WriteString(c)
			if i < len(l)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("query: render table: %w", err)
	}
	return nil
}

// cell escapes what would break a table line.
func cell(s string) string {
	clean := utf8.ValidString(s)
	if clean {
		for _, r := range s {
			if !unicode.IsPrint(r) {
				clean = false
				break
			}
		}
	}
	if clean {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

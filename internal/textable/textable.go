// Package textable renders the plain-text tables of the operator commands
// (ctl topology, ctl locate, ctl list, the demo): a header line, then one
// line per row, columns left-aligned and two spaces apart, no trailing
// spaces, widths counted in runes.
package textable

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Write renders header and rows to w. Every row has len(header) cells.
func Write(w io.Writer, header []string, rows [][]string) error {
	widths := make([]int, len(header))
	measure := func(l []string) {
		for i, c := range l {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	measure(header)
	for _, r := range rows {
		measure(r)
	}
	var b strings.Builder
	line := func(l []string) {
		for i, c := range l {
			b.WriteString(c)
			if i < len(l)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Cell escapes, Go-style, what would break a table line: invalid UTF-8,
// control and other non-printable characters (names may contain them).
func Cell(s string) string {
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

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every command and ctl subcommand has a row in the Commands table of
// docs/OPERATIONS.md, where an operator looks them up (ctl status and ctl
// relocate were missing: only the admin endpoint section named them).
func TestOperationsCommandsTableListsEveryCommand(t *testing.T) {
	rows := commandRows(t)
	for _, c := range leafCommands() {
		if _, ok := rows[c.name]; !ok {
			t.Errorf("docs/OPERATIONS.md \"Commands\" has no row for `meshnode %s`", c.name)
		}
	}
}

// Every flag a command defines itself (the "Flags:" of its --help; the
// configuration flags have their own table) is named in its row of the
// Commands table: the rows of demo (--log-level, --timeout) and ctl list
// (--continue) left some out.
func TestOperationsCommandsTableNamesEveryFlag(t *testing.T) {
	rows := commandRows(t)
	flagLine := regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)`)
	for _, c := range leafCommands() {
		var out, errb bytes.Buffer
		if code := c.run(context.Background(), []string{"--help"}, &out, &errb); code != ExitOK {
			t.Fatalf("meshnode %s --help: exit %d %s", c.name, code, errb.String())
		}
		_, flags, ok := strings.Cut(out.String(), "\nFlags:\n")
		if !ok {
			continue // no flags of its own
		}
		flags, _, _ = strings.Cut(flags, "\n\n")
		for _, line := range strings.Split(flags, "\n") {
			m := flagLine.FindStringSubmatch(line)
			if m == nil {
				continue // a wrapped usage line
			}
			if !strings.Contains(rows[c.name], m[1]) {
				t.Errorf("docs/OPERATIONS.md \"Commands\": the row of `meshnode %s` does not name its flag %s", c.name, m[1])
			}
		}
	}
}

// leafCommand is a command that runs (not a group), by its full name
// after "meshnode".
type leafCommand struct {
	name string
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

func leafCommands() []leafCommand {
	var out []leafCommand
	for _, c := range mainGroup().commands {
		if c.name != "ctl" && c.name != "wire" {
			out = append(out, leafCommand{c.name, c.run})
		}
	}
	for _, c := range ctlCommands() {
		out = append(out, leafCommand{"ctl " + c.name, c.run})
	}
	for _, c := range wireGroup().commands {
		out = append(out, leafCommand{"wire " + c.name, c.run})
	}
	return out
}

// commandRows maps each command of docs/OPERATIONS.md's Commands table
// ("ctl list") to its row.
func commandRows(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	start := strings.Index(doc, "\n## Commands\n")
	if start < 0 {
		t.Fatal(`docs/OPERATIONS.md has no "## Commands" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n### "); end >= 0 {
		section = section[:end]
	}
	rows := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `meshnode ([a-z]+(?: [a-z]+)?)(.*)$").FindAllStringSubmatch(section, -1) {
		rows[m[1]] = m[2]
	}
	return rows
}

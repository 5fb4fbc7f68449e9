package cli

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every command and ctl subcommand has a row in the Commands table of
// docs/OPERATIONS.md, where an operator looks them up (ctl status and ctl
// relocate were missing: only the admin endpoint section named them).
func TestOperationsCommandsTableListsEveryCommand(t *testing.T) {
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
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `meshnode ([a-z]+(?: [a-z]+)?)").FindAllStringSubmatch(section, -1) {
		rows[m[1]] = true
	}
	var want []string
	for _, c := range mainGroup().commands {
		if c.name != "ctl" && c.name != "wire" {
			want = append(want, c.name)
		}
	}
	for _, c := range ctlCommands() {
		want = append(want, "ctl "+c.name)
	}
	for _, c := range wireGroup().commands {
		want = append(want, "wire "+c.name)
	}
	for _, name := range want {
		if !rows[name] {
			t.Errorf("docs/OPERATIONS.md \"Commands\" has no row for `meshnode %s`", name)
		}
	}
}

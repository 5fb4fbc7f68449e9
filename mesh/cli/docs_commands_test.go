package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/config"
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

// Every meshnode command line the docs show names flags its command has,
// spelled with two dashes: docs/node.example.yaml showed "ctl keygen -out
// node", which pflag reads as the shorthands -o, -u, -t (a usage error).
func TestDocsCommandLinesUseRealFlags(t *testing.T) {
	flagLine := regexp.MustCompile(`^\s+(?:-[a-zA-Z], )?(--[a-z][a-z0-9._-]*)`)
	known := map[string]map[string]bool{}
	for _, c := range leafCommands() {
		var out, errb bytes.Buffer
		if code := c.run(context.Background(), []string{"--help"}, &out, &errb); code != ExitOK {
			t.Fatalf("meshnode %s --help: exit %d %s", c.name, code, errb.String())
		}
		flags := map[string]bool{"--help": true, "-h": true}
		for _, line := range strings.Split(out.String(), "\n") {
			if m := flagLine.FindStringSubmatch(line); m != nil {
				flags[m[1]] = true
			}
		}
		if strings.Contains(out.String(), "\nConfiguration flags") {
			flags["--"+config.FlagConfigFile] = true
			for _, k := range config.Keys() {
				if k.Flag != "" {
					flags["--"+k.Flag] = true
				}
			}
		}
		known[c.name] = flags
	}
	// The typo OPERATIONS.md shows on purpose, with the error it gets.
	shownAsError := map[string]bool{"--lease.tll=1s": true}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md", "../../docs/node.example.yaml")
	cmdLine := regexp.MustCompile("meshnode ((?:ctl |wire )?[a-z]+)([^`\n]*)")
	flagToken := regexp.MustCompile(`(?:^|[\s\[|])(-{1,2}[a-zA-Z][a-zA-Z0-9._-]*)(=\S*)?`)
	checked := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range cmdLine.FindAllStringSubmatch(line, -1) {
				flags, ok := known[m[1]]
				if !ok || strings.HasPrefix(m[2], ":") {
					continue // prose ("meshnode run drains"), or a message the command printed
				}
				for _, ft := range flagToken.FindAllStringSubmatch(m[2], -1) {
					name := ft[1]
					checked++
					switch {
					case shownAsError[name+ft[2]]:
					case !strings.HasPrefix(name, "--") && name != "-h":
						t.Errorf("%s:%d: `meshnode %s … %s`: flags take two dashes (pflag reads %s as shorthands)", filepath.Base(f), i+1, m[1], name, name)
					case !flags[name]:
						t.Errorf("%s:%d: `meshnode %s` has no flag %s", filepath.Base(f), i+1, m[1], name)
					}
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d flags in the docs' command lines: the pattern no longer finds them", checked)
	}
}

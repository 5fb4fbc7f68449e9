package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/meshnode/meshnode/"

// docs/ARCHITECTURE.md says its package graph is the real import graph:
// every arrow is a non-test import between the module's own packages, every
// such import is drawn, and a package imports only packages of lower layers.
// The graph had fallen behind the code more than once (a new package or
// import not drawn); this keeps it true.
func TestArchitectureGraphIsTheImportGraph(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	drawn, layers := readDrawnGraph(t, filepath.Join(root, "docs", "ARCHITECTURE.md"))
	real := goListImports(t, root)

	var problems []string
	for pkg, imps := range real {
		l, ok := layers[pkg]
		if !ok {
			problems = append(problems, pkg+" is not drawn")
			continue
		}
		for _, imp := range imps {
			if !drawn[pkg][imp] {
				problems = append(problems, pkg+" imports "+imp+", not drawn")
			}
			if il, ok := layers[imp]; ok && il >= l {
				problems = append(problems, pkg+" (layer "+strconv.Itoa(l)+") imports "+imp+" (layer "+strconv.Itoa(il)+")")
			}
		}
	}
	for pkg, imps := range drawn {
		if _, ok := real[pkg]; !ok {
			problems = append(problems, pkg+" is drawn but is not a package")
			continue
		}
		for imp := range imps {
			if !contains(real[pkg], imp) {
				problems = append(problems, pkg+" ──> "+imp+" is drawn but not imported")
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error("docs/ARCHITECTURE.md package graph: " + p)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// goListImports is the module's packages and their non-test imports of
// the module's own packages, paths relative to the module.
func goListImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	cmd := exec.Command(goBin, "list", "-f", `{{.ImportPath}}:{{join .Imports " "}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	real := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imps, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, modulePath)
		real[pkg] = nil
		for _, imp := range strings.Fields(imps) {
			if rel, ok := strings.CutPrefix(imp, modulePath); ok {
				real[pkg] = append(real[pkg], rel)
			}
		}
	}
	return real
}

var (
	layerLine = regexp.MustCompile(`^layer (\d+)\s+`)
	parens    = regexp.MustCompile(`\([^)]*\)`)
)

// readDrawnGraph parses the first code block of the page: lines
// "layer N  pkg ──> a, b," (the layer may be left out: the one above holds),
// continued on indented lines, and "layer 0  (no project imports)  a  b"
// with its continuations. Parenthesised text is a note.
func readDrawnGraph(t *testing.T, path string) (map[string]map[string]bool, map[string]int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	drawn := make(map[string]map[string]bool)
	layers := make(map[string]int)
	layer, cur, inBlock, leaves := -1, "", false, false
	add := func(pkg string) {
		if _, dup := layers[pkg]; dup {
			t.Errorf("docs/ARCHITECTURE.md package graph: %s drawn twice", pkg)
		}
		layers[pkg] = layer
		drawn[pkg] = make(map[string]bool)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			if inBlock {
				break
			}
			inBlock = true
			continue
		}
		if !inBlock {
			continue
		}
		if m := layerLine.FindStringSubmatch(line); m != nil {
			layer, _ = strconv.Atoi(m[1])
			line = line[len(m[0]):]
		}
		line = parens.ReplaceAllString(line, "")
		if layer == 0 {
			leaves = true
		}
		if leaves {
			for _, pkg := range strings.Fields(line) {
				add(pkg)
			}
			continue
		}
		if pkg, imps, ok := strings.Cut(line, "──>"); ok {
			cur = strings.TrimSpace(pkg)
			add(cur)
			line = imps
		}
		for _, imp := range strings.Split(line, ",") {
			if imp = strings.TrimSpace(imp); imp != "" {
				drawn[cur][imp] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(layers) == 0 {
		t.Fatal("docs/ARCHITECTURE.md: no package graph found")
	}
	return drawn, layers
}

package mesh

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// docMetricRows parses the docs/OPERATIONS.md "Metrics" table: for each
// metric name its labels, each with the values the row enumerates
// (`label` = a, b, c) or nil for a free label (`peer`, `reason`). Text in
// parentheses is commentary and dropped first.
func docMetricRows(t *testing.T) map[string]map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	nameRe := regexp.MustCompile("`(meshnode_[a-z_]+)`")
	labelRe := regexp.MustCompile("`([a-z_]+)`(?: = ([^`;]*))?")
	rows := map[string]map[string][]string{}
	for _, l := range strings.Split(string(doc), "\n") {
		cells := strings.Split(l, "|") // "", name, type, labels, meaning, ""
		if !strings.HasPrefix(l, "| `meshnode_") || len(cells) < 5 {
			continue
		}
		labels := map[string][]string{}
		for _, m := range labelRe.FindAllStringSubmatch(dropParens(cells[3]), -1) {
			var values []string
			for _, v := range strings.Split(m[2], ",") {
				if v = strings.TrimSpace(v); v != "" {
					values = append(values, v)
				}
			}
			labels[m[1]] = values
		}
		for _, m := range nameRe.FindAllStringSubmatch(cells[1], -1) {
			rows[m[1]] = labels
		}
	}
	if len(rows) == 0 {
		t.Fatal("no metric rows in docs/OPERATIONS.md")
	}
	return rows
}

// dropParens removes the parenthesised parts of s (nested ones included).
func dropParens(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// The metrics table documents the `op` label of
// meshnode_authority_conflicts_total (and of the lane-wait counters) as
// exactly the operations the node exports (authorityOps), and those are
// every authority.Op constant but terminalLookup (a read, no batch): the
// test parses package authority, so a new operation cannot be left out of
// the metrics or the docs. Until 2026-12-07 (review R6) the node exported
// op="reclaim", which the table did not name, and had no series for
// readopt, whose conflicts were counted and never exported.
func TestAuthorityOpsLabelsAreDocumented(t *testing.T) {
	documented := docMetricRows(t)["meshnode_authority_conflicts_total"]["op"]
	if len(documented) == 0 {
		t.Fatal("no `op` = … values in the meshnode_authority_conflicts_total row of docs/OPERATIONS.md")
	}
	var exported []string
	for _, op := range authorityOps {
		exported = append(exported, string(op))
	}
	declared := authorityOpConstants(t)
	declared = slices.DeleteFunc(declared, func(op string) bool { return op == "terminalLookup" })
	for _, c := range []struct {
		what string
		got  []string
	}{{"documented in docs/OPERATIONS.md", documented}, {"declared in package authority (Op constants but terminalLookup)", declared}} {
		a, b := slices.Clone(exported), slices.Clone(c.got)
		sort.Strings(a)
		sort.Strings(b)
		if !slices.Equal(a, b) {
			t.Errorf("op values exported (authorityOps) %v, %s %v", a, c.what, b)
		}
	}
}

// authorityOpConstants returns the values of package authority's
// constants of type Op.
func authorityOpConstants(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir("authority")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, "authority/"+e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Op" {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out = append(out, strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Op constants found in package authority")
	}
	return out
}

// Every label value a running node exports is documented: each metric
// family has a row in docs/OPERATIONS.md "Metrics", each of its labels is
// named there, and a value of a label the row enumerates is among them;
// for the series the node's collector writes (all values always present)
// the row names no value the node does not export. A HELP text that lists
// some of a label's values lists all of them. Until 2026-12-07 (review R6)
// op="reclaim" was exported and not documented, and the HELP of
// meshnode_session_events_total and meshnode_instance_spot_activations_total
// left out binding_unbound and passed_on.
func TestExportedLabelValuesAreDocumented(t *testing.T) {
	rows := docMetricRows(t)
	c := newCluster(t, 1, nil)
	mfs, err := c.nodes[0].Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	collected := map[string]bool{}
	descs := make(chan *prometheus.Desc, 100)
	nodeCollector{}.Describe(descs)
	close(descs)
	for d := range descs {
		if m := regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String()); m != nil {
			collected[m[1]] = true
		}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "meshnode_") {
			continue
		}
		row, ok := rows[name]
		if !ok {
			t.Errorf("%s is exported but has no row in docs/OPERATIONS.md \"Metrics\"", name)
			continue
		}
		exported := map[string][]string{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(exported[lp.GetName()], lp.GetValue()) {
					exported[lp.GetName()] = append(exported[lp.GetName()], lp.GetValue())
				}
			}
		}
		for label, values := range exported {
			documented, named := row[label]
			if !named {
				t.Errorf("%s: label %q is exported but not named in its docs row", name, label)
				continue
			}
			if documented == nil {
				continue // a free label (peer, reason, …)
			}
			for _, v := range values {
				if !slices.Contains(documented, v) {
					t.Errorf("%s: %s=%q is exported but not among the documented values %v", name, label, v, documented)
				}
			}
			if collected[name] {
				for _, v := range documented {
					if !slices.Contains(values, v) {
						t.Errorf("%s: %s=%q is documented but not exported (exported: %v)", name, label, v, values)
					}
				}
			}
			var inHelp, missing []string
			for _, v := range documented {
				if regexp.MustCompile(`\b` + regexp.QuoteMeta(v) + `\b`).MatchString(mf.GetHelp()) {
					inHelp = append(inHelp, v)
				} else {
					missing = append(missing, v)
				}
			}
			if len(inHelp) >= 2 && len(missing) > 0 {
				t.Errorf("%s: its HELP lists %s values %v but not %v: %q", name, label, inHelp, missing, mf.GetHelp())
			}
		}
	}
}

// Every metric docs/OPERATIONS.md "Metrics" has a row for is one the node
// registers, with the labels the row names (no more, no fewer, whether or
// not a series exists yet) and, for those with series, the row's type.
// TestExportedLabelValuesAreDocumented checks the other way round, from
// what a node exports; a row left behind by a rename, or naming a label
// the metric does not have, passed it.
func TestDocumentedMetricsAreRegistered(t *testing.T) {
	rows := docMetricRows(t)
	types := docMetricTypes(t)
	c := newCluster(t, 1, nil)
	reg := c.nodes[0].metrics.reg
	descs := make(chan *prometheus.Desc, 1000)
	reg.Describe(descs)
	close(descs)
	described := map[string][]string{}
	fq := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	vl := regexp.MustCompile(`variableLabels: \{([a-z_,]*)\}`)
	cl := regexp.MustCompile(`constLabels: \{([^}]*)\}`)
	for d := range descs {
		s := d.String()
		m := fq.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("cannot read the name of %s", s)
		}
		var labels []string
		if v := vl.FindStringSubmatch(s); v != nil && v[1] != "" {
			labels = append(labels, strings.Split(v[1], ",")...)
		}
		if v := cl.FindStringSubmatch(s); v != nil && v[1] != "" {
			for _, p := range strings.Split(v[1], ",") {
				name, _, _ := strings.Cut(p, "=")
				labels = append(labels, name)
			}
		}
		sort.Strings(labels)
		described[m[1]] = labels
	}
	if len(described) < 20 {
		t.Fatalf("the registry describes only %d metrics: the pattern no longer reads them", len(described))
	}
	for name, row := range rows {
		labels, ok := described[name]
		if !ok {
			t.Errorf("docs/OPERATIONS.md \"Metrics\" has a row for %s, which the node does not register", name)
			continue
		}
		var documented []string
		for l := range row {
			documented = append(documented, l)
		}
		sort.Strings(documented)
		if !slices.Equal(documented, labels) {
			t.Errorf("%s: docs/OPERATIONS.md names the labels %v, the node's metric has %v", name, documented, labels)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		want, ok := types[mf.GetName()]
		if !ok {
			continue
		}
		if got := strings.ToLower(mf.GetType().String()); got != want {
			t.Errorf("%s: docs/OPERATIONS.md says %s, the node exports a %s", mf.GetName(), want, got)
		}
	}
}

// docMetricTypes is the type column of the "Metrics" table by metric name.
func docMetricTypes(t *testing.T) map[string]string {
	t.Helper()
	doc, err := os.ReadFile("../docs/OPERATIONS.md")
	if err != nil {
		t.Fatal(err)
	}
	nameRe := regexp.MustCompile("`(meshnode_[a-z_]+)`")
	out := map[string]string{}
	for _, l := range strings.Split(string(doc), "\n") {
		cells := strings.Split(l, "|")
		if !strings.HasPrefix(l, "| `meshnode_") || len(cells) < 5 {
			continue
		}
		for _, m := range nameRe.FindAllStringSubmatch(cells[1], -1) {
			out[m[1]] = strings.TrimSpace(cells[2])
		}
	}
	return out
}

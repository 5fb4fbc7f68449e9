package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// proseDocs are the pages whose running text names configuration keys.
func proseDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	fence := regexp.MustCompile("(?s)```.*?```")
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc := string(raw)
		// The generated table has its own test (TestOperationsTable);
		// code blocks show commands and output, some wrong on purpose.
		if before, rest, ok := strings.Cut(doc, tableBegin); ok {
			_, after, _ := strings.Cut(rest, tableEnd)
			doc = before + after
		}
		doc = fence.ReplaceAllStringFunc(doc, func(b string) string { return strings.Repeat("\n", strings.Count(b, "\n")) })
		out[filepath.Base(f)] = doc
	}
	return out
}

// docKeyRef is a configuration key (or section) as the running text of the
// docs writes it in a code span: `lease.ttl`, `lease.ttl=20s`,
// `log.format: json`, `--lease.ttl=20s`.
var docKeyRef = regexp.MustCompile("`(?:--)?((?:node|lease|routing|transport|location_store|relocation_store|relocation|recovery|log|admin)(?:\\.[a-z0-9_]+)+|store_failure_grace|shutdown_deadline)(?:(=|: ?)([^`]*))?`")

// TestDocsNameRealConfigKeys: every configuration key the docs' running
// text names (outside the generated table, which TestOperationsTable keeps)
// is a key or a section of keys that config accepts, and a value shown with
// it (`relocation.drain_on_shutdown=false`, `log.format: json`) is one that
// the key takes: it decodes and passes the key's own rules. The table and
// docs/node.example.yaml were checked; the prose, where operators read
// what to set, was not.
func TestDocsNameRealConfigKeys(t *testing.T) {
	env := map[string]string{}
	var keys []string
	for _, k := range Keys() {
		env[k.Key] = k.Env
		keys = append(keys, k.Key)
	}
	known := func(ref string) bool {
		if _, ok := env[ref]; ok {
			return true
		}
		if strings.HasPrefix(ref, "node.limits.spot_types.") {
			return true // a per-type limit, node.limits.spot_types.<stable type>
		}
		for _, k := range keys {
			if strings.HasPrefix(k, ref+".") {
				return true // a section: `transport.curve`
			}
		}
		return false
	}
	fileName := regexp.MustCompile(`\.(?:ya?ml|key|pub|log|md|go)$`) // node.example.yaml, node.key.pub
	checked, values := 0, 0
	for name, doc := range proseDocs(t) {
		for _, m := range docKeyRef.FindAllStringSubmatchIndex(doc, -1) {
			ref := doc[m[2]:m[3]]
			line := strings.Count(doc[:m[0]], "\n") + 1
			if fileName.MatchString(ref) {
				continue
			}
			checked++
			if !known(ref) {
				t.Errorf("docs/%s:%d: `%s` is not a configuration key", name, line, ref)
				continue
			}
			if m[6] < 0 {
				continue
			}
			val := doc[m[6]:m[7]]
			if _, ok := env[ref]; !ok || val == "" || strings.ContainsAny(val, "…<") || regexp.MustCompile(`^[A-Z]$`).MatchString(val) {
				continue // a placeholder (`replica_acks: N`) or a section
			}
			values++
			c, err := Load(nil, LoadOptions{Environ: []string{env[ref] + "=" + val}})
			if err != nil {
				t.Fatalf("Load %s=%s: %v", env[ref], val, err)
			}
			err = c.Validate(nil)
			for _, p := range problemsOf(t, err) {
				if p.Key == ref {
					t.Errorf("docs/%s:%d: `%s` shows a value the key does not take: %s", name, line, doc[m[0]+1:m[1]-1], p.Message)
				}
			}
		}
	}
	if checked < 100 || values < 5 {
		t.Fatalf("checked only %d keys and %d values in the docs: the pattern no longer finds them", checked, values)
	}
}

// docDefault is a default the running text states for a key: "`key`,
// default 15 s", "`key` (default 65,536, …", "`key`, 5 s by default",
// "`key`, default `true`", "`key`, whose default 0 means …".
var docDefault = regexp.MustCompile("`([a-z_]+(?:\\.[a-z0-9_]+)*)`([^`.;|]{0,40}?)(?:\\bdefault(?:s| is| of)?:?\\s+`?([0-9][0-9,.]*(?: ?(?:ms|s|min|m|h|KiB|MiB))?|true|false|[a-z]+)`?|,\\s+([0-9][0-9,.]*(?: ?(?:ms|s|m|h))?)\\s+by\\s+default)")

// TestDocsStateTheTrueDefaults: a default the running text of the docs
// states for a key is the key's real default (Keys().Default, what
// config.Default() holds).
func TestDocsStateTheTrueDefaults(t *testing.T) {
	defaults := map[string]string{}
	for _, k := range Keys() {
		defaults[k.Key] = k.Default
	}
	checked := 0
	for name, doc := range proseDocs(t) {
		for _, m := range docDefault.FindAllStringSubmatch(doc, -1) {
			key := m[1]
			def, ok := defaults[key]
			if !ok {
				continue
			}
			stated := m[3]
			if stated == "" {
				stated = m[4]
			}
			if stated == "" {
				continue
			}
			checked++
			if !sameValue(def, stated) {
				i := strings.Index(doc, m[0])
				t.Errorf("docs/%s:%d: %q states the default of %s as %q; it is %s", name, strings.Count(doc[:i], "\n")+1, m[0], key, stated, def)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d stated defaults: the pattern no longer finds them", checked)
	}
}

// sameValue compares a Keys().Default rendering with a value as prose
// writes it ("15 s", "65,536", "1 MiB", "true").
func sameValue(def, stated string) bool {
	s := strings.ReplaceAll(stated, ",", "")
	s = strings.ReplaceAll(s, " ", "")
	if d, err := time.ParseDuration(def); err == nil {
		got, err := time.ParseDuration(strings.TrimSuffix(s, "in")) // "5min"
		return err == nil && got == d
	}
	if n, err := strconv.ParseInt(def, 10, 64); err == nil {
		mult := int64(1)
		if v, ok := strings.CutSuffix(s, "KiB"); ok {
			s, mult = v, 1<<10
		} else if v, ok := strings.CutSuffix(s, "MiB"); ok {
			s, mult = v, 1<<20
		}
		got, err := strconv.ParseInt(s, 10, 64)
		return err == nil && got*mult == n
	}
	return strings.Trim(def, `"`) == s
}

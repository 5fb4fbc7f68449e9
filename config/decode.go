package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// source says where a layer's values came from, for problem messages.
type source interface {
	describe(key string) string
}

type fileSource string

func (f fileSource) describe(string) string { return fmt.Sprintf("in file %q", string(f)) }

// envSource maps dotted keys to the environment variable that set them.
type envSource map[string]string

func (e envSource) describe(key string) string {
	for k := key; ; {
		if name, ok := e[k]; ok {
			return "from environment variable " + name
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return "from the environment"
		}
		k = k[:i]
	}
}

type flagSource struct{}

func (flagSource) describe(key string) string {
	// A spot_types entry key extends the flag's name; name the flag itself.
	for k := key; ; {
		if _, ok := lookupLeaf(k); ok {
			return "from flag --" + k
		}
		i := strings.LastIndexByte(k, '.')
		if i < 0 {
			return "from flag --" + key
		}
		k = k[:i]
	}
}

// decoder applies one layer's nested map onto a Config. With src == nil it
// decodes silently (the merged map, whose problems were already reported
// per layer).
type decoder struct {
	src      source
	problems []Problem
}

func (d *decoder) report(key, format string, args ...any) {
	if d.src == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	d.problems = append(d.problems, Problem{Key: key, Message: msg + " (" + d.src.describe(key) + ")"})
}

// decode applies raw onto cfg and returns the problems found.
func decode(cfg *Config, raw map[string]any, src source) []Problem {
	d := &decoder{src: src}
	d.section(reflect.ValueOf(cfg).Elem(), raw, "")
	return d.problems
}

func (d *decoder) section(v reflect.Value, m map[string]any, prefix string) {
	t := v.Type()
	known := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("koanf")
		if name == "" || !f.IsExported() {
			continue
		}
		known[name] = true
		raw, ok := m[name]
		if !ok || raw == nil {
			// An empty YAML value ("lease:") means "not set here".
			continue
		}
		key := joinKey(prefix, name)
		if f.Type.Kind() == reflect.Struct {
			sub, ok := raw.(map[string]any)
			if !ok {
				d.report(key, "must be a mapping of keys, got %s", showAt(key, raw))
				continue
			}
			d.section(v.Field(i), sub, key)
			continue
		}
		if val, ok := d.leaf(key, f.Type, raw); ok {
			v.Field(i).Set(val)
		}
	}
	var unknown []string
	for name := range m {
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		key := joinKey(prefix, name)
		if s := suggest(prefix, name); s != "" {
			d.report(key, "unknown key; did you mean %s?", joinKey(prefix, s))
		} else {
			d.report(key, "unknown key")
		}
	}
}

// leaf converts raw to a value of type t. It reports and returns false when
// raw has the wrong shape.
func (d *decoder) leaf(key string, t reflect.Type, raw any) (reflect.Value, bool) {
	switch {
	case t == durationType:
		dur, ok := toDuration(raw)
		if !ok {
			d.report(key, "must be a duration such as \"5s\", got %s", showAt(key, raw))
			return reflect.Value{}, false
		}
		return reflect.ValueOf(dur), true
	case t.Kind() == reflect.String:
		s, ok := raw.(string)
		if !ok {
			d.report(key, "must be a string (quote it in YAML), got %s", showAt(key, raw))
			return reflect.Value{}, false
		}
		return reflect.ValueOf(s).Convert(t), true
	case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
		n, ok := toInt64(raw)
		if !ok || (t.Kind() == reflect.Int && int64(int(n)) != n) {
			d.report(key, "must be an integer, got %s", showAt(key, raw))
			return reflect.Value{}, false
		}
		return reflect.ValueOf(n).Convert(t), true
	case t.Kind() == reflect.Bool:
		b, ok := toBool(raw)
		if !ok {
			d.report(key, "must be true or false, got %s", showAt(key, raw))
			return reflect.Value{}, false
		}
		return reflect.ValueOf(b), true
	case t.Kind() == reflect.Slice:
		return d.stringList(key, raw)
	case t.Kind() == reflect.Map:
		return d.intMap(key, raw)
	}
	// Unreachable for the Config type; reported rather than panicking.
	d.report(key, "unsupported setting type %s", t)
	return reflect.Value{}, false
}

func (d *decoder) stringList(key string, raw any) (reflect.Value, bool) {
	switch v := raw.(type) {
	case []string:
		return reflect.ValueOf(append([]string{}, v...)), true
	case string:
		return reflect.ValueOf(splitList(v)), true
	case []any:
		out := make([]string, 0, len(v))
		ok := true
		for i, e := range v {
			s, good := e.(string)
			if !good {
				// Every bad entry, not only the first.
				d.report(key, "entry %d must be a string, got %s", i+1, showAt(key, e))
				ok = false
				continue
			}
			out = append(out, s)
		}
		if !ok {
			return reflect.Value{}, false
		}
		return reflect.ValueOf(out), true
	}
	d.report(key, "must be a list of strings or a comma-separated string, got %s", showAt(key, raw))
	return reflect.Value{}, false
}

func (d *decoder) intMap(key string, raw any) (reflect.Value, bool) {
	entries := map[string]any{}
	switch v := raw.(type) {
	case map[string]any:
		entries = v
	case map[string]int:
		for k, n := range v {
			entries[k] = n
		}
	case string:
		// A malformed pair is reported, and the well-formed ones are still
		// decoded and checked: every problem of the value at once.
		m, ok := parsePairs(v)
		if !ok {
			d.report(key, "must be type=n pairs separated by commas, got %q", v)
		}
		entries = m
	default:
		d.report(key, "must be a mapping of stable type to integer, got %s", showAt(key, raw))
		return reflect.Value{}, false
	}
	out := make(map[string]int, len(entries))
	names := make([]string, 0, len(entries))
	for k := range entries {
		names = append(names, k)
	}
	sort.Strings(names)
	// An entry that is not an integer is reported and left out; the others
	// are kept, so that Validate checks them too and every problem of the
	// map is listed at once (the configuration is refused either way).
	for _, k := range names {
		n, good := toInt64(entries[k])
		if !good || int64(int(n)) != n {
			d.report(key+"."+k, "must be an integer, got %s", showAt(key+"."+k, entries[k]))
			continue
		}
		out[k] = int(n)
	}
	return reflect.ValueOf(out), true
}

// splitList splits a comma-separated list, trimming blanks and dropping
// empty entries (so a trailing comma in an environment variable is harmless).
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parsePairs parses "a=1,b=2" into a map of string values. It reports
// false when a pair has no "=", and returns the well-formed pairs anyway.
func parsePairs(s string) (map[string]any, bool) {
	out := map[string]any{}
	ok := true
	for _, p := range splitList(s) {
		k, v, found := strings.Cut(p, "=")
		if !found {
			ok = false
			continue
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, ok
}

func toDuration(raw any) (time.Duration, bool) {
	switch v := raw.(type) {
	case time.Duration:
		return v, true
	case string:
		d, err := time.ParseDuration(strings.TrimSpace(v))
		return d, err == nil
	}
	// A bare number has no unit, so only 0 is unambiguous ("0 disables" is
	// natural to write in YAML).
	if n, ok := toInt64(raw); ok && n == 0 {
		return 0, true
	}
	return 0, false
}

func toInt64(raw any) (int64, bool) {
	switch v := raw.(type) {
	case int:
		return int64(v), true
	case int8:
		return int64(v), true
	case int16:
		return int64(v), true
	case int32:
		return int64(v), true
	case int64:
		return v, true
	case uint:
		return int64(v), uint64(v) <= math.MaxInt64
	case uint8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case uint64:
		return int64(v), v <= math.MaxInt64
	case float64:
		if v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxInt64 {
			return 0, false
		}
		return int64(v), true
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		return n, err == nil
	}
	return 0, false
}

// showAt is show for the value of key, except for a secret's (isSecret):
// its kind only. A password or token written unquoted reads as a number,
// and its type error printed it (review, 2026-12-07).
func showAt(key string, raw any) string {
	if !isSecret(key) {
		return show(raw)
	}
	switch raw.(type) {
	case string:
		return "a string (not shown: a secret)"
	case map[string]any, []any:
		return show(raw)
	}
	return "a value of another type (not shown: a secret)"
}

// show renders a raw value for a message: strings quoted, others as written.
func show(raw any) string {
	switch v := raw.(type) {
	case string:
		return strconv.Quote(v)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	}
	return fmt.Sprint(raw)
}

// suggest returns the sibling key closest to name, if it is a likely typo.
func suggest(prefix, name string) string {
	best, bestDist := "", 3 // at most 2 edits
	for _, s := range sections[prefix] {
		if dist := EditDistance(name, s); dist < bestDist && dist < len(s) {
			best, bestDist = s, dist
		}
	}
	return best
}

// EditDistance is the Levenshtein distance between a and b (in bytes: keys
// and flag names are ASCII). The command line uses it to suggest a flag.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// toBool accepts a YAML boolean or, from the environment and flags, the
// strings strconv.ParseBool knows (true/false, 1/0, t/f).
func toBool(raw any) (bool, bool) {
	switch v := raw.(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		return b, err == nil
	}
	return false, false
}

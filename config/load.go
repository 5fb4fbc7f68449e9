package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
	yamlv3 "go.yaml.in/yaml/v3"
)

// LoadOptions tunes Load.
type LoadOptions struct {
	// File is the YAML file to read; "" means none. MESHNODE_CONFIG and the
	// --config flag override it, in that order.
	File string
	// Environ replaces the process environment (os.Environ) when non-nil;
	// tests inject variables through it. Pass an empty, non-nil slice for
	// "no environment".
	Environ []string
}

// LoadError reports a source Load could not read at all: an unreadable or
// malformed file, or bad command-line arguments. Problems inside readable
// sources are not LoadErrors; Validate reports them.
type LoadError struct {
	Source string // file path, "flags"
	Err    error
}

func (e *LoadError) Error() string { return fmt.Sprintf("config: %s: %v", e.Source, e.Err) }

// Unwrap exposes the cause, e.g. fs.ErrNotExist or pflag.ErrHelp.
func (e *LoadError) Unwrap() error { return e.Err }

// Load parses args with a flag set built by Flags, then layers defaults,
// the YAML file, the environment and the flags into one Config. It does
// not validate: call Config.Validate.
func Load(args []string, opts LoadOptions) (Config, error) {
	fs := pflag.NewFlagSet("meshnode", pflag.ContinueOnError)
	// The caller decides how to show usage; Load only returns the error.
	fs.SetOutput(io.Discard)
	Flags(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, &LoadError{Source: "flags", Err: err}
	}
	if fs.NArg() > 0 {
		return Config{}, &LoadError{Source: "flags", Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	return LoadFlagSet(fs, opts)
}

// LoadFlagSet is Load for a command that parsed its own flag set (usually
// after calling Flags on it). Only flags named by a configuration key, and
// only those the user set, are taken; the command's other flags are ignored.
func LoadFlagSet(fs *pflag.FlagSet, opts LoadOptions) (Config, error) {
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	path := opts.File
	for _, kv := range environ {
		if name, val, ok := strings.Cut(kv, "="); ok && name == EnvConfigFile && val != "" {
			path = val
		}
	}
	if f := fs.Lookup(FlagConfigFile); f != nil && f.Changed {
		path = f.Value.String()
	}

	merged := koanf.New(".")
	if err := merged.Load(confmap.Provider(defaultsMap(), "."), nil); err != nil {
		return Config{}, &LoadError{Source: "defaults", Err: err}
	}
	var problems []Problem
	var err error
	from := map[string]string{} // key -> the source that set it last
	if path != "" {
		kf := koanf.New(".")
		if err := kf.Load(file.Provider(path), oneDocumentYAML{yaml.Parser()}); err != nil {
			return Config{}, &LoadError{Source: path, Err: err}
		}
		if problems, err = layer(merged, kf, fileSource(path), problems); err != nil {
			return Config{}, &LoadError{Source: path, Err: err}
		}
		noteFrom(from, kf, fileSource(path))
	}

	names := envSource{}
	var envProblems []Problem
	ke := koanf.New(".")
	err = ke.Load(env.Provider(".", env.Opt{
		Prefix:        EnvPrefix,
		EnvironFunc:   func() []string { return environ },
		TransformFunc: envTransform(names, &envProblems),
	}), nil)
	if err != nil {
		return Config{}, &LoadError{Source: "environment", Err: err}
	}
	problems = append(problems, envProblems...)
	if problems, err = layer(merged, ke, names, problems); err != nil {
		return Config{}, &LoadError{Source: "environment", Err: err}
	}
	noteFrom(from, ke, names)

	kp := koanf.New(".")
	if err := kp.Load(posflag.ProviderWithFlag(fs, ".", nil, flagValue(fs)), nil); err != nil {
		return Config{}, &LoadError{Source: "flags", Err: err}
	}
	if problems, err = layer(merged, kp, flagSource{}, problems); err != nil {
		return Config{}, &LoadError{Source: "flags", Err: err}
	}
	noteFrom(from, kp, flagSource{})

	// Decode onto the defaults (not a zero Config): an empty YAML section
	// replaces the defaults' map in the merge, and must not zero its keys.
	cfg := Default()
	decode(&cfg, merged.Raw(), nil)
	cfg.loadProblems = problems
	for key, desc := range from {
		if cfg.origins == nil {
			cfg.origins = make(map[string]origin, len(from))
		}
		if v, ok := cfg.valueAt(key); ok {
			cfg.origins[key] = origin{from: desc, value: v}
		}
	}
	return cfg, nil
}

// origin is where a key's loaded value came from, and that value.
type origin struct {
	from  string // "in file …", "from environment variable …", "from flag …"
	value any
}

// noteFrom records src as the source of every key k sets (a later layer
// replaces an earlier one's entry).
func noteFrom(from map[string]string, k *koanf.Koanf, src source) {
	for _, key := range k.Keys() {
		from[key] = src.describe(key)
	}
}

// valueAt is the value of a dotted key: a leaf, or one entry of a map leaf
// (node.limits.spot_types.Chat).
func (c Config) valueAt(key string) (any, bool) {
	if k, ok := lookupLeaf(key); ok {
		return reflect.ValueOf(c).FieldByIndex(k.index).Interface(), true
	}
	// The map leaf is the shortest prefix that is one: an entry's name
	// may hold dots itself (a stable type com.example.Room). Until
	// 2026-12-07 the key was cut at its last dot, and such an entry's
	// problems named no source (review).
	i := -1
	var k keySpec
	for j := strings.IndexByte(key, '.'); j >= 0; {
		if lk, ok := lookupLeaf(key[:j]); ok {
			i, k = j, lk
			break
		}
		next := strings.IndexByte(key[j+1:], '.')
		if next < 0 {
			break
		}
		j += next + 1
	}
	if i < 0 {
		return nil, false
	}
	m := reflect.ValueOf(c).FieldByIndex(k.index)
	if m.Kind() != reflect.Map {
		return nil, false
	}
	v := m.MapIndex(reflect.ValueOf(key[i+1:]))
	if !v.IsValid() {
		return nil, false
	}
	return v.Interface(), true
}

// layer checks one source's map on its own, so that each problem names the
// source it came from and a later layer cannot hide it, then merges it.
func layer(merged, k *koanf.Koanf, src source, problems []Problem) ([]Problem, error) {
	scratch := Default()
	problems = append(problems, decode(&scratch, k.Raw(), src)...)
	// A type=n value with a malformed pair stayed a string for decode to
	// report; its well-formed pairs still merge entry by entry, so that
	// Validate checks them with the rest.
	for _, key := range k.Keys() {
		if kk, ok := lookupLeaf(key); ok && kk.typ.Kind() == reflect.Map {
			if s, ok := k.Get(key).(string); ok {
				m, _ := parsePairs(s)
				k.Delete(key)
				if err := k.Set(key, m); err != nil {
					return problems, err
				}
			}
		}
	}
	return problems, merged.Merge(k)
}

// defaultsMap flattens Default() for the confmap provider.
func defaultsMap() map[string]any {
	def := reflect.ValueOf(Default())
	out := make(map[string]any, len(schema))
	for _, k := range schema {
		v := def.FieldByIndex(k.index)
		switch x := v.Interface().(type) {
		case []string:
			out[k.path] = append([]string{}, x...)
		case map[string]int:
			m := make(map[string]any, len(x))
			for name, n := range x {
				m[name] = n
			}
			out[k.path] = m
		default:
			out[k.path] = x
		}
	}
	return out
}

// envTransform maps MESHNODE_A__B_C=v to key "a.b_c". Variables whose first
// segment names no configuration key are not ours (the project's own test
// helpers use MESHNODE_TEST_…) and are ignored, except for the likely typo
// of a single underscore after a section name, which is reported. An empty
// value means "not set".
func envTransform(names envSource, problems *[]Problem) func(string, string) (string, any) {
	top := map[string]bool{}
	for _, n := range sections[""] {
		top[n] = true
	}
	return func(name, val string) (string, any) {
		if name == EnvConfigFile || val == "" {
			return "", nil
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "__", "."))
		first, _, _ := strings.Cut(key, ".")
		if !top[first] {
			if p, ok := envTypo(name, key); ok {
				*problems = append(*problems, p)
			}
			return "", nil
		}
		names[key] = name
		if key == "node.limits.spot_types" {
			// A map merges entry by entry with the file's map; a value that
			// does not parse stays a string and is reported by decode.
			if m, ok := parsePairs(val); ok {
				return key, m
			}
		}
		return key, val
	}
}

// envTypo recognizes MESHNODE_LEASE_TTL meant as MESHNODE_LEASE__TTL.
func envTypo(name, key string) (Problem, bool) {
	for _, sec := range sections[""] {
		if !isSection(sec) || !strings.HasPrefix(key, sec+"_") {
			continue
		}
		for _, k := range schema {
			if strings.ReplaceAll(k.path, ".", "_") == key {
				return Problem{Key: k.path, Message: fmt.Sprintf(
					"unknown environment variable %s: nested keys are separated by a double underscore; did you mean %s?",
					name, EnvName(k.path))}, true
			}
		}
		return Problem{Key: key, Message: fmt.Sprintf(
			"unknown environment variable %s: nested keys are separated by a double underscore, e.g. %s",
			name, EnvName(sec+".<key>"))}, true
	}
	return Problem{}, false
}

// flagValue keeps only flags named by a configuration key.
func flagValue(fs *pflag.FlagSet) func(*pflag.Flag) (string, any) {
	return func(f *pflag.Flag) (string, any) {
		if _, ok := lookupLeaf(f.Name); !ok {
			return "", nil
		}
		if p, ok := f.Value.(*pairsFlag); ok {
			// A map merges entry by entry with the file's and the
			// environment's (koanf merges nested map[string]any); a value
			// that does not parse stays a string and is reported by decode,
			// as from the environment.
			if m, ok := parsePairs(p.String()); ok {
				return f.Name, m
			}
			return f.Name, p.String()
		}
		return f.Name, posflag.FlagVal(fs, f)
	}
}

// oneDocumentYAML is koanf's YAML parser, refusing a file of several YAML
// documents: the parser reads the first and drops the rest without a word,
// so settings after a "---" (two files joined, a Kubernetes-style list of
// documents) were silently not applied (operator try-out 6). Empty
// documents (a leading or trailing "---", one that holds only comments) are
// not counted, and the one document with settings is read wherever it is:
// read by the parser, an empty first document (templating output,
// "---\n---\nnode: …") made it drop every setting without a word. A
// document that does not parse is reported wherever it is.
type oneDocumentYAML struct{ koanf.Parser }

func (p oneDocumentYAML) Unmarshal(b []byte) (map[string]any, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(b))
	var docs []*yamlv3.Node
	for {
		doc := new(yamlv3.Node)
		if err := dec.Decode(doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if len(doc.Content) > 0 && doc.Content[0].Tag != "!!null" {
			docs = append(docs, doc)
		}
	}
	switch len(docs) {
	case 0:
		return p.Parser.Unmarshal(b)
	case 1:
		// As the parser decodes the first document (yaml.Unmarshal).
		var out map[string]any
		if err := docs[0].Decode(&out); err != nil {
			return nil, err
		}
		return out, nil
	}
	return nil, fmt.Errorf("holds %d YAML documents (separated by ---), and only the first would be read: put every setting in one document", len(docs))
}

package config

import (
	"fmt"
	"reflect"
	"strings"
)

// IgnoredSettings names the settings of one store that belong to a
// provider it does not use: redis.* keys under a store whose provider is
// memory or none. They are accepted on purpose (one YAML file may carry
// both providers' settings and select one per environment), but an
// operator who set the Redis keys and forgot provider: redis would run on
// a memory store without a word; the node logs a WARN for each
// (mesh.Start), so that the mistake is seen at start.
type IgnoredSettings struct {
	Store    string   // "location_store" or "relocation_store"
	Provider string   // the provider selected: "memory", or "" (none)
	Keys     []string // below Store+".redis", in schema order: "addrs", "db", "tls.ca_file"
}

// String is the WARN line: "location_store: redis settings (addrs, db) are
// ignored: provider is memory".
func (s IgnoredSettings) String() string {
	provider := s.Provider
	if provider == ProviderNone {
		provider = "not set (no store)"
	}
	return fmt.Sprintf("%s: redis settings (%s) are ignored: provider is %s", s.Store, strings.Join(s.Keys, ", "), provider)
}

// IgnoredStoreSettings returns, for each store whose provider is not redis
// (memory or none), the redis.* keys that were set: by the user — Load
// read them from the file, the environment or a flag, even at their
// default value — or by the program, which changed them from Default() to
// a value that is not the zero value. Defaults never count. A store with
// provider redis, or with no such key set, is not listed; nor is a store
// with an unknown provider (Validate refuses it).
func (c Config) IgnoredStoreSettings() []IgnoredSettings {
	def := Default()
	var out []IgnoredSettings
	for _, st := range []struct {
		name     string
		provider string
	}{
		{"location_store", c.LocationStore.Provider},
		{"relocation_store", c.RelocationStore.Provider},
	} {
		if st.provider != ProviderMemory && st.provider != ProviderNone {
			continue
		}
		prefix := st.name + ".redis."
		var keys []string
		for _, k := range schema {
			if !strings.HasPrefix(k.path, prefix) {
				continue
			}
			if c.setByUser(k.path) || c.setByProgram(k, def) {
				keys = append(keys, strings.TrimPrefix(k.path, prefix))
			}
		}
		if len(keys) > 0 {
			out = append(out, IgnoredSettings{Store: st.name, Provider: st.provider, Keys: keys})
		}
	}
	return out
}

// setByUser reports whether Load read key from the file, the environment
// or a flag (an empty environment variable is not a setting).
func (c Config) setByUser(key string) bool {
	_, ok := c.origins[key]
	return ok
}

// setByProgram reports whether key holds neither its default nor its
// type's zero value (an empty list counts as zero): a program that built
// its Config from Default() and set a Redis address. The zero value is left
// out so that a store configured as StoreConfig{Provider: "memory"} (Redis
// settings all zero) does not list every key whose default is not zero.
func (c Config) setByProgram(k keySpec, def Config) bool {
	v := reflect.ValueOf(c).FieldByIndex(k.index)
	if v.IsZero() || (v.Kind() == reflect.Slice && v.Len() == 0) {
		return false
	}
	return !reflect.DeepEqual(v.Interface(), reflect.ValueOf(def).FieldByIndex(k.index).Interface())
}

// UnusedAdminToken returns the WARN line a node logs at start when
// admin.token is set and admin.listen is empty, and "" otherwise. The
// token is then used by nothing: no listener runs, and `meshnode ctl
// status` / `ctl relocate` read their token from MESHNODE_ADMIN__TOKEN in
// their own environment, not from a node. It is accepted on purpose — a
// shell that exports MESHNODE_ADMIN__TOKEN for ctl also hands it to a
// node started there without a listener, and a file shared by nodes with
// and without one may carry it — but more often admin.listen was
// forgotten, and the node ran without metrics, probes or host commands
// without a word. The line names where
// the token was read (never the token itself).
func (c Config) UnusedAdminToken() string {
	if c.Admin.Token == "" || c.Admin.Listen != "" {
		return ""
	}
	from := ""
	if o, ok := c.origins["admin.token"]; ok {
		from = " (" + o.from + ")"
	}
	return "admin.token is set" + from + " but admin.listen is empty: no admin listener runs (no metrics, probes, " +
		"ctl status or ctl relocate) and the token is not used; set admin.listen (" + EnvName("admin.listen") +
		", e.g. 127.0.0.1:9464), or unset admin.token"
}

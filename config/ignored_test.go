package config

import (
	"reflect"
	"strings"
	"testing"
)

// Redis settings of a store whose provider is memory (or none) are
// accepted, and named as ignored (the node's start WARN) when the user set
// them — in the file, the environment or a flag, even at their default —
// or the program did; defaults never are, and a store with provider redis
// uses them.
func TestIgnoredStoreSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string   // "" = no file
		env  []string // nil = none
		args []string
		edit func(*Config) // after Load: a program's own settings
		want []IgnoredSettings
		line string // want[0].String(), when want is not empty
	}{
		{name: "defaults", args: []string{"--location_store.provider=memory", "--relocation_store.provider=memory"}},
		{name: "nothing selected, nothing set"},
		{name: "memory with addrs and a bad db in the file", yaml: `
location_store:
  provider: memory
  redis:
    addrs: [r:6379]
    db: -1
`, want: []IgnoredSettings{{Store: "location_store", Provider: ProviderMemory, Keys: []string{"addrs", "db"}}},
			line: "location_store: redis settings (addrs, db) are ignored: provider is memory"},
		{name: "provider redis uses them", yaml: `
location_store:
  provider: redis
  redis: {addrs: [r:6379], db: 3}
relocation_store:
  provider: redis
  redis: {addrs: [r:6379], namespace: other}
`},
		{name: "a key set at its default counts", yaml: `
relocation_store:
  provider: memory
  redis: {db: 0, tls: {min_version: "1.2"}}
`, want: []IgnoredSettings{{Store: "relocation_store", Provider: ProviderMemory, Keys: []string{"db", "tls.min_version"}}}},
		{name: "from the environment and a flag, both stores",
			env:  []string{"MESHNODE_RELOCATION_STORE__REDIS__PASSWORD=s3cret"},
			args: []string{"--location_store.provider=memory", "--location_store.redis.namespace=orders"},
			want: []IgnoredSettings{
				{Store: "location_store", Provider: ProviderMemory, Keys: []string{"namespace"}},
				{Store: "relocation_store", Provider: ProviderNone, Keys: []string{"password"}},
			},
			line: "location_store: redis settings (namespace) are ignored: provider is memory"},
		{name: "no provider: the line says so", args: []string{"--relocation_store.redis.addrs=r:6379"},
			want: []IgnoredSettings{{Store: "relocation_store", Provider: ProviderNone, Keys: []string{"addrs"}}},
			line: "relocation_store: redis settings (addrs) are ignored: provider is not set (no store)"},
		{name: "an empty environment variable is not a setting", env: []string{"MESHNODE_LOCATION_STORE__REDIS__ADDRS="},
			args: []string{"--location_store.provider=memory"}},
		// A redis.* key is Redis's only: discovery rounds of a memory store
		// are bounded by lease.renew_timeout (mesh.discoveryRoundBound).
		{name: "the location store's operation timeout is ignored with memory",
			args: []string{"--location_store.provider=memory", "--location_store.redis.operation_timeout=5s"},
			want: []IgnoredSettings{{Store: "location_store", Provider: ProviderMemory, Keys: []string{"operation_timeout"}}}},
		{name: "set by the program", args: []string{"--location_store.provider=memory"},
			edit: func(c *Config) {
				c.LocationStore.Redis.Addrs = []string{"r:6379"}
				c.LocationStore.Redis.ReplicaAcks = 1
			},
			want: []IgnoredSettings{{Store: "location_store", Provider: ProviderMemory, Keys: []string{"addrs", "replica_acks"}}}},
		{name: "zeroed by the program", edit: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderMemory}
			c.RelocationStore.Redis.Addrs = nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadFrom(t, tc.env, tc.yaml, tc.args)
			if tc.edit != nil {
				tc.edit(&c)
			}
			got := c.IgnoredStoreSettings()
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("IgnoredStoreSettings() = %+v, want %+v", got, tc.want)
			}
			if tc.line != "" {
				if s := got[0].String(); s != tc.line {
					t.Fatalf("line %q, want %q", s, tc.line)
				}
			}
		})
	}
}

// admin.token without admin.listen is accepted (Validate) and named by
// UnusedAdminToken with where it was read, never its value; with a
// listener, or without a token, there is no line.
func TestUnusedAdminToken(t *testing.T) {
	const token = "0123456789abcdef0123"
	for _, tc := range []struct {
		name string
		env  []string
		yaml string
		want string // "" = no line; otherwise its start
	}{
		{name: "neither"},
		{name: "token from the environment", env: []string{"MESHNODE_ADMIN__TOKEN=" + token},
			want: "admin.token is set (from environment variable MESHNODE_ADMIN__TOKEN) but admin.listen is empty: "},
		{name: "token in the file", yaml: "admin: {token: " + token + "}\n",
			want: "admin.token is set (in file "},
		{name: "token and listener", env: []string{"MESHNODE_ADMIN__TOKEN=" + token, "MESHNODE_ADMIN__LISTEN=127.0.0.1:9464"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadFrom(t, tc.env, tc.yaml, []string{"--location_store.provider=memory", "--relocation_store.provider=memory"})
			if err := c.Validate(nil); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got := c.UnusedAdminToken()
			if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("UnusedAdminToken() = %q, want one beginning %q", got, tc.want)
			}
			if strings.Contains(got, token) {
				t.Fatalf("the line shows the token: %q", got)
			}
		})
	}
}

// loadFrom loads the configuration of env (nil: an empty environment), a
// file holding yaml ("" = no file) and the flags args.
func loadFrom(t *testing.T, env []string, yaml string, args []string) Config {
	t.Helper()
	opts := LoadOptions{Environ: noEnv}
	if env != nil {
		opts.Environ = env
	}
	if yaml != "" {
		opts.File = writeYAML(t, yaml)
	}
	return mustLoad(t, args, opts)
}

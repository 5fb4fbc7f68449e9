package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// noEnv is an empty, non-nil environment: the process environment is not read.
var noEnv = []string{}

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, args []string, opts LoadOptions) Config {
	t.Helper()
	c, err := Load(args, opts)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestLoadDefaultsOnly(t *testing.T) {
	got := mustLoad(t, nil, LoadOptions{Environ: noEnv})
	if want := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Load with no sources:\n got  %+v\n want %+v", got, want)
	}
}

// nodeYAML is what testdata/node.yaml decodes to.
func nodeYAML() Config {
	return Config{
		Node: NodeConfig{
			MeshName: "orders", RoutingID: "a1b2c3",
			Endpoint: "tcp://0.0.0.0:7001", AdvertiseEndpoint: "tcp://10.0.0.5:7001",
			SecurityIdentity: "node-a", ObjectRole: RoleServer, PlacementWeight: 250, ApplicationVersion: 42,
			Limits: LimitsConfig{Actors: 5000, Spots: 2000, SpotTypes: map[string]int{"Chat": 100, "com.example.Room": 7}},
		},
		Lease:   LeaseConfig{RenewInterval: 4 * time.Second, TTL: 20 * time.Second, RenewTimeout: 2 * time.Second, FencingMargin: 6 * time.Second},
		Routing: RoutingConfig{RouteCacheMaxAge: 10 * time.Second, RouteCacheMaxEntries: 65536, MessageFollowDuration: 20 * time.Second},
		Transport: TransportConfig{LivenessInterval: 2 * time.Second, PeerTimeout: 9 * time.Second,
			SendQueueLimit: 500, RequestTimeout: 7 * time.Second, MaxUnadmitted: 16, MaxPeers: 200, IOBufferBytes: 32 << 10, Curve: CurveConfig{AllowedKeys: []string{}}},
		LocationStore: StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{
			Addrs: []string{"redis-a:6379", "redis-b:6379"}, MasterName: "mymaster", Username: "mesh",
			Password: "file-secret", DB: 2, Namespace: "orders", OperationTimeout: 1500 * time.Millisecond,
			TLS: RedisTLSConfig{MinVersion: TLSVersion12}, ReplicaAcks: 1, ReplicaAckTimeout: 250 * time.Millisecond}},
		RelocationStore: StoreConfig{Provider: ProviderMemory, Redis: defaultRedis("meshnode-reloc")},
		Relocation: RelocationConfig{Deadline: 12 * time.Second, ChunkSize: 65536, MaxConcurrent: 64, HostTargetRun: 32, HostDeadline: 90 * time.Second,
			DrainOnShutdown: false},
		Recovery:          RecoveryConfig{ReclaimGrace: 30 * time.Second, ReclaimSweepInterval: 0},
		StoreFailureGrace: 45 * time.Second,
		ShutdownDeadline:  20 * time.Second,
		Log:               LogConfig{Format: LogJSON, Level: LogDebug},
	}
}

func TestLoadTestdataFile(t *testing.T) {
	got := mustLoad(t, nil, LoadOptions{File: "testdata/node.yaml", Environ: noEnv})
	if want := nodeYAML(); !reflect.DeepEqual(withoutOrigins(got), want) {
		t.Fatalf("testdata/node.yaml:\n got  %+v\n want %+v", got, want)
	}
	if err := got.Validate([]FactoryPolicy{{StableType: "Room", Kind: KindInstanceSpot}}); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// TestLayering checks defaults < YAML < environment < flags, key by key, and
// that a flag left at its default does not override a lower layer.
func TestLayering(t *testing.T) {
	file := writeYAML(t, "node:\n  mesh_name: from-file\nlease:\n  ttl: 21s\n")
	tests := []struct {
		name     string
		file     string
		env      []string
		args     []string
		wantMesh string
		wantTTL  time.Duration
	}{
		{name: "defaults", wantMesh: "default", wantTTL: 15 * time.Second},
		{name: "file over defaults", file: file, wantMesh: "from-file", wantTTL: 21 * time.Second},
		{name: "env over file", file: file, env: []string{"MESHNODE_NODE__MESH_NAME=from-env"},
			wantMesh: "from-env", wantTTL: 21 * time.Second},
		{name: "flag over env", file: file, env: []string{"MESHNODE_NODE__MESH_NAME=from-env", "MESHNODE_LEASE__TTL=22s"},
			args: []string{"--node.mesh_name=from-flag"}, wantMesh: "from-flag", wantTTL: 22 * time.Second},
		{name: "flag over file without env", file: file, args: []string{"--lease.ttl", "23s"},
			wantMesh: "from-file", wantTTL: 23 * time.Second},
		{name: "unset flag keeps file", file: file, args: []string{"--log.level=warn"},
			wantMesh: "from-file", wantTTL: 21 * time.Second},
		{name: "env without file", env: []string{"MESHNODE_LEASE__TTL=24s"}, wantMesh: "default", wantTTL: 24 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = noEnv
			}
			c := mustLoad(t, tc.args, LoadOptions{File: tc.file, Environ: env})
			if c.Node.MeshName != tc.wantMesh || c.Lease.TTL != tc.wantTTL {
				t.Fatalf("mesh_name=%q ttl=%s, want %q %s", c.Node.MeshName, c.Lease.TTL, tc.wantMesh, tc.wantTTL)
			}
			// Keys no layer touched keep their defaults.
			if c.Lease.RenewInterval != 5*time.Second || c.Node.PlacementWeight != 100 {
				t.Fatalf("untouched keys changed: %+v", c.Lease)
			}
		})
	}
}

func TestConfigFileSelection(t *testing.T) {
	a := writeYAML(t, "node:\n  mesh_name: a\n")
	b := writeYAML(t, "node:\n  mesh_name: b\n")
	c := writeYAML(t, "node:\n  mesh_name: c\n")
	tests := []struct {
		name string
		opts LoadOptions
		args []string
		want string
	}{
		{"option", LoadOptions{File: a, Environ: noEnv}, nil, "a"},
		{"env over option", LoadOptions{File: a, Environ: []string{EnvConfigFile + "=" + b}}, nil, "b"},
		{"flag over env", LoadOptions{File: a, Environ: []string{EnvConfigFile + "=" + b}}, []string{"--config", c}, "c"},
		{"empty env ignored", LoadOptions{File: a, Environ: []string{EnvConfigFile + "="}}, nil, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustLoad(t, tc.args, tc.opts).Node.MeshName; got != tc.want {
				t.Fatalf("mesh_name = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLoadValueForms(t *testing.T) {
	file := writeYAML(t, `
node:
  limits:
    spot_types:
      Chat: 100
      com.example.Room: 7
routing:
  route_cache_max_age: 0
location_store:
  redis:
    addrs: x:1
`)
	tests := []struct {
		name  string
		env   []string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{name: "file forms", check: func(t *testing.T, c Config) {
			want := map[string]int{"Chat": 100, "com.example.Room": 7}
			if !reflect.DeepEqual(c.Node.Limits.SpotTypes, want) {
				t.Errorf("spot_types = %v, want %v", c.Node.Limits.SpotTypes, want)
			}
			if c.Routing.RouteCacheMaxAge != 0 {
				t.Errorf("bare 0 duration = %s", c.Routing.RouteCacheMaxAge)
			}
			if !reflect.DeepEqual(c.LocationStore.Redis.Addrs, []string{"x:1"}) {
				t.Errorf("addrs = %q", c.LocationStore.Redis.Addrs)
			}
		}},
		{name: "env comma list", env: []string{"MESHNODE_LOCATION_STORE__REDIS__ADDRS=a:6379, b:6379,"}, check: func(t *testing.T, c Config) {
			if want := []string{"a:6379", "b:6379"}; !reflect.DeepEqual(c.LocationStore.Redis.Addrs, want) {
				t.Errorf("addrs = %q, want %q", c.LocationStore.Redis.Addrs, want)
			}
		}},
		{name: "flag list", args: []string{"--relocation_store.redis.addrs=c:1,d:2"}, check: func(t *testing.T, c Config) {
			if want := []string{"c:1", "d:2"}; !reflect.DeepEqual(c.RelocationStore.Redis.Addrs, want) {
				t.Errorf("addrs = %q, want %q", c.RelocationStore.Redis.Addrs, want)
			}
		}},
		{name: "env and flag maps merge per type", env: []string{"MESHNODE_NODE__LIMITS__SPOT_TYPES=Chat=5,Lobby=3"},
			args: []string{"--node.limits.spot_types=Lobby=4"}, check: func(t *testing.T, c Config) {
				want := map[string]int{"Chat": 5, "com.example.Room": 7, "Lobby": 4}
				if !reflect.DeepEqual(c.Node.Limits.SpotTypes, want) {
					t.Errorf("spot_types = %v, want %v", c.Node.Limits.SpotTypes, want)
				}
			}},
		{name: "repeated map flags add up", args: []string{"--node.limits.spot_types=A=1", "--node.limits.spot_types", "B=2,C=3"},
			check: func(t *testing.T, c Config) {
				want := map[string]int{"A": 1, "B": 2, "C": 3, "Chat": 100, "com.example.Room": 7}
				if !reflect.DeepEqual(c.Node.Limits.SpotTypes, want) {
					t.Errorf("spot_types = %v, want %v", c.Node.Limits.SpotTypes, want)
				}
			}},
		{name: "env typed values", env: []string{
			"MESHNODE_NODE__PLACEMENT_WEIGHT=7", "MESHNODE_NODE__APPLICATION_VERSION=9000000000",
			"MESHNODE_STORE_FAILURE_GRACE=1m", "MESHNODE_NODE__OBJECT_ROLE=client", "MESHNODE_LOG__LEVEL=",
		}, check: func(t *testing.T, c Config) {
			if c.Node.PlacementWeight != 7 || c.Node.ApplicationVersion != 9000000000 ||
				c.StoreFailureGrace != time.Minute || c.Node.ObjectRole != RoleClient || c.Log.Level != LogInfo {
				t.Errorf("got %+v / %s / %q", c.Node, c.StoreFailureGrace, c.Log.Level)
			}
		}},
		{name: "foreign MESHNODE variables are ignored", env: []string{
			"MESHNODE_TEST_REDIS_ADDR=127.0.0.1:1", "MESHNODE_SKIP_REDIS=1", "OTHER_LEASE__TTL=1s",
		}, check: func(t *testing.T, c Config) {
			c.LocationStore.Provider, c.RelocationStore.Provider = ProviderMemory, ProviderMemory
			if err := c.Validate(nil); err != nil {
				t.Errorf("Validate: %v", err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = noEnv
			}
			tc.check(t, mustLoad(t, tc.args, LoadOptions{File: file, Environ: env}))
		})
	}
}

// TestLoadProblems checks that unknown keys and malformed values are kept by
// Load and reported by Validate with the exact key, message and source.
func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  []string
		args []string
		want func(file string) []Problem
	}{
		{name: "unknown keys in file", yaml: `
nod:
  mesh_name: x
node:
  mesh_nme: x
  limits:
    actorz: 3
lease:
  ttll: 3s
whatever: 1
`, want: func(f string) []Problem {
			in := ` (in file "` + f + `")`
			return []Problem{
				p("node.limits.actorz", "unknown key; did you mean node.limits.actors?"+in),
				p("node.mesh_nme", "unknown key; did you mean node.mesh_name?"+in),
				p("lease.ttll", "unknown key; did you mean lease.ttl?"+in),
				p("nod", "unknown key; did you mean node?"+in),
				p("whatever", "unknown key"+in),
			}
		}},
		{name: "wrong types in file", yaml: `
node:
  mesh_name: 123
  placement_weight: many
  limits:
    spot_types:
      Chat: lots
lease:
  ttl: abc
  renew_interval: 5
routing: 5s
location_store:
  redis:
    addrs: 6379
relocation_store:
  redis:
    addrs: [a:1, 2, b:2, 4]
`, want: func(f string) []Problem {
			in := ` (in file "` + f + `")`
			return []Problem{
				p("node.mesh_name", "must be a string (quote it in YAML), got 123"+in),
				p("node.placement_weight", `must be an integer, got "many"`+in),
				p("node.limits.spot_types.Chat", `must be an integer, got "lots"`+in),
				p("lease.renew_interval", `must be a duration such as "5s", got 5`+in),
				p("lease.ttl", `must be a duration such as "5s", got "abc"`+in),
				p("routing", `must be a mapping of keys, got "5s"`+in),
				p("location_store.redis.addrs", "must be a list of strings or a comma-separated string, got 6379"+in),
				p("relocation_store.redis.addrs", "entry 2 must be a string, got 2"+in),
				p("relocation_store.redis.addrs", "entry 4 must be a string, got 4"+in),
			}
		}},
		{name: "a later layer does not hide a file problem", yaml: "lease: 5s\n",
			env: []string{"MESHNODE_LEASE__TTL=20s"},
			want: func(f string) []Problem {
				return []Problem{p("lease", `must be a mapping of keys, got "5s" (in file "`+f+`")`)}
			}},
		{name: "environment problems", env: []string{
			"MESHNODE_LEASE__TTLL=3s",
			"MESHNODE_LEASE_TTL=3s",
			"MESHNODE_LOCATION_STORE_REDIS_ADDRS=a:1",
			"MESHNODE_NODE_WHATEVER=1",
			"MESHNODE_NODE__PLACEMENT_WEIGHT=lots",
			"MESHNODE_NODE__LIMITS__SPOT_TYPES=Chat",
		}, want: func(string) []Problem {
			return []Problem{
				p("lease.ttl", "unknown environment variable MESHNODE_LEASE_TTL: nested keys are separated by a double underscore; did you mean MESHNODE_LEASE__TTL?"),
				p("location_store.redis.addrs", "unknown environment variable MESHNODE_LOCATION_STORE_REDIS_ADDRS: nested keys are separated by a double underscore; did you mean MESHNODE_LOCATION_STORE__REDIS__ADDRS?"),
				p("node_whatever", "unknown environment variable MESHNODE_NODE_WHATEVER: nested keys are separated by a double underscore, e.g. MESHNODE_NODE__<KEY>"),
				p("node.placement_weight", `must be an integer, got "lots" (from environment variable MESHNODE_NODE__PLACEMENT_WEIGHT)`),
				p("node.limits.spot_types", `must be type=n pairs separated by commas, got "Chat" (from environment variable MESHNODE_NODE__LIMITS__SPOT_TYPES)`),
				p("lease.ttll", "unknown key; did you mean lease.ttl? (from environment variable MESHNODE_LEASE__TTLL)"),
			}
		}},
		{name: "environment map entry", env: []string{"MESHNODE_NODE__LIMITS__SPOT_TYPES=Chat=x, Room=2"},
			want: func(string) []Problem {
				return []Problem{p("node.limits.spot_types.Chat", `must be an integer, got "x" (from environment variable MESHNODE_NODE__LIMITS__SPOT_TYPES)`)}
			}},
		{name: "flag map entry", args: []string{"--node.limits.spot_types", "Room=2", "--node.limits.spot_types=Chat=abc"},
			want: func(string) []Problem {
				return []Problem{p("node.limits.spot_types.Chat", `must be an integer, got "abc" (from flag --node.limits.spot_types)`)}
			}},
		{name: "every entry of a map value", env: []string{"MESHNODE_NODE__LIMITS__SPOT_TYPES=Chat=-1,Room=x"},
			want: func(string) []Problem {
				from := " (from environment variable MESHNODE_NODE__LIMITS__SPOT_TYPES)"
				return []Problem{
					p("node.limits.spot_types.Room", `must be an integer, got "x"`+from),
					p("node.limits.spot_types.Chat", "must be 0 (no limit) or 1..2147483647, got -1"+from),
				}
			}},
		{name: "every entry of a map across layers", yaml: "node:\n  limits:\n    spot_types:\n      Room: x\n",
			args: []string{"--node.limits.spot_types=Chat=-2,Lobby=3"},
			want: func(f string) []Problem {
				return []Problem{
					p("node.limits.spot_types.Room", `must be an integer, got "x" (in file "`+f+`")`),
					p("node.limits.spot_types.Chat", "must be 0 (no limit) or 1..2147483647, got -2 (from flag --node.limits.spot_types)"),
				}
			}},
		{name: "a malformed pair does not hide the others", env: []string{"MESHNODE_NODE__LIMITS__SPOT_TYPES=Chat=-1,Room,Lobby=y"},
			want: func(string) []Problem {
				from := " (from environment variable MESHNODE_NODE__LIMITS__SPOT_TYPES)"
				return []Problem{
					p("node.limits.spot_types", `must be type=n pairs separated by commas, got "Chat=-1,Room,Lobby=y"`+from),
					p("node.limits.spot_types.Lobby", `must be an integer, got "y"`+from),
					p("node.limits.spot_types.Chat", "must be 0 (no limit) or 1..2147483647, got -1"+from),
				}
			}},
		{name: "flag map without pairs", args: []string{"--node.limits.spot_types=Chat"},
			want: func(string) []Problem {
				return []Problem{p("node.limits.spot_types", `must be type=n pairs separated by commas, got "Chat" (from flag --node.limits.spot_types)`)}
			}},
		{name: "integer out of range", yaml: "node:\n  application_version: 9223372036854775808\n  placement_weight: 1.5\n",
			want: func(f string) []Problem {
				return []Problem{
					p("node.placement_weight", `must be an integer, got 1.5 (in file "`+f+`")`),
					p("node.application_version", `must be an integer, got 9223372036854775808 (in file "`+f+`")`),
				}
			}},
		{name: "not a boolean", env: []string{"MESHNODE_RELOCATION__DRAIN_ON_SHUTDOWN=maybe"}, yaml: "relocation:\n  max_concurrent: 4\n",
			want: func(string) []Problem {
				return []Problem{p("relocation.drain_on_shutdown", `must be true or false, got "maybe" (from environment variable MESHNODE_RELOCATION__DRAIN_ON_SHUTDOWN)`)}
			}},
		{name: "empty section keeps defaults", yaml: "lease:\nnode:\n  limits:\n", want: func(string) []Problem { return nil }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var file string
			if tc.yaml != "" {
				file = writeYAML(t, tc.yaml)
			}
			env := noEnv
			if tc.env != nil {
				env = tc.env
			}
			c := mustLoad(t, tc.args, LoadOptions{File: file, Environ: env})
			c.LocationStore.Provider, c.RelocationStore.Provider = ProviderMemory, ProviderMemory
			got := problemsOf(t, c.Validate(nil))
			if want := tc.want(file); !reflect.DeepEqual(got, want) {
				t.Errorf("problems:\n got  %q\n want %q", got, want)
			}
			// A bad value never replaces the default (the environment sets
			// a valid lease.ttl in one case).
			if c.Lease.RenewInterval != 5*time.Second || (tc.env == nil && c.Lease.TTL != 15*time.Second) {
				t.Errorf("lease = %+v, want defaults", c.Lease)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	broken := writeYAML(t, "node: [unclosed\n")
	list := writeYAML(t, "- a\n- b\n")
	tests := []struct {
		name   string
		args   []string
		opts   LoadOptions
		source string
		is     error
	}{
		{"missing file", nil, LoadOptions{File: filepath.Join(t.TempDir(), "nope.yaml"), Environ: noEnv}, "", fs.ErrNotExist},
		{"broken yaml", nil, LoadOptions{File: broken, Environ: noEnv}, broken, nil},
		{"yaml not a mapping", nil, LoadOptions{File: list, Environ: noEnv}, list, nil},
		{"unknown flag", []string{"--node.mesh"}, LoadOptions{Environ: noEnv}, "flags", nil},
		{"bad flag value", []string{"--lease.ttl=soon"}, LoadOptions{Environ: noEnv}, "flags", nil},
		{"positional argument", []string{"run"}, LoadOptions{Environ: noEnv}, "flags", nil},
		{"help", []string{"--help"}, LoadOptions{Environ: noEnv}, "flags", pflag.ErrHelp},
		{"password has no flag", []string{"--location_store.redis.password=x"}, LoadOptions{Environ: noEnv}, "flags", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, tc.opts)
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v (%T), want *LoadError", err, err)
			}
			if tc.source != "" && le.Source != tc.source {
				t.Errorf("Source = %q, want %q", le.Source, tc.source)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.is)
			}
		})
	}
}

// TestLoadFlagSet checks that a command's own flags are left alone.
func TestLoadFlagSet(t *testing.T) {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.Int("demo.count", 3, "not a config key")
	Flags(fs)
	Flags(fs) // registering twice is harmless
	if err := fs.Parse([]string{"--demo.count=9", "--node.object_role=none"}); err != nil {
		t.Fatal(err)
	}
	c, err := LoadFlagSet(fs, LoadOptions{Environ: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	if c.Node.ObjectRole != RoleNone {
		t.Fatalf("object_role = %q", c.Node.ObjectRole)
	}
	if err := c.Validate(nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestLoadReadsProcessEnvironmentByDefault(t *testing.T) {
	t.Setenv("MESHNODE_NODE__MESH_NAME", "from-process")
	if got := mustLoad(t, nil, LoadOptions{}).Node.MeshName; got != "from-process" {
		t.Fatalf("mesh_name = %q", got)
	}
}

// A boolean setting reads YAML booleans, environment strings and flags.
func TestLoadBoolean(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  []string
		want bool
	}{
		{"default", nil, nil, true},
		{"environment false", nil, []string{"MESHNODE_RELOCATION__DRAIN_ON_SHUTDOWN=false"}, false},
		{"environment 0", nil, []string{"MESHNODE_RELOCATION__DRAIN_ON_SHUTDOWN=0"}, false},
		{"flag over environment", []string{"--relocation.drain_on_shutdown=true"}, []string{"MESHNODE_RELOCATION__DRAIN_ON_SHUTDOWN=false"}, true},
		{"bare flag", []string{"--relocation.drain_on_shutdown=false"}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = []string{}
			}
			got := mustLoad(t, tc.args, LoadOptions{Environ: env}).Relocation.DrainOnShutdown
			if got != tc.want {
				t.Fatalf("drain_on_shutdown = %v, want %v", got, tc.want)
			}
		})
	}
}

// A rule's problem about one key names where the value came from, as the
// decoding problems do: with a file, the environment and flags all able
// to set a key, "must be 0..10000, got 30000" alone leaves the operator
// looking in the wrong layer. A value the program set after Load is not
// blamed on a source.
func TestValidationProblemsNameTheirSource(t *testing.T) {
	path := writeYAML(t, "node:\n  placement_weight: 20000\n  application_version: -1\n"+
		"  limits:\n    spot_types:\n      Chat: -2\nrelocation:\n  chunk_size: 10\n")
	cfg := mustLoad(t, []string{"--transport.send_queue_limit=0", "--config", path},
		LoadOptions{Environ: []string{"MESHNODE_NODE__PLACEMENT_WEIGHT=30000", "MESHNODE_LOG__LEVEL=loud"}})
	err := cfg.Validate(nil)
	if err == nil {
		t.Fatal("no problems")
	}
	for _, want := range []string{
		`config: node.placement_weight: must be 0..10000, got 30000 (from environment variable MESHNODE_NODE__PLACEMENT_WEIGHT)`,
		`config: node.application_version: must be 0..9223372036854775807, got -1 (in file "` + path + `")`,
		`config: node.limits.spot_types.Chat: must be 0 (no limit) or 1..2147483647, got -2 (in file "` + path + `")`,
		`config: relocation.chunk_size: ` + chunkLow + `got 10 (in file "` + path + `")`,
		`config: transport.send_queue_limit: must be at least 1, got 0 (from flag --transport.send_queue_limit)`,
		`config: log.level: must be one of debug, info, warn, error, got "loud" (from environment variable MESHNODE_LOG__LEVEL)`,
	} {
		if !strings.Contains(err.Error()+"\n", want+"\n") {
			t.Errorf("problems lack the line\n%s\ngot:\n%s", want, err)
		}
	}

	// Set by the program after Load: not the file's value any more.
	cfg.Relocation.ChunkSize = 5
	err = cfg.Validate(nil)
	if want := "config: relocation.chunk_size: " + chunkLow + "got 5\n"; !strings.Contains(err.Error()+"\n", want) {
		t.Errorf("a value set by the program is blamed on a source:\n%s", err)
	}
}

// withoutOrigins is c without the record of where Load read each value,
// for comparing a loaded Config with a literal one.
func withoutOrigins(c Config) Config {
	c.origins = nil
	return c
}

// LoadProblems is the decoding part of Validate alone: unknown keys and
// wrong types, not the rules (here: no store for a server).
func TestLoadProblemsAlone(t *testing.T) {
	c := mustLoad(t, nil, LoadOptions{Environ: noEnv})
	if err := c.LoadProblems(); err != nil {
		t.Fatalf("defaults: LoadProblems() = %v", err)
	}
	if c.Validate(nil) == nil {
		t.Fatal("the defaults validate; the test needs a rule they break")
	}
	c = mustLoad(t, nil, LoadOptions{Environ: []string{"MESHNODE_LEASE__TLL=1s", "MESHNODE_NODE__PLACEMENT_WEIGHT=heavy"}})
	want := []Problem{
		p("lease.tll", `unknown key; did you mean lease.ttl? (from environment variable MESHNODE_LEASE__TLL)`),
		p("node.placement_weight", `must be an integer, got "heavy" (from environment variable MESHNODE_NODE__PLACEMENT_WEIGHT)`),
	}
	got := problemsOf(t, c.LoadProblems())
	sortProblems := func(ps []Problem) {
		slices.SortFunc(ps, func(a, b Problem) int { return strings.Compare(a.Key, b.Key) })
	}
	sortProblems(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadProblems:\n got  %v\n want %v", got, want)
	}
}

// A file of several YAML documents is refused: only the first would be
// read, so the settings after a "---" were silently not applied. A leading
// or trailing "---" (one document) is fine, and so are empty documents
// before the one with settings.
func TestLoadRefusesAFileOfSeveralYAMLDocuments(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       string // "" = loads, with mesh_name "a"
	}{
		{"two documents", "node:\n  mesh_name: a\n---\nnode:\n  mesh_name: b\n", "holds 2 YAML documents"},
		{"three documents", "node:\n  mesh_name: a\n---\nlease:\n  ttl: 20s\n---\nlog:\n  level: debug\n", "holds 3 YAML documents"},
		{"leading separator", "---\nnode:\n  mesh_name: a\n", ""},
		{"trailing separator", "node:\n  mesh_name: a\n---\n", ""},
		{"comments after a trailing separator", "node:\n  mesh_name: a\n--- # end\n# nothing more\n", ""},
		{"comments before a leading separator", "# header\n---\n# about\nnode:\n  mesh_name: a\n", ""},
		{"document end marker", "node:\n  mesh_name: a\n...\n", ""},
		// Empty documents before the settings (templating output): the
		// parser read only the first, empty one, and every setting was
		// silently dropped.
		{"an empty document first", "---\n---\nnode:\n  mesh_name: a\n", ""},
		{"a comment-only document first", "---\n# rendered from a template\n---\nnode:\n  mesh_name: a\n", ""},
		// A second document that does not parse was not even looked at.
		{"a second document that does not parse", "node:\n  mesh_name: a\n---\nnode: [\n", "did not find expected node content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".yaml")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(nil, LoadOptions{File: path, Environ: noEnv})
			switch {
			case tc.want == "" && (err != nil || c.Node.MeshName != "a"):
				t.Fatalf("Load = %v, mesh_name %q; want it loaded", err, c.Node.MeshName)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Load = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable the config reads.
const EnvPrefix = "MESHNODE_"

// EnvConfigFile names the environment variable holding the YAML file path.
const EnvConfigFile = EnvPrefix + "CONFIG"

// FlagConfigFile is the flag holding the YAML file path.
const FlagConfigFile = "config"

var durationType = reflect.TypeFor[time.Duration]()

// KeyInfo describes one configuration key, for flags and documentation.
type KeyInfo struct {
	Key     string // dotted key, e.g. "lease.ttl"
	Env     string // environment variable, e.g. "MESHNODE_LEASE__TTL"
	Flag    string // flag name without dashes, "" when the key has no flag
	Default string // default value as a user would write it
	Help    string // one-line meaning
}

// keySpec is one leaf of the Config struct.
type keySpec struct {
	path  string
	index []int
	typ   reflect.Type
}

// schema lists every leaf key of Config in struct order; sections maps every
// struct-valued key (and "" for the root) to its child names.
var schema, sections = buildSchema()

func buildSchema() ([]keySpec, map[string][]string) {
	var leaves []keySpec
	secs := map[string][]string{}
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			name := f.Tag.Get("koanf")
			if name == "" || !f.IsExported() {
				continue
			}
			path := joinKey(prefix, name)
			idx := append(append([]int{}, index...), i)
			secs[prefix] = append(secs[prefix], name)
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, path, idx)
				continue
			}
			leaves = append(leaves, keySpec{path: path, index: idx, typ: f.Type})
		}
	}
	walk(reflect.TypeFor[Config](), "", nil)
	return leaves, secs
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func lookupLeaf(path string) (keySpec, bool) {
	for _, k := range schema {
		if k.path == path {
			return k, true
		}
	}
	return keySpec{}, false
}

func isSection(path string) bool {
	_, ok := sections[path]
	return ok && path != ""
}

// EnvName returns the environment variable for a dotted key.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "__"))
}

// isSecret reports whether key holds a secret (a password, a token, an
// inline secret key): it gets no flag and its value is never printed.
func isSecret(key string) bool {
	return strings.HasSuffix(key, "password") || strings.HasSuffix(key, ".secret_key") || strings.HasSuffix(key, ".token")
}

// hasFlag reports whether a key gets a command-line flag. Secrets do not:
// command lines are visible to every local user (ps, /proc).
func hasFlag(key string) bool { return !isSecret(key) }

// help is the one-line meaning of every key; a test checks it is complete.
var help = map[string]string{
	"admin.listen":                                    "admin HTTP listener host:port (metrics, /healthz, /readyz, /v1/status, /v1/relocate, pprof); empty = off; a non-loopback host needs admin.token",
	"admin.token":                                     "admin bearer token, at least 16 bytes, no blank or control character (no flag: command lines are visible to other users); when set, every endpoint but the probes requires it, on loopback too; unset, only a loopback admin.listen is allowed and every local user may use every endpoint (relocate and pprof included); set without admin.listen, it is unused and the node logs a WARN at start (ctl status/relocate read MESHNODE_ADMIN__TOKEN from their own environment)",
	"node.mesh_name":                                  "RouteMesh name; nodes admit only peers of the same mesh",
	"node.routing_id":                                 "node routing id (RID) as hex, 1..255 bytes; empty = random per run",
	"node.endpoint":                                   "where the ROUTER binds, tcp://host:port (port 0 = any free port)",
	"node.advertise_endpoint":                         "endpoint published to peers; empty = bound endpoint with the real port; required for a wildcard bind",
	"node.security_identity":                          "transport security identity peers must match exactly; empty = none (sent as \"anonymous\" on the wire, whose admission text is 1..255 bytes)",
	"node.object_role":                                "object role: none, client or server (spec §2)",
	"node.placement_weight":                           "placement weight 0..10000; 0 = never chosen for new or relocated objects (spec §4)",
	"node.application_version":                        "application deployment sequence number, 0..2^63-1",
	"node.limits.actors":                              "Actor limit; 0 = no limit, else 1..2^31-1 (spec §4)",
	"node.limits.spots":                               "Spot limit (Entry Spots excluded); 0 = no limit, else 1..2^31-1 (spec §4)",
	"node.limits.spot_types":                          "per stable type User/Instance Spot limit, type=n; 0 = no limit, else 1..2^31-1 (spec §4)",
	"lease.renew_interval":                            "owner lease renew interval (spec §5)",
	"lease.ttl":                                       "owner lease TTL (spec §5)",
	"lease.renew_timeout":                             "timeout of one renew request (spec §5)",
	"lease.fencing_margin":                            "owner lease fencing margin; renew_interval + renew_timeout < ttl - fencing_margin (spec §5)",
	"routing.route_cache_max_age":                     "how long a Ready location stays cached; 0 disables the cache (spec §7.3)",
	"routing.route_cache_max_entries":                 "how many routes a node caches, least recently used out first (~260 bytes each: follow BenchmarkCacheEntryBytes); a node sending to more objects reads the store for the ones evicted",
	"routing.message_follow_duration":                 "how long a previous owner forwards messages after a move; 0 disables Message Follow (spec §7.3)",
	"transport.liveness_interval":                     "liveness probe interval to a silent peer",
	"transport.peer_timeout":                          "silence after which a peer is down; must exceed liveness_interval",
	"transport.send_queue_limit":                      "records queued per peer before sends fail, at least 1",
	"transport.request_timeout":                       "deadline of a request that carries none",
	"transport.curve.enabled":                         "CURVE authentication and encryption on every link; the RID is then derived from the public key (node.routing_id must be empty); the other curve keys are refused without it",
	"transport.curve.secret_key_file":                 "file holding the node's Z85 secret key, mode 0600 (\"meshnode ctl keygen\" writes one)",
	"transport.curve.secret_key":                      "the node's Z85 secret key inline, for the environment (no flag: command lines are visible to other users); not with secret_key_file",
	"transport.curve.public_key":                      "optional Z85 public key; startup fails unless it matches the secret key",
	"transport.curve.allowed_keys_file":               "file of trusted node public keys, one Z85 key per line (# comments, a label after the key)",
	"transport.curve.allowed_keys":                    "trusted node public keys inline (Z85, comma-separated in the environment); joined with allowed_keys_file",
	"transport.max_unadmitted":                        "inbound connections that have not completed hello; more are closed at once, at least 1",
	"transport.max_peers":                             "admitted inbound peers (distinct RIDs); a hello from one more is rejected (resourceLimit), at least 1",
	"transport.io_buffer_bytes":                       "read and write buffer of each connection, 4096..16777216; a node holds two connections per peer, each with both buffers",
	"location_store.provider":                         "Location Store provider: memory or redis; empty = none (client and server need one, spec §2; a running node of role none too, mesh.Start refuses it without)",
	"location_store.redis.addrs":                      "Redis host:port list (Sentinel addresses when master_name is set)",
	"location_store.redis.master_name":                "Redis Sentinel master name; empty = no Sentinel",
	"location_store.redis.sentinel_username":          "ACL user name at the Sentinels, when they require one; only with master_name",
	"location_store.redis.sentinel_password":          "password at the Sentinels (their requirepass, or sentinel_username's); only with master_name (no flag: use the environment)",
	"location_store.redis.username":                   "Redis ACL user name; empty = the default user (docs/store-redis.md, Securing the connection)",
	"location_store.redis.password":                   "password of the ACL user, or requirepass's for the default user (no flag: command lines are visible to other users; use the environment)",
	"location_store.redis.db":                         "Redis database number, 0 or more; only 0 for a Cluster (several addrs without master_name)",
	"location_store.redis.namespace":                  "prefix of every Location Store key",
	"location_store.redis.operation_timeout":          "timeout of one Redis operation",
	"location_store.redis.replica_acks":               "replicas each write waits for (Redis WAIT, same round trip), 0..16, so that a failover keeps it; 0 = writes do not wait (a failover may lose the last ones, which the nodes then detect and stop on)",
	"location_store.redis.replica_ack_timeout":        "how long a write waits for replica_acks, below operation_timeout (and, for the Location Store, lease.renew_timeout); when fewer acknowledge in time, writes stop waiting (WARN) until a replica is back (checked every second)",
	"location_store.redis.pool_size":                  "most connections the store opens to Redis; 0 = automatic: 10 per CPU the process may use (GOMAXPROCS), at least 32 (a host command alone keeps relocation.max_concurrent moves in flight)",
	"location_store.redis.tls.enabled":                "connect with TLS; the other tls keys are refused without it",
	"location_store.redis.tls.ca_file":                "PEM file of the CAs that may sign the server certificate; empty = the system's roots",
	"location_store.redis.tls.cert_file":              "PEM client certificate, for a server that requires one (tls-auth-clients); needs key_file",
	"location_store.redis.tls.key_file":               "PEM private key of cert_file; keep it readable by the node only",
	"location_store.redis.tls.server_name":            "name the server certificate must carry; empty = the host of each address",
	"location_store.redis.tls.min_version":            "lowest TLS version offered: 1.2 or 1.3",
	"location_store.redis.tls.insecure_skip_verify":   "accept any server certificate (tests only: anyone on the path can pose as the server); logs a security warning; not with ca_file",
	"relocation_store.provider":                       "Relocation Store provider: memory or redis; empty = none (required by Recreate/PreserveState policies and Instance Spots, spec §2)",
	"relocation_store.redis.addrs":                    "Redis host:port list (Sentinel addresses when master_name is set)",
	"relocation_store.redis.master_name":              "Redis Sentinel master name; empty = no Sentinel",
	"relocation_store.redis.sentinel_username":        "ACL user name at the Sentinels, when they require one; only with master_name",
	"relocation_store.redis.sentinel_password":        "password at the Sentinels (their requirepass, or sentinel_username's); only with master_name (no flag: use the environment)",
	"relocation_store.redis.username":                 "Redis ACL user name; empty = the default user (docs/store-redis.md, Securing the connection)",
	"relocation_store.redis.password":                 "password of the ACL user, or requirepass's for the default user (no flag: command lines are visible to other users; use the environment)",
	"relocation_store.redis.db":                       "Redis database number, 0 or more; only 0 for a Cluster (several addrs without master_name)",
	"relocation_store.redis.namespace":                "prefix of every Relocation Store key",
	"relocation_store.redis.operation_timeout":        "timeout of one Redis operation",
	"relocation_store.redis.replica_acks":             "replicas each write waits for (Redis WAIT, same round trip), 0..16, so that a failover keeps it; 0 = writes do not wait (a failover may lose the last ones, which the nodes then detect and stop on)",
	"relocation_store.redis.replica_ack_timeout":      "how long a write waits for replica_acks, below operation_timeout (and, for the Location Store, lease.renew_timeout); when fewer acknowledge in time, writes stop waiting (WARN) until a replica is back (checked every second)",
	"relocation_store.redis.pool_size":                "most connections the store opens to Redis; 0 = automatic: 10 per CPU the process may use (GOMAXPROCS), at least 32 (a host command alone keeps relocation.max_concurrent moves in flight)",
	"relocation_store.redis.tls.enabled":              "connect with TLS; the other tls keys are refused without it",
	"relocation_store.redis.tls.ca_file":              "PEM file of the CAs that may sign the server certificate; empty = the system's roots",
	"relocation_store.redis.tls.cert_file":            "PEM client certificate, for a server that requires one (tls-auth-clients); needs key_file",
	"relocation_store.redis.tls.key_file":             "PEM private key of cert_file; keep it readable by the node only",
	"relocation_store.redis.tls.server_name":          "name the server certificate must carry; empty = the host of each address",
	"relocation_store.redis.tls.min_version":          "lowest TLS version offered: 1.2 or 1.3",
	"relocation_store.redis.tls.insecure_skip_verify": "accept any server certificate (tests only: anyone on the path can pose as the server); logs a security warning; not with ca_file",
	"relocation.deadline":                             "deadline of a move whose caller gave none; in a host Relocate or drain, how long a move waits for the object's application (its running turn, its Snapshot; docs/RELOCATION.md)",
	"relocation.chunk_size":                           "bytes per Restore chunk on the ordered connection, 65536..16777216 (64 KiB..16 MiB: 4096 chunks of at least 64 KiB carry the largest payload, 256 MiB)",
	"relocation.max_concurrent":                       "moves a host Relocate or drain runs at once, 1..1024",
	"relocation.host_target_run":                      "at most this many consecutive moves of a host Relocate or drain go to one target (fewer when few are left), 0..1048576; 0 = every move placed on its own",
	"relocation.host_deadline":                        "deadline of a host Relocate whose caller gave none",
	"relocation.drain_on_shutdown":                    "on SIGTERM, SIGINT or SIGHUP (meshnode run, a server node), move this node's objects to the other serving nodes before the §11 shutdown",
	"recovery.reclaim_grace":                          "how long a dead owner's objects look dead before a creation of their Id or the sweep removes their records (Destroy and ctl reclaim do not wait)",
	"recovery.reclaim_sweep_interval":                 "how often a serving node reclaims the records of dead owners' objects; 0 = no sweep",
	"store_failure_grace":                             "how long the last full descriptor list is kept while the Location Store is unreachable; 0 = no grace (spec §10)",
	"shutdown_deadline":                               "deadline of an orderly shutdown, after which it completes as ForceStopped (spec §11)",
	"log.format":                                      "log format: text or json",
	"log.level":                                       "log level: debug, info, warn or error",
}

// Keys describes every configuration key, in the order of the Config struct.
func Keys() []KeyInfo {
	def := reflect.ValueOf(Default())
	out := make([]KeyInfo, 0, len(schema))
	for _, k := range schema {
		info := KeyInfo{Key: k.path, Env: EnvName(k.path), Help: help[k.path]}
		if hasFlag(k.path) {
			info.Flag = k.path
		}
		info.Default = formatDefault(def.FieldByIndex(k.index))
		out = append(out, info)
	}
	return out
}

// formatDefault renders a value the way a user would write it in YAML.
func formatDefault(v reflect.Value) string {
	switch {
	case v.Type() == durationType:
		return time.Duration(v.Int()).String()
	case v.Kind() == reflect.String:
		return fmt.Sprintf("%q", v.String())
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case v.Kind() == reflect.Map:
		keys := make([]string, 0, v.Len())
		for _, mk := range v.MapKeys() {
			keys = append(keys, fmt.Sprintf("%s: %v", mk.String(), v.MapIndex(mk).Interface()))
		}
		sort.Strings(keys)
		return "{" + strings.Join(keys, ", ") + "}"
	}
	return fmt.Sprint(v.Interface())
}

// Flags registers --config and one flag per key (named by the dotted key,
// secrets excepted) on fs, with the built-in defaults as shown defaults.
// Only flags the user sets override lower layers. A flag name fs already
// holds is left alone, so a command may define its own variant first.
func Flags(fs *pflag.FlagSet) {
	if fs.Lookup(FlagConfigFile) == nil {
		fs.String(FlagConfigFile, "", "path to a YAML config file (also "+EnvConfigFile+")")
	}
	def := reflect.ValueOf(Default())
	for _, k := range schema {
		if !hasFlag(k.path) || fs.Lookup(k.path) != nil {
			continue
		}
		v := def.FieldByIndex(k.index)
		usage := help[k.path]
		switch {
		case k.typ == durationType:
			fs.Duration(k.path, time.Duration(v.Int()), usage)
		case k.typ.Kind() == reflect.String:
			fs.String(k.path, v.String(), usage)
		case k.typ.Kind() == reflect.Int:
			fs.Int(k.path, int(v.Int()), usage)
		case k.typ.Kind() == reflect.Int64:
			fs.Int64(k.path, v.Int(), usage)
		case k.typ.Kind() == reflect.Bool:
			fs.Bool(k.path, v.Bool(), usage)
		case k.typ.Kind() == reflect.Slice:
			fs.StringSlice(k.path, v.Interface().([]string), usage)
		case k.typ.Kind() == reflect.Map:
			fs.Var(&pairsFlag{def: v.Interface().(map[string]int)}, k.path, usage)
		}
	}
}

// pairsFlag is a map key's flag (type=n pairs, repeatable). It keeps the
// text as given, so that flagValue parses it like the same value from the
// environment and a bad entry is reported by the decoder with its key
// and source ("node.limits.spot_types.Chat: must be an integer, got "abc"
// (from flag --node.limits.spot_types)") instead of failing the flag
// parse with a bare strconv error.
type pairsFlag struct {
	def map[string]int
	set []string
}

func (p *pairsFlag) String() string {
	if p.set != nil {
		return strings.Join(p.set, ",")
	}
	pairs := make([]string, 0, len(p.def))
	for k, n := range p.def {
		pairs = append(pairs, k+"="+strconv.Itoa(n))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}

func (p *pairsFlag) Set(s string) error {
	p.set = append(p.set, s)
	return nil
}

func (p *pairsFlag) Type() string { return "type=n,..." }

// Package config turns a node's settings into one typed, validated Config.
//
// Settings come from four layers, each overriding the one before it:
//
//  1. built-in defaults (Default),
//  2. an optional YAML file (snake_case keys, durations as Go duration
//     strings such as "5s"),
//  3. environment variables with the MESHNODE_ prefix, where a double
//     underscore separates nesting levels (MESHNODE_LEASE__TTL=20s) and lists
//     are comma-separated (MESHNODE_LOCATION_STORE__REDIS__ADDRS=a:6379,b:6379),
//  4. command-line flags registered by Flags, named by the dotted key
//     (--lease.ttl=20s); only flags the user actually set override.
//
// The layers are read and merged with koanf; decoding into Config is done by
// this package so that every problem names the key and the layer it came
// from ("in file node.yaml", "from environment variable MESHNODE_…").
//
// Load only fails for problems that stop it from reading a source at all (an
// unreadable file, broken YAML, a bad flag). Everything else — unknown keys,
// values of the wrong type, and every startup rule of the spec (§2, §4, §5,
// §7.3) — is reported by Config.Validate, all at once, as a *ValidationError.
// A node must call Validate before it opens a socket (spec §2: "startup fails
// with a configuration error before a network socket is opened").
package config

import (
	"encoding/hex"
	"runtime"
	"time"
)

// ObjectRole is a MeshNode's object role (spec §2).
type ObjectRole string

// Object roles. Client and Server need a Location Store; only Server hosts
// objects and registers factories.
const (
	RoleNone   ObjectRole = "none"
	RoleClient ObjectRole = "client"
	RoleServer ObjectRole = "server"
)

// Store provider names known to the configuration.
const (
	ProviderNone   = ""
	ProviderMemory = "memory"
	ProviderRedis  = "redis"
)

// Log formats and levels accepted by LogConfig.
const (
	LogText  = "text"
	LogJSON  = "json"
	LogDebug = "debug"
	LogInfo  = "info"
	LogWarn  = "warn"
	LogError = "error"
)

// Bounds that Validate enforces. They come from the spec and the wire schema
// the project adopts (text fields are length-prefixed with one byte).
const (
	MaxWeight       = 10000           // §4: placement weight 0..10000
	MaxLimit        = 1<<31 - 1       // §4: a positive limit is 1..2^31-1
	MaxTextBytes    = 255             // mesh name, security identity, stable type
	MaxRoutingID    = 255             // RID: 1..255 raw bytes
	MaxEndpoint     = 4096            // endpoint text
	MinFollowMargin = 5 * time.Second // §7.3: cache age ≤ follow duration - 5s
)

// Config is the whole configuration of one node.
type Config struct {
	Node            NodeConfig       `koanf:"node"`
	Lease           LeaseConfig      `koanf:"lease"`
	Routing         RoutingConfig    `koanf:"routing"`
	Transport       TransportConfig  `koanf:"transport"`
	LocationStore   StoreConfig      `koanf:"location_store"`
	RelocationStore StoreConfig      `koanf:"relocation_store"`
	Relocation      RelocationConfig `koanf:"relocation"`
	Recovery        RecoveryConfig   `koanf:"recovery"`
	// StoreFailureGrace is how long the node keeps using the last complete
	// descriptor list (and its connection intents) while the Location Store
	// is unreachable (§10). It never extends the owner lease.
	StoreFailureGrace time.Duration `koanf:"store_failure_grace"`
	// ShutdownDeadline bounds an orderly shutdown (§11); when it passes the
	// shutdown completes as ForceStopped.
	ShutdownDeadline time.Duration `koanf:"shutdown_deadline"`
	Log              LogConfig     `koanf:"log"`
	// Admin is the node's HTTP admin listener (metrics, probes, status,
	// control); off unless Listen is set (docs/OPERATIONS.md "Admin
	// endpoint").
	Admin AdminConfig `koanf:"admin"`

	// loadProblems are the problems Load found while decoding (unknown keys,
	// values of the wrong type). Validate reports them first so that a user
	// sees every problem in one run.
	loadProblems []Problem
	// origins says where Load read each key's final value (a file, an
	// environment variable, a flag) and what that value decoded to, so that
	// a rule's problem names its source while the key still holds it.
	origins map[string]origin
}

// AdminConfig configures the admin HTTP listener.
type AdminConfig struct {
	// Listen is host:port to bind; empty = no listener. A non-loopback
	// host requires Token.
	Listen string `koanf:"listen"`
	// Token, when set, is required (Authorization: Bearer) by every
	// endpoint but /healthz and /readyz — and by the control endpoints
	// (relocate, pprof) even on loopback. No flag: command lines are
	// visible to other users.
	Token string `koanf:"token"`
}

// MinAdminToken is the shortest admin token accepted: a token an attacker
// can guess protects nothing.
const MinAdminToken = 16

// NodeConfig describes the MeshNode itself.
type NodeConfig struct {
	MeshName string `koanf:"mesh_name"`
	// RoutingID is the node's RID as hex; empty means a random RID per run.
	RoutingID string `koanf:"routing_id"`
	// Endpoint is where the node's ROUTER binds, tcp://host:port; port 0
	// picks a free port.
	Endpoint string `koanf:"endpoint"`
	// AdvertiseEndpoint is what the descriptor publishes when it differs
	// from the bound endpoint (NAT, wildcard bind). Empty means the bound
	// endpoint with the real port.
	AdvertiseEndpoint  string       `koanf:"advertise_endpoint"`
	SecurityIdentity   string       `koanf:"security_identity"`
	ObjectRole         ObjectRole   `koanf:"object_role"`
	PlacementWeight    int          `koanf:"placement_weight"`
	ApplicationVersion int64        `koanf:"application_version"`
	Limits             LimitsConfig `koanf:"limits"`
}

// LimitsConfig holds a node's capacity limits (§4). 0 means no limit.
type LimitsConfig struct {
	Actors int `koanf:"actors"`
	Spots  int `koanf:"spots"`
	// SpotTypes limits User/Instance Spots per stable type.
	SpotTypes map[string]int `koanf:"spot_types"`
}

// LeaseConfig is the owner lease timing of §5.
type LeaseConfig struct {
	RenewInterval time.Duration `koanf:"renew_interval"`
	TTL           time.Duration `koanf:"ttl"`
	RenewTimeout  time.Duration `koanf:"renew_timeout"`
	FencingMargin time.Duration `koanf:"fencing_margin"`
}

// RoutingConfig is the route cache and Message Follow timing of §7.3.
// 0 disables the feature.
type RoutingConfig struct {
	RouteCacheMaxAge time.Duration `koanf:"route_cache_max_age"`
	// RouteCacheMaxEntries bounds the routes a node caches (least recently
	// used first out): a node sending to more objects than this reads the
	// store again for the ones it evicted.
	RouteCacheMaxEntries  int           `koanf:"route_cache_max_entries"`
	MessageFollowDuration time.Duration `koanf:"message_follow_duration"`
}

// Bounds of routing.route_cache_max_entries: an entry is ~260 bytes
// (follow BenchmarkCacheEntryBytes), so the largest cache is ~4 GiB, which
// a node holds only on purpose.
const MaxRouteCacheEntries = 16 << 20

// DefaultRouteCacheEntries is routing.route_cache_max_entries' default, the
// bound the route cache had before it was a key (follow.DefaultMaxEntries).
const DefaultRouteCacheEntries = 65536

// TransportConfig tunes the ROUTER/DEALER transport (design WIRE.md).
type TransportConfig struct {
	// LivenessInterval is how often a probe is sent to a silent peer.
	LivenessInterval time.Duration `koanf:"liveness_interval"`
	// PeerTimeout without any record from a peer marks it down.
	PeerTimeout time.Duration `koanf:"peer_timeout"`
	// SendQueueLimit bounds the records queued per peer before sends fail.
	SendQueueLimit int `koanf:"send_queue_limit"`
	// RequestTimeout is the default deadline of a request without one.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// MaxUnadmitted bounds inbound connections that have not completed
	// hello; more are closed at accept (docs/TRANSPORT.md "Limits before
	// admission").
	MaxUnadmitted int `koanf:"max_unadmitted"`
	// MaxPeers bounds admitted inbound peers (distinct RIDs); a hello from
	// one more is rejected with resourceLimit.
	MaxPeers int `koanf:"max_peers"`
	// IOBufferBytes is the read buffer and the write buffer of each
	// connection (a node has two per peer: its link and the peer's).
	IOBufferBytes int `koanf:"io_buffer_bytes"`
	// Curve is link security (docs/OPERATIONS.md, Link security).
	Curve CurveConfig `koanf:"curve"`
}

// CurveConfig enables CURVE (ZeroMQ RFC 25/26) on every transport
// connection. With it the node's RID is derived from its public key, so
// node.routing_id must stay empty.
type CurveConfig struct {
	// Enabled switches CURVE on; it is explicit so that a mistyped key
	// name cannot silently leave a node open.
	Enabled bool `koanf:"enabled"`
	// SecretKeyFile holds the node's Z85 secret key (mode 0600); or
	// SecretKey holds it inline (for the environment). Exactly one.
	SecretKeyFile string `koanf:"secret_key_file"`
	SecretKey     string `koanf:"secret_key"`
	// PublicKey, optional, must be the secret key's public key: a check
	// against a swapped or wrong key file.
	PublicKey string `koanf:"public_key"`
	// AllowedKeysFile lists trusted node public keys, one Z85 key per line
	// (blank lines, '#' comments and a label after the key are allowed);
	// AllowedKeys lists more inline. Their union must not be empty.
	AllowedKeysFile string   `koanf:"allowed_keys_file"`
	AllowedKeys     []string `koanf:"allowed_keys"`
}

// RelocationConfig tunes the move of one Actor or Spot (docs/RELOCATION.md).
type RelocationConfig struct {
	// Deadline bounds a move whose caller gave no deadline.
	Deadline time.Duration `koanf:"deadline"`
	// ChunkSize is the size of one Restore chunk (record 52) on the
	// ordered connection: RelocationChunkRange, 64 KiB..16 MiB.
	ChunkSize int `koanf:"chunk_size"`
	// MaxConcurrent bounds the moves a host Relocate or drain runs at
	// once (docs/RELOCATION.md "Host relocation and drain").
	MaxConcurrent int `koanf:"max_concurrent"`
	// HostTargetRun bounds how many consecutive moves of a host Relocate
	// or drain go to one target before the next run is placed (0: every
	// move is placed on its own). Runs keep the targets' owner CAS batches from
	// refusing each other on this node's capacity rows (docs/RELOCATION.md
	// "Host relocation and drain").
	HostTargetRun int `koanf:"host_target_run"`
	// HostDeadline bounds a host Relocate whose caller gave no deadline.
	HostDeadline time.Duration `koanf:"host_deadline"`
	// DrainOnShutdown: an orderly stop (SIGTERM) first moves this node's
	// objects to the other serving nodes, within shutdown_deadline.
	DrainOnShutdown bool `koanf:"drain_on_shutdown"`
}

// RecoveryConfig tunes what a node does about the objects of a dead owner
// (docs/AUTHORITY.md "Reclaiming a dead owner's objects").
type RecoveryConfig struct {
	// ReclaimGrace is how long an object's owner lease must have looked
	// ended to this node before a creation of its Id or the sweep may
	// remove its record (a paused owner that comes back within it keeps
	// its objects). Destroy/Close of the dead generation and
	// `meshnode ctl reclaim` do not wait.
	ReclaimGrace time.Duration `koanf:"reclaim_grace"`
	// ReclaimSweepInterval is how often a serving node looks for records
	// of dead owners and reclaims them; 0 turns the sweep off.
	ReclaimSweepInterval time.Duration `koanf:"reclaim_sweep_interval"`
}

// MaxRelocationConcurrency bounds relocation.max_concurrent.
const MaxRelocationConcurrency = 1024

// MaxHostTargetRun bounds relocation.host_target_run.
const MaxHostTargetRun = 1 << 20

// Relocation chunk size bounds (relocation.chunk_size): package chunk's
// ChunkSizeRange for the payload limits package mesh runs with
// (chunk.Limits{}: payloads up to 256 MiB), 64 KiB..16 MiB. Above 16 MiB
// chunk.Split refuses a chunk size (every move the node sourced failed);
// below 64 KiB a payload of the largest size needs more than 4096 chunks
// (docs/RESTORE-PAYLOAD.md). Written here, not imported: config sits below
// chunk in the package layers (docs/ARCHITECTURE.md), and
// TestRelocationChunkRange ties these to package chunk's.
const (
	MinRelocationChunk = 64 << 10
	MaxRelocationChunk = 16 << 20
	// relocationMaxPayload and relocationMaxChunks are chunk's
	// DefaultMaxPayload and MaxChunkCount, for the refusal's reason.
	relocationMaxPayload = 256 << 20
	relocationMaxChunks  = 4096
)

// RelocationChunkRange is the range relocation.chunk_size must be in.
func RelocationChunkRange() (lo, hi int) { return MinRelocationChunk, MaxRelocationChunk }

// StoreConfig selects one store provider (Location or Relocation Store).
type StoreConfig struct {
	// Provider is "", "memory" or "redis". "" means no store configured.
	Provider string      `koanf:"provider"`
	Redis    RedisConfig `koanf:"redis"`
}

// RedisConfig holds the settings of the redis provider.
type RedisConfig struct {
	// Addrs are host:port addresses. With MasterName set they are Sentinel
	// addresses.
	Addrs      []string `koanf:"addrs"`
	MasterName string   `koanf:"master_name"`
	// SentinelUsername and SentinelPassword log in to the Sentinels
	// themselves, when they require it (only with MasterName).
	SentinelUsername string `koanf:"sentinel_username"`
	SentinelPassword string `koanf:"sentinel_password"`
	Username         string `koanf:"username"`
	Password         string `koanf:"password"`
	DB               int    `koanf:"db"`
	// Namespace prefixes every key so that several meshes (or tests) share
	// one server without seeing each other.
	Namespace        string         `koanf:"namespace"`
	OperationTimeout time.Duration  `koanf:"operation_timeout"`
	TLS              RedisTLSConfig `koanf:"tls"`
	// ReplicaAcks, when positive, makes every store write wait (Redis WAIT)
	// until that many replicas acknowledged it, for at most
	// ReplicaAckTimeout, so that a failover does not lose what the mesh
	// acted on (docs/store-redis.md, "Writes that survive a failover").
	ReplicaAcks       int           `koanf:"replica_acks"`
	ReplicaAckTimeout time.Duration `koanf:"replica_ack_timeout"`
	// PoolSize caps the store's connections to Redis; 0 (the default) is
	// RedisPoolSize's automatic size.
	PoolSize int `koanf:"pool_size"`
}

// MinRedisPool is the least automatic pool size, and MaxRedisPool the
// largest pool_size accepted.
const (
	MinRedisPool = 32
	MaxRedisPool = 10000
)

// RedisPoolSize is the connection pool a redis store opens with: pool_size
// when set, else the client library's default (10 per usable CPU) but at
// least MinRedisPool. Why a floor: a host command alone keeps
// relocation.max_concurrent (16) moves' store calls in flight, beside
// creations, deliveries, discovery and the lease; on a one-CPU container
// the library's 10 are fewer than those calls, which then queue for a
// connection, and that wait counts against operation_timeout. (Measured on
// a drain of the Redis demo on one core under the race detector, which is
// CPU-starved either way: a pool of 40 passed 3 of 4 runs, the default 1 of
// 3, in one helper's runs; with this floor 0 of 4 passed in later runs —
// the floor removes the queueing, not the starvation.)
func (r RedisConfig) RedisPoolSize() int {
	if r.PoolSize > 0 {
		return r.PoolSize
	}
	return max(MinRedisPool, 10*runtime.GOMAXPROCS(0))
}

// MaxRedisReplicaAcks bounds replica_acks (the providers check the same
// bound, internal/redisconn.MaxReplicaAcks).
const MaxRedisReplicaAcks = 16

// RedisTLSConfig makes the redis provider connect with TLS
// (docs/store-redis.md, Securing the connection). ClientConfig turns it
// into a *tls.Config.
type RedisTLSConfig struct {
	// Enabled switches TLS on; it is explicit, and the other keys are
	// refused without it, so that a forgotten or mistyped key cannot
	// silently leave the connection in plain text.
	Enabled bool `koanf:"enabled"`
	// CAFile holds the PEM certificates that may sign the server's
	// certificate; empty means the system's roots.
	CAFile string `koanf:"ca_file"`
	// CertFile and KeyFile are the client certificate and its private key
	// (PEM), for servers that require one (tls-auth-clients); both or
	// neither.
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
	// ServerName is the name the server's certificate must carry; empty
	// means the host of each address dialled.
	ServerName string `koanf:"server_name"`
	// MinVersion is the lowest TLS version offered: "1.2" or "1.3".
	MinVersion string `koanf:"min_version"`
	// InsecureSkipVerify accepts any server certificate. Only for a test
	// setup: anyone on the path can then pose as the server. It is never
	// implied, and the store logs a security warning when it is on.
	InsecureSkipVerify bool `koanf:"insecure_skip_verify"`
}

// LogConfig selects the slog handler.
type LogConfig struct {
	Format string `koanf:"format"` // text | json
	Level  string `koanf:"level"`  // debug | info | warn | error
}

// Default returns the built-in defaults. Note that it does not validate on
// its own: the default role is server, and a server needs a Location Store,
// which the framework never invents (spec §2).
func Default() Config {
	return Config{
		Node: NodeConfig{
			MeshName:        "default",
			Endpoint:        "tcp://127.0.0.1:0",
			ObjectRole:      RoleServer,
			PlacementWeight: 100,
			Limits:          LimitsConfig{SpotTypes: map[string]int{}},
		},
		Lease: LeaseConfig{
			RenewInterval: 5 * time.Second,
			TTL:           15 * time.Second,
			RenewTimeout:  3 * time.Second,
			FencingMargin: 5 * time.Second,
		},
		Routing: RoutingConfig{
			RouteCacheMaxAge:      15 * time.Second,
			RouteCacheMaxEntries:  DefaultRouteCacheEntries,
			MessageFollowDuration: 30 * time.Second,
		},
		Transport: TransportConfig{
			LivenessInterval: 5 * time.Second,
			PeerTimeout:      15 * time.Second,
			SendQueueLimit:   10000,
			RequestTimeout:   10 * time.Second,
			Curve:            CurveConfig{AllowedKeys: []string{}},
			// transport.DefaultMaxUnadmitted / DefaultMaxPeers (not
			// imported: config does not depend on the transport).
			MaxUnadmitted: 64,
			MaxPeers:      1024,
			// transport.DefaultIOBufferBytes (docs/TRANSPORT.md).
			IOBufferBytes: 16 << 10,
		},
		LocationStore:   StoreConfig{Redis: defaultRedis("meshnode")},
		RelocationStore: StoreConfig{Redis: defaultRedis("meshnode-reloc")},
		Relocation: RelocationConfig{Deadline: 30 * time.Second, ChunkSize: 1 << 20, MaxConcurrent: 16,
			HostTargetRun: 256, HostDeadline: 5 * time.Minute, DrainOnShutdown: true},
		Recovery:          RecoveryConfig{ReclaimGrace: time.Minute, ReclaimSweepInterval: time.Minute},
		StoreFailureGrace: 30 * time.Second,
		ShutdownDeadline:  30 * time.Second,
		Log:               LogConfig{Format: LogText, Level: LogInfo},
	}
}

func defaultRedis(namespace string) RedisConfig {
	return RedisConfig{Addrs: []string{}, Namespace: namespace, OperationTimeout: 2 * time.Second,
		TLS: RedisTLSConfig{MinVersion: TLSVersion12}, ReplicaAckTimeout: 500 * time.Millisecond}
}

// RoutingIDBytes returns the configured RID, or nil when the node should
// pick a random one. Call it on a validated Config; a malformed value
// returns nil too.
func (n NodeConfig) RoutingIDBytes() []byte {
	if n.RoutingID == "" {
		return nil
	}
	b, err := hex.DecodeString(n.RoutingID)
	if err != nil || len(b) == 0 || len(b) > MaxRoutingID {
		return nil
	}
	return b
}

// Redacted returns a copy that is safe to log: passwords and inline keys
// are replaced. (TLS settings hold only file paths, never key material.)
func (c Config) Redacted() Config {
	const mask = "REDACTED"
	for _, r := range []*RedisConfig{&c.LocationStore.Redis, &c.RelocationStore.Redis} {
		if r.Password != "" {
			r.Password = mask
		}
		if r.SentinelPassword != "" {
			r.SentinelPassword = mask
		}
	}
	if c.Transport.Curve.SecretKey != "" {
		c.Transport.Curve.SecretKey = mask
	}
	return c
}

package config

import (
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// valid returns a configuration that passes Validate: the defaults plus the
// stores the defaults deliberately leave out.
func valid() Config {
	c := Default()
	c.LocationStore.Provider = ProviderMemory
	c.RelocationStore.Provider = ProviderMemory
	return c
}

func p(key, msg string) Problem { return Problem{Key: key, Message: msg} }

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(err, ErrInvalid) = false")
	}
	return ve.Problems
}

func TestValidateRules(t *testing.T) {
	var (
		actor        = FactoryPolicy{StableType: "Counter", Kind: KindActor}
		userSpot     = FactoryPolicy{StableType: "Lobby", Kind: KindUserSpot}
		recreate     = FactoryPolicy{StableType: "Chat", Kind: KindActor, Policy: PolicyRecreate}
		preserve     = FactoryPolicy{StableType: "Cart", Kind: KindUserSpot, Policy: PolicyPreserveState}
		instanceSpot = FactoryPolicy{StableType: "Room", Kind: KindInstanceSpot}
	)
	tests := []struct {
		name      string
		mutate    func(c *Config)
		factories []FactoryPolicy
		want      []Problem
	}{
		{name: "valid defaults with stores", mutate: func(*Config) {}},
		{name: "valid with every factory kind", mutate: func(*Config) {},
			factories: []FactoryPolicy{actor, userSpot, recreate, preserve, instanceSpot}},

		// node
		{name: "admin on loopback without a token", mutate: func(c *Config) { c.Admin.Listen = "127.0.0.1:9464" }},
		{name: "admin on localhost without a token", mutate: func(c *Config) { c.Admin.Listen = "localhost:0" }},
		{name: "admin on every interface without a token", mutate: func(c *Config) { c.Admin.Listen = "0.0.0.0:9464" },
			want: []Problem{p("admin.listen", `binds "0.0.0.0", which is not loopback: set admin.token (MESHNODE_ADMIN__TOKEN) or bind 127.0.0.1`)}},
		{name: "admin on an empty host without a token", mutate: func(c *Config) { c.Admin.Listen = ":9464" },
			want: []Problem{p("admin.listen", `binds "", which is not loopback: set admin.token (MESHNODE_ADMIN__TOKEN) or bind 127.0.0.1`)}},
		{name: "admin on the network with a token", mutate: func(c *Config) {
			c.Admin.Listen, c.Admin.Token = "10.0.0.5:9464", "0123456789abcdef"
		}},
		{name: "admin token too short", mutate: func(c *Config) { c.Admin.Token = "short" },
			want: []Problem{p("admin.token", "must be at least 16 bytes, got 5")}},
		{name: "admin listen not host:port", mutate: func(c *Config) { c.Admin.Listen = "9464" },
			want: []Problem{p("admin.listen", `must be host:port, got "9464": address 9464: missing port in address`)}},
		{name: "admin port out of range", mutate: func(c *Config) { c.Admin.Listen = "127.0.0.1:70000" },
			want: []Problem{p("admin.listen", `port must be 0..65535, got "70000"`)}},
		{name: "empty mesh name", mutate: func(c *Config) { c.Node.MeshName = "" },
			want: []Problem{p("node.mesh_name", "must not be empty")}},
		{name: "long mesh name", mutate: func(c *Config) { c.Node.MeshName = strings.Repeat("m", 256) },
			want: []Problem{p("node.mesh_name", "must be at most 255 bytes, got 256")}},
		{name: "255-byte mesh name", mutate: func(c *Config) { c.Node.MeshName = strings.Repeat("m", 255) }},
		{name: "mesh name with NUL", mutate: func(c *Config) { c.Node.MeshName = "a\x00b" },
			want: []Problem{p("node.mesh_name", "must be UTF-8 text without NUL bytes")}},
		{name: "mesh name not UTF-8", mutate: func(c *Config) { c.Node.MeshName = "\xff" },
			want: []Problem{p("node.mesh_name", "must be UTF-8 text without NUL bytes")}},
		{name: "routing id not hex", mutate: func(c *Config) { c.Node.RoutingID = "xyz" },
			want: []Problem{p("node.routing_id", `must be hex digits (e.g. "a1b2c3"), got "xyz"`)}},
		{name: "routing id odd length", mutate: func(c *Config) { c.Node.RoutingID = "abc" },
			want: []Problem{p("node.routing_id", `must be hex digits (e.g. "a1b2c3"), got "abc"`)}},
		{name: "routing id too long", mutate: func(c *Config) { c.Node.RoutingID = strings.Repeat("ab", 256) },
			want: []Problem{p("node.routing_id", "must be 1..255 bytes, got 256 bytes")}},
		{name: "routing id 255 bytes", mutate: func(c *Config) { c.Node.RoutingID = strings.Repeat("AB", 255) }},
		{name: "endpoint wrong scheme", mutate: func(c *Config) { c.Node.Endpoint = "udp://127.0.0.1:1" },
			want: []Problem{p("node.endpoint", `must be tcp://host:port (port 0 = any free port), got "udp://127.0.0.1:1"`)}},
		{name: "endpoint without port", mutate: func(c *Config) { c.Node.Endpoint = "tcp://127.0.0.1" },
			want: []Problem{p("node.endpoint", `must be tcp://host:port (port 0 = any free port), got "tcp://127.0.0.1"`)}},
		{name: "endpoint port out of range", mutate: func(c *Config) { c.Node.Endpoint = "tcp://127.0.0.1:65536" },
			want: []Problem{p("node.endpoint", `must be tcp://host:port (port 0 = any free port), got "tcp://127.0.0.1:65536"`)}},
		{name: "endpoint without host", mutate: func(c *Config) { c.Node.Endpoint = "tcp://:7000" },
			want: []Problem{p("node.endpoint", `must be tcp://host:port (port 0 = any free port), got "tcp://:7000"`)}},
		{name: "wildcard bind without advertise", mutate: func(c *Config) { c.Node.Endpoint = "tcp://*:7000" },
			want: []Problem{p("node.advertise_endpoint", `required when node.endpoint binds a wildcard address ("tcp://*:7000"): peers cannot dial it`)}},
		{name: "IPv6 wildcard bind without advertise", mutate: func(c *Config) { c.Node.Endpoint = "tcp://[::]:7000" },
			want: []Problem{p("node.advertise_endpoint", `required when node.endpoint binds a wildcard address ("tcp://[::]:7000"): peers cannot dial it`)}},
		{name: "wildcard bind with advertise", mutate: func(c *Config) {
			c.Node.Endpoint = "tcp://0.0.0.0:7000"
			c.Node.AdvertiseEndpoint = "tcp://10.0.0.1:7000"
		}},
		{name: "advertise port 0", mutate: func(c *Config) { c.Node.AdvertiseEndpoint = "tcp://10.0.0.1:0" },
			want: []Problem{p("node.advertise_endpoint", `port must be 1..65535 because peers dial it, got "tcp://10.0.0.1:0"`)}},
		{name: "advertise wildcard host", mutate: func(c *Config) { c.Node.AdvertiseEndpoint = "tcp://0.0.0.0:7000" },
			want: []Problem{p("node.advertise_endpoint", `host must be an address peers can dial, not "0.0.0.0"`)}},
		{name: "advertise malformed", mutate: func(c *Config) { c.Node.AdvertiseEndpoint = "10.0.0.1:7000" },
			want: []Problem{p("node.advertise_endpoint", `must be tcp://host:port, got "10.0.0.1:7000"`)}},
		{name: "endpoint too long", mutate: func(c *Config) { c.Node.Endpoint = "tcp://" + strings.Repeat("h", 4096) + ":1" },
			want: []Problem{p("node.endpoint", "must be at most 4096 bytes, got 4104")}},
		{name: "long security identity", mutate: func(c *Config) { c.Node.SecurityIdentity = strings.Repeat("s", 300) },
			want: []Problem{p("node.security_identity", "must be at most 255 bytes, got 300")}},
		{name: "unknown role", mutate: func(c *Config) { c.Node.ObjectRole = "sever" },
			want: []Problem{p("node.object_role", `must be one of none, client, server, got "sever"`)}},
		{name: "negative weight", mutate: func(c *Config) { c.Node.PlacementWeight = -1 },
			want: []Problem{p("node.placement_weight", "must be 0..10000, got -1")}},
		{name: "weight too large", mutate: func(c *Config) { c.Node.PlacementWeight = 10001 },
			want: []Problem{p("node.placement_weight", "must be 0..10000, got 10001")}},
		{name: "weight bounds", mutate: func(c *Config) { c.Node.PlacementWeight = 0 }},
		{name: "weight upper bound", mutate: func(c *Config) { c.Node.PlacementWeight = 10000 }},
		{name: "negative application version", mutate: func(c *Config) { c.Node.ApplicationVersion = -1 },
			want: []Problem{p("node.application_version", "must be 0..9223372036854775807, got -1")}},
		{name: "negative actor limit", mutate: func(c *Config) { c.Node.Limits.Actors = -1 },
			want: []Problem{p("node.limits.actors", "must be 0 (no limit) or 1..2147483647, got -1")}},
		{name: "spot limit too large", mutate: func(c *Config) { c.Node.Limits.Spots = 1 << 31 },
			want: []Problem{p("node.limits.spots", "must be 0 (no limit) or 1..2147483647, got 2147483648")}},
		{name: "limits at bounds", mutate: func(c *Config) {
			c.Node.Limits.Actors = MaxLimit
			c.Node.Limits.Spots = 1
			c.Node.Limits.SpotTypes = map[string]int{"Chat": MaxLimit, "Room": 0}
		}},
		{name: "negative spot type limit", mutate: func(c *Config) { c.Node.Limits.SpotTypes = map[string]int{"Chat": -5} },
			want: []Problem{p("node.limits.spot_types.Chat", "must be 0 (no limit) or 1..2147483647, got -5")}},
		// Spec §4 has no per-Actor-type limit: until 2026-12-07 such an entry
		// was accepted and never enforced.
		{name: "spot type limit on an actor type", mutate: func(c *Config) { c.Node.Limits.SpotTypes = map[string]int{"Counter": 5} },
			factories: []FactoryPolicy{actor},
			want:      []Problem{p("node.limits.spot_types.Counter", `names the Actor type "Counter": there is no per-Actor-type limit (spec §4); node.limits.actors caps the Actors of a node`)}},
		{name: "spot type limit on a spot type", mutate: func(c *Config) { c.Node.Limits.SpotTypes = map[string]int{"Lobby": 5} },
			factories: []FactoryPolicy{actor, userSpot}},
		{name: "empty spot type name", mutate: func(c *Config) { c.Node.Limits.SpotTypes = map[string]int{"": 3} },
			want: []Problem{p("node.limits.spot_types", "stable type name must not be empty")}},
		{name: "long spot type name", mutate: func(c *Config) { c.Node.Limits.SpotTypes = map[string]int{strings.Repeat("t", 256): 1} },
			want: []Problem{p("node.limits.spot_types", `stable type name "`+strings.Repeat("t", 256)+`" must be 1..255 bytes of UTF-8 text without NUL`)}},

		// lease (§5)
		{name: "lease values not positive", mutate: func(c *Config) {
			c.Lease = LeaseConfig{RenewInterval: 0, TTL: -time.Second, RenewTimeout: 0, FencingMargin: -2 * time.Second}
		}, want: []Problem{
			p("lease.renew_interval", "must be positive, got 0s"),
			p("lease.ttl", "must be positive, got -1s"),
			p("lease.renew_timeout", "must be positive, got 0s"),
			p("lease.fencing_margin", "must be positive, got -2s"),
		}},
		{name: "lease relation violated", mutate: func(c *Config) { c.Lease.FencingMargin = 10 * time.Second },
			want: []Problem{p("lease", "renew_interval + renew_timeout must be less than ttl - fencing_margin (spec §5): 5s + 3s = 8s is not less than 15s - 10s = 5s")}},
		{name: "lease relation equal is violated", mutate: func(c *Config) { c.Lease.TTL = 13 * time.Second },
			want: []Problem{p("lease", "renew_interval + renew_timeout must be less than ttl - fencing_margin (spec §5): 5s + 3s = 8s is not less than 13s - 5s = 8s")}},
		{name: "lease relation just holds", mutate: func(c *Config) { c.Lease.TTL = 13*time.Second + time.Millisecond }},

		// routing (§7.3)
		{name: "negative routing durations", mutate: func(c *Config) {
			c.Routing.RouteCacheMaxAge, c.Routing.MessageFollowDuration = -time.Second, -time.Second
		}, want: []Problem{
			p("routing.route_cache_max_age", "must not be negative (0 disables the route cache), got -1s"),
			p("routing.message_follow_duration", "must not be negative (0 disables Message Follow), got -1s"),
		}},
		{name: "cache too close to follow", mutate: func(c *Config) { c.Routing.RouteCacheMaxAge = 26 * time.Second },
			want: []Problem{p("routing.route_cache_max_age", "must be at least 5s shorter than routing.message_follow_duration (spec §7.3): 26s is not at most 30s - 5s = 25s")}},
		{name: "cache exactly 5s shorter", mutate: func(c *Config) { c.Routing.RouteCacheMaxAge = 25 * time.Second }},
		{name: "follow disabled allows any cache age", mutate: func(c *Config) {
			c.Routing.RouteCacheMaxAge, c.Routing.MessageFollowDuration = time.Minute, 0
		}},
		{name: "cache disabled allows short follow", mutate: func(c *Config) {
			c.Routing.RouteCacheMaxAge, c.Routing.MessageFollowDuration = 0, time.Second
		}},
		{name: "route cache entries out of range", mutate: func(c *Config) { c.Routing.RouteCacheMaxEntries = 0 }, want: []Problem{
			p("routing.route_cache_max_entries", "must be 1..16777216, got 0"),
		}},

		// transport
		{name: "transport values", mutate: func(c *Config) {
			c.Transport = TransportConfig{LivenessInterval: 0, PeerTimeout: 15 * time.Second, SendQueueLimit: 0, RequestTimeout: -time.Second,
				MaxUnadmitted: 0, MaxPeers: -1, IOBufferBytes: 0}
		}, want: []Problem{
			p("transport.liveness_interval", "must be positive, got 0s"),
			p("transport.send_queue_limit", "must be at least 1, got 0"),
			p("transport.request_timeout", "must be positive, got -1s"),
			p("transport.max_unadmitted", "must be at least 1, got 0"),
			p("transport.max_peers", "must be at least 1, got -1"),
			p("transport.io_buffer_bytes", "must be 4096..16777216 (4 KiB..16 MiB), got 0"),
		}},
		{name: "io buffer too large", mutate: func(c *Config) { c.Transport.IOBufferBytes = 16<<20 + 1 },
			want: []Problem{p("transport.io_buffer_bytes", "must be 4096..16777216 (4 KiB..16 MiB), got 16777217")}},
		{name: "io buffer at its bounds", mutate: func(c *Config) { c.Transport.IOBufferBytes = 4 << 10 }},
		{name: "peer timeout not above interval", mutate: func(c *Config) { c.Transport.PeerTimeout = 5 * time.Second },
			want: []Problem{p("transport.peer_timeout", "must be greater than transport.liveness_interval (5s), got 5s")}},

		// stores
		{name: "unknown provider", mutate: func(c *Config) { c.LocationStore.Provider = "etcd" },
			want: []Problem{p("location_store.provider", `unknown provider "etcd" (known: memory, redis)`)}},
		{name: "redis without addrs", mutate: func(c *Config) { c.RelocationStore.Provider = ProviderRedis },
			want: []Problem{p("relocation_store.redis.addrs", "must list at least one host:port when provider is redis")}},
		{name: "redis bad settings", mutate: func(c *Config) {
			c.LocationStore.Provider = ProviderRedis
			c.LocationStore.Redis = RedisConfig{Addrs: []string{"a:6379", "b", "c:0"}, DB: -1, OperationTimeout: 0}
		}, want: []Problem{
			p("location_store.redis.addrs", `entry 2 must be host:port, got "b"`),
			p("location_store.redis.addrs", `entry 3 must be host:port, got "c:0"`),
			p("location_store.redis.db", "must not be negative, got -1"),
			p("location_store.redis.namespace", "must not be empty when provider is redis"),
			p("location_store.redis.operation_timeout", "must be positive, got 0s"),
		}},
		// A Cluster (several addrs, no master_name) has only database 0:
		// go-redis's Cluster client has no DB and would drop it silently.
		{name: "db with a Cluster", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"a:6379", "b:6379"}, Namespace: "x",
				OperationTimeout: time.Second, DB: 3}}
		}, want: []Problem{p("location_store.redis.db", "must be 0 with several addrs (a Redis Cluster has only database 0), got 3")}},
		{name: "db with Sentinels", mutate: func(c *Config) {
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"s1:26379", "s2:26379"}, Namespace: "y",
				MasterName: "m", OperationTimeout: time.Second, DB: 3}}
		}},
		{name: "sentinel login without sentinel", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, SentinelUsername: "u", SentinelPassword: "p"}}
		}, want: []Problem{
			p("location_store.redis.sentinel_username", "is only used with master_name (Sentinel)"),
			p("location_store.redis.sentinel_password", "is only used with master_name (Sentinel)"),
		}},
		{name: "sentinel login with sentinel", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"s:26379"}, Namespace: "x",
				MasterName: "m", OperationTimeout: time.Second, SentinelUsername: "u", SentinelPassword: "p"}}
		}},
		// Redis's HELLO sends a user name only with a password: without
		// one the connection silently logged in as the default user
		// (operator try-out, 2026-12-07: a least-privilege user named,
		// its password forgotten, and the node ran with +@all).
		{name: "username without password", mutate: func(c *Config) {
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, Username: "meshnode"}}
		}, want: []Problem{p("relocation_store.redis.password",
			"is empty but relocation_store.redis.username is \"meshnode\": without a password the user name is never sent, "+
				"and Redis takes the connection as its default user; give the user's password (MESHNODE_RELOCATION_STORE__REDIS__PASSWORD)")}},
		{name: "sentinel username without sentinel password", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"s:26379"}, Namespace: "x",
				MasterName: "m", OperationTimeout: time.Second, SentinelUsername: "u"}}
		}, want: []Problem{p("location_store.redis.sentinel_password",
			"is empty but location_store.redis.sentinel_username is \"u\": without a password the user name is never sent, "+
				"and the Sentinels take the connection as their default user; give the user's password (MESHNODE_LOCATION_STORE__REDIS__SENTINEL_PASSWORD)")}},
		{name: "replica acks out of range", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, ReplicaAcks: 17}}
		}, want: []Problem{p("location_store.redis.replica_acks", "must be 0..16, got 17")}},
		{name: "pool size negative", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, PoolSize: -1}}
		}, want: []Problem{p("location_store.redis.pool_size", "must be 0 (automatic) to 10000, got -1")}},
		{name: "pool size too large", mutate: func(c *Config) {
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "y",
				OperationTimeout: time.Second, PoolSize: 10001}}
		}, want: []Problem{p("relocation_store.redis.pool_size", "must be 0 (automatic) to 10000, got 10001")}},
		{name: "pool size set", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, PoolSize: 64}}
		}},
		{name: "replica ack timeout missing", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, ReplicaAcks: 1}}
		}, want: []Problem{p("location_store.redis.replica_ack_timeout", "must be positive, got 0s")}},
		{name: "replica ack timeout negative without replica acks", mutate: func(c *Config) {
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "y",
				OperationTimeout: time.Second, ReplicaAckTimeout: -time.Second}}
		}, want: []Problem{p("relocation_store.redis.replica_ack_timeout", "must not be negative, got -1s")}},
		{name: "replica ack timeout not below the operation timeout", mutate: func(c *Config) {
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "y",
				OperationTimeout: time.Second, ReplicaAcks: 2, ReplicaAckTimeout: time.Second}}
		}, want: []Problem{p("relocation_store.redis.replica_ack_timeout", "must be below operation_timeout (1s), which also covers the write itself, got 1s")}},
		{name: "replica ack timeout not below the lease renew timeout", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: 5 * time.Second, ReplicaAcks: 1, ReplicaAckTimeout: c.Lease.RenewTimeout}}
		}, want: []Problem{p("location_store.redis.replica_ack_timeout", "must be below lease.renew_timeout (3s): a lease renewal is a write and waits for the replicas too, got 3s")}},
		{name: "replica acks with a timeout", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x",
				OperationTimeout: time.Second, ReplicaAcks: 1, ReplicaAckTimeout: 200 * time.Millisecond}}
		}},
		{name: "operation timeout checked for memory too", mutate: func(c *Config) { c.RelocationStore.Redis.OperationTimeout = -time.Second },
			want: []Problem{p("relocation_store.redis.operation_timeout", "must be positive, got -1s")}},
		{name: "two redis stores colliding", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x", OperationTimeout: time.Second}}
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x", OperationTimeout: time.Second}}
		}, want: []Problem{p("relocation_store.redis.namespace", `must differ from location_store.redis.namespace ("x") on the same Redis server and db, or the two stores' keys could collide`)}},
		{name: "two redis stores on different dbs", mutate: func(c *Config) {
			c.LocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x", OperationTimeout: time.Second}}
			c.RelocationStore = StoreConfig{Provider: ProviderRedis, Redis: RedisConfig{Addrs: []string{"r:6379"}, Namespace: "x", DB: 1, OperationTimeout: time.Second}}
		}},

		// §10, §11
		{name: "negative store failure grace", mutate: func(c *Config) { c.StoreFailureGrace = -time.Second },
			want: []Problem{p("store_failure_grace", "must not be negative (0 = no grace), got -1s")}},
		{name: "zero store failure grace", mutate: func(c *Config) { c.StoreFailureGrace = 0 }},
		{name: "zero shutdown deadline", mutate: func(c *Config) { c.ShutdownDeadline = 0 },
			want: []Problem{p("shutdown_deadline", "must be positive, got 0s")}},
		{name: "zero relocation deadline", mutate: func(c *Config) { c.Relocation.Deadline = 0 },
			want: []Problem{p("relocation.deadline", "must be positive, got 0s")}},
		{name: "relocation chunk below 64 KiB", mutate: func(c *Config) { c.Relocation.ChunkSize = 1023 },
			want: []Problem{p("relocation.chunk_size", chunkLow+"got 1023")}},
		{name: "relocation chunk above 16 MiB", mutate: func(c *Config) { c.Relocation.ChunkSize = 64<<20 + 1 },
			want: []Problem{p("relocation.chunk_size", chunkHigh+"got 67108865")}},
		{name: "relocation chunk bounds", mutate: func(c *Config) { c.Relocation.ChunkSize = 64 << 10 }},
		{name: "negative host target run", mutate: func(c *Config) { c.Relocation.HostTargetRun = -1 },
			want: []Problem{p("relocation.host_target_run", "must be 0..1048576 (0 places every move on its own), got -1")}},
		{name: "host target run too long", mutate: func(c *Config) { c.Relocation.HostTargetRun = MaxHostTargetRun + 1 },
			want: []Problem{p("relocation.host_target_run", "must be 0..1048576 (0 places every move on its own), got 1048577")}},
		{name: "host target runs off", mutate: func(c *Config) { c.Relocation.HostTargetRun = 0 }},
		{name: "relocation chunk 16 MiB", mutate: func(c *Config) { c.Relocation.ChunkSize = 16 << 20 }},
		{name: "negative reclaim grace", mutate: func(c *Config) { c.Recovery.ReclaimGrace = -time.Second },
			want: []Problem{p("recovery.reclaim_grace", "must not be negative, got -1s")}},
		{name: "negative reclaim sweep interval", mutate: func(c *Config) { c.Recovery.ReclaimSweepInterval = -time.Second },
			want: []Problem{p("recovery.reclaim_sweep_interval", "must not be negative (0 turns the sweep off), got -1s")}},
		{name: "no grace, no sweep", mutate: func(c *Config) { c.Recovery = RecoveryConfig{} }},

		// log
		{name: "bad log settings", mutate: func(c *Config) { c.Log = LogConfig{Format: "xml", Level: "verbose"} },
			want: []Problem{
				p("log.format", `must be text or json, got "xml"`),
				p("log.level", `must be one of debug, info, warn, error, got "verbose"`),
			}},
		{name: "log level in capitals", mutate: func(c *Config) { c.Log = LogConfig{Format: "JSON", Level: "DEBUG"} }},

		// §2
		{name: "server without location store", mutate: func(c *Config) { c.LocationStore.Provider = "" },
			want: []Problem{p("location_store.provider", "object_role=server requires location_store.provider (the framework never invents a store)")}},
		{name: "client without location store", mutate: func(c *Config) {
			c.Node.ObjectRole = RoleClient
			c.LocationStore.Provider = ""
		}, want: []Problem{p("location_store.provider", "object_role=client requires location_store.provider (the framework never invents a store)")}},
		{name: "role none needs no store", mutate: func(c *Config) {
			c.Node.ObjectRole = RoleNone
			c.LocationStore.Provider = ""
			c.RelocationStore.Provider = ""
		}},
		{name: "role none with factories", mutate: func(c *Config) { c.Node.ObjectRole = RoleNone },
			factories: []FactoryPolicy{actor, userSpot},
			want:      []Problem{p("node.object_role", `object_role=none cannot register factories, only server hosts objects (2 registered, first "Counter")`)}},
		{name: "role client with factories", mutate: func(c *Config) { c.Node.ObjectRole = RoleClient },
			factories: []FactoryPolicy{userSpot},
			want:      []Problem{p("node.object_role", `object_role=client cannot register factories, only server hosts objects (1 registered, first "Lobby")`)}},
		{name: "recreate policy needs relocation store", mutate: func(c *Config) { c.RelocationStore.Provider = "" },
			factories: []FactoryPolicy{actor, recreate, preserve},
			want:      []Problem{p("relocation_store.provider", `factory "Chat" (actor, RecreateOnRelocation) requires a Relocation Store (spec §2); set relocation_store.provider`)}},
		{name: "preserve policy needs relocation store", mutate: func(c *Config) { c.RelocationStore.Provider = "" },
			factories: []FactoryPolicy{userSpot, preserve},
			want:      []Problem{p("relocation_store.provider", `factory "Cart" (user spot, PreserveStateWith) requires a Relocation Store (spec §2); set relocation_store.provider`)}},
		{name: "instance spot needs relocation store", mutate: func(c *Config) { c.RelocationStore.Provider = "" },
			factories: []FactoryPolicy{actor, instanceSpot},
			want:      []Problem{p("relocation_store.provider", `factory "Room" (instance spot) requires a Relocation Store (spec §2); set relocation_store.provider`)}},
		{name: "all disabled needs no relocation store", mutate: func(c *Config) { c.RelocationStore.Provider = "" },
			factories: []FactoryPolicy{actor, userSpot}},
		{name: "relocation store without need is allowed", mutate: func(*Config) {},
			factories: []FactoryPolicy{actor}},
		{name: "bad factory entries", mutate: func(*Config) {},
			factories: []FactoryPolicy{
				{StableType: "", Kind: KindActor},
				{StableType: "X", Kind: 0},
				{StableType: "Y", Kind: KindActor, Policy: 9},
				actor,
				actor,
				{StableType: "Counter", Kind: KindUserSpot}, // same name, other kind: allowed
			},
			want: []Problem{
				p("factories", "entry 1: stable type must not be empty"),
				p("factories", `factory "X": unknown kind 0`),
				p("factories", `factory "Y": unknown relocation policy 9`),
				p("factories", `actor factory "Counter" is registered twice`),
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			got := problemsOf(t, c.Validate(tc.factories))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n got  %q\n want %q", got, tc.want)
			}
		})
	}
}

func TestDefaultNeedsALocationStore(t *testing.T) {
	got := problemsOf(t, Default().Validate(nil))
	want := []Problem{p("location_store.provider", "object_role=server requires location_store.provider (the framework never invents a store)")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	c := valid()
	c.Node.PlacementWeight = 20000
	c.Lease.RenewTimeout = 8 * time.Second
	c.Routing.RouteCacheMaxAge = 28 * time.Second
	c.Transport.SendQueueLimit = -3
	c.Log.Level = "loud"
	err := c.Validate(nil)
	want := strings.Join([]string{
		"config: node.placement_weight: must be 0..10000, got 20000",
		"config: lease: renew_interval + renew_timeout must be less than ttl - fencing_margin (spec §5): 5s + 8s = 13s is not less than 15s - 5s = 10s",
		"config: routing.route_cache_max_age: must be at least 5s shorter than routing.message_follow_duration (spec §7.3): 28s is not at most 30s - 5s = 25s",
		"config: transport.send_queue_limit: must be at least 1, got -3",
		`config: log.level: must be one of debug, info, warn, error, got "loud"`,
	}, "\n")
	if err == nil {
		t.Fatal("Validate returned nil")
	}
	if err.Error() != want {
		t.Fatalf("Error():\n%s\nwant:\n%s", err, want)
	}
	if n := len(strings.Split(err.Error(), "\n")); n != 5 {
		t.Fatalf("got %d lines, want 5", n)
	}
	if got := len(problemsOf(t, err)); got != 5 {
		t.Fatalf("got %d problems, want 5", got)
	}
}

func TestRoutingIDBytes(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
	}{
		{"", nil},
		{"a1B2", []byte{0xa1, 0xb2}},
		{"zz", nil},
		{strings.Repeat("00", 256), nil},
	}
	for _, tc := range tests {
		n := NodeConfig{RoutingID: tc.in}
		if got := n.RoutingIDBytes(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("RoutingIDBytes(%q) = %x, want %x", tc.in, got, tc.want)
		}
	}
}

func TestRedacted(t *testing.T) {
	c := valid()
	c.LocationStore.Redis.Password = "s3cret"
	c.RelocationStore.Redis.SentinelPassword = "s3ntinel"
	r := c.Redacted()
	if r.LocationStore.Redis.Password != "REDACTED" || r.RelocationStore.Redis.Password != "" {
		t.Fatalf("Redacted passwords = %q, %q", r.LocationStore.Redis.Password, r.RelocationStore.Redis.Password)
	}
	if r.RelocationStore.Redis.SentinelPassword != "REDACTED" || r.LocationStore.Redis.SentinelPassword != "" {
		t.Fatalf("Redacted Sentinel passwords = %q, %q", r.LocationStore.Redis.SentinelPassword, r.RelocationStore.Redis.SentinelPassword)
	}
	if c.LocationStore.Redis.Password != "s3cret" {
		t.Fatal("Redacted changed the original")
	}
}

func TestFactoryPolicyStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{KindActor.String(), "actor"},
		{KindUserSpot.String(), "user spot"},
		{KindInstanceSpot.String(), "instance spot"},
		{FactoryKind(7).String(), "FactoryKind(7)"},
		{PolicyDisable.String(), "DisableRelocation"},
		{PolicyRecreate.String(), "RecreateOnRelocation"},
		{PolicyPreserveState.String(), "PreserveStateWith"},
		{RelocationPolicy(9).String(), "RelocationPolicy(9)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// The automatic pool is the client library's 10 per usable CPU with a
// floor; pool_size, when set, is taken as it is.
func TestRedisPoolSize(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		procs, set, want int
	}{
		{1, 0, MinRedisPool},
		{2, 0, MinRedisPool},
		{8, 0, 80},
		{1, 5, 5},
		{8, 200, 200},
	} {
		runtime.GOMAXPROCS(tc.procs)
		if got := (RedisConfig{PoolSize: tc.set}).RedisPoolSize(); got != tc.want {
			t.Errorf("GOMAXPROCS %d, pool_size %d: %d, want %d", tc.procs, tc.set, got, tc.want)
		}
	}
}

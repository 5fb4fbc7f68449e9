package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/meshnode/meshnode/internal/bearer"
)

// ErrInvalid is matched (errors.Is) by every *ValidationError.
var ErrInvalid = errors.New("config: invalid configuration")

// Problem is one configuration problem. Key is the dotted key it concerns
// (for a rule spanning several keys, their common section).
type Problem struct {
	Key     string
	Message string
}

func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// ValidationError lists every problem of a configuration.
type ValidationError struct {
	Problems []Problem
}

// Error lists the problems one per line, each naming its key.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "config: " + p.String()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// FactoryKind is what a registered factory creates.
type FactoryKind uint8

// Factory kinds. The zero value is invalid so that a forgotten field is
// caught rather than read as "actor".
const (
	KindActor FactoryKind = iota + 1
	KindUserSpot
	KindInstanceSpot
)

func (k FactoryKind) String() string {
	switch k {
	case KindActor:
		return "actor"
	case KindUserSpot:
		return "user spot"
	case KindInstanceSpot:
		return "instance spot"
	}
	return fmt.Sprintf("FactoryKind(%d)", uint8(k))
}

// RelocationPolicy is a factory's relocation policy (spec §2).
type RelocationPolicy uint8

// Relocation policies; the zero value is DisableRelocation.
const (
	PolicyDisable       RelocationPolicy = iota // DisableRelocation
	PolicyRecreate                              // RecreateOnRelocation
	PolicyPreserveState                         // PreserveStateWith
)

func (p RelocationPolicy) String() string {
	switch p {
	case PolicyDisable:
		return "DisableRelocation"
	case PolicyRecreate:
		return "RecreateOnRelocation"
	case PolicyPreserveState:
		return "PreserveStateWith"
	}
	return fmt.Sprintf("RelocationPolicy(%d)", uint8(p))
}

// FactoryPolicy is what Validate needs to know of one registered factory.
type FactoryPolicy struct {
	StableType string
	Kind       FactoryKind
	Policy     RelocationPolicy
}

// NeedsRelocationStore reports whether this factory alone makes a
// Relocation Store mandatory (spec §2).
func (f FactoryPolicy) NeedsRelocationStore() bool {
	return f.Kind == KindInstanceSpot || f.Policy == PolicyRecreate || f.Policy == PolicyPreserveState
}

func (f FactoryPolicy) describe() string {
	if f.Policy == PolicyDisable {
		return f.Kind.String()
	}
	return f.Kind.String() + ", " + f.Policy.String()
}

type problems []Problem

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

// LoadProblems returns the problems Load found while reading the sources
// — unknown keys, values of the wrong type — as a *ValidationError, or nil.
// They are the first part of what Validate reports. A tool that reads a
// few keys only (meshnode ctl) checks them instead of every rule of a
// running node, so that a mistyped key or value does not silently become
// its default.
func (c Config) LoadProblems() error {
	if len(c.loadProblems) == 0 {
		return nil
	}
	return &ValidationError{Problems: slices.Clone(c.loadProblems)}
}

// Validate checks every startup rule and returns nil or a *ValidationError
// holding all problems at once: first those Load found (unknown keys, values
// of the wrong type), then the rules, in key order. factories lists the
// factories the node registers (nil for none).
func (c Config) Validate(factories []FactoryPolicy) error {
	ps := problems(slices.Clone(c.loadProblems))
	c.Node.validate(&ps, c.Transport.Curve.Enabled)
	c.Lease.validate(&ps)
	c.Routing.validate(&ps)
	c.Transport.validate(&ps)
	c.LocationStore.validate(&ps, "location_store")
	c.RelocationStore.validate(&ps, "relocation_store")
	c.validateStorePair(&ps)
	if r := c.LocationStore.Redis; c.LocationStore.Provider == ProviderRedis && r.ReplicaAcks > 0 &&
		r.ReplicaAckTimeout > 0 && c.Lease.RenewTimeout > 0 && r.ReplicaAckTimeout >= c.Lease.RenewTimeout {
		// A renewal is a write: waiting for a lagging replica must leave it
		// time to complete, or every renewal fails while the replica lags.
		ps.add("location_store.redis.replica_ack_timeout", "must be below lease.renew_timeout (%s): a lease renewal is a write and waits for the replicas too, got %s",
			c.Lease.RenewTimeout, r.ReplicaAckTimeout)
	}
	if c.StoreFailureGrace < 0 {
		ps.add("store_failure_grace", "must not be negative (0 = no grace), got %s", c.StoreFailureGrace)
	}
	positive(&ps, "shutdown_deadline", c.ShutdownDeadline)
	positive(&ps, "relocation.deadline", c.Relocation.Deadline)
	positive(&ps, "relocation.host_deadline", c.Relocation.HostDeadline)
	if c.Recovery.ReclaimGrace < 0 {
		ps.add("recovery.reclaim_grace", "must not be negative, got %v", c.Recovery.ReclaimGrace)
	}
	if c.Recovery.ReclaimSweepInterval < 0 {
		ps.add("recovery.reclaim_sweep_interval", "must not be negative (0 turns the sweep off), got %v", c.Recovery.ReclaimSweepInterval)
	}
	if n := c.Relocation.MaxConcurrent; n < 1 || n > MaxRelocationConcurrency {
		ps.add("relocation.max_concurrent", "must be 1..%d, got %d", MaxRelocationConcurrency, n)
	}
	if n := c.Relocation.HostTargetRun; n < 0 || n > MaxHostTargetRun {
		ps.add("relocation.host_target_run", "must be 0..%d (0 places every move on its own), got %d", MaxHostTargetRun, n)
	}
	if lo, hi := RelocationChunkRange(); c.Relocation.ChunkSize < lo || c.Relocation.ChunkSize > hi {
		n, why := c.Relocation.ChunkSize, "a source cannot split a payload into chunks above "+byteSize(uint64(hi))
		if n < lo {
			why = fmt.Sprintf("below %s a payload of %s, the largest a move carries, needs more than %d chunks",
				byteSize(uint64(lo)), byteSize(relocationMaxPayload), relocationMaxChunks)
		}
		ps.add("relocation.chunk_size", "must be %d..%d bytes (%s..%s; %s), got %d", lo, hi, byteSize(uint64(lo)), byteSize(uint64(hi)), why, n)
	}
	c.Log.validate(&ps)
	c.Admin.validate(&ps)
	c.validateRoles(&ps, factories)
	ps = c.dropUndecidedSwitchProblems(ps)
	if len(ps) == 0 {
		return nil
	}
	// A rule's problem about one key names where its value was read, as
	// Load's own problems do, while the key still holds the value Load
	// read (a program may have set it since).
	for i := len(c.loadProblems); i < len(ps); i++ {
		if o, ok := c.origins[ps[i].Key]; ok {
			if v, ok := c.valueAt(ps[i].Key); ok && reflect.DeepEqual(v, o.value) {
				ps[i].Message += " (" + o.from + ")"
			}
		}
	}
	return &ValidationError{Problems: ps}
}

// dropUndecidedSwitchProblems leaves out the rules' "is set but
// <section>.enabled is false" problems of a section whose enabled switch did
// not decode (`MESHNODE_TRANSPORT__CURVE__ENABLED=maybe`): its own problem
// says what is wrong, and the others would read as if it had been set to
// false (operator try-out 6).
func (c Config) dropUndecidedSwitchProblems(ps problems) problems {
	var undecided []string
	for _, p := range c.loadProblems {
		if strings.HasSuffix(p.Key, ".enabled") {
			undecided = append(undecided, "is set but "+p.Key+" is false")
		}
	}
	if len(undecided) == 0 {
		return ps
	}
	kept := ps[:len(c.loadProblems)]
	for _, p := range ps[len(c.loadProblems):] {
		if !slices.ContainsFunc(undecided, func(u string) bool { return strings.Contains(p.Message, u) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

func (n NodeConfig) validate(ps *problems, curveOn bool) {
	text(ps, "node.mesh_name", n.MeshName, true)
	if n.RoutingID != "" && curveOn {
		ps.add("node.routing_id", "must be empty with transport.curve.enabled: the RID is derived from the node's public key")
	}
	if n.RoutingID != "" {
		b, err := hex.DecodeString(n.RoutingID)
		switch {
		case err != nil:
			ps.add("node.routing_id", "must be hex digits (e.g. \"a1b2c3\"), got %q", n.RoutingID)
		case len(b) > MaxRoutingID:
			ps.add("node.routing_id", "must be 1..%d bytes, got %d bytes", MaxRoutingID, len(b))
		}
	}
	bindHost, bindOK := endpoint(ps, "node.endpoint", n.Endpoint, false)
	if n.AdvertiseEndpoint != "" {
		endpoint(ps, "node.advertise_endpoint", n.AdvertiseEndpoint, true)
	} else if bindOK && wildcard(bindHost) {
		ps.add("node.advertise_endpoint", "required when node.endpoint binds a wildcard address (%q): peers cannot dial it", n.Endpoint)
	}
	text(ps, "node.security_identity", n.SecurityIdentity, false)
	switch n.ObjectRole {
	case RoleNone, RoleClient, RoleServer:
	default:
		ps.add("node.object_role", "must be one of none, client, server, got %q", string(n.ObjectRole))
	}
	if n.PlacementWeight < 0 || n.PlacementWeight > MaxWeight {
		ps.add("node.placement_weight", "must be 0..%d, got %d", MaxWeight, n.PlacementWeight)
	}
	if n.ApplicationVersion < 0 {
		ps.add("node.application_version", "must be 0..9223372036854775807, got %d", n.ApplicationVersion)
	}
	limit(ps, "node.limits.actors", n.Limits.Actors)
	limit(ps, "node.limits.spots", n.Limits.Spots)
	names := make([]string, 0, len(n.Limits.SpotTypes))
	for name := range n.Limits.SpotTypes {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch {
		case name == "":
			ps.add("node.limits.spot_types", "stable type name must not be empty")
		case len(name) > MaxTextBytes || !utf8.ValidString(name) || strings.ContainsRune(name, 0):
			ps.add("node.limits.spot_types", "stable type name %q must be 1..%d bytes of UTF-8 text without NUL", name, MaxTextBytes)
		}
		limit(ps, "node.limits.spot_types."+name, n.Limits.SpotTypes[name])
	}
}

func (l LeaseConfig) validate(ps *problems) {
	ok := positive(ps, "lease.renew_interval", l.RenewInterval)
	ok = positive(ps, "lease.ttl", l.TTL) && ok
	ok = positive(ps, "lease.renew_timeout", l.RenewTimeout) && ok
	ok = positive(ps, "lease.fencing_margin", l.FencingMargin) && ok
	if !ok {
		return
	}
	// §5: a host must be able to notice a failed renewal before its local
	// admission deadline, or it could accept work beside the next owner.
	// Compared without forming the sum, which can overflow (both are
	// positive, so budget-RenewInterval cannot).
	if budget := l.TTL - l.FencingMargin; l.RenewInterval >= budget || l.RenewTimeout >= budget-l.RenewInterval {
		used := "overflows"
		if l.RenewInterval <= math.MaxInt64-l.RenewTimeout {
			used = (l.RenewInterval + l.RenewTimeout).String()
		}
		ps.add("lease", "renew_interval + renew_timeout must be less than ttl - fencing_margin (spec §5): %s + %s = %s is not less than %s - %s = %s",
			l.RenewInterval, l.RenewTimeout, used, l.TTL, l.FencingMargin, budget)
	}
}

func (r RoutingConfig) validate(ps *problems) {
	if r.RouteCacheMaxAge < 0 {
		ps.add("routing.route_cache_max_age", "must not be negative (0 disables the route cache), got %s", r.RouteCacheMaxAge)
	}
	if r.RouteCacheMaxEntries < 1 || r.RouteCacheMaxEntries > MaxRouteCacheEntries {
		ps.add("routing.route_cache_max_entries", "must be 1..%d, got %d", MaxRouteCacheEntries, r.RouteCacheMaxEntries)
	}
	if r.MessageFollowDuration < 0 {
		ps.add("routing.message_follow_duration", "must not be negative (0 disables Message Follow), got %s", r.MessageFollowDuration)
	}
	// §7.3: a sender must drop its cached route before the previous owner
	// stops forwarding, or its messages would reach an owner that neither
	// hosts nor follows the object.
	if r.RouteCacheMaxAge > 0 && r.MessageFollowDuration > 0 && r.MessageFollowDuration-r.RouteCacheMaxAge < MinFollowMargin {
		ps.add("routing.route_cache_max_age", "must be at least %s shorter than routing.message_follow_duration (spec §7.3): %s is not at most %s - %s = %s",
			MinFollowMargin, r.RouteCacheMaxAge, r.MessageFollowDuration, MinFollowMargin, r.MessageFollowDuration-MinFollowMargin)
	}
}

// Bounds of transport.io_buffer_bytes: below 4 KiB most records need
// several socket calls; above 16 MiB each connection pins more memory than
// any record needs buffered (larger records bypass the buffers).
const (
	MinIOBufferBytes = 4 << 10
	MaxIOBufferBytes = 16 << 20
)

func (t TransportConfig) validate(ps *problems) {
	okI := positive(ps, "transport.liveness_interval", t.LivenessInterval)
	okT := positive(ps, "transport.peer_timeout", t.PeerTimeout)
	if okI && okT && t.PeerTimeout <= t.LivenessInterval {
		ps.add("transport.peer_timeout", "must be greater than transport.liveness_interval (%s), got %s", t.LivenessInterval, t.PeerTimeout)
	}
	if t.SendQueueLimit < 1 {
		ps.add("transport.send_queue_limit", "must be at least 1, got %d", t.SendQueueLimit)
	}
	positive(ps, "transport.request_timeout", t.RequestTimeout)
	if !t.Curve.Enabled {
		t.Curve.unusedKeys(ps)
	} else {
		if _, _, err := t.Curve.Keys(); err != nil {
			errs := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				errs = j.Unwrap() // each problem on its own line
			}
			for _, e := range errs {
				var ke *curveKeyError
				if errors.As(e, &ke) {
					ps.add(ke.key, "%v", ke.err)
				} else {
					ps.add("transport.curve", "%v", e)
				}
			}
		}
	}
	if t.MaxUnadmitted < 1 {
		ps.add("transport.max_unadmitted", "must be at least 1, got %d", t.MaxUnadmitted)
	}
	if t.MaxPeers < 1 {
		ps.add("transport.max_peers", "must be at least 1, got %d", t.MaxPeers)
	}
	if t.IOBufferBytes < MinIOBufferBytes || t.IOBufferBytes > MaxIOBufferBytes {
		ps.add("transport.io_buffer_bytes", "must be %d..%d (4 KiB..16 MiB), got %d", MinIOBufferBytes, MaxIOBufferBytes, t.IOBufferBytes)
	}
}

func (s StoreConfig) validate(ps *problems, prefix string) {
	switch s.Provider {
	case ProviderNone, ProviderMemory:
	case ProviderRedis:
		s.Redis.validate(ps, prefix)
	default:
		ps.add(prefix+".provider", "unknown provider %q (known: memory, redis)", s.Provider)
	}
	positive(ps, prefix+".redis.operation_timeout", s.Redis.OperationTimeout)
}

// validate checks the keys of a redis store; prefix is the store's,
// "location_store" or "relocation_store".
func (r RedisConfig) validate(ps *problems, prefix string) {
	if len(r.Addrs) == 0 {
		ps.add(prefix+".redis.addrs", "must list at least one host:port when provider is redis")
	}
	for i, a := range r.Addrs {
		if !hostPort(a) {
			ps.add(prefix+".redis.addrs", "entry %d must be host:port, got %q", i+1, a)
		}
	}
	switch {
	case r.DB < 0:
		ps.add(prefix+".redis.db", "must not be negative, got %d", r.DB)
	case r.DB != 0 && r.MasterName == "" && len(r.Addrs) > 1:
		// Several addrs without master_name are a Cluster, which has
		// only database 0: go-redis's Cluster client drops db silently
		// (accepted until 2026-12-07).
		ps.add(prefix+".redis.db", "must be 0 with several addrs (a Redis Cluster has only database 0), got %d", r.DB)
	}
	if r.Namespace == "" {
		ps.add(prefix+".redis.namespace", "must not be empty when provider is redis")
	}
	r.TLS.build(ps, prefix+".redis.tls")
	r.loginProblems(ps, prefix+".redis")
	r.validateReplicas(ps, prefix+".redis")
	if r.MasterName == "" {
		// Without Sentinel the keys would be ignored: a credential
		// meant for the Sentinels must not silently go nowhere.
		if r.SentinelUsername != "" {
			ps.add(prefix+".redis.sentinel_username", "is only used with master_name (Sentinel)")
		}
		if r.SentinelPassword != "" {
			ps.add(prefix+".redis.sentinel_password", "is only used with master_name (Sentinel)")
		}
	}
}

// Check reports the problems Validate finds in the keys of this store as
// a *ValidationError, or nil; prefix is the store's dotted key,
// "location_store" or "relocation_store". The store openers call it, for
// ctl commands that do not validate the whole configuration: a problem of
// the store's own keys (a user name without a password, a TLS file, db or
// namespace) is then a configuration error naming the key, as for run —
// until review O (2026-12-08) only the login and TLS keys were checked, and
// ctl answered the others with the provider's "invalid db" or "invalid
// namespace", exit 1, naming no key.
// The operation timeout is not checked: a provider takes 0 for its
// default, and an application may rely on that.
func (s StoreConfig) Check(prefix string) error {
	var ps problems
	if s.Provider == ProviderRedis {
		s.Redis.validate(&ps, prefix)
	}
	if len(ps) > 0 {
		return &ValidationError{Problems: ps}
	}
	return nil
}

// loginProblems refuses a user name without a password: Redis's HELLO (and
// go-redis) send the user name only with a password, so the connection
// would silently log in as the server's default user — with whatever
// rights it has, not the named user's (found in an operator try-out,
// 2026-12-07). A user with nopass takes any password.
func (r RedisConfig) loginProblems(ps *problems, prefix string) {
	if r.Username != "" && r.Password == "" {
		ps.add(prefix+".password", "is empty but %s.username is %q: without a password the user name is never sent, "+
			"and Redis takes the connection as its default user; give the user's password (%s)",
			prefix, r.Username, EnvName(prefix+".password"))
	}
	if r.MasterName != "" && r.SentinelUsername != "" && r.SentinelPassword == "" {
		ps.add(prefix+".sentinel_password", "is empty but %s.sentinel_username is %q: without a password the user name is never sent, "+
			"and the Sentinels take the connection as their default user; give the user's password (%s)",
			prefix, r.SentinelUsername, EnvName(prefix+".sentinel_password"))
	}
}

// validateReplicas checks replica_acks and its timeout, which must leave
// the operation timeout room for the write itself, and pool_size.
func (r RedisConfig) validateReplicas(ps *problems, prefix string) {
	if r.PoolSize < 0 || r.PoolSize > MaxRedisPool {
		ps.add(prefix+".pool_size", "must be 0 (automatic) to %d, got %d", MaxRedisPool, r.PoolSize)
	}
	if r.ReplicaAcks < 0 || r.ReplicaAcks > MaxRedisReplicaAcks {
		ps.add(prefix+".replica_acks", "must be 0..%d, got %d", MaxRedisReplicaAcks, r.ReplicaAcks)
		return
	}
	if r.ReplicaAcks == 0 {
		// Unused while no replica is waited for, but a negative timeout is
		// never meaningful: refuse it now rather than when replica_acks is
		// set (until 2026-12-06 it passed silently).
		if r.ReplicaAckTimeout < 0 {
			ps.add(prefix+".replica_ack_timeout", "must not be negative, got %s", r.ReplicaAckTimeout)
		}
		return
	}
	if positive(ps, prefix+".replica_ack_timeout", r.ReplicaAckTimeout) && r.OperationTimeout > 0 &&
		r.ReplicaAckTimeout >= r.OperationTimeout {
		ps.add(prefix+".replica_ack_timeout", "must be below operation_timeout (%s), which also covers the write itself, got %s",
			r.OperationTimeout, r.ReplicaAckTimeout)
	}
}

// validateStorePair rejects two redis stores whose keys could collide: same
// namespace and database on a shared server.
func (c Config) validateStorePair(ps *problems) {
	l, r := c.LocationStore, c.RelocationStore
	if l.Provider != ProviderRedis || r.Provider != ProviderRedis || l.Redis.Namespace == "" ||
		l.Redis.Namespace != r.Redis.Namespace || l.Redis.DB != r.Redis.DB {
		return
	}
	for _, a := range r.Redis.Addrs {
		if slices.Contains(l.Redis.Addrs, a) {
			ps.add("relocation_store.redis.namespace", "must differ from location_store.redis.namespace (%q) on the same Redis server and db, or the two stores' keys could collide", l.Redis.Namespace)
			return
		}
	}
}

func (l LogConfig) validate(ps *problems) {
	switch strings.ToLower(l.Format) {
	case LogText, LogJSON:
	default:
		ps.add("log.format", "must be text or json, got %q", l.Format)
	}
	if _, ok := parseLevel(l.Level); !ok {
		ps.add("log.level", "must be one of debug, info, warn, error, got %q", l.Level)
	}
}

// validateRoles applies spec §2: which roles need which stores, and who may
// register factories.
func (c Config) validateRoles(ps *problems, factories []FactoryPolicy) {
	type kindType struct {
		kind FactoryKind
		typ  string
	}
	seen := map[kindType]bool{}
	for i, f := range factories {
		switch {
		case f.StableType == "":
			ps.add("factories", "entry %d: stable type must not be empty", i+1)
		case f.Kind < KindActor || f.Kind > KindInstanceSpot:
			ps.add("factories", "factory %q: unknown kind %d", f.StableType, uint8(f.Kind))
		case f.Policy > PolicyPreserveState:
			ps.add("factories", "factory %q: unknown relocation policy %d", f.StableType, uint8(f.Policy))
		case seen[kindType{f.Kind, f.StableType}]:
			ps.add("factories", "%s factory %q is registered twice", f.Kind, f.StableType)
		}
		seen[kindType{f.Kind, f.StableType}] = true
		if _, ok := c.Node.Limits.SpotTypes[f.StableType]; ok && f.Kind == KindActor {
			// Until 2026-12-07 accepted and never enforced.
			ps.add("node.limits.spot_types."+f.StableType, "names the Actor type %q: there is no per-Actor-type limit (spec §4); "+
				"node.limits.actors caps the Actors of a node", f.StableType)
		}
	}

	role := c.Node.ObjectRole
	if (role == RoleClient || role == RoleServer) && c.LocationStore.Provider == ProviderNone {
		ps.add("location_store.provider", "object_role=%s requires location_store.provider (the framework never invents a store)", role)
	}
	if (role == RoleNone || role == RoleClient) && len(factories) > 0 {
		ps.add("node.object_role", "object_role=%s cannot register factories, only server hosts objects (%d registered, first %q)",
			role, len(factories), factories[0].StableType)
	}
	if c.RelocationStore.Provider == ProviderNone {
		for _, f := range factories {
			if f.NeedsRelocationStore() {
				ps.add("relocation_store.provider", "factory %q (%s) requires a Relocation Store (spec §2); set relocation_store.provider",
					f.StableType, f.describe())
				break
			}
		}
	}
}

func positive(ps *problems, key string, d time.Duration) bool {
	if d <= 0 {
		ps.add(key, "must be positive, got %s", d)
		return false
	}
	return true
}

func limit(ps *problems, key string, n int) {
	if n < 0 || n > MaxLimit {
		ps.add(key, "must be 0 (no limit) or 1..%d, got %d", MaxLimit, n)
	}
}

// text checks a wire text field: UTF-8, no NUL, one length byte.
func text(ps *problems, key, s string, required bool) {
	switch {
	case s == "" && required:
		ps.add(key, "must not be empty")
	case len(s) > MaxTextBytes:
		ps.add(key, "must be at most %d bytes, got %d", MaxTextBytes, len(s))
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		ps.add(key, "must be UTF-8 text without NUL bytes")
	}
}

// endpoint checks tcp://host:port and returns the host. An advertised
// endpoint is dialed by peers, so it needs a real port and host.
func endpoint(ps *problems, key, s string, advertised bool) (string, bool) {
	if len(s) > MaxEndpoint {
		ps.add(key, "must be at most %d bytes, got %d", MaxEndpoint, len(s))
		return "", false
	}
	rest, ok := strings.CutPrefix(s, "tcp://")
	host, portText, err := net.SplitHostPort(rest)
	port, perr := strconv.Atoi(portText)
	if !ok || err != nil || host == "" || perr != nil || port < 0 || port > 65535 || strings.TrimLeft(portText, "0123456789") != "" {
		if advertised {
			ps.add(key, "must be tcp://host:port, got %q", s)
		} else {
			ps.add(key, "must be tcp://host:port (port 0 = any free port), got %q", s)
		}
		return "", false
	}
	if advertised {
		if port == 0 {
			ps.add(key, "port must be 1..65535 because peers dial it, got %q", s)
			return host, false
		}
		if wildcard(host) {
			ps.add(key, "host must be an address peers can dial, not %q", host)
			return host, false
		}
	}
	return host, true
}

func wildcard(host string) bool {
	return host == "*" || host == "0.0.0.0" || host == "::"
}

func hostPort(s string) bool {
	host, portText, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return false
	}
	port, err := strconv.Atoi(portText)
	return err == nil && port >= 1 && port <= 65535 && strings.TrimLeft(portText, "0123456789") == ""
}

// validate checks the admin listener: a host:port, and a token whenever the
// listener is reachable from other hosts (an unauthenticated control
// endpoint on the network would let anyone drain the node).
func (a AdminConfig) validate(ps *problems) {
	if a.Token != "" && len(a.Token) < MinAdminToken {
		ps.add("admin.token", "must be at least %d bytes, got %d", MinAdminToken, len(a.Token))
	}
	// A token no client can send (a secret file's trailing newline, blanks
	// around it) left every endpoint but the probes 401 for good until
	// 2026-12-07; refused here, without printing it.
	if err := bearer.Check(a.Token); err != nil {
		ps.add("admin.token", "%v", err)
	}
	if a.Listen == "" {
		return
	}
	host, port, err := net.SplitHostPort(a.Listen)
	if err != nil {
		ps.add("admin.listen", "must be host:port, got %q: %v", a.Listen, err)
		return
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		ps.add("admin.listen", "port must be 0..65535, got %q", port)
	}
	if !LoopbackHost(host) && a.Token == "" {
		ps.add("admin.listen", "binds %q, which is not loopback: set admin.token (MESHNODE_ADMIN__TOKEN) or bind 127.0.0.1", host)
	}
}

// LoopbackHost reports whether host names only the loopback interface. An
// empty host or a wildcard (0.0.0.0, ::) binds every interface.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// byteSize writes n in the largest binary unit that divides it ("64 KiB",
// "16 MiB", "1000 bytes").
func byteSize(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatUint(n>>30, 10) + " GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatUint(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatUint(n>>10, 10) + " KiB"
	}
	return strconv.FormatUint(n, 10) + " bytes"
}

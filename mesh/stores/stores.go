// Package stores opens the Location Store and Relocation Store a node's
// configuration names. Providers register by name, like database/sql
// drivers; "memory" and "redis" are registered here. The framework never
// invents a store: an empty provider name opens nothing (§2).
//
// For "redis" it also turns the TLS keys into a client configuration and
// points a refused login or TLS handshake at the keys to check.
package stores

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/locstore"
	locmemory "github.com/meshnode/meshnode/locstore/memory"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/relocstore"
	relmemory "github.com/meshnode/meshnode/relocstore/memory"
	relredis "github.com/meshnode/meshnode/relocstore/redis"
)

// ErrUnknownProvider is returned for a provider name nobody registered.
var ErrUnknownProvider = errors.New("stores: unknown provider")

// LocationOpener opens a Location Store from its configuration.
type LocationOpener func(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (locstore.Store, error)

// RelocationOpener opens a Relocation Store from its configuration.
type RelocationOpener func(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (relocstore.Store, error)

var (
	mu         sync.RWMutex
	locations  = map[string]LocationOpener{}
	relocation = map[string]RelocationOpener{}
)

// RegisterLocation registers a Location Store provider under name.
func RegisterLocation(name string, open LocationOpener) error {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := locations[name]; dup || name == "" || open == nil {
		return fmt.Errorf("stores: cannot register location provider %q (empty, nil or duplicate)", name)
	}
	locations[name] = open
	return nil
}

// RegisterRelocation registers a Relocation Store provider under name.
func RegisterRelocation(name string, open RelocationOpener) error {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := relocation[name]; dup || name == "" || open == nil {
		return fmt.Errorf("stores: cannot register relocation provider %q (empty, nil or duplicate)", name)
	}
	relocation[name] = open
	return nil
}

// LocationProviders lists the registered Location Store provider names.
func LocationProviders() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(locations))
	for n := range locations {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// oneShotKey marks a context whose stores are opened by a one-shot tool.
type oneShotKey struct{}

// OneShot returns ctx marked for opening a store for a one-shot tool (the
// ctl commands), not for a node's run. A provider's opener then leaves out
// the notices meant for the start of a node's log: for redis, the
// durability settings check (its WARN when persistence is off or keys may
// be evicted: a node logs it when it opens the store, and every run of a
// ctl command repeated it in front of its answer) and the replica_acks
// INFO. Problems that concern the tool itself (a refused login, a TLS
// setting that skips verification) are still reported.
func OneShot(ctx context.Context) context.Context { return context.WithValue(ctx, oneShotKey{}, true) }

// IsOneShot reports whether ctx was marked by OneShot; an opener registered
// by an application consults it the same way.
func IsOneShot(ctx context.Context) bool {
	v, _ := ctx.Value(oneShotKey{}).(bool)
	return v
}

// OpenLocation opens the configured Location Store, or returns nil, nil when
// no provider is configured.
func OpenLocation(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (locstore.Store, error) {
	if cfg.Provider == "" {
		return nil, nil
	}
	mu.RLock()
	open, ok := locations[cfg.Provider]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: location store %q (registered: %v)", ErrUnknownProvider, cfg.Provider, LocationProviders())
	}
	s, err := open(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("open location store %q: %w", cfg.Provider, err)
	}
	return s, nil
}

// OpenRelocation opens the configured Relocation Store, or nil, nil.
func OpenRelocation(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (relocstore.Store, error) {
	if cfg.Provider == "" {
		return nil, nil
	}
	mu.RLock()
	open, ok := relocation[cfg.Provider]
	mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: relocation store %q", ErrUnknownProvider, cfg.Provider)
	}
	s, err := open(ctx, cfg, log)
	if err != nil {
		return nil, fmt.Errorf("open relocation store %q: %w", cfg.Provider, err)
	}
	return s, nil
}

func init() {
	must := func(err error) {
		if err != nil {
			panic(err) // only on a duplicate built-in name: a programming error
		}
	}
	must(RegisterLocation(locmemory.ProviderName, func(_ context.Context, _ config.StoreConfig, log *slog.Logger) (locstore.Store, error) {
		return locmemory.New(locmemory.WithLogger(log))
	}))
	must(RegisterLocation(locredis.ProviderName, func(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (locstore.Store, error) {
		const prefix = "location_store"
		r := cfg.Redis
		if err := cfg.Check(prefix); err != nil {
			return nil, err // a user name without a password, db, namespace…: before any connection
		}
		locredis.RouteClientLogs(log) // go-redis's own lines into this log, at debug
		tlsCfg, err := redisTLS(r, prefix, log)
		if err != nil {
			return nil, err
		}
		st, err := locredis.New(ctx, locredis.Options{Addrs: r.Addrs, MasterName: r.MasterName,
			SentinelUsername: r.SentinelUsername, SentinelPassword: r.SentinelPassword, Username: r.Username,
			Password: r.Password, TLSConfig: tlsCfg, DB: r.DB, Namespace: r.Namespace, OperationTimeout: r.OperationTimeout,
			ReplicaAcks: r.ReplicaAcks, ReplicaAckTimeout: r.ReplicaAckTimeout, PoolSize: r.RedisPoolSize(), Logger: log})
		if err != nil {
			return nil, explainOpen(prefix, r, err)
		}
		if log != nil && !IsOneShot(ctx) {
			warnDurability(ctx, st, log)
			logReplicaAcks(log, "Location Store", r)
		}
		return st, nil
	}))
	must(RegisterRelocation(relmemory.ProviderName, func(_ context.Context, _ config.StoreConfig, _ *slog.Logger) (relocstore.Store, error) {
		return relmemory.New()
	}))
	must(RegisterRelocation(relredis.ProviderName, func(ctx context.Context, cfg config.StoreConfig, log *slog.Logger) (relocstore.Store, error) {
		const prefix = "relocation_store"
		r := cfg.Redis
		if err := cfg.Check(prefix); err != nil {
			return nil, err // a user name without a password, db, namespace…: before any connection
		}
		locredis.RouteClientLogs(log) // the same process-wide go-redis logger
		tlsCfg, err := redisTLS(r, prefix, log)
		if err != nil {
			return nil, err
		}
		st, err := relredis.New(ctx, relredis.Options{Addrs: r.Addrs, MasterName: r.MasterName,
			SentinelUsername: r.SentinelUsername, SentinelPassword: r.SentinelPassword, Username: r.Username,
			Password: r.Password, TLSConfig: tlsCfg, DB: r.DB, Namespace: r.Namespace, OperationTimeout: r.OperationTimeout, Logger: log,
			ReplicaAcks: r.ReplicaAcks, ReplicaAckTimeout: r.ReplicaAckTimeout, PoolSize: r.RedisPoolSize()})
		if err != nil {
			return nil, explainOpen(prefix, r, err)
		}
		if log != nil && !IsOneShot(ctx) {
			logReplicaAcks(log, "Relocation Store", r)
		}
		return st, nil
	}))
}

// logReplicaAcks says once, at open, that the store's writes wait for
// replicas: an operator reading the start of a log sees the setting the
// later replica WARN/INFO lines are about.
func logReplicaAcks(log *slog.Logger, store string, r config.RedisConfig) {
	if r.ReplicaAcks > 0 {
		log.Info(store+": every write waits for Redis replicas (replica_acks)", "replica_acks", r.ReplicaAcks,
			"replica_ack_timeout", r.ReplicaAckTimeout)
	}
}

// redisTLS builds the TLS client configuration of a redis store (nil when
// TLS is off). Config.Validate reports the same problems, but ctl commands
// open stores without validating the whole configuration, so a bad file
// must still stop here with the key named (a *config.ValidationError); the
// openers check the store's other keys before (config.StoreConfig.Check).
func redisTLS(r config.RedisConfig, prefix string, log *slog.Logger) (*tls.Config, error) {
	c, err := r.TLS.ClientConfig(prefix + ".redis.tls")
	if err != nil || c == nil {
		return nil, err
	}
	if c.InsecureSkipVerify && log != nil {
		log.Warn("SECURITY WARNING: "+prefix+".redis.tls.insecure_skip_verify is true: the Redis server's certificate is NOT verified, "+
			"so anyone on the network path can pose as the server and read the store's password and data; use it for tests only",
			"addrs", r.Addrs)
	}
	return c, nil
}

// explainOpen names the keys to check when the server refused the login or
// the TLS handshake, the two startup failures an operator fixes in the
// configuration. The password is never part of the message.
func explainOpen(prefix string, r config.RedisConfig, err error) error {
	switch {
	case errors.Is(err, redisconn.ErrAuth) && r.MasterName != "":
		// The refusal may come from the Sentinels or from the master.
		return fmt.Errorf("%w (check %s.redis.sentinel_username and %s.redis.sentinel_password for the Sentinels, e.g. %s, "+
			"and %s.redis.username and %s.redis.password for the master)",
			err, prefix, prefix, config.EnvName(prefix+".redis.sentinel_password"), prefix, prefix)
	case errors.Is(err, redisconn.ErrAuth):
		return fmt.Errorf("%w (check %s.redis.username and %s.redis.password, e.g. %s)",
			err, prefix, prefix, config.EnvName(prefix+".redis.password"))
	case errors.Is(err, redisconn.ErrNoPermission):
		return fmt.Errorf("%w (check the ACL rule of %s.redis.username %q: docs/store-redis.md, \"The least an account needs\", gives it)",
			err, prefix, r.Username)
	case errors.Is(err, redisconn.ErrPlainText):
		return fmt.Errorf("%w (check %s.redis.addrs: name the server's TLS port, or set %s.redis.tls.enabled: false for a server without TLS)",
			err, prefix, prefix)
	case errors.Is(err, redisconn.ErrTLS):
		return fmt.Errorf("%w (check %s.redis.tls.*)", err, prefix)
	case errors.Is(err, redisconn.ErrNotRedis):
		return fmt.Errorf("%w (check %s.redis.addrs: it must name Redis servers, not a node's endpoint or admin listener)", err, prefix)
	}
	return err
}

// warnDurability logs, once per opened store, each Redis setting the
// Location Store's guarantees need that the server does not have
// (docs/store-redis.md); settings it cannot read are only mentioned at
// debug level (CONFIG is often disabled on managed services).
func warnDurability(ctx context.Context, st *locredis.Store, log *slog.Logger) {
	warns, err := st.CheckDurability(ctx)
	if err != nil {
		log.Debug("Redis durability settings not checked", "err", err)
		return
	}
	for _, w := range warns {
		log.Warn("Location Store: "+w, "see", "docs/store-redis.md")
	}
}

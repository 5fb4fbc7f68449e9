// Package redisconn builds the go-redis clients of the Redis store
// providers (Location Store and Relocation Store) the one way both need:
// the per-operation context deadline bounds dial, pool wait and socket I/O,
// and there are no hidden client retries, because a failed call must report
// "outcome unknown" at once so the framework can re-read (spec §10).
package redisconn

import (
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Options are the connection settings a provider takes from its config.
type Options struct {
	// Addrs: one address is a standalone server, several are Cluster seed
	// nodes; with MasterName they are Sentinel addresses.
	Addrs      []string
	MasterName string
	Username   string
	Password   string
	DB         int
	PoolSize   int // 0 = go-redis default
}

// NewClient returns a UniversalClient whose fixed timeouts equal the
// operation timeout; they are only a backstop, the per-operation deadline
// (ContextTimeoutEnabled) is what bounds a call.
func NewClient(o Options, operationTimeout time.Duration) goredis.UniversalClient {
	return goredis.NewUniversalClient(&goredis.UniversalOptions{
		Addrs:                 o.Addrs,
		MasterName:            o.MasterName,
		Username:              o.Username,
		Password:              o.Password,
		DB:                    o.DB,
		PoolSize:              o.PoolSize,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		// RESP2: the providers use no RESP3 feature (no client-side
		// caching, no push messages), and go-redis's push-notification
		// check on every RESP3 reply cost ~5 % of a host relocation's CPU
		// (benchmarks/README.md, issue 11).
		Protocol:     2,
		DialTimeout:  operationTimeout,
		ReadTimeout:  operationTimeout,
		WriteTimeout: operationTimeout,
		PoolTimeout:  operationTimeout,
	})
}

// ContextTimeoutEnabled reports whether a caller-built client honours
// context deadlines for socket I/O; without it an operation timeout cannot
// bound a silent server. Unknown implementations are given the benefit of
// the doubt.
func ContextTimeoutEnabled(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return true
}

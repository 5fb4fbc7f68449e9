// Package redisconn builds the go-redis clients of the Redis store
// providers (Location Store and Relocation Store) the one way both need:
// the per-operation context deadline bounds dial, pool wait and socket I/O,
// and there are no hidden client retries, because a failed call must report
// "outcome unknown" at once so the framework can re-read (spec §10).
//
// It also turns the errors of a connection's first command into ones that
// say what is wrong (Explain): a refused password or a failed TLS
// handshake, instead of a bare server reply or an x509 detail; makes a
// Cluster client follow a failover at once (ReloadAfter); holds the
// replica wait both providers' writes share (ReplicaWait, replicas.go);
// and runs each store call so that a cancelled caller need not wait for it
// (Leavable, leave.go).
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ErrAuth is the cause when the server refused the credentials: a wrong
// user name or password, a disabled ACL user, no password where the server
// requires one, or a password where it has none.
var ErrAuth = errors.New("authentication failed")

// ErrTLS is the cause when no TLS session could be set up: the server's
// certificate is not trusted or not for the name dialled, the server
// refused the client certificate, or one side does not speak TLS.
var ErrTLS = errors.New("TLS handshake failed")

// ErrNotRedis is the cause when the server's answer is not the Redis
// protocol at all: the address is some other service (an HTTP server such
// as a node's admin listener, a node's mesh port).
var ErrNotRedis = errors.New("the server does not speak the Redis protocol (is this address a Redis server?)")

// Options are the connection settings a provider takes from its config.
type Options struct {
	// Addrs: one address is a standalone server, several are Cluster seed
	// nodes; with MasterName they are Sentinel addresses.
	Addrs      []string
	MasterName string
	// SentinelUsername and SentinelPassword log in to the Sentinels
	// themselves (their requirepass, or an ACL user of theirs); Username
	// and Password are the master's.
	SentinelUsername string
	SentinelPassword string
	Username         string
	Password         string
	DB               int
	PoolSize         int // 0 = go-redis default
	// TLSConfig, when not nil, makes every connection (to Sentinels, too)
	// use TLS with it. An empty ServerName is taken from each address
	// dialled, so Cluster nodes are each verified under their own name.
	TLSConfig *tls.Config
}

// CheckDB says what is wrong with a database number for these addresses,
// or "" when nothing is: it must not be negative (go-redis would take -1 as
// database 0), and a Cluster — several addresses without MasterName — has
// only database 0 (go-redis's Cluster client has no DB and would drop any
// other silently, so the keys would land where the operator did not put
// them).
func CheckDB(addrs []string, masterName string, db int) string {
	switch {
	case db < 0:
		return fmt.Sprintf("database %d is negative", db)
	case db != 0 && masterName == "" && len(addrs) > 1:
		return fmt.Sprintf("database %d with several addresses (a Redis Cluster has only database 0)", db)
	}
	return ""
}

// NewClient returns a UniversalClient whose fixed timeouts equal the
// operation timeout; they are only a backstop, the per-operation deadline
// (ContextTimeoutEnabled) is what bounds a call.
func NewClient(o Options, operationTimeout time.Duration) goredis.UniversalClient {
	return goredis.NewUniversalClient(&goredis.UniversalOptions{
		Addrs:                 o.Addrs,
		MasterName:            o.MasterName,
		SentinelUsername:      o.SentinelUsername,
		SentinelPassword:      o.SentinelPassword,
		Username:              o.Username,
		Password:              o.Password,
		DB:                    o.DB,
		PoolSize:              o.PoolSize,
		TLSConfig:             o.TLSConfig,
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

// Explain wraps err, the failure of a connection's first command, in
// ErrAuth, ErrTLS, ErrNotRedis or ErrMeshPort (a TLS handshake answered
// with a ZMTP greeting) when it is one of those, so that a startup error says
// "authentication failed" rather than only the server's reply; other
// errors are returned unchanged. No credential is ever part of the text:
// Redis's replies do not echo the password.
func Explain(err error) error {
	switch {
	case err == nil:
		return nil
	case isAuth(err):
		return fmt.Errorf("%w: %w", ErrAuth, err)
	case tlsFromMeshPort(err):
		return &meshPortError{err: err}
	case isTLS(err):
		return fmt.Errorf("%w: %w", ErrTLS, err)
	case strings.HasPrefix(err.Error(), "redis: can't parse"):
		// go-redis's reader met bytes that are no RESP reply (its error
		// has no type of its own).
		return fmt.Errorf("%w: %w", ErrNotRedis, err)
	}
	return err
}

func isAuth(err error) bool {
	if goredis.IsAuthError(err) { // NOAUTH, WRONGPASS
		return true
	}
	// "ERR AUTH <password> called without any password configured for the
	// default user" (a password sent to a server without one), and Redis
	// before 6's "ERR invalid password" (HasErrorPrefix skips "ERR ").
	return goredis.HasErrorPrefix(err, "AUTH ") || goredis.HasErrorPrefix(err, "invalid password")
}

func isTLS(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		alert    tls.AlertError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid) {
		return true
	}
	// An alert the server sent (a refused client certificate) reaches the
	// client as an unexported type, only its text is recognizable.
	return strings.Contains(err.Error(), "remote error: tls: ")
}

// ReloadAfter asks a Cluster client to read the cluster's slot map again
// after a call failed. Why: go-redis re-reads it on a MOVED or ASK reply
// and otherwise only every ClusterStateReloadInterval (60 s), and a master
// that died answers neither — its calls fail with "connection refused" or
// a timeout, and the client kept dialling it for up to a minute after the
// cluster had promoted its replica (found in a try-out: a mesh stayed
// unready 68 s after a 3-master Cluster's failover). The reload is lazy and
// coalesced by go-redis (one CLUSTER SLOTS per 200 ms at most), so asking
// after every failure costs nothing while the store is healthy. Other
// clients are left alone.
func ReloadAfter(c goredis.UniversalClient) {
	if cc, ok := c.(*goredis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}

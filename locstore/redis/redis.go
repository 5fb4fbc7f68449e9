// Package redis is the production Location Store provider (locstore.Store)
// on Redis, through a go-redis UniversalClient: one address is a standalone
// server, several are a Cluster, and a MasterName selects Sentinel.
//
// Every SPI operation is one Lua script call (EVALSHA, falling back to EVAL
// when the server does not have the script cached), so a Write batch is
// checked and applied atomically and StoreNow is the server's TIME read
// inside that same call. Redis 5.0 or newer is required (scripts that read
// TIME and then write); the provider is tested against Redis 7.
//
// # Key layout
//
// Every Redis key of a namespace starts with the hash tag "{<namespace>}:",
// so all keys of a namespace live in one Cluster slot and a batch is a
// single-slot script call. For a namespace ns:
//
//	{ns}:k:<key>      HASH  the record of SPI key <key>: v = value bytes
//	                        verbatim, s = version (decimal commit sequence),
//	                        x = expiresAt in epoch ms (absent when durable)
//	{ns}:seq          STRING  commit sequence; versions are drawn from it
//	{ns}:idx          ZSET  every key with a record or history, score 0, so
//	                        ZRANGEBYLEX walks keys in byte order
//	{ns}:exp          ZSET  keys of expiring records (and of deleted keys
//	                        whose history keeps their index entry), scored
//	                        by when they are physically gone: their index
//	                        entries are reaped from here by later writes
//	{ns}:snaps        ZSET  registry of open scan snapshots (id by seq)
//	{ns}:cursorkey    STRING the namespace's 32-byte cursor HMAC key
//	{ns}:snap:<id>    HASH  one open scan snapshot (seq, StoreNow, prefix)
//	{ns}:h:<key>      ZSET  superseded records an open snapshot may need
//	{ns}:hv:<seq>     STRING  the value of the superseded record <seq>
//
// The framework's own records use keys that are lowercase hex SHA-256
// digests (spec §3.4), so such a record lives at "{ns}:k:" + hex, and its
// value bytes are in field v exactly as the framework encoded them: another
// runtime can read them with HGET.
//
// # Versions
//
// A version is the decimal commit sequence number the mutation drew from
// {ns}:seq. The sequence only grows, so a version is never reused within the
// namespace, also after a key is deleted and recreated.
//
// # Snapshot scans
//
// Scan keeps a snapshot by multi-versioning on the commit sequence: the first
// page fixes the current sequence S and StoreNow T0; later pages resolve each
// indexed key as it was at S (the current record when its sequence is at most
// S, otherwise the history entry live at S) and judge expiry at T0. Writes
// keep history of a record only while an open snapshot can see it; a
// snapshot is released by its last page or expires after
// Options.SnapshotTTL, and history goes with it. Cursors are opaque and
// never expose a Redis SCAN cursor; each script call examines a bounded
// number of index entries.
//
// # Failures
//
// Each operation runs under a deadline of Options.OperationTimeout covering
// connection acquisition and the command; one whose context has no
// deadline runs on a goroutine of its own (redisconn.Leavable), so that a
// caller that cancels it — which go-redis does not see once a command is
// written — returns at once while the call finishes or times out without
// it (one with a deadline returns by it). Any failure is a
// *locstore.ProviderError (errors.Is(err, locstore.ErrUnavailable)); the
// script calls are never retried by the client, because a retried Write whose
// first attempt applied would report a Conflict that did not happen (spec
// §10: the caller re-reads instead).
//
// docs/store-redis.md describes the scripts, limits and failure behaviour in
// full.
package redis

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/locstore"
)

// ProviderName is the name the provider is registered and configured under.
const ProviderName = "redis"

// Defaults of Options.
const (
	DefaultOperationTimeout = 2 * time.Second
	DefaultSnapshotTTL      = 5 * time.Minute
	// MaxNamespaceBytes bounds Options.Namespace.
	MaxNamespaceBytes = 256
)

// Scan work bounds. Each script call examines at most examineBudget index
// entries so that no call blocks the server for long; one Scan page is
// assembled from at most maxCallsPerPage calls, after which a short page
// (possibly empty) is returned with a cursor.
const (
	examineBudget   = 1024
	maxCallsPerPage = 16
)

// ErrClosed is the cause of the ProviderError returned after Close.
var ErrClosed = errors.New("locstore/redis: store closed")

// ErrAuth is the cause of New's ProviderError when the server refused the
// user name or password; ErrTLS when no TLS session could be set up;
// ErrNotRedis when the address answered in another protocol, and
// ErrMeshPort (also ErrNotRedis) when that was a meshnode node's mesh port;
// ErrPlainText (also ErrTLS) when TLS is on and the address is a Redis port
// that speaks plain text.
// They are the same values for the Relocation Store provider.
var (
	ErrAuth      = redisconn.ErrAuth
	ErrTLS       = redisconn.ErrTLS
	ErrNotRedis  = redisconn.ErrNotRedis
	ErrMeshPort  = redisconn.ErrMeshPort
	ErrPlainText = redisconn.ErrPlainText
	// ErrNoPermission: the account may not run a command the store needs
	// (its ACL rule; docs/store-redis.md, "The least an account needs").
	ErrNoPermission = redisconn.ErrNoPermission
)

// Options configures New.
type Options struct {
	// Addrs: one address is a standalone server, several are Cluster seed
	// nodes; with MasterName they are Sentinel addresses.
	Addrs      []string
	MasterName string
	// SentinelUsername and SentinelPassword log in to the Sentinels, when
	// they require it (with MasterName only).
	SentinelUsername string
	SentinelPassword string
	// Username and Password log in (Redis ACL user, or only a password for
	// the default user / requirepass).
	Username string
	Password string
	// TLSConfig, when not nil, makes every connection use TLS with it; an
	// empty ServerName is taken from each address dialled.
	TLSConfig *tls.Config
	// DB selects the database of a standalone or Sentinel-managed server;
	// a Cluster has only database 0, and New refuses another with several
	// Addrs (go-redis's Cluster client would drop it silently).
	DB int
	// Namespace prefixes every Redis key as the hash tag "{Namespace}:".
	// Required; must not contain '{' or '}'.
	Namespace string
	// OperationTimeout bounds each operation: connection acquisition plus
	// the command (default 2s).
	OperationTimeout time.Duration
	// SnapshotTTL is how long an unfinished scan snapshot stays readable
	// after its first page (default 5 min); a scan that reaches its last
	// page releases it at once. Processes sharing a namespace should use the
	// same value: an expiring value stays physically readable for the
	// writer's SnapshotTTL past its expiry, for snapshots taken before it.
	SnapshotTTL time.Duration
	// PoolSize is the go-redis pool size per node (0 = go-redis default).
	PoolSize int
	// ReplicaAcks, when positive, makes every write wait (Redis WAIT, in
	// the write's own round trip) until that many replicas acknowledged it,
	// for at most ReplicaAckTimeout (required then, below
	// OperationTimeout), so that a failover keeps it. A write acknowledged
	// by fewer in time still counts (it applied on the master); the Store
	// then stops waiting, logs a WARN, and lets one write a second wait
	// again until the replicas keep up (internal/redisconn.ReplicaWait).
	// 0 (the default): writes do not wait, and a failover to a replica that
	// missed them is caught afterwards by the rollback watch (RollbackError).
	ReplicaAcks       int
	ReplicaAckTimeout time.Duration
	// Logger receives the replica wait's log lines and the WARN of a commit
	// sequence found lost on its own (default slog.Default()).
	Logger *slog.Logger
}

// Store is the Redis Location Store. It is safe for concurrent use.
type Store struct {
	client goredis.UniversalClient
	owned  bool
	ns     string
	prefix string // "{ns}:"
	// The namespace's fixed keys (see the package doc).
	seqK, registryK, indexK string
	timeout                 time.Duration
	snapTTL                 time.Duration
	// cursorKey authenticates the cursors of this namespace, so an edited,
	// truncated or foreign cursor is Expired instead of resuming elsewhere.
	// It is one random value per namespace, kept in Redis ({ns}:cursorkey)
	// and loaded at the first Scan, so that every Store instance on the
	// namespace — another process, a later "ctl list" — accepts the
	// cursors of the others (the snapshots themselves live in Redis too).
	cursorMu     sync.Mutex
	cursorLoaded bool
	cursorKey    [32]byte

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	// rollback notices the namespace going back in time (rollback.go).
	rollback seqWatch
	log      *slog.Logger // Options.Logger
	// replicas is what each write waits for (Options.ReplicaAcks); nil:
	// writes do not wait.
	replicas *redisconn.ReplicaWait
}

var (
	_ locstore.Store       = (*Store)(nil)
	_ locstore.MultiReader = (*Store)(nil)
)

// New connects to Redis as opts describes and checks the connection with a
// PING bounded by ctx and the operation timeout. The Store owns the client:
// Close closes it.
func New(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Addrs) == 0 {
		return nil, &locstore.ArgumentError{Op: "open", Field: "addrs", Reason: "no Redis address"}
	}
	if opts.PoolSize < 0 {
		return nil, &locstore.ArgumentError{Op: "open", Field: "poolSize", Reason: "negative"}
	}
	if why := redisconn.CheckDB(opts.Addrs, opts.MasterName, opts.DB); why != "" {
		return nil, &locstore.ArgumentError{Op: "open", Field: "db", Reason: why}
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	// No client retries (see the package doc, Failures); the operation
	// timeout bounds dial, pool wait and I/O (internal/redisconn).
	s.client = redisconn.NewClient(redisconn.Options{Addrs: opts.Addrs, MasterName: opts.MasterName,
		SentinelUsername: opts.SentinelUsername, SentinelPassword: opts.SentinelPassword,
		Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig, DB: opts.DB,
		PoolSize: opts.PoolSize}, s.timeout)
	s.owned = true
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Ping(pctx).Err(); err != nil {
		_ = s.client.Close()
		return nil, &locstore.ProviderError{Provider: ProviderName, Op: "open", Err: redisconn.ExplainOpen(err, opts.Addrs, opts.TLSConfig != nil)}
	}
	if s.replicas != nil {
		if err := redisconn.CheckWait(pctx, s.client, s.seqK); err != nil {
			_ = s.client.Close()
			return nil, &locstore.ProviderError{Provider: ProviderName, Op: "open", Err: err}
		}
	}
	// The account's ACL rule: the read script (EVAL, EVALSHA, TIME, HGET)
	// on a key of the namespace that no record uses. Other failures are
	// left to the first real call.
	if denied := s.checkPermissions(pctx); denied != nil {
		_ = s.client.Close()
		return nil, &locstore.ProviderError{Provider: ProviderName, Op: "open", Err: denied}
	}
	return s, nil
}

// checkPermissions runs the read script on openCheckKey with EVAL, then
// with EVALSHA, and returns ErrNoPermission when the server refused either
// to the account (nil otherwise, whatever else failed). Both, whatever the
// server's script cache holds: a provider sends EVAL only when EVALSHA met
// NOSCRIPT, so with the scripts cached (another node loaded them) a rule
// without +eval passed an EVALSHA-only check and failed every call after
// the cache was emptied — a Redis restart, a failover — on every node at
// once (review O, 2026-12-08: TestOpenWithoutEvalWhenScriptsAreCached).
func (s *Store) checkPermissions(ctx context.Context) error {
	c := newCall(2, 0)
	c.key(s.dataKey(openCheckKey))
	c.key(s.seqK)
	c.args[2] = c.nkeys
	if _, err := s.run(ctx, "eval", readScript.src, c.args); redisconn.ExplainPermission(err) != nil {
		return redisconn.ExplainPermission(err)
	}
	_, err := s.Read(ctx, openCheckKey)
	return redisconn.ExplainPermission(err)
}

// openCheckKey is the key New reads to check the account's permissions:
// framework keys are hex digests, so no record has it.
const openCheckKey = "open-check"

// NewWithClient uses a client the caller built and keeps owning: Close does
// not close it, the caller does after closing the Store. Only Namespace,
// OperationTimeout and SnapshotTTL of opts are used. The client must have
// ContextTimeoutEnabled, or the operation timeout could not bound socket
// I/O: a *redis.Client, *redis.ClusterClient or *redis.Ring without it is
// rejected. The client's MaxRetries does not matter: the provider's script
// calls opt out of client retries.
func NewWithClient(client goredis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, &locstore.ArgumentError{Op: "open", Field: "client", Reason: "nil client"}
	}
	if !contextTimeoutEnabled(client) {
		return nil, &locstore.ArgumentError{Op: "open", Field: "client",
			Reason: "ContextTimeoutEnabled is false, so the operation timeout could not bound network I/O"}
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.client = client
	return s, nil
}

func contextTimeoutEnabled(c goredis.UniversalClient) bool { return redisconn.ContextTimeoutEnabled(c) }

func newStore(opts Options) (*Store, error) {
	if err := ValidateNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	if opts.OperationTimeout < 0 {
		return nil, &locstore.ArgumentError{Op: "open", Field: "operationTimeout", Reason: "negative"}
	}
	if opts.SnapshotTTL < 0 {
		return nil, &locstore.ArgumentError{Op: "open", Field: "snapshotTTL", Reason: "negative"}
	}
	if opts.SnapshotTTL > 0 && opts.SnapshotTTL < time.Millisecond {
		return nil, &locstore.ArgumentError{Op: "open", Field: "snapshotTTL", Reason: "below 1ms"}
	}
	s := &Store{
		ns:      opts.Namespace,
		prefix:  "{" + opts.Namespace + "}:",
		timeout: opts.OperationTimeout,
		snapTTL: opts.SnapshotTTL,
	}
	if s.timeout == 0 {
		s.timeout = DefaultOperationTimeout
	}
	r := redisconn.Replicas{Acks: opts.ReplicaAcks, Timeout: opts.ReplicaAckTimeout}
	if err := r.ValidateWithin(s.timeout); err != nil {
		return nil, &locstore.ArgumentError{Op: "open", Field: "replicaAcks", Reason: err.Error()}
	}
	s.replicas = redisconn.NewReplicaWait(r, "Location Store", opts.Logger, nil)
	s.log = opts.Logger
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.snapTTL == 0 {
		s.snapTTL = DefaultSnapshotTTL
	}
	s.seqK, s.registryK, s.indexK = s.prefix+"seq", s.prefix+"snaps", s.prefix+"idx"
	return s, nil
}

// loadCursorKey reads (or, the first time anyone scans the namespace,
// creates with SET NX) the namespace's cursor key.
func (s *Store) loadCursorKey(ctx context.Context) error {
	s.cursorMu.Lock()
	defer s.cursorMu.Unlock()
	if s.cursorLoaded {
		return nil
	}
	var fresh [32]byte
	_, _ = rand.Read(fresh[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	k := s.prefix + "cursorkey"
	// GET first: SETNX is refused under maxmemory even when the key exists,
	// and a scan is a read.
	v, err := s.client.Get(ctx, k).Bytes()
	if errors.Is(err, goredis.Nil) {
		if err := s.client.SetNX(ctx, k, fresh[:], 0).Err(); err != nil {
			return err
		}
		v, err = s.client.Get(ctx, k).Bytes()
	}
	if err != nil {
		return err
	}
	if len(v) != len(s.cursorKey) {
		return fmt.Errorf("%s holds %d bytes, want %d", k, len(v), len(s.cursorKey))
	}
	copy(s.cursorKey[:], v)
	s.cursorLoaded = true
	return nil
}

// ValidateNamespace checks a namespace: 1..MaxNamespaceBytes bytes of UTF-8
// without '{' or '}' (which would change the Cluster hash tag).
func ValidateNamespace(ns string) error {
	field := "namespace"
	switch {
	case ns == "":
		return &locstore.ArgumentError{Op: "open", Field: field, Reason: "empty namespace"}
	case len(ns) > MaxNamespaceBytes:
		return &locstore.ArgumentError{Op: "open", Field: field, Reason: fmt.Sprintf("namespace is %d bytes, limit %d", len(ns), MaxNamespaceBytes)}
	case !utf8.ValidString(ns):
		return &locstore.ArgumentError{Op: "open", Field: field, Reason: "namespace is not valid UTF-8"}
	case strings.ContainsAny(ns, "{}"):
		return &locstore.ArgumentError{Op: "open", Field: field, Reason: "namespace contains '{' or '}'"}
	}
	return nil
}

// WaitsForReplicas reports whether writes wait for replicas
// (Options.ReplicaAcks > 0).
func (s *Store) WaitsForReplicas() bool { return s.replicas != nil }

// ReplicasBehind reports whether writes currently go on without waiting,
// because fewer replicas than Options.ReplicaAcks acknowledged the last
// one that waited (false when writes do not wait at all).
func (s *Store) ReplicasBehind() bool { return s.replicas != nil && s.replicas.Behind() }

// Namespace returns the store's namespace.
func (s *Store) Namespace() string { return s.ns }

// Close marks the store closed and closes the client if New created it.
// It is idempotent; operations after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.owned {
			s.closeErr = s.client.Close()
		}
	})
	return s.closeErr
}

func (s *Store) dataKey(k string) string { return s.prefix + "k:" + k }
func (s *Store) histKey(k string) string { return s.prefix + "h:" + k }
func (s *Store) snapKey(id [snapIDBytes]byte) string {
	return s.prefix + "snap:" + hex.EncodeToString(id[:])
}

func (s *Store) fail(op string, err error) error {
	if !errors.Is(err, ErrClosed) && s.client != nil {
		redisconn.ReloadAfter(s.client) // a Cluster may have moved the slot (failover)
	}
	// A script meets a refusal at its first write call or not at all:
	// Redis checks maxmemory only before a script's first write, and the
	// other causes cannot change while a script runs. So a refused script
	// wrote nothing. Only a lasting refusal is reported as one
	// (ErrWriteRefused: the framework stops asking); a read-only replica
	// met during a failover passes, so it stays an ordinary failure that
	// the framework retries, with the advice in its text.
	err = redisconn.ExplainLogin(err)
	if denied := redisconn.ExplainPermission(err); denied != nil && !errors.Is(err, ErrNoPermission) {
		// Lasting until an operator changes the rule, but a script stopped
		// at the command keeps what it wrote before: not a Refused write.
		return &locstore.ProviderError{Provider: ProviderName, Op: op, Denied: true,
			Err: fmt.Errorf("%w (%s)", denied, redisconn.PermissionHint)}
	}
	if r, ok := redisconn.WriteRefusal(err); ok {
		if r.Lasting {
			return &locstore.ProviderError{Provider: ProviderName, Op: op, Refused: true,
				Err: fmt.Errorf("%w (refused, nothing written: %s; docs/store-redis.md)", err, r.Hint)}
		}
		err = fmt.Errorf("%w (%s; docs/store-redis.md)", err, r.Hint)
	}
	return &locstore.ProviderError{Provider: ProviderName, Op: op, Err: err}
}

// failFor is fail for a call whose caller's context is caller: when that
// context has ended (its deadline passed, or it was cancelled), its error
// is wrapped too, so that errors.Is(err, context.DeadlineExceeded) (or
// context.Canceled) holds as ProviderError promises — go-redis reports a
// deadline as an I/O timeout, and the socket deadline, set from the
// context's, fires a moment before the context's own timer marks it done.
// The store's own OperationTimeout is not the caller's deadline and is
// not wrapped: it stays an outage.
func (s *Store) failFor(caller context.Context, op string, err error) error {
	cerr := caller.Err()
	if dl, ok := caller.Deadline(); ok && cerr == nil && !time.Now().Before(dl) {
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return s.fail(op, err)
}

// opContext applies the operation timeout. It fails when the store is
// closed.
func (s *Store) opContext(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, s.fail(op, ErrClosed)
	}
	if err := s.rollback.err(); err != nil {
		return nil, nil, s.fail(op, err)
	}
	if err := ctx.Err(); err != nil {
		// Nothing is sent: not an unknown outcome (leavable's wording).
		return nil, nil, &locstore.ProviderError{Provider: ProviderName, Op: op,
			Err: fmt.Errorf("%w: the caller's context had ended; nothing was sent", err)}
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.timeout {
		// The caller's deadline comes first anyway: no second timer (a
		// context and a timer per call were ~5 % of what a creation
		// allocated).
		return ctx, noCancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, cancel, nil
}

func noCancel() {}

// leavable runs call, the Redis part of operation op, under the operation
// timeout (opContext) so that its caller returns as soon as its context
// ends, cancelled included, while Redis does not answer
// (redisconn.Leavable): the call then goes on without it until it is
// answered or times out, and the caller gets a *ProviderError matching
// ErrUnavailable and the context's error — for a write an unknown
// outcome, never a "not applied". call gets the caller's context (for
// failFor) and the operation's.
func leavable[T any](s *Store, caller context.Context, op string, call func(caller, ctx context.Context) (T, error)) (T, error) {
	ctx, cancel, err := s.opContext(caller, op)
	if err != nil {
		var zero T
		return zero, err
	}
	// Cancelling at return is also right for a call that goes on: its
	// context, derived from the caller's, has ended already, and the
	// socket deadline of its command in flight was set from it before.
	defer cancel()
	v, left, err := redisconn.Leavable(caller, func() (T, error) { return call(caller, ctx) })
	if left {
		return v, &locstore.ProviderError{Provider: ProviderName, Op: op,
			Err: fmt.Errorf("%w: the call was left to finish or time out without its caller (a write's outcome is unknown)", caller.Err())}
	}
	return v, err
}

// noRetryCmd marks a script call as not retryable by go-redis, whatever the
// client's MaxRetries: the call may have run before the connection failed.
type noRetryCmd struct{ *goredis.Cmd }

func (noRetryCmd) NoRetry() bool { return true }

// call is the argument list of one script call: three reserved slots for
// the command name, the script and the key count, then the keys, then the
// other arguments. Building it once avoids copying (and re-boxing) keys and
// arguments on the hot path.
type call struct {
	args  []any
	nkeys int
}

func newCall(nkeys, nargs int) *call {
	return &call{args: make([]any, 3, 3+nkeys+nargs)}
}

func (c *call) key(k string) { c.args = append(c.args, k); c.nkeys++ }
func (c *call) arg(a ...any) { c.args = append(c.args, a...) }

// eval runs sc with EVALSHA and falls back to EVAL when the server answers
// NOSCRIPT (the script was never loaded or the cache was flushed). NOSCRIPT
// means the script did not run, so the fallback cannot apply anything twice.
func (s *Store) eval(ctx context.Context, sc *script, c *call) ([]any, error) {
	return s.evalOn(ctx, sc, c, false)
}

// evalOn is eval, its command followed by WAIT in the same round trip when
// replicated (runReplicated).
func (s *Store) evalOn(ctx context.Context, sc *script, c *call, replicated bool) ([]any, error) {
	run := s.run
	if replicated {
		run = s.runReplicated
	}
	c.args[2] = c.nkeys
	v, err := run(ctx, "evalsha", sc.sha, c.args)
	if err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		v, err = run(ctx, "eval", sc.src, c.args)
	}
	if err != nil {
		return nil, err
	}
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, fmt.Errorf("unexpected script reply %T", v)
	}
	return arr, nil
}

func (s *Store) run(ctx context.Context, name, payload string, args []any) (any, error) {
	args[0], args[1] = name, payload
	cmd := goredis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // Cluster routing: the first key decides the slot
	_ = s.client.Process(ctx, noRetryCmd{cmd})
	return cmd.Result()
}

// Read implements locstore.Store.
func (s *Store) Read(ctx context.Context, key string) (locstore.ReadResult, error) {
	const op = "read"
	if err := locstore.ValidateKey(op, "key", key); err != nil {
		return locstore.ReadResult{}, err
	}
	c := newCall(2, 0)
	c.key(s.dataKey(key))
	c.key(s.seqK)
	return leavable(s, ctx, op, func(caller, ctx context.Context) (locstore.ReadResult, error) {
		return s.read(caller, ctx, c)
	})
}

func (s *Store) read(caller, ctx context.Context, c *call) (locstore.ReadResult, error) {
	const op = "read"
	before := s.rollback.before()
	r, err := s.eval(ctx, readScript, c)
	if err != nil {
		return locstore.ReadResult{}, s.failFor(caller, op, err)
	}
	if len(r) != 2 && len(r) != 5 {
		return locstore.ReadResult{}, s.failFor(caller, op, fmt.Errorf("read reply has %d elements", len(r)))
	}
	now, err := replyInt(r[0])
	if err != nil {
		return locstore.ReadResult{}, s.failFor(caller, op, err)
	}
	if err := s.rollback.saw(before, r[1]); err != nil {
		return locstore.ReadResult{}, s.failFor(caller, op, err)
	}
	res := locstore.ReadResult{StoreNow: time.UnixMilli(now)}
	if len(r) == 2 {
		return res, nil
	}
	v, ver, x, err := replyStrings3(r[2], r[3], r[4])
	if err != nil {
		return locstore.ReadResult{}, s.failFor(caller, op, err)
	}
	exp, err := parseExpiresAt(x)
	if err != nil {
		return locstore.ReadResult{}, s.failFor(caller, op, err)
	}
	res.Found = true
	res.Value = []byte(v)
	res.Version = ver
	res.ExpiresAt = exp
	return res, nil
}

// ReadMany implements locstore.MultiReader: one script call for every key.
func (s *Store) ReadMany(ctx context.Context, keys []string) ([]locstore.ReadResult, error) {
	const op = "readMany"
	if err := locstore.ValidateReadKeys(op, keys); err != nil {
		return nil, err
	}
	c := newCall(len(keys)+1, 0)
	for _, k := range keys {
		c.key(s.dataKey(k))
	}
	c.key(s.seqK)
	n := len(keys) // keys is the caller's: not read once the call may go on without it
	return leavable(s, ctx, op, func(caller, ctx context.Context) ([]locstore.ReadResult, error) {
		return s.readMany(caller, ctx, c, n)
	})
}

func (s *Store) readMany(caller, ctx context.Context, c *call, n int) ([]locstore.ReadResult, error) {
	const op = "readMany"
	before := s.rollback.before()
	r, err := s.eval(ctx, readManyScript, c)
	if err != nil {
		return nil, s.failFor(caller, op, err)
	}
	if len(r) != 2+3*n {
		return nil, s.failFor(caller, op, fmt.Errorf("readMany reply has %d elements for %d keys", len(r), n))
	}
	now, err := replyInt(r[0])
	if err != nil {
		return nil, s.failFor(caller, op, err)
	}
	if err := s.rollback.saw(before, r[1]); err != nil {
		return nil, s.failFor(caller, op, err)
	}
	storeNow := time.UnixMilli(now)
	out := make([]locstore.ReadResult, n)
	for i := range n {
		v, ver, x, err := replyStrings3(r[2+3*i], r[3+3*i], r[4+3*i])
		if err != nil {
			return nil, s.failFor(caller, op, err)
		}
		out[i].StoreNow = storeNow
		if ver == "" {
			continue
		}
		exp, err := parseExpiresAt(x)
		if err != nil {
			return nil, s.failFor(caller, op, err)
		}
		out[i].Found, out[i].Value, out[i].Version, out[i].ExpiresAt = true, []byte(v), ver, exp
	}
	return out, nil
}

// Write implements locstore.Store.
func (s *Store) Write(ctx context.Context, req locstore.WriteRequest) (locstore.WriteResult, error) {
	const op = "write"
	if err := req.Validate(); err != nil {
		return locstore.WriteResult{}, err
	}
	// The values are copied when the call may go on after Write returned
	// (redisconn.Leavable): the caller may reuse them then.
	c := s.writeCall(req, redisconn.MayLeave(ctx))
	n := len(req.Mutations)
	return leavable(s, ctx, op, func(caller, ctx context.Context) (locstore.WriteResult, error) {
		return s.write(caller, ctx, c, n)
	})
}

func (s *Store) write(caller, ctx context.Context, c *call, n int) (locstore.WriteResult, error) {
	const op = "write"
	before := s.rollback.before()
	r, err := s.evalWrite(ctx, c)
	if err != nil {
		return locstore.WriteResult{}, s.failFor(caller, op, err)
	}
	if len(r) < 2 {
		return locstore.WriteResult{}, s.failFor(caller, op, fmt.Errorf("write reply has %d elements", len(r)))
	}
	applied, err := replyInt(r[0])
	if err != nil {
		return locstore.WriteResult{}, s.failFor(caller, op, err)
	}
	now, err := replyInt(r[1])
	if err != nil {
		return locstore.WriteResult{}, s.failFor(caller, op, err)
	}
	res := locstore.WriteResult{StoreNow: time.UnixMilli(now)}
	switch applied {
	case 0:
		return res, nil
	case 1:
	case 3:
		// The commit sequence had been lost on its own; the script raised
		// it past the records this batch touched (writeSrc).
		if len(r) < 4 {
			return locstore.WriteResult{}, s.failFor(caller, op, fmt.Errorf("write reply has %d elements", len(r)))
		}
		was, raised := r[len(r)-2], r[len(r)-1]
		r = r[:len(r)-2]
		s.log.Warn("Location Store: the commit sequence stood below a record it had numbered, so it was lost on its own "+
			"(evicted under an allkeys-* maxmemory policy, deleted, or restored apart from the records); "+
			"raised far past them (2^48) so that no number is handed out again — set maxmemory-policy noeviction (docs/store-redis.md)",
			"namespace", s.ns, "sequence_was", was, "raised_to", raised, "key", s.seqK)
	default:
		return locstore.WriteResult{}, s.failFor(caller, op, fmt.Errorf("write reply status %d", applied))
	}
	if len(r)-2 != n {
		return locstore.WriteResult{}, s.failFor(caller, op, fmt.Errorf("write reply has %d versions for %d mutations", len(r)-2, n))
	}
	res.Applied = true
	res.Versions = make([]string, n)
	for i := range n {
		v, ok := r[2+i].(string)
		if !ok {
			return locstore.WriteResult{}, s.failFor(caller, op, fmt.Errorf("write reply version %d is %T", i, r[2+i]))
		}
		res.Versions[i] = v
	}
	if err := s.rollback.drew(before, res.Versions); err != nil {
		// Applied, but in a store that went back in time: nothing this
		// process does next may build on it.
		return locstore.WriteResult{}, s.failFor(caller, op, err)
	}
	return res, nil
}

// evalWrite runs the write script, followed by WAIT in the same round trip
// when writes wait for replicas (Options.ReplicaAcks).
func (s *Store) evalWrite(ctx context.Context, c *call) ([]any, error) {
	return s.evalOn(ctx, writeScript, c, s.replicas != nil)
}

// runReplicated is run on the connection WAIT must use, with WAIT after
// the command (redisconn.ReplicaWait).
func (s *Store) runReplicated(ctx context.Context, name, payload string, args []any) (any, error) {
	args[0], args[1] = name, payload
	cmd := goredis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3) // Cluster routing: the first key decides the slot
	if err := s.replicas.Run(ctx, s.client, s.seqK, noRetryCmd{cmd}); err != nil {
		return nil, err
	}
	return cmd.Val(), nil
}

// writeCall lays out a validated request for writeSrc: mutation keys first
// in mutation order, then keys that only carry a condition.
//
// With own, the values are copied into one buffer of the call's, so that
// the call reads nothing of the caller's once it has been built.
func (s *Store) writeCall(req locstore.WriteRequest, own bool) *call {
	type slot struct {
		key, cond, expected, mut string
		retentionMS              int64
		value                    []byte
	}
	slots := make([]slot, 0, len(req.Mutations)+len(req.Conditions))
	var owned []byte
	if own {
		n := 0
		for _, m := range req.Mutations {
			n += len(m.Value)
		}
		owned = make([]byte, 0, n)
	}
	for _, m := range req.Mutations {
		sl := slot{key: m.Key, mut: "d"}
		if m.Kind == locstore.MutPut {
			sl.mut = "p"
			sl.value = m.Value
			if own {
				at := len(owned)
				owned = append(owned, m.Value...)
				sl.value = owned[at:len(owned):len(owned)]
			}
			// Round up: a value never expires before the retention asked.
			sl.retentionMS = int64((m.Retention + time.Millisecond - 1) / time.Millisecond)
		}
		slots = append(slots, sl)
	}
	// Small batches find a condition's slot by a linear search; large ones
	// through a map.
	var at map[string]int
	if len(slots) > 16 {
		at = make(map[string]int, len(slots))
		for i, sl := range slots {
			at[sl.key] = i
		}
	}
	find := func(k string) int {
		if at != nil {
			if i, ok := at[k]; ok {
				return i
			}
			return -1
		}
		for i := range slots {
			if slots[i].key == k {
				return i
			}
		}
		return -1
	}
	for _, cond := range req.Conditions {
		i := find(cond.Key)
		if i < 0 {
			i = len(slots)
			slots = append(slots, slot{key: cond.Key})
			if at != nil {
				at[cond.Key] = i
			}
		}
		if cond.Kind == locstore.CondMissing {
			slots[i].cond = "m"
		} else {
			slots[i].cond = "v"
			slots[i].expected = cond.Version
		}
	}
	c := newCall(3+2*len(slots), 4+6*len(slots))
	c.key(s.seqK)
	c.key(s.registryK)
	c.key(s.indexK)
	for _, sl := range slots {
		c.key(s.dataKey(sl.key))
		c.key(s.histKey(sl.key))
	}
	c.arg(len(slots), len(req.Mutations), s.prefix, s.snapTTL.Milliseconds())
	for _, sl := range slots {
		value := sl.value
		if value == nil {
			value = emptyValue
		}
		c.arg(sl.key, sl.cond, sl.expected, sl.mut, sl.retentionMS, value)
	}
	return c
}

// emptyValue stands for the value of a slot without a Put.
var emptyValue = []byte{}

// Scan implements locstore.Store.
func (s *Store) Scan(ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	const op = "scan"
	if err := req.Validate(); err != nil {
		return locstore.ScanPage{}, err
	}
	return leavable(s, ctx, op, func(caller, ctx context.Context) (locstore.ScanPage, error) {
		return s.scan(caller, ctx, req)
	})
}

func (s *Store) scan(caller, ctx context.Context, req locstore.ScanRequest) (locstore.ScanPage, error) {
	const op = "scan"
	if err := s.loadCursorKey(ctx); err != nil {
		return locstore.ScanPage{}, s.failFor(caller, op, err)
	}

	mode := "new"
	var id [snapIDBytes]byte
	after := ""
	if req.Cursor != "" {
		var ok bool
		id, after, ok = s.decodeCursor(req.Cursor, req.Prefix)
		if !ok {
			return s.expiredPage(ctx, caller)
		}
		mode = "cont"
	} else {
		_, _ = rand.Read(id[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	}

	snapK := s.snapKey(id)
	page := locstore.ScanPage{}
	items, bytes := req.Limit, locstore.MaxPageBytes
	for call := 1; ; call++ {
		c := newCall(4, 8)
		c.key(s.indexK)
		c.key(s.seqK)
		c.key(s.registryK)
		c.key(snapK)
		c.arg(mode, req.Prefix, after, items, bytes, examineBudget, s.snapTTL.Milliseconds(), s.prefix)
		r, err := s.eval(ctx, scanScript, c)
		if err != nil {
			return locstore.ScanPage{}, s.failFor(caller, op, err)
		}
		part, err := parseScanReply(r)
		if err != nil {
			return locstore.ScanPage{}, s.failFor(caller, op, err)
		}
		page.StoreNow = part.now
		if part.expired {
			return locstore.ScanPage{Expired: true, StoreNow: part.now}, nil
		}
		page.Items = append(page.Items, part.items...)
		for _, it := range part.items {
			items--
			bytes -= it.EncodedSize()
		}
		switch {
		case part.state == scanExhausted:
			return page, nil
		case part.pos == "":
			// Cannot happen with a well-formed reply (a call that stops early
			// has examined at least one entry); refuse rather than loop.
			return locstore.ScanPage{}, s.failFor(caller, op, errors.New("scan reply without a position"))
		case part.state == scanFull || call >= maxCallsPerPage || items == 0:
			page.Next = s.encodeCursor(id, req.Prefix, part.pos)
			return page, nil
		}
		// Budget ran out with room left on the page: go on with the
		// snapshot the first call registered.
		mode, after = "cont", part.pos
	}
}

// expiredPage answers an undecodable cursor. It still reads the server
// clock, because every result carries StoreNow.
func (s *Store) expiredPage(ctx, caller context.Context) (locstore.ScanPage, error) {
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return locstore.ScanPage{}, s.failFor(caller, "scan", err)
	}
	return locstore.ScanPage{Expired: true, StoreNow: time.UnixMilli(t.UnixMilli())}, nil
}

const (
	scanExhausted = 0
	scanFull      = 1
	scanBudget    = 2
)

type scanPart struct {
	now     time.Time
	expired bool
	state   int64
	pos     string
	items   []locstore.Item
}

func parseScanReply(r []any) (scanPart, error) {
	var p scanPart
	if len(r) < 2 {
		return p, fmt.Errorf("scan reply has %d elements", len(r))
	}
	status, err := replyInt(r[0])
	if err != nil {
		return p, err
	}
	now, err := replyInt(r[1])
	if err != nil {
		return p, err
	}
	p.now = time.UnixMilli(now)
	if status == 0 {
		p.expired = true
		return p, nil
	}
	if len(r) < 4 || (len(r)-4)%4 != 0 {
		return p, fmt.Errorf("scan reply has %d elements", len(r))
	}
	if p.state, err = replyInt(r[2]); err != nil {
		return p, err
	}
	if p.state < scanExhausted || p.state > scanBudget {
		return p, fmt.Errorf("scan reply state %d", p.state)
	}
	var ok bool
	if p.pos, ok = r[3].(string); !ok {
		return p, fmt.Errorf("scan reply position is %T", r[3])
	}
	p.items = make([]locstore.Item, 0, (len(r)-4)/4)
	for i := 4; i < len(r); i += 4 {
		k, ok := r[i].(string)
		if !ok {
			return p, fmt.Errorf("scan reply key is %T", r[i])
		}
		v, ver, x, err := replyStrings3(r[i+1], r[i+2], r[i+3])
		if err != nil {
			return p, err
		}
		exp, err := parseExpiresAt(x)
		if err != nil {
			return p, err
		}
		p.items = append(p.items, locstore.Item{Key: k, Value: []byte(v), Version: ver, ExpiresAt: exp})
	}
	return p, nil
}

func replyInt(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("unexpected script reply element %T, want integer", v)
	}
	return n, nil
}

func replyStrings3(a, b, c any) (string, string, string, error) {
	x, ok1 := a.(string)
	y, ok2 := b.(string)
	z, ok3 := c.(string)
	if !ok1 || !ok2 || !ok3 {
		return "", "", "", fmt.Errorf("unexpected script reply elements %T, %T, %T", a, b, c)
	}
	return x, y, z, nil
}

func parseExpiresAt(x string) (time.Time, error) {
	if x == "" {
		return time.Time{}, nil
	}
	ms, err := strconv.ParseInt(x, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored expiresAt %q: %w", x, err)
	}
	return time.UnixMilli(ms), nil
}

// Cursor: base64url (no padding) of version byte 1, the 16-byte snapshot
// id, a 16-byte HMAC-SHA256 tag and the last index entry processed. The tag
// covers the id, the scan prefix and the position under a key private to the
// namespace (kept in Redis, see cursorKey), so every Store instance on the
// namespace accepts its cursors, and only for the same prefix. With keys of
// at most 1024 bytes a cursor is at most 1,410 characters, under the 4,096
// the SPI allows.
const (
	cursorVersion = 1
	snapIDBytes   = 16
	cursorTagLen  = 16
)

func (s *Store) cursorTag(id [snapIDBytes]byte, prefix, pos string) []byte {
	m := hmac.New(sha256.New, s.cursorKey[:])
	m.Write([]byte{cursorVersion})
	m.Write(id[:])
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(prefix)))
	m.Write(n[:])
	m.Write([]byte(prefix))
	m.Write([]byte(pos))
	return m.Sum(nil)[:cursorTagLen]
}

func (s *Store) encodeCursor(id [snapIDBytes]byte, prefix, pos string) string {
	b := make([]byte, 0, 1+snapIDBytes+cursorTagLen+len(pos))
	b = append(b, cursorVersion)
	b = append(b, id[:]...)
	b = append(b, s.cursorTag(id, prefix, pos)...)
	b = append(b, pos...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Store) decodeCursor(c, prefix string) (id [snapIDBytes]byte, pos string, ok bool) {
	const head = 1 + snapIDBytes + cursorTagLen
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) <= head || b[0] != cursorVersion {
		return id, "", false
	}
	copy(id[:], b[1:1+snapIDBytes])
	pos = string(b[head:])
	if !hmac.Equal(b[1+snapIDBytes:head], s.cursorTag(id, prefix, pos)) {
		return id, "", false
	}
	return id, pos, true
}

// Package redis is the production Relocation Store provider, on Redis through
// github.com/redis/go-redis/v9 (a UniversalClient: standalone, Sentinel or
// Cluster).
//
// It implements the relocstore SPI with the semantics of the contract suite
// (relocstore/storetest) and the key/storage format documented in
// docs/store-relocation.md (format version 1): per reference a meta hash
// (reference, length, SHA-256, state, expiry, tombstone-until) and a data
// string holding exactly the stored bytes. All keys of a namespace share one
// hash tag, so every script touches one Cluster slot.
//
// Design points, each for a reason:
//   - Lua scripts make each change one atomic step; they compare payloads by
//     length + SHA-256 computed once in Go, so a 64 MiB payload is never
//     shipped into Lua and compared byte by byte.
//   - A large payload is first probed by digest (a retry of the same bytes
//     is answered without sending them again) and otherwise SET under a
//     staging key and RENAMEd into place by the script, which moves it
//     without copying.
//   - Expiry is judged by the server's TIME only; Redis' own key expiry is
//     set to the same instants so memory is reclaimed.
//   - Every operation runs under its own deadline (Options.OperationTimeout)
//     covering connection acquisition and the command; any failure is a
//     *relocstore.ProviderError (errors.Is(err, relocstore.ErrUnavailable)).
//   - An operation whose context has no deadline runs on a goroutine of
//     its own (redisconn.Leavable), so that a cancelled caller returns at
//     once while Redis does not answer (go-redis watches only a deadline
//     once a command is written); a Put copies its payload for it first.
package redis

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/redisconn"
	"github.com/meshnode/meshnode/relocstore"
)

// ProviderName is the name configuration uses to select this provider.
const ProviderName = "redis"

// FormatVersion is the version of the key/storage format this provider
// reads and writes (the "rs1" key segment and the meta field v).
const FormatVersion = 1

// DefaultOperationTimeout bounds one operation when Options.OperationTimeout
// is zero.
const DefaultOperationTimeout = 2 * time.Second

// MaxNamespaceBytes bounds Options.Namespace.
const MaxNamespaceBytes = 256

const (
	// inlineMax is the largest payload passed to the put script as an
	// argument. Larger payloads are probed by digest first and then staged,
	// so Lua never holds a copy of them.
	inlineMax = 256 << 10
	// stagingTTL bounds how long a staged payload can outlive a client that
	// died between SET and the committing script (they are pipelined, so
	// normally the script runs right after the SET).
	stagingTTL = 5 * time.Minute
	// readAttempts bounds how often Read retries when the data key vanished
	// (or did not match) between the meta script and the GET pipelined
	// behind it, which only a concurrent Delete or expiry explains.
	readAttempts = 3
)

// ErrClosed is the cause of the provider error returned by every operation
// after Close.
var ErrClosed = errors.New("redis relocation store is closed")

// ErrFormat is the cause when a record in the namespace is not in a format
// version this provider understands, or is malformed.
var ErrFormat = errors.New("redis relocation store: unsupported or malformed record")

// ErrAuth is the cause of New's ProviderError when the server refused the
// user name or password; ErrTLS when no TLS session could be set up;
// ErrNotRedis when the address answered in another protocol, and
// ErrMeshPort (also ErrNotRedis) when that was a meshnode node's mesh port;
// ErrPlainText (also ErrTLS) when TLS is on and the address is a Redis port
// that speaks plain text.
// They are the same values for the Location Store provider.
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

// ErrIntegrity is the cause when the stored bytes do not match the length or
// digest recorded at Put. The bytes are not returned. It is the SPI's
// relocstore.ErrIntegrity (a caller needs no import of this provider to
// tell a corrupt payload from a store that did not answer).
var ErrIntegrity = relocstore.ErrIntegrity

// Options configures New. Only Namespace is required besides an address.
type Options struct {
	// Addrs is one address (standalone), a Sentinel list (with MasterName)
	// or Cluster seed addresses (more than one address).
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
	// Namespace isolates this store's keys: every key is "{Namespace}:rs1:…".
	// 1..MaxNamespaceBytes printable ASCII bytes without '{' or '}' (the
	// braces delimit the Cluster hash tag).
	Namespace string
	// OperationTimeout bounds each operation, including waiting for a pooled
	// connection, dialling, and the command itself (default
	// DefaultOperationTimeout). A 64 MiB Put over a slow link needs more.
	OperationTimeout time.Duration
	// TombstoneRetention is how long a deleted or expired reference keeps
	// the digest of its bytes, refusing other bytes (default
	// relocstore.DefaultRetention; bounds 1ms..relocstore.MaxRetention).
	TombstoneRetention time.Duration
	// Logger receives diagnostic events (default slog.Default()).
	Logger *slog.Logger
	// ReplicaAcks and ReplicaAckTimeout make every Put, Renew and Delete
	// wait for that many replica acknowledgements (Redis WAIT, in the same
	// round trip), as the Location Store provider's options of the same
	// names do (internal/redisconn.ReplicaWait).
	ReplicaAcks       int
	ReplicaAckTimeout time.Duration
	// PoolSize is the go-redis pool size (0 = go-redis default).
	PoolSize int
}

// Store is the Redis Relocation Store. It is safe for concurrent use.
type Store struct {
	c          goredis.UniversalClient
	ownsClient bool
	prefix     string // "{ns}:rs1:"
	opTimeout  time.Duration
	tombMs     int64
	log        *slog.Logger
	replicas   *redisconn.ReplicaWait // what each change waits for (Options.ReplicaAcks); nil: none
	closed     atomic.Bool
	// skewMs is added to the server's TIME by every script. It is always 0
	// except in this package's tests, which advance the provider clock with
	// it instead of sleeping.
	skewMs atomic.Int64
}

var _ relocstore.Store = (*Store)(nil)

// New connects to Redis, checks the server answers within the operation
// timeout, and returns a store that owns (and on Close closes) its client.
func New(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Addrs) == 0 {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "addrs", Reason: "no Redis address"}
	}
	if opts.PoolSize < 0 {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "poolSize", Reason: "negative"}
	}
	if why := redisconn.CheckDB(opts.Addrs, opts.MasterName, opts.DB); why != "" {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "db", Reason: why}
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	// No hidden client retries: a failed call reports "outcome unknown" at
	// once and the framework re-reads or re-Puts (spec §10), which is safe
	// for every operation of this store (internal/redisconn).
	s.c = redisconn.NewClient(redisconn.Options{Addrs: opts.Addrs, MasterName: opts.MasterName,
		SentinelUsername: opts.SentinelUsername, SentinelPassword: opts.SentinelPassword,
		Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLSConfig, DB: opts.DB, PoolSize: opts.PoolSize}, s.opTimeout)
	s.ownsClient = true
	octx, cancel := context.WithTimeout(ctx, s.opTimeout)
	defer cancel()
	if err := s.c.Ping(octx).Err(); err != nil {
		_ = s.c.Close()
		return nil, s.fail(octx, "new", redisconn.ExplainOpen(err, opts.Addrs, opts.TLSConfig != nil))
	}
	if s.replicas != nil {
		if err := redisconn.CheckWait(octx, s.c, s.prefix); err != nil {
			_ = s.c.Close()
			return nil, s.fail(octx, "new", err)
		}
	}
	// The account's ACL rule: the read script (SCRIPT LOAD, EVAL,
	// EVALSHA, TIME, HMGET, GET) on a ref no payload uses, so that a rule
	// without the script commands fails here and not at the first Instance
	// Spot activation. Other failures are left to the first real call.
	if denied := s.checkPermissions(octx); denied != nil {
		_ = s.c.Close()
		return nil, s.fail(octx, "new", denied)
	}
	// And the commands the write scripts run (HSET, SET, DEL, RENAME,
	// PEXPIREAT, EXISTS, STRLEN), which a read does not: without this a
	// rule lacking one of them started the node and failed its first
	// Instance Spot activation. The check writes nothing
	// (writeCheckScript).
	if err := s.checkWrites(octx); err != nil {
		_ = s.c.Close()
		return nil, s.fail(octx, "new", err)
	}
	return s, nil
}

// checkPermissions loads the read script (SCRIPT LOAD), runs it on
// openCheckRef with EVAL, then reads that ref (EVALSHA, GET), and returns
// ErrNoPermission when the server refused any of them to the account (nil
// otherwise, whatever else failed). All three, whatever the server's
// script cache holds: the provider sends SCRIPT LOAD and EVAL only when
// EVALSHA met NOSCRIPT, so with the scripts cached (another node loaded
// them) a rule without +script|load or +eval passed an EVALSHA-only check
// and failed every call after the cache was emptied — a Redis restart, a
// failover — on every node at once (review O, 2026-12-08:
// TestOpenWithoutEvalWhenScriptsAreCached).
func (s *Store) checkPermissions(ctx context.Context) error {
	if err := readScript.Load(ctx, s.c).Err(); redisconn.ExplainPermission(err) != nil {
		return redisconn.ExplainPermission(err)
	}
	meta, _ := s.keys(openCheckRef)
	if err := readScript.Eval(ctx, s.c, []string{meta}, s.skewMs.Load(), openCheckRef).Err(); redisconn.ExplainPermission(err) != nil {
		return redisconn.ExplainPermission(err)
	}
	_, err := s.Read(ctx, openCheckRef)
	return redisconn.ExplainPermission(err)
}

// openCheckRef is the ref New reads to check the account's permissions.
const openCheckRef = "meshnode-open-check"

// checkWrites runs writeCheckScript on two keys of the namespace that no
// record or staging key uses (the "c:" segment, with a random part) and
// returns ErrNoPermission, naming the command, when the account may not
// run one of the write scripts' commands. Other failures are left to the
// first real call, as the open's read check leaves them.
func (s *Store) checkWrites(ctx context.Context) error {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (aborts the program instead)
	k := s.prefix + "c:" + hex.EncodeToString(b[:])
	err := writeCheckScript.Run(ctx, s.c, []string{k, k + ":to"}).Err()
	return redisconn.ExplainPermission(err)
}

// NewWithClient returns a store on an existing client, for instance one
// shared with the Location Store. The connection fields of opts are ignored.
// Close does not close the client: its owner does. The client must have
// ContextTimeoutEnabled, or the operation timeout could not bound network
// I/O; a *redis.Client, *redis.ClusterClient or *redis.Ring without it is
// rejected.
func NewWithClient(client goredis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "client", Reason: "nil client"}
	}
	enabled := redisconn.ContextTimeoutEnabled(client)
	if !enabled {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "client",
			Reason: "ContextTimeoutEnabled is false, so the operation timeout could not bound network I/O"}
	}
	s, err := newStore(opts)
	if err != nil {
		return nil, err
	}
	s.c = client
	return s, nil
}

func newStore(opts Options) (*Store, error) {
	if err := validateNamespace(opts.Namespace); err != nil {
		return nil, err
	}
	s := &Store{
		prefix:    "{" + opts.Namespace + "}:rs" + strconv.Itoa(FormatVersion) + ":",
		opTimeout: opts.OperationTimeout,
		log:       opts.Logger,
	}
	switch {
	case s.opTimeout == 0:
		s.opTimeout = DefaultOperationTimeout
	case s.opTimeout < 0:
		return nil, &relocstore.ArgumentError{Op: "new", Field: "operation timeout", Reason: fmt.Sprintf("%v is negative", s.opTimeout)}
	}
	tomb := opts.TombstoneRetention
	if tomb == 0 {
		tomb = relocstore.DefaultRetention
	}
	if tomb < time.Millisecond || tomb > relocstore.MaxRetention {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "tombstone retention",
			Reason: fmt.Sprintf("%v outside 1ms..%v", tomb, relocstore.MaxRetention)}
	}
	s.tombMs = ceilMs(tomb)
	r := redisconn.Replicas{Acks: opts.ReplicaAcks, Timeout: opts.ReplicaAckTimeout}
	if err := r.ValidateWithin(s.opTimeout); err != nil {
		return nil, &relocstore.ArgumentError{Op: "new", Field: "replica acks", Reason: err.Error()}
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = s.log.With("provider", ProviderName, "store", "relocation", "namespace", opts.Namespace)
	s.replicas = redisconn.NewReplicaWait(r, "Relocation Store", s.log, nil)
	return s, nil
}

func validateNamespace(ns string) error {
	if ns == "" || len(ns) > MaxNamespaceBytes {
		return &relocstore.ArgumentError{Op: "new", Field: "namespace",
			Reason: fmt.Sprintf("namespace is %d bytes, want 1..%d", len(ns), MaxNamespaceBytes)}
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; c < 0x21 || c > 0x7e || c == '{' || c == '}' {
			return &relocstore.ArgumentError{Op: "new", Field: "namespace",
				Reason: fmt.Sprintf("byte %#x at %d: only printable ASCII without '{' and '}'", c, i)}
		}
	}
	return nil
}

// ceilMs converts to whole milliseconds, rounding up so a retention is never
// shortened by the server's millisecond resolution.
func ceilMs(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// keys returns the meta and data keys of ref. The key holds the SHA-256 of
// the reference, not the reference itself, so a 4096-byte reference costs a
// fixed-size key; the meta hash keeps the reference for the exact compare.
func (s *Store) keys(ref string) (meta, data string) {
	sum := sha256.Sum256([]byte(ref))
	h := hex.EncodeToString(sum[:])
	return s.prefix + "m:" + h, s.prefix + "d:" + h
}

// stagingKey is unique per Put, so concurrent Puts of one reference never
// overwrite each other's staged bytes.
func (s *Store) stagingKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (aborts the program instead)
	return s.prefix + "s:" + hex.EncodeToString(b[:])
}

// begin checks the store is open and the caller has not given up, and
// returns the context bounded by the operation timeout.
func (s *Store) begin(ctx context.Context, op string) (context.Context, context.CancelFunc, error) {
	if s.closed.Load() {
		return nil, nil, s.fail(ctx, op, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, s.fail(ctx, op, err)
	}
	octx, cancel := context.WithTimeout(ctx, s.opTimeout)
	return octx, cancel, nil
}

// leavable runs call, the Redis part of operation op, under the operation
// timeout (begin) so that its caller returns as soon as its context ends,
// cancelled included, while Redis does not answer (redisconn.Leavable):
// the call then goes on without it until it is answered or times out, and
// the caller gets a *ProviderError matching ErrUnavailable and the
// context's error — an unknown outcome (§10).
func leavable[T any](s *Store, caller context.Context, op string, call func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel, err := s.begin(caller, op)
	if err != nil {
		var zero T
		return zero, err
	}
	// Cancelling at return is also right for a call that goes on: its
	// context, derived from the caller's, has ended already, and the
	// socket deadline of its command in flight was set from it before.
	defer cancel()
	v, left, err := redisconn.Leavable(caller, func() (T, error) { return call(ctx) })
	if left {
		return v, &relocstore.ProviderError{Provider: ProviderName, Op: op,
			Err: fmt.Errorf("%w: the call was left to finish or time out without its caller (its outcome is unknown)", caller.Err())}
	}
	return v, err
}

// fail wraps a failure as a provider error. When the operation's context
// ended, its error is wrapped too (go-redis reports a deadline as an I/O
// timeout), so errors.Is(err, context.DeadlineExceeded) holds.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	cerr := ctx.Err()
	if dl, ok := ctx.Deadline(); ok && cerr == nil && !time.Now().Before(dl) {
		// The socket deadline (set from the context's) can fire a moment
		// before the context's own timer marks it done.
		cerr = context.DeadlineExceeded
	}
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	switch {
	case goredis.HasErrorPrefix(err, "RSFORMAT"):
		err = fmt.Errorf("%w: %w", ErrFormat, err)
	case redisconn.LoginRefused(err):
		err = redisconn.ExplainLogin(err)
	case redisconn.PermissionDenied(err) && !errors.Is(err, ErrNoPermission):
		err = fmt.Errorf("%w (%s)", redisconn.ExplainPermission(err), redisconn.PermissionHint)
	default:
		// Only the advice: a pipeline (staging, then the script) may have
		// written its first part before the refusal, so this provider
		// does not say nothing was written; its callers read to decide.
		if r, ok := redisconn.WriteRefusal(err); ok {
			err = fmt.Errorf("%w (refused: %s; docs/store-redis.md)", err, r.Hint)
		}
	}
	if !errors.Is(err, ErrClosed) && s.c != nil {
		redisconn.ReloadAfter(s.c) // a Cluster may have moved the slot (failover)
	}
	return &relocstore.ProviderError{Provider: ProviderName, Op: op, Err: err}
}

// reply is a parsed script answer: {kind, now, [exp], [extra...]}.
type reply struct {
	kind  string
	now   time.Time
	exp   time.Time
	extra []string
}

func parseReply(v any) (reply, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) < 2 {
		return reply{}, fmt.Errorf("unexpected script reply %T %v", v, v)
	}
	strs := make([]string, len(arr))
	for i, x := range arr {
		s, ok := x.(string)
		if !ok {
			return reply{}, fmt.Errorf("unexpected script reply element %T %v", x, x)
		}
		strs[i] = s
	}
	r := reply{kind: strs[0]}
	now, err := strconv.ParseInt(strs[1], 10, 64)
	if err != nil {
		return reply{}, fmt.Errorf("script reply time %q: %w", strs[1], err)
	}
	r.now = time.UnixMilli(now)
	if len(strs) > 2 {
		exp, err := strconv.ParseInt(strs[2], 10, 64)
		if err != nil {
			return reply{}, fmt.Errorf("script reply expiry %q: %w", strs[2], err)
		}
		r.exp = time.UnixMilli(exp)
		r.extra = strs[3:]
	}
	return r, nil
}

// run executes a script (EVALSHA, falling back to EVAL when the server's
// script cache lacks it) and parses the reply.
func (s *Store) run(ctx context.Context, sc *goredis.Script, keys []string, args ...any) (reply, error) {
	v, err := sc.Run(ctx, s.c, keys, args...).Result()
	if err != nil {
		return reply{}, err
	}
	return parseReply(v)
}

// change runs a script that may change the record, as run does, after
// the commands of extra (the staged payload's SET) in the same round trip,
// and followed by WAIT when changes wait for replicas (Options.ReplicaAcks).
func (s *Store) change(ctx context.Context, sc *goredis.Script, keys []string, extra []goredis.Cmder, args ...any) (reply, error) {
	if s.replicas == nil && len(extra) == 0 {
		return s.run(ctx, sc, keys, args...)
	}
	v, err := s.send(ctx, sc, keys, extra, args)
	if goredis.HasErrorPrefix(err, "NOSCRIPT") {
		// The script cache was flushed; what extra wrote (the staged
		// bytes) is still there, so only the script is sent again.
		if err = sc.Load(ctx, s.c).Err(); err == nil {
			v, err = s.send(ctx, sc, keys, nil, args)
		}
	}
	if err != nil {
		return reply{}, err
	}
	return parseReply(v)
}

// send is one round trip of change: extra, then the script's EVALSHA.
// Its error is the first failing command's, then WAIT's.
func (s *Store) send(ctx context.Context, sc *goredis.Script, keys []string, extra []goredis.Cmder, args []any) (any, error) {
	cargs := make([]any, 0, 3+len(keys)+len(args))
	cargs = append(cargs, "evalsha", sc.Hash(), len(keys))
	for _, k := range keys {
		cargs = append(cargs, k)
	}
	cargs = append(cargs, args...)
	eval := goredis.NewCmd(ctx, cargs...)
	cmds := append(append([]goredis.Cmder(nil), extra...), eval)
	if s.replicas != nil {
		if err := s.replicas.Run(ctx, s.c, keys[0], cmds...); err != nil {
			return nil, err
		}
		return eval.Val(), nil
	}
	pipe := s.c.Pipeline()
	for _, c := range cmds {
		_ = pipe.Process(ctx, c)
	}
	_, _ = pipe.Exec(ctx) // errors are inspected per command below
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return nil, err
		}
	}
	return eval.Val(), nil
}

// Put implements relocstore.Store.
func (s *Store) Put(ctx context.Context, ref string, payload []byte, retention time.Duration) (relocstore.PutResult, error) {
	const op = "put"
	ret, err := relocstore.ValidatePut(ref, payload, retention)
	if err != nil {
		return relocstore.PutResult{}, err
	}
	if redisconn.MayLeave(ctx) {
		// The call may go on after Put returned (leavable), and the
		// caller may reuse payload then.
		payload = bytes.Clone(payload)
	}
	return leavable(s, ctx, op, func(ctx context.Context) (relocstore.PutResult, error) {
		return s.put(ctx, ref, payload, ret)
	})
}

func (s *Store) put(ctx context.Context, ref string, payload []byte, ret time.Duration) (relocstore.PutResult, error) {
	const op = "put"
	sum := sha256.Sum256(payload)
	dg := hex.EncodeToString(sum[:])
	meta, data := s.keys(ref)
	args := func(mode string) []any {
		return []any{s.skewMs.Load(), ref, mode, len(payload), dg, ceilMs(ret), s.tombMs}
	}

	if len(payload) <= inlineMax {
		r, err := s.change(ctx, putScript, []string{meta, data}, nil, append(args("inline"), payload)...)
		if err != nil {
			return relocstore.PutResult{}, s.fail(ctx, op, err)
		}
		return putResult(r)
	}

	staging := s.stagingKey()
	keys := []string{meta, data, staging}
	// Probe first: a retry of bytes already stored, or a Conflict, is
	// answered without sending the payload.
	r, err := s.run(ctx, putScript, keys, args("probe")...)
	if err != nil {
		return relocstore.PutResult{}, s.fail(ctx, op, err)
	}
	if r.kind != "need" {
		return putResult(r)
	}
	// Stage and commit in one round trip. The script re-checks everything:
	// another Put may have won in between.
	set := goredis.NewStatusCmd(ctx, "set", staging, payload, "px", stagingTTL.Milliseconds())
	if r, err = s.change(ctx, putScript, keys, []goredis.Cmder{set}, args("staged")...); err != nil {
		return relocstore.PutResult{}, s.fail(ctx, op, err)
	}
	if r.kind == "need" {
		return relocstore.PutResult{}, s.fail(ctx, op, errors.New("put script asked for the payload in staged mode"))
	}
	return putResult(r)
}

func putResult(r reply) (relocstore.PutResult, error) {
	switch r.kind {
	case "stored":
		return relocstore.PutResult{Outcome: relocstore.Stored, ExpiresAt: r.exp, StoreNow: r.now}, nil
	case "already":
		return relocstore.PutResult{Outcome: relocstore.AlreadyStored, ExpiresAt: r.exp, StoreNow: r.now}, nil
	case "conflict":
		return relocstore.PutResult{Outcome: relocstore.Conflict, StoreNow: r.now}, nil
	}
	return relocstore.PutResult{}, &relocstore.ProviderError{Provider: ProviderName, Op: "put",
		Err: fmt.Errorf("unexpected put script answer %q", r.kind)}
}

// Read implements relocstore.Store. The returned slice is freshly allocated
// by the client for this reply and referenced by nothing else.
func (s *Store) Read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	const op = "read"
	if err := relocstore.ValidateRef(op, ref); err != nil {
		return relocstore.ReadResult{}, err
	}
	return leavable(s, ctx, op, func(ctx context.Context) (relocstore.ReadResult, error) {
		return s.read(ctx, ref)
	})
}

func (s *Store) read(ctx context.Context, ref string) (relocstore.ReadResult, error) {
	const op = "read"
	meta, data := s.keys(ref)

	var (
		last    reply
		lastErr error
	)
	for attempt := 0; attempt < readAttempts; attempt++ {
		// The meta script decides Found/Missing on the server clock; the GET
		// behind it in the same round trip fetches the bytes without passing
		// them through Lua.
		pipe := s.c.Pipeline()
		metaCmd := pipe.EvalSha(ctx, readScript.Hash(), []string{meta}, s.skewMs.Load(), ref)
		dataCmd := pipe.Get(ctx, data)
		_, _ = pipe.Exec(ctx) // errors are inspected per command below
		v, err := metaCmd.Result()
		if goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if err := readScript.Load(ctx, s.c).Err(); err != nil {
				return relocstore.ReadResult{}, s.fail(ctx, op, err)
			}
			lastErr = err
			continue
		}
		if err != nil {
			return relocstore.ReadResult{}, s.fail(ctx, op, err)
		}
		if last, err = parseReply(v); err != nil {
			return relocstore.ReadResult{}, s.fail(ctx, op, err)
		}
		if last.kind == "missing" {
			return relocstore.ReadResult{StoreNow: last.now}, nil
		}
		if last.kind != "found" || len(last.extra) != 2 {
			return relocstore.ReadResult{}, s.fail(ctx, op, fmt.Errorf("unexpected read script answer %v", v))
		}
		b, err := dataCmd.Bytes()
		if errors.Is(err, goredis.Nil) {
			// Deleted or expired between the two commands; look again.
			lastErr = goredis.Nil
			continue
		}
		if err != nil {
			return relocstore.ReadResult{}, s.fail(ctx, op, err)
		}
		if err := verify(b, last.extra[0], last.extra[1]); err != nil {
			lastErr = err
			continue
		}
		if b == nil {
			b = []byte{} // Found with an empty payload is never a nil slice
		}
		return relocstore.ReadResult{Found: true, Bytes: b, ExpiresAt: last.exp, StoreNow: last.now}, nil
	}
	if errors.Is(lastErr, goredis.Nil) {
		// The meta record says live but the bytes are gone (evicted under
		// maxmemory, or removed by something other than this provider).
		// Missing is the truth the framework can act on (DataLost, §10);
		// the tombstone stays, so the reference is not reused.
		s.log.Warn("relocation payload missing although its record is live", "ref_key", meta)
		return relocstore.ReadResult{StoreNow: last.now}, nil
	}
	if errors.Is(lastErr, ErrIntegrity) {
		s.log.Error("relocation payload does not match its digest", "ref_key", meta, "err", lastErr)
	}
	return relocstore.ReadResult{}, s.fail(ctx, op, lastErr)
}

// verify checks the bytes against the length and digest recorded at Put
// (the read script answers them in that order).
func verify(b []byte, length, digestHex string) error {
	n, err := strconv.Atoi(length)
	if err != nil || n != len(b) {
		return fmt.Errorf("%w: length %d, recorded %q", ErrIntegrity, len(b), length)
	}
	want, err := hex.DecodeString(digestHex)
	sum := sha256.Sum256(b)
	if err != nil || !bytes.Equal(sum[:], want) {
		return fmt.Errorf("%w: SHA-256 differs", ErrIntegrity)
	}
	return nil
}

// Renew implements relocstore.Store. It extends the expiry to
// StoreNow+retention and never shortens it.
func (s *Store) Renew(ctx context.Context, ref string, retention time.Duration) (relocstore.RenewResult, error) {
	const op = "renew"
	ret, err := relocstore.ValidateRenew(ref, retention)
	if err != nil {
		return relocstore.RenewResult{}, err
	}
	return leavable(s, ctx, op, func(ctx context.Context) (relocstore.RenewResult, error) {
		return s.renew(ctx, ref, ret)
	})
}

func (s *Store) renew(ctx context.Context, ref string, ret time.Duration) (relocstore.RenewResult, error) {
	const op = "renew"
	meta, data := s.keys(ref)
	r, err := s.change(ctx, renewScript, []string{meta, data}, nil, s.skewMs.Load(), ref, ceilMs(ret), s.tombMs)
	if err != nil {
		return relocstore.RenewResult{}, s.fail(ctx, op, err)
	}
	switch r.kind {
	case "renewed":
		return relocstore.RenewResult{Renewed: true, ExpiresAt: r.exp, StoreNow: r.now}, nil
	case "missing":
		return relocstore.RenewResult{StoreNow: r.now}, nil
	}
	return relocstore.RenewResult{}, s.fail(ctx, op, fmt.Errorf("unexpected renew script answer %q", r.kind))
}

// Delete implements relocstore.Store. The bytes go at once; the record stays
// as a tombstone for the tombstone retention so the reference is never
// reused for other bytes.
func (s *Store) Delete(ctx context.Context, ref string) error {
	const op = "delete"
	if err := relocstore.ValidateRef(op, ref); err != nil {
		return err
	}
	_, err := leavable(s, ctx, op, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.del(ctx, ref)
	})
	return err
}

func (s *Store) del(ctx context.Context, ref string) error {
	const op = "delete"
	meta, data := s.keys(ref)
	r, err := s.change(ctx, deleteScript, []string{meta, data}, nil, s.skewMs.Load(), ref, s.tombMs)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if r.kind != "ok" {
		return s.fail(ctx, op, fmt.Errorf("unexpected delete script answer %q", r.kind))
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

// Close implements relocstore.Store. It closes the client only if New
// created it; later operations fail with ErrClosed. A second Close is a
// no-op.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.ownsClient {
		if err := s.c.Close(); err != nil {
			return &relocstore.ProviderError{Provider: ProviderName, Op: "close", Err: err}
		}
	}
	return nil
}

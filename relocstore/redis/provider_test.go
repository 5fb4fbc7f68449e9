package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
)

func rawClient(t *testing.T, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func hexSHA(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	return b
}

func mustPut(t *testing.T, s relocstore.Store, ref string, p []byte, ret time.Duration, want relocstore.PutOutcome) relocstore.PutResult {
	t.Helper()
	r, err := s.Put(t.Context(), ref, p, ret)
	if err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", ref, len(p), err)
	}
	if r.Outcome != want {
		t.Fatalf("Put(%q, %d bytes) = %v, want %v", ref, len(p), r.Outcome, want)
	}
	return r
}

func mustRead(t *testing.T, s relocstore.Store, ref string, want []byte) relocstore.ReadResult {
	t.Helper()
	r, err := s.Read(t.Context(), ref)
	if err != nil {
		t.Fatalf("Read(%q): %v", ref, err)
	}
	if want == nil {
		if r.Found {
			t.Fatalf("Read(%q) = Found, want Missing", ref)
		}
		return r
	}
	if !r.Found || !bytes.Equal(r.Bytes, want) {
		t.Fatalf("Read(%q) = Found %v, %d bytes; want %d bytes", ref, r.Found, len(r.Bytes), len(want))
	}
	return r
}

// stagingKeys lists staged payloads left in the namespace.
func stagingKeys(t *testing.T, c *goredis.Client, s *relocredis.Store) []string {
	t.Helper()
	keys, err := c.Keys(t.Context(), relocredis.KeyPrefix(s)+"s:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestKeyLayout pins the documented storage format (version 1): which keys
// exist, their fields, the bytes and the Redis expiries, after each
// operation, on both the inline and the staged Put path.
func TestKeyLayout(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	s := newStore(t, relocredis.Options{Addrs: []string{addr}, Namespace: ns, TombstoneRetention: time.Hour})
	defer s.Close()
	c := rawClient(t, addr)
	ctx := t.Context()

	for _, size := range []int{0, 10, relocredis.InlineMax, relocredis.InlineMax + 1, 3 << 20} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			ref := fmt.Sprintf("layout/\u00e9/%d", size)
			p := fill(size, 7)
			h := hexSHA([]byte(ref))
			meta := "{" + ns + "}:rs1:m:" + h
			data := "{" + ns + "}:rs1:d:" + h
			if relocredis.KeyPrefix(s)+"m:"+h != meta {
				t.Fatalf("prefix %q does not match the documented layout", relocredis.KeyPrefix(s))
			}

			st := mustPut(t, s, ref, p, 10*time.Minute, relocstore.Stored)
			exp := st.ExpiresAt.UnixMilli()
			want := map[string]string{
				"v": "1", "ref": ref, "len": strconv.Itoa(size), "dg": hexSHA(p), "st": "live",
				"exp": strconv.FormatInt(exp, 10), "tu": strconv.FormatInt(exp+time.Hour.Milliseconds(), 10),
			}
			got, err := c.HGetAll(ctx, meta).Result()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("meta hash\n got %v\nwant %v", got, want)
			}
			if b, err := c.Get(ctx, data).Bytes(); err != nil || !bytes.Equal(b, p) {
				t.Fatalf("data key holds %d bytes (err %v), want the %d payload bytes", len(b), err, size)
			}
			if pt := c.PExpireTime(ctx, data).Val(); pt.Milliseconds() != exp {
				t.Errorf("data key PEXPIRETIME %v, want %d", pt.Milliseconds(), exp)
			}
			if pt := c.PExpireTime(ctx, meta).Val(); pt.Milliseconds() != exp+time.Hour.Milliseconds() {
				t.Errorf("meta key PEXPIRETIME %v, want exp+tombstone %d", pt.Milliseconds(), exp+time.Hour.Milliseconds())
			}

			// AlreadyStored and Conflict (both probe paths for large
			// payloads) leave no staged copy behind.
			mustPut(t, s, ref, p, time.Minute, relocstore.AlreadyStored)
			if size > 0 {
				mustPut(t, s, ref, fill(size, 8), time.Minute, relocstore.Conflict)
			}
			if k := stagingKeys(t, c, s); len(k) != 0 {
				t.Fatalf("staging keys left: %v", k)
			}

			if err := s.Delete(ctx, ref); err != nil {
				t.Fatal(err)
			}
			if n := c.Exists(ctx, data).Val(); n != 0 {
				t.Fatal("data key survived Delete")
			}
			got = c.HGetAll(ctx, meta).Val()
			if got["st"] != "gone" || got["dg"] != hexSHA(p) || got["ref"] != ref {
				t.Fatalf("tombstone %v", got)
			}
			tu, _ := strconv.ParseInt(got["tu"], 10, 64)
			if pt := c.PExpireTime(ctx, meta).Val(); pt.Milliseconds() != tu {
				t.Errorf("tombstone PEXPIRETIME %d, want tu %d", pt.Milliseconds(), tu)
			}
			if tu > exp+time.Hour.Milliseconds() || tu < st.StoreNow.UnixMilli()+time.Hour.Milliseconds() {
				t.Errorf("tombstone-until %d outside [put time + 1h, exp + 1h]", tu)
			}
		})
	}
	// Every key of the store is inside the namespace hash tag.
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, ns) && !strings.HasPrefix(k, "{"+ns+"}:rs1:") {
			t.Errorf("key %q outside the documented prefix", k)
		}
	}
}

// TestRealExpiry uses no clock offset: the server's TIME moves, the payload
// becomes Missing, Redis removes the data key by itself, and the tombstone
// key disappears once its retention has passed, after which the reference
// accepts other bytes.
func TestRealExpiry(t *testing.T) {
	addr := testredis.Addr(t)
	s := newStore(t, relocredis.Options{Addrs: []string{addr}, TombstoneRetention: 150 * time.Millisecond})
	defer s.Close()
	c := rawClient(t, addr)
	const ref = "real/expiry"
	p := []byte("first bytes")
	st := mustPut(t, s, ref, p, 100*time.Millisecond, relocstore.Stored)
	time.Sleep(time.Until(st.ExpiresAt) + 20*time.Millisecond)
	r := mustRead(t, s, ref, nil)
	if r.StoreNow.Before(st.ExpiresAt) {
		t.Fatalf("Missing at %v before expiry %v", r.StoreNow, st.ExpiresAt)
	}
	h := hexSHA([]byte(ref))
	if n := c.Exists(t.Context(), relocredis.KeyPrefix(s)+"d:"+h).Val(); n != 0 {
		t.Error("Redis kept the data key after its expiry")
	}
	mustPut(t, s, ref, []byte("other bytes"), time.Hour, relocstore.Conflict)
	// Tombstone-until is exp + 150ms.
	time.Sleep(time.Until(st.ExpiresAt.Add(150*time.Millisecond)) + 20*time.Millisecond)
	if n := c.Exists(t.Context(), relocredis.KeyPrefix(s)+"m:"+h).Val(); n != 0 {
		t.Error("Redis kept the tombstone after its retention")
	}
	mustPut(t, s, ref, []byte("other bytes"), time.Hour, relocstore.Stored)
}

// TestTombstoneRetention: the tombstone refuses other bytes exactly for the
// configured retention, counted from the delete or the expiry.
func TestTombstoneRetention(t *testing.T) {
	s := newStore(t, relocredis.Options{TombstoneRetention: time.Minute})
	defer s.Close()
	mustPut(t, s, "deleted", []byte("a"), time.Hour, relocstore.Stored)
	if err := s.Delete(t.Context(), "deleted"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "expired", []byte("a"), 10*time.Second, relocstore.Stored)
	// Real time also passes between these calls, so stay a second clear of
	// each boundary.
	relocredis.AdvanceClock(s, 58*time.Second)
	mustPut(t, s, "deleted", []byte("b"), time.Hour, relocstore.Conflict)
	mustPut(t, s, "expired", []byte("b"), time.Hour, relocstore.Conflict)
	relocredis.AdvanceClock(s, 2*time.Second)
	mustPut(t, s, "deleted", []byte("b"), time.Hour, relocstore.Stored)
	mustPut(t, s, "expired", []byte("b"), time.Hour, relocstore.Conflict)
	relocredis.AdvanceClock(s, 10*time.Second)
	mustPut(t, s, "expired", []byte("b"), time.Hour, relocstore.Stored)
}

// TestNamespaces: the same reference in two namespaces of one server is two
// independent payloads.
func TestNamespaces(t *testing.T) {
	addr := testredis.Addr(t)
	a := newStore(t, relocredis.Options{Addrs: []string{addr}, Namespace: testredis.Namespace(t) + "-a"})
	defer a.Close()
	b := newStore(t, relocredis.Options{Addrs: []string{addr}, Namespace: testredis.Namespace(t) + "-b"})
	defer b.Close()
	mustPut(t, a, "same/ref", []byte("in a"), time.Hour, relocstore.Stored)
	mustPut(t, b, "same/ref", []byte("in b"), time.Hour, relocstore.Stored)
	mustRead(t, a, "same/ref", []byte("in a"))
	mustRead(t, b, "same/ref", []byte("in b"))
	if err := a.Delete(t.Context(), "same/ref"); err != nil {
		t.Fatal(err)
	}
	mustRead(t, b, "same/ref", []byte("in b"))
}

// TestScriptCacheFlushed: every path still works after SCRIPT FLUSH (a
// restarted or failed-over server), including a staged Put whose commit
// follows the SET in the same pipeline.
func TestScriptCacheFlushed(t *testing.T) {
	addr := testredis.Addr(t)
	s := newStore(t, relocredis.Options{Addrs: []string{addr}})
	defer s.Close()
	c := rawClient(t, addr)
	large := fill(relocredis.InlineMax+1, 3)
	small := []byte("small")
	flush := func() {
		t.Helper()
		if err := c.ScriptFlush(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	mustPut(t, s, "flush/large", large, time.Hour, relocstore.Stored)
	flush()
	mustPut(t, s, "flush/small", small, time.Hour, relocstore.Stored)
	flush()
	mustRead(t, s, "flush/large", large)
	flush()
	if r, err := s.Renew(t.Context(), "flush/small", 2*time.Hour); err != nil || !r.Renewed {
		t.Fatalf("Renew = %+v, %v", r, err)
	}
	flush()
	if err := s.Delete(t.Context(), "flush/small"); err != nil {
		t.Fatal(err)
	}
	mustRead(t, s, "flush/small", nil)
	if k := stagingKeys(t, c, s); len(k) != 0 {
		t.Fatalf("staging keys left: %v", k)
	}
}

// TestCorruptRecords: records this provider cannot trust are reported, not
// returned: an unknown format version is ErrFormat, bytes that do not match
// their digest are ErrIntegrity, and a data key removed behind the
// provider's back reads as Missing while the tombstone still refuses other
// bytes.
func TestCorruptRecords(t *testing.T) {
	addr := testredis.Addr(t)
	var logs bytes.Buffer
	s := newStore(t, relocredis.Options{Addrs: []string{addr}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	c := rawClient(t, addr)
	ctx := t.Context()
	keys := func(ref string) (string, string) {
		h := hexSHA([]byte(ref))
		return relocredis.KeyPrefix(s) + "m:" + h, relocredis.KeyPrefix(s) + "d:" + h
	}

	mustPut(t, s, "bad/version", []byte("x"), time.Hour, relocstore.Stored)
	meta, _ := keys("bad/version")
	c.HSet(ctx, meta, "v", "2")
	if _, err := s.Read(ctx, "bad/version"); !errors.Is(err, relocredis.ErrFormat) || !errors.Is(err, relocstore.ErrUnavailable) {
		t.Errorf("Read of a version-2 record: %v, want ErrFormat", err)
	}
	if _, err := s.Put(ctx, "bad/version", []byte("x"), 0); !errors.Is(err, relocredis.ErrFormat) {
		t.Errorf("Put over a version-2 record: %v, want ErrFormat", err)
	}

	mustPut(t, s, "bad/bytes", []byte("original"), time.Hour, relocstore.Stored)
	_, data := keys("bad/bytes")
	c.Set(ctx, data, "tampered", goredis.KeepTTL)
	if r, err := s.Read(ctx, "bad/bytes"); !errors.Is(err, relocredis.ErrIntegrity) {
		t.Errorf("Read of tampered bytes = %+v, %v; want ErrIntegrity", r, err)
	}

	mustPut(t, s, "bad/evicted", []byte("original"), time.Hour, relocstore.Stored)
	_, data = keys("bad/evicted")
	c.Del(ctx, data)
	mustRead(t, s, "bad/evicted", nil)
	if r, err := s.Renew(ctx, "bad/evicted", time.Hour); err != nil || r.Renewed {
		t.Errorf("Renew of evicted bytes = %+v, %v; want Missing", r, err)
	}
	mustPut(t, s, "bad/evicted", []byte("other"), time.Hour, relocstore.Conflict)
	// The same bytes heal the record (Stored, since they were not there),
	// without shortening the recorded expiry.
	healed := mustPut(t, s, "bad/evicted", []byte("original"), time.Minute, relocstore.Stored)
	if got := healed.ExpiresAt.Sub(healed.StoreNow); got < 59*time.Minute {
		t.Errorf("healing Put shortened the expiry to %v from now", got)
	}
	mustRead(t, s, "bad/evicted", []byte("original"))
	// Likewise on the staged path.
	large := fill(relocredis.InlineMax+1, 9)
	mustPut(t, s, "bad/evicted-large", large, time.Hour, relocstore.Stored)
	_, data = keys("bad/evicted-large")
	c.Del(ctx, data)
	mustPut(t, s, "bad/evicted-large", large, time.Hour, relocstore.Stored)
	mustRead(t, s, "bad/evicted-large", large)

	for _, msg := range []string{"does not match its digest", "missing although its record is live"} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("no log line %q in:\n%s", msg, logs.String())
		}
	}
}

func TestOptionsValidation(t *testing.T) {
	addr := testredis.Addr(t)
	cases := map[string]relocredis.Options{
		"no address":          {Namespace: "ns"},
		"empty namespace":     {Addrs: []string{addr}},
		"brace in namespace":  {Addrs: []string{addr}, Namespace: "a{b"},
		"closing brace":       {Addrs: []string{addr}, Namespace: "a}b"},
		"space in namespace":  {Addrs: []string{addr}, Namespace: "a b"},
		"non-ASCII":           {Addrs: []string{addr}, Namespace: "caf\u00e9"},
		"namespace too long":  {Addrs: []string{addr}, Namespace: strings.Repeat("n", relocredis.MaxNamespaceBytes+1)},
		"negative timeout":    {Addrs: []string{addr}, Namespace: "ns", OperationTimeout: -time.Second},
		"negative db":         {Addrs: []string{addr}, Namespace: "ns", DB: -1},
		"db with a cluster":   {Addrs: []string{addr, addr}, Namespace: "ns", DB: 3},
		"tombstone too short": {Addrs: []string{addr}, Namespace: "ns", TombstoneRetention: time.Microsecond},
		"tombstone too long":  {Addrs: []string{addr}, Namespace: "ns", TombstoneRetention: relocstore.MaxRetention + 1},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := relocredis.New(t.Context(), o)
			if err == nil {
				s.Close()
				t.Fatal("accepted")
			}
			if !errors.Is(err, relocstore.ErrArgument) {
				t.Fatalf("error %v is not an argument error", err)
			}
		})
	}
	s, err := relocredis.New(t.Context(), relocredis.Options{Addrs: []string{addr}, Namespace: strings.Repeat("n", relocredis.MaxNamespaceBytes)})
	if err != nil {
		t.Fatalf("maximal namespace: %v", err)
	}
	s.Close()
}

// TestNewWithClient: a shared client must honour context deadlines, and
// Close leaves it open for its owner.
func TestNewWithClient(t *testing.T) {
	addr := testredis.Addr(t)
	bad := goredis.NewClient(&goredis.Options{Addr: addr})
	defer bad.Close()
	if _, err := relocredis.NewWithClient(bad, relocredis.Options{Namespace: "ns"}); !errors.Is(err, relocstore.ErrArgument) {
		t.Fatalf("client without ContextTimeoutEnabled: %v, want an argument error", err)
	}
	if _, err := relocredis.NewWithClient(nil, relocredis.Options{Namespace: "ns"}); !errors.Is(err, relocstore.ErrArgument) {
		t.Fatalf("nil client: %v", err)
	}
	shared := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer shared.Close()
	s, err := relocredis.NewWithClient(shared, relocredis.Options{Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "shared", []byte("x"), time.Hour, relocstore.Stored)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := shared.Ping(t.Context()).Err(); err != nil {
		t.Fatalf("store Close closed the shared client: %v", err)
	}
	if _, err := s.Read(t.Context(), "shared"); !errors.Is(err, relocredis.ErrClosed) {
		t.Fatalf("Read after Close: %v, want ErrClosed", err)
	}
}

// returns runs fn and fails the test if it has not returned within a
// generous bound: it guards against a hang, it does not measure speed.
func returns(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not return: the operation timeout does not bound it", what)
		return nil
	}
}

func wantTimeout(t *testing.T, what string, err error) {
	t.Helper()
	var pe *relocstore.ProviderError
	if !errors.Is(err, relocstore.ErrUnavailable) || !errors.As(err, &pe) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%s: %v, want a provider error wrapping context.DeadlineExceeded", what, err)
	}
}

// ops runs every operation of s once with a background context (so only the
// store's own operation timeout can end it).
func ops(s relocstore.Store) map[string]func() error {
	ctx := context.Background()
	return map[string]func() error{
		"put small": func() error { _, err := s.Put(ctx, "t/ref", []byte("x"), 0); return err },
		"put large": func() error { _, err := s.Put(ctx, "t/ref", fill(relocredis.InlineMax+1, 1), 0); return err },
		"read":      func() error { _, err := s.Read(ctx, "t/ref"); return err },
		"renew":     func() error { _, err := s.Renew(ctx, "t/ref", 0); return err },
		"delete":    func() error { return s.Delete(ctx, "t/ref") },
	}
}

// TestOperationTimeoutSilentServer: against a server that accepts but never
// answers, New and every operation fail with the operation timeout instead
// of hanging.
func TestOperationTimeoutSilentServer(t *testing.T) {
	addr := testredis.SilentPort(t)
	err := returns(t, "New", func() error {
		s, err := relocredis.New(context.Background(), relocredis.Options{
			Addrs: []string{addr}, Namespace: "silent", OperationTimeout: 200 * time.Millisecond})
		if err == nil {
			s.Close()
		}
		return err
	})
	wantTimeout(t, "New", err)

	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	s, err := relocredis.NewWithClient(client, relocredis.Options{Namespace: "silent", OperationTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, fn := range ops(s) {
		wantTimeout(t, name, returns(t, name, fn))
	}
}

// TestOperationTimeoutPoolWait: the operation timeout also covers waiting
// for a pooled connection. The only connection of the pool is held by a
// blocking command; every operation gives up after its timeout, and works
// again once the connection is free.
func TestOperationTimeoutPoolWait(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	client := goredis.NewClient(&goredis.Options{
		Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		PoolSize: 1, PoolTimeout: time.Hour, // only the operation timeout can end the wait
		PipelinePoolSize: -1, // pipelines share the one connection too
	})
	defer client.Close()
	s, err := relocredis.NewWithClient(client, relocredis.Options{Namespace: ns, OperationTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	blockKey := "{" + ns + "}:block"
	held := make(chan error, 1)
	go func() { held <- client.BLPop(context.Background(), 0, blockKey).Err() }()
	// Wait until the blocking command owns the pool's only connection.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := client.PoolStats()
		if st.TotalConns == 1 && st.IdleConns == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("BLPOP never took the connection: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for name, fn := range ops(s) {
		wantTimeout(t, name, returns(t, name, fn))
	}

	if err := rawClient(t, addr).LPush(t.Context(), blockKey, "go").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("BLPOP: %v", err)
	}
	mustPut(t, s, "after", []byte("x"), time.Hour, relocstore.Stored)
	mustRead(t, s, "after", []byte("x"))
}

// TestServerDown: with the server gone (connection refused rather than
// silence) every operation is a provider failure, not an argument error or
// a result.
func TestServerDown(t *testing.T) {
	srv := testredis.NewServer(t)
	s := newStore(t, relocredis.Options{Addrs: []string{srv.Addr}, OperationTimeout: time.Second})
	defer s.Close()
	mustPut(t, s, "down", []byte("x"), time.Hour, relocstore.Stored)
	srv.Stop()
	for name, fn := range ops(s) {
		err := returns(t, name, fn)
		if !errors.Is(err, relocstore.ErrUnavailable) || errors.Is(err, relocstore.ErrArgument) {
			t.Errorf("%s with the server down: %v, want a provider error", name, err)
		}
	}
}

// A negative pool size is refused before anything connects.
func TestNewRefusesANegativePoolSize(t *testing.T) {
	_, err := relocredis.New(context.Background(), relocredis.Options{Addrs: []string{"127.0.0.1:1"}, Namespace: "x", PoolSize: -1})
	var ae *relocstore.ArgumentError
	if !errors.As(err, &ae) || ae.Field != "poolSize" {
		t.Fatalf("New with PoolSize -1: %v, want an ArgumentError on poolSize", err)
	}
}

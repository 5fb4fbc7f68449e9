package redis

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/locstore/storetest"
)

// --- helpers ---------------------------------------------------------------

func openStore(t *testing.T, addr, ns string, mod func(*Options)) *Store {
	t.Helper()
	opts := Options{Addrs: []string{addr}, Namespace: ns, OperationTimeout: 5 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	s, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newTestStore(t *testing.T, mod func(*Options)) *Store {
	t.Helper()
	return openStore(t, testredis.Addr(t), testredis.Namespace(t), mod)
}

func rawClient(t *testing.T, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustWrite(t *testing.T, s locstore.Store, req locstore.WriteRequest) locstore.WriteResult {
	t.Helper()
	res, err := s.Write(context.Background(), req)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if !res.Applied {
		t.Fatalf("Write: Conflict, want Applied")
	}
	return res
}

func put(t *testing.T, s locstore.Store, key, value string) string {
	t.Helper()
	return mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put(key, []byte(value))}}).Versions[0]
}

func del(t *testing.T, s locstore.Store, key string) {
	t.Helper()
	mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}})
}

// scanAll reads a whole snapshot; between(i) runs after page i (0-based).
func scanAll(t *testing.T, s locstore.Store, prefix string, limit int, between func(page int)) []locstore.Item {
	t.Helper()
	var all []locstore.Item
	cursor := ""
	for page := 0; ; page++ {
		p, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: prefix, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatalf("Scan page %d: %v", page, err)
		}
		if p.Expired {
			t.Fatalf("Scan page %d: Expired", page)
		}
		if len(p.Items) > limit {
			t.Fatalf("Scan page %d: %d items, limit %d", page, len(p.Items), limit)
		}
		all = append(all, p.Items...)
		if p.Next == "" {
			return all
		}
		if len(p.Next) > locstore.MaxCursorBytes {
			t.Fatalf("cursor is %d bytes", len(p.Next))
		}
		cursor = p.Next
		if between != nil {
			between(page)
		}
	}
}

func itemsString(items []locstore.Item) string {
	var b strings.Builder
	for _, it := range items {
		fmt.Fprintf(&b, "%s=%s@%s;", it.Key, it.Value, it.Version)
	}
	return b.String()
}

// keysMatching lists the Redis keys of a pattern (test inspection only).
func keysMatching(t *testing.T, c *goredis.Client, pattern string) []string {
	t.Helper()
	var out []string
	iter := c.Scan(context.Background(), 0, pattern, 1000).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN %s: %v", pattern, err)
	}
	return out
}

// --- contract suite --------------------------------------------------------

func harness() storetest.Harness {
	return storetest.Harness{
		Name: ProviderName,
		New: func(t *testing.T) locstore.Store {
			addr := testredis.Addr(t)
			s, err := New(context.Background(), Options{Addrs: []string{addr}, Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Second})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			return s
		},
		// The provider clock is the server's TIME: only real time moves it.
		Advance:    func(t *testing.T, _ locstore.Store, d time.Duration) { time.Sleep(d) },
		ExpiryUnit: 300 * time.Millisecond,
	}
}

func TestContract(t *testing.T) { storetest.Run(t, harness()) }

func TestContractStress(t *testing.T) { storetest.RunStress(t, harness()) }

// --- options ---------------------------------------------------------------

func TestOptionsRejectedBeforeIO(t *testing.T) {
	// The address is never dialled: validation fails first.
	const unused = "127.0.0.1:1"
	tests := []struct {
		name string
		opts Options
	}{
		{"no address", Options{Namespace: "ns"}},
		{"empty namespace", Options{Addrs: []string{unused}}},
		{"open brace", Options{Addrs: []string{unused}, Namespace: "a{b"}},
		{"close brace", Options{Addrs: []string{unused}, Namespace: "a}b"}},
		{"not utf8", Options{Addrs: []string{unused}, Namespace: "a\xffb"}},
		{"too long", Options{Addrs: []string{unused}, Namespace: strings.Repeat("n", MaxNamespaceBytes+1)}},
		{"negative timeout", Options{Addrs: []string{unused}, Namespace: "ns", OperationTimeout: -time.Second}},
		{"negative snapshot ttl", Options{Addrs: []string{unused}, Namespace: "ns", SnapshotTTL: -time.Second}},
		{"negative pool", Options{Addrs: []string{unused}, Namespace: "ns", PoolSize: -1}},
		{"negative db", Options{Addrs: []string{unused}, Namespace: "ns", DB: -1}},
		// A Cluster has only database 0 (go-redis's Cluster client drops DB).
		{"db with a cluster", Options{Addrs: []string{unused, "127.0.0.1:2"}, Namespace: "ns", DB: 3}},
		{"negative replica acks", Options{Addrs: []string{unused}, Namespace: "ns", ReplicaAcks: -1}},
		{"too many replica acks", Options{Addrs: []string{unused}, Namespace: "ns", ReplicaAcks: 17, ReplicaAckTimeout: time.Second}},
		{"replica acks without a timeout", Options{Addrs: []string{unused}, Namespace: "ns", ReplicaAcks: 1}},
		{"replica ack timeout not below the operation timeout", Options{Addrs: []string{unused}, Namespace: "ns",
			ReplicaAcks: 1, ReplicaAckTimeout: 2 * time.Second, OperationTimeout: 2 * time.Second}},
		{"negative replica ack timeout", Options{Addrs: []string{unused}, Namespace: "ns", ReplicaAckTimeout: -time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(context.Background(), tc.opts)
			if err == nil {
				_ = s.Close()
				t.Fatal("New accepted invalid options")
			}
			if !errors.Is(err, locstore.ErrArgument) {
				t.Fatalf("error %v is not ErrArgument", err)
			}
		})
	}
	if _, err := NewWithClient(nil, Options{Namespace: "ns"}); !errors.Is(err, locstore.ErrArgument) {
		t.Fatalf("NewWithClient(nil): %v", err)
	}
	// Without ContextTimeoutEnabled the operation timeout could not bound
	// socket I/O.
	noCtx := goredis.NewClient(&goredis.Options{Addr: unused})
	defer noCtx.Close()
	if _, err := NewWithClient(noCtx, Options{Namespace: "ns"}); !errors.Is(err, locstore.ErrArgument) {
		t.Fatalf("NewWithClient without ContextTimeoutEnabled: %v", err)
	}
	noCtxCluster := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{unused}})
	defer noCtxCluster.Close()
	if _, err := NewWithClient(noCtxCluster, Options{Namespace: "ns"}); !errors.Is(err, locstore.ErrArgument) {
		t.Fatalf("NewWithClient(cluster) without ContextTimeoutEnabled: %v", err)
	}
}

func TestNewFailsWhenServerDown(t *testing.T) {
	srv := testredis.NewServer(t)
	addr := srv.Addr
	srv.Stop()
	_, err := New(context.Background(), Options{Addrs: []string{addr}, Namespace: "ns", OperationTimeout: 500 * time.Millisecond})
	if !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("New against a stopped server: %v, want ErrUnavailable", err)
	}
}

// --- layout and versions ---------------------------------------------------

func TestKeyLayout(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	s := openStore(t, addr, ns, nil)
	raw := rawClient(t, addr)
	ctx := context.Background()

	// The framework's records use hex SHA-256 keys (spec §3.4).
	sum := sha256.Sum256([]byte("authority\x00actor\x00user:42"))
	key := hex.EncodeToString(sum[:])
	value := []byte(`{"recordVersion":1}`)
	ver := put(t, s, key, string(value))

	h, err := raw.HGetAll(ctx, "{"+ns+"}:k:"+key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if h["v"] != string(value) || h["s"] != ver || len(h) != 2 {
		t.Fatalf("record hash = %q, want v=%q s=%q only", h, value, ver)
	}
	if ttl := raw.PTTL(ctx, "{"+ns+"}:k:"+key).Val(); ttl != -1 {
		t.Fatalf("durable record has PTTL %v", ttl)
	}
	if m, err := raw.ZScore(ctx, "{"+ns+"}:idx", key).Result(); err != nil || m != 0 {
		t.Fatalf("index entry: %v %v", m, err)
	}
	for _, k := range keysMatching(t, raw, "*"+ns+"*") {
		if !strings.HasPrefix(k, "{"+ns+"}:") {
			t.Errorf("key %q outside the namespace hash tag", k)
		}
	}

	// An expiring record carries x and a physical TTL beyond it.
	res := mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring("exp", []byte("e"), time.Hour)}})
	x, err := raw.HGet(ctx, "{"+ns+"}:k:exp", "x").Int64()
	if err != nil {
		t.Fatal(err)
	}
	if want := res.StoreNow.Add(time.Hour).UnixMilli(); x != want {
		t.Fatalf("x = %d, want StoreNow+1h = %d", x, want)
	}
	if pttl := raw.PTTL(ctx, "{"+ns+"}:k:exp").Val(); pttl <= time.Hour {
		t.Fatalf("PTTL %v: physical expiry must wait past expiresAt", pttl)
	}
	// Replacing it with a durable value clears both.
	put(t, s, "exp", "durable")
	if n := raw.HExists(ctx, "{"+ns+"}:k:exp", "x").Val(); n {
		t.Fatal("x survived a durable put")
	}
	if pttl := raw.PTTL(ctx, "{"+ns+"}:k:exp").Val(); pttl != -1 {
		t.Fatalf("PTTL %v after durable put", pttl)
	}
}

func TestVersionsUniqueAcrossDeleteAndRecreate(t *testing.T) {
	s := newTestStore(t, nil)
	seen := map[string]string{}
	record := func(what, v string) {
		t.Helper()
		if prev, dup := seen[v]; dup {
			t.Fatalf("version %q of %s reused (first for %s)", v, what, prev)
		}
		seen[v] = what
	}
	record("a#1", put(t, s, "a", "1"))
	del(t, s, "a")
	record("a#2", put(t, s, "a", "1")) // same bytes, new version
	res := mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.Put("b", []byte("x")), locstore.Delete("a"), locstore.Put("c", []byte("y")),
	}})
	if res.Versions[1] != "" {
		t.Fatalf("delete has version %q", res.Versions[1])
	}
	record("b", res.Versions[0])
	record("c", res.Versions[2])
	record("a#3", put(t, s, "a", "1"))
}

func TestExpiresAtIsStoreNowPlusRetention(t *testing.T) {
	s := newTestStore(t, nil)
	ctx := context.Background()
	tests := []struct {
		name      string
		retention time.Duration
		wantDelta time.Duration
	}{
		{"whole ms", 250 * time.Millisecond, 250 * time.Millisecond},
		{"fraction rounds up", 1500 * time.Microsecond, 2 * time.Millisecond},
		{"long", 48 * time.Hour, 48 * time.Hour},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key := "r/" + tc.name
			w := mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring(key, []byte("v"), tc.retention)}})
			// Read immediately: it may already have expired for the 2ms case,
			// which is fine; when found, ExpiresAt is exact.
			r, err := s.Read(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if r.Found {
				if want := w.StoreNow.Add(tc.wantDelta); !r.ExpiresAt.Equal(want) {
					t.Fatalf("ExpiresAt %v, want %v", r.ExpiresAt, want)
				}
				if !r.StoreNow.Before(r.ExpiresAt) {
					t.Fatalf("found with StoreNow %v >= ExpiresAt %v", r.StoreNow, r.ExpiresAt)
				}
			} else if !r.StoreNow.After(w.StoreNow.Add(tc.wantDelta).Add(-time.Millisecond)) {
				t.Fatalf("missing at %v before expiry %v", r.StoreNow, w.StoreNow.Add(tc.wantDelta))
			}
		})
	}
}

// --- isolation -------------------------------------------------------------

func TestNamespacesIsolatedOnOneServer(t *testing.T) {
	addr := testredis.Addr(t)
	a := openStore(t, addr, testredis.Namespace(t)+"-a", nil)
	b := openStore(t, addr, testredis.Namespace(t)+"-b", nil)
	ctx := context.Background()

	va := put(t, a, "shared", "from-a")
	if r, err := b.Read(ctx, "shared"); err != nil || r.Found {
		t.Fatalf("b sees a's key: %+v %v", r, err)
	}
	// b can create the same key; a's record is untouched.
	mustWrite(t, b, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfMissing("shared")},
		Mutations:  []locstore.Mutation{locstore.Put("shared", []byte("from-b"))},
	})
	r, err := a.Read(ctx, "shared")
	if err != nil || !r.Found || string(r.Value) != "from-a" || r.Version != va {
		t.Fatalf("a's record changed: %+v %v", r, err)
	}
	put(t, a, "only-a", "1")
	items := scanAll(t, b, "", 10, nil)
	for _, it := range items {
		if it.Key == "only-a" || string(it.Value) == "from-a" {
			t.Fatalf("b's scan sees a's record %q", it.Key)
		}
	}
	// A cursor of a's snapshot is meaningless in b.
	put(t, a, "only-a2", "2")
	p, err := a.Scan(ctx, locstore.ScanRequest{Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("a scan: %+v %v", p, err)
	}
	pb, err := b.Scan(ctx, locstore.ScanRequest{Limit: 1, Cursor: p.Next})
	if err != nil || !pb.Expired {
		t.Fatalf("b accepted a's cursor: %+v %v", pb, err)
	}
}

func TestTwoServers(t *testing.T) {
	ns := testredis.Namespace(t)
	one := openStore(t, testredis.Addr(t), ns, nil)
	other := testredis.NewServer(t)
	two := openStore(t, other.Addr, ns, nil)
	ctx := context.Background()

	put(t, one, "k", "on-one")
	if r, err := two.Read(ctx, "k"); err != nil || r.Found {
		t.Fatalf("second server sees the first's key: %+v %v", r, err)
	}
	put(t, two, "k", "on-two")
	r, err := one.Read(ctx, "k")
	if err != nil || string(r.Value) != "on-one" {
		t.Fatalf("first server: %+v %v", r, err)
	}
	// Losing the second server fails only the second store.
	other.Stop()
	if _, err := two.Read(ctx, "k"); !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("read on a stopped server: %v", err)
	}
	if _, err := one.Read(ctx, "k"); err != nil {
		t.Fatalf("first server affected: %v", err)
	}
}

// --- failures --------------------------------------------------------------

func TestOperationTimeoutAgainstSilentServer(t *testing.T) {
	const timeout = 150 * time.Millisecond
	addr := testredis.SilentPort(t)
	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = client.Close() })
	s, err := NewWithClient(client, Options{Namespace: "silent", OperationTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := []struct {
		name string
		do   func() error
	}{
		{"read", func() error { _, err := s.Read(ctx, "k"); return err }},
		{"write", func() error {
			_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
			return err
		}},
		{"scan", func() error { _, err := s.Scan(ctx, locstore.ScanRequest{Limit: 10}); return err }},
		{"scan garbage cursor", func() error { _, err := s.Scan(ctx, locstore.ScanRequest{Limit: 10, Cursor: "garbage"}); return err }},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			start := time.Now()
			err := op.do()
			elapsed := time.Since(start)
			var pe *locstore.ProviderError
			if !errors.Is(err, locstore.ErrUnavailable) || !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *ProviderError matching ErrUnavailable", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				var ne net.Error
				if !errors.As(err, &ne) || !ne.Timeout() {
					t.Fatalf("cause %v is neither the deadline nor a timeout", err)
				}
			}
			// Not a speed assertion: a generous bound that only fails if the
			// timeout is not applied at all (go-redis' own default is 3s and
			// a silent server would otherwise block forever).
			if elapsed > 2*time.Second {
				t.Fatalf("took %v with a %v operation timeout", elapsed, timeout)
			}
		})
	}
	// The caller's own deadline is honoured too when it is shorter.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Read(cctx, "k"); !errors.Is(err, locstore.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

func TestStoppedServerIsUnavailable(t *testing.T) {
	srv := testredis.NewServer(t)
	s := openStore(t, srv.Addr, "stopped", func(o *Options) { o.OperationTimeout = 500 * time.Millisecond })
	put(t, s, "k", "v")
	srv.Stop()
	_, err := s.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("k", []byte("w"))}})
	if !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("write on a stopped server: %v", err)
	}
}

// fakeRedis answers the connection handshake and drops the connection when a
// script call arrives, counting those calls: a client retry would show up as
// a second call.
type fakeRedis struct {
	addr    string
	scripts atomic.Int32
}

func newFakeRedis(t *testing.T) *fakeRedis {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRedis{addr: l.Addr().String()}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeRedis) serve(c net.Conn) {
	defer c.Close()
	rd := bufio.NewReader(c)
	for {
		args, err := readRESPArray(rd)
		if err != nil {
			return
		}
		switch strings.ToUpper(args[0]) {
		case "HELLO":
			_, err = io.WriteString(c, "-ERR unknown command 'HELLO'\r\n")
		case "EVALSHA", "EVAL":
			f.scripts.Add(1)
			return // the reply is lost: outcome unknown to the client
		case "PING":
			_, err = io.WriteString(c, "+PONG\r\n")
		default:
			_, err = io.WriteString(c, "+OK\r\n")
		}
		if err != nil {
			return
		}
	}
}

func readRESPArray(rd *bufio.Reader) ([]string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("not an array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		hdr, err := rd.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(hdr[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

func TestScriptCallsAreNeverRetried(t *testing.T) {
	f := newFakeRedis(t)
	// A client with go-redis' default retries (MaxRetries 0 = 3 retries):
	// the provider must still send each script call once.
	client := goredis.NewClient(&goredis.Options{Addr: f.addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	s, err := NewWithClient(client, Options{Namespace: "fake", OperationTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Write(context.Background(), locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("k", "7")},
		Mutations:  []locstore.Mutation{locstore.Put("k", []byte("v"))},
	})
	if !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("lost reply: %v, want ErrUnavailable (never a guessed outcome)", err)
	}
	if n := f.scripts.Load(); n != 1 {
		t.Fatalf("script sent %d times, want exactly 1", n)
	}
}

func TestClose(t *testing.T) {
	addr := testredis.Addr(t)
	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	s, err := NewWithClient(client, Options{Namespace: testredis.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Read(context.Background(), "k"); !errors.Is(err, ErrClosed) || !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("read after Close: %v", err)
	}
	// The caller's client is still usable.
	if err := client.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Close closed a client it does not own: %v", err)
	}
}

// --- limits ----------------------------------------------------------------

func TestLargestBatchAndValue(t *testing.T) {
	s := newTestStore(t, func(o *Options) { o.OperationTimeout = 20 * time.Second })
	ctx := context.Background()

	// 2,048 distinct keys adding up to exactly 4 MiB, with a condition each.
	const n = locstore.MaxBatchKeys
	req := locstore.WriteRequest{}
	per := locstore.MaxBatchBytes / n
	for i := range n {
		k := fmt.Sprintf("batch/%04d", i)
		req.Conditions = append(req.Conditions, locstore.IfMissing(k))
		req.Mutations = append(req.Mutations, locstore.Put(k, bytes.Repeat([]byte{byte('a' + i%26)}, per-2*len(k))))
	}
	if got := req.EncodedSize(); got != locstore.MaxBatchBytes {
		t.Fatalf("test batch is %d bytes, want %d", got, locstore.MaxBatchBytes)
	}
	res := mustWrite(t, s, req)
	if len(res.Versions) != n {
		t.Fatalf("%d versions", len(res.Versions))
	}
	r, err := s.Read(ctx, "batch/2047")
	if err != nil || !r.Found || !bytes.Equal(r.Value, req.Mutations[2047].Value) || r.Version != res.Versions[2047] {
		t.Fatalf("read back: found=%v err=%v", r.Found, err)
	}
	// The same batch again conflicts on every condition and changes nothing.
	res2, err := s.Write(ctx, req)
	if err != nil || res2.Applied {
		t.Fatalf("repeat: %+v %v", res2.Applied, err)
	}
	if r2, _ := s.Read(ctx, "batch/0000"); r2.Version != res.Versions[0] {
		t.Fatal("conflicting batch changed a version")
	}

	// One 1 MiB value with a 1,024-byte key.
	big := bytes.Repeat([]byte{0xC3, 0x00, 0xFF}, locstore.MaxValueBytes/3)
	big = append(big, 0x01)
	key := strings.Repeat("k", locstore.MaxKeyBytes)
	v := put(t, s, key, string(big))
	r, err = s.Read(ctx, key)
	if err != nil || !bytes.Equal(r.Value, big) || r.Version != v {
		t.Fatalf("1 MiB value: equal=%v err=%v", bytes.Equal(r.Value, big), err)
	}
}

func TestScanPageBytesBound(t *testing.T) {
	s := newTestStore(t, nil)
	mb := bytes.Repeat([]byte("x"), locstore.MaxValueBytes)
	for i := range 5 {
		put(t, s, fmt.Sprintf("big/%d", i), string(mb))
	}
	var sizes []int
	cursor := ""
	total := 0
	for {
		p, err := s.Scan(context.Background(), locstore.ScanRequest{Prefix: "big/", Limit: 1000, Cursor: cursor})
		if err != nil || p.Expired {
			t.Fatalf("scan: %v expired=%v", err, p.Expired)
		}
		size := 0
		for _, it := range p.Items {
			size += it.EncodedSize()
		}
		if size > locstore.MaxPageBytes {
			t.Fatalf("page of %d bytes", size)
		}
		sizes = append(sizes, len(p.Items))
		total += len(p.Items)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	// 3 MiB + keys/versions fit in 4 MiB, a fourth item would cross.
	if !slices.Equal(sizes, []int{3, 2}) || total != 5 {
		t.Fatalf("page sizes %v", sizes)
	}
}

// --- scan snapshots --------------------------------------------------------

func TestScanSeesTheSnapshot(t *testing.T) {
	initial := []string{"p/a", "p/b", "p/c", "p/d", "p/e", "p/f"}
	tests := []struct {
		name   string
		mutate func(t *testing.T, s *Store)
	}{
		{"update unscanned", func(t *testing.T, s *Store) { put(t, s, "p/d", "changed") }},
		{"delete unscanned", func(t *testing.T, s *Store) { del(t, s, "p/e") }},
		{"create in range", func(t *testing.T, s *Store) { put(t, s, "p/c2", "new") }},
		{"delete and recreate", func(t *testing.T, s *Store) { del(t, s, "p/f"); put(t, s, "p/f", "again") }},
		{"update scanned", func(t *testing.T, s *Store) { put(t, s, "p/a", "changed") }},
		{"rewrite many times", func(t *testing.T, s *Store) {
			for i := range 20 {
				put(t, s, "p/c", strconv.Itoa(i))
			}
		}},
		{"everything in one batch", func(t *testing.T, s *Store) {
			mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
				locstore.Put("p/d", []byte("x")), locstore.Delete("p/e"), locstore.Put("p/c2", []byte("y")),
				locstore.Delete("p/f"), locstore.PutExpiring("p/b", []byte("z"), time.Hour),
			}})
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, nil)
			var want []locstore.Item
			for _, k := range initial {
				v := put(t, s, k, "v-"+k)
				want = append(want, locstore.Item{Key: k, Value: []byte("v-" + k), Version: v})
			}
			put(t, s, "q/outside", "x")
			got := scanAll(t, s, "p/", 2, func(page int) {
				if page == 0 {
					tc.mutate(t, s)
				}
			})
			if itemsString(got) != itemsString(want) {
				t.Fatalf("snapshot\n got %s\nwant %s", itemsString(got), itemsString(want))
			}
			// A fresh scan sees the mutation.
			if now := scanAll(t, s, "p/", 2, nil); itemsString(now) == itemsString(want) {
				t.Fatalf("fresh scan does not see the mutation: %s", itemsString(now))
			}
		})
	}
}

func TestScanJudgesExpiryAtSnapshotTime(t *testing.T) {
	s := newTestStore(t, nil)
	put(t, s, "e/a", "a")
	mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring("e/b", []byte("b"), 300*time.Millisecond)}})
	put(t, s, "e/c", "c")
	got := scanAll(t, s, "e/", 1, func(page int) {
		if page == 0 {
			time.Sleep(400 * time.Millisecond)
			if r, _ := s.Read(context.Background(), "e/b"); r.Found {
				t.Fatal("e/b not expired for Read")
			}
		}
	})
	if len(got) != 3 || got[1].Key != "e/b" || got[1].ExpiresAt.IsZero() {
		t.Fatalf("snapshot lost the value live at its start: %s", itemsString(got))
	}
}

func TestScanManyInvisibleEntries(t *testing.T) {
	// More index entries than one script call examines lie between visible
	// keys: pages are assembled from several bounded calls.
	s := newTestStore(t, func(o *Options) { o.OperationTimeout = 20 * time.Second })
	var want []string
	for _, k := range []string{"a0", "a1", "a2", "c0", "c1", "c2"} {
		put(t, s, k, k)
		want = append(want, k)
	}
	got := scanAll(t, s, "", 1, func(page int) {
		if page != 0 {
			return
		}
		// Created after the snapshot: invisible to it.
		const n = 3 * examineBudget
		for i := 0; i < n; i += 512 {
			req := locstore.WriteRequest{}
			for j := i; j < i+512 && j < n; j++ {
				req.Mutations = append(req.Mutations, locstore.Put(fmt.Sprintf("b%05d", j), []byte("x")))
			}
			mustWrite(t, s, req)
		}
	})
	var keys []string
	for _, it := range got {
		keys = append(keys, it.Key)
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
}

func TestScanCursorRejection(t *testing.T) {
	s := newTestStore(t, nil)
	ctx := context.Background()
	for i := range 3 {
		put(t, s, fmt.Sprintf("x/%d", i), "v")
	}
	p, err := s.Scan(ctx, locstore.ScanRequest{Prefix: "x/", Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	id, pos, ok := s.decodeCursor(p.Next, "x/")
	if !ok || pos != "x/0" {
		t.Fatalf("cursor decodes to %q %v", pos, ok)
	}
	var otherID [snapIDBytes]byte
	otherID[0] = id[0] ^ 1
	tests := []struct {
		name   string
		prefix string
		cursor string
	}{
		{"not base64", "x/", "!!!"},
		{"empty payload", "x/", "AQ"},
		{"wrong cursor version", "x/", withVersion(9, s.encodeCursor(id, "x/", "x/0"))},
		{"unknown snapshot", "x/", s.encodeCursor(otherID, "x/", "x/0")},
		{"other prefix", "y/", p.Next},
		{"other prefix, re-signed", "y/", s.encodeCursor(id, "y/", "x/0")},
		{"position edited", "x/", withPos(p.Next, "x/1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.Scan(ctx, locstore.ScanRequest{Prefix: tc.prefix, Limit: 1, Cursor: tc.cursor})
			if err != nil {
				t.Fatal(err)
			}
			if !got.Expired || got.StoreNow.IsZero() || len(got.Items) != 0 {
				t.Fatalf("got %+v, want Expired with StoreNow", got)
			}
		})
	}
	// The genuine cursor still works after all that.
	if got, err := s.Scan(ctx, locstore.ScanRequest{Prefix: "x/", Limit: 5, Cursor: p.Next}); err != nil || got.Expired || len(got.Items) != 2 {
		t.Fatalf("genuine cursor: %+v %v", got, err)
	}
}

func withVersion(v byte, cursor string) string {
	b, _ := base64.RawURLEncoding.DecodeString(cursor)
	b[0] = v
	return base64.RawURLEncoding.EncodeToString(b)
}

func withPos(cursor, pos string) string {
	b, _ := base64.RawURLEncoding.DecodeString(cursor)
	b = append(b[:1+snapIDBytes+cursorTagLen], pos...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestScanConsistentWhileWritersRun(t *testing.T) {
	// Accounts move units between each other in two-key batches; an account
	// at zero is deleted and recreated when it receives units. Every snapshot
	// must add up to the same total although writers commit between pages.
	s := newTestStore(t, nil)
	ctx := context.Background()
	const accounts, start = 16, 10
	for i := range accounts {
		put(t, s, fmt.Sprintf("acct/%02d", i), strconv.Itoa(start))
	}
	var applied atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i, j := rng.IntN(accounts), rng.IntN(accounts)
				if i == j {
					continue
				}
				from, to := fmt.Sprintf("acct/%02d", i), fmt.Sprintf("acct/%02d", j)
				rf, err := s.Read(ctx, from)
				if err != nil {
					t.Error(err)
					return
				}
				rt, err := s.Read(ctx, to)
				if err != nil {
					t.Error(err)
					return
				}
				if !rf.Found {
					continue
				}
				have, _ := strconv.Atoi(string(rf.Value))
				amount := 1 + rng.IntN(have)
				recv := 0
				conds := []locstore.Condition{locstore.IfVersion(from, rf.Version), locstore.IfMissing(to)}
				if rt.Found {
					recv, _ = strconv.Atoi(string(rt.Value))
					conds[1] = locstore.IfVersion(to, rt.Version)
				}
				muts := []locstore.Mutation{locstore.Delete(from), locstore.Put(to, []byte(strconv.Itoa(recv+amount)))}
				if have > amount {
					muts[0] = locstore.Put(from, []byte(strconv.Itoa(have-amount)))
				}
				res, err := s.Write(ctx, locstore.WriteRequest{Conditions: conds, Mutations: muts})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Applied {
					applied.Add(1)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	for round := range 8 {
		sum := 0
		items := scanAll(t, s, "acct/", 3, func(int) {
			// Let writers commit between pages (bounded wait).
			before := applied.Load()
			deadline := time.Now().Add(2 * time.Second)
			for applied.Load() < before+3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		})
		for i, it := range items {
			if i > 0 && items[i-1].Key >= it.Key {
				t.Fatalf("round %d: keys out of order: %q then %q", round, items[i-1].Key, it.Key)
			}
			n, err := strconv.Atoi(string(it.Value))
			if err != nil || n <= 0 {
				t.Fatalf("round %d: %s = %q", round, it.Key, it.Value)
			}
			sum += n
		}
		if sum != accounts*start {
			t.Fatalf("round %d: snapshot sums to %d, want %d (%s)", round, sum, accounts*start, itemsString(items))
		}
	}
	if applied.Load() == 0 {
		t.Fatal("no write applied: the test observed nothing")
	}
}

// --- history cleanup -------------------------------------------------------

func TestNoHistoryWithoutOpenSnapshot(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	s := openStore(t, addr, ns, nil)
	raw := rawClient(t, addr)
	for i := range 10 {
		put(t, s, "k", strconv.Itoa(i))
	}
	put(t, s, "gone", "x")
	del(t, s, "gone")
	if ks := keysMatching(t, raw, "{"+ns+"}:h*"); len(ks) != 0 {
		t.Fatalf("history without any snapshot: %v", ks)
	}
	if raw.ZScore(context.Background(), "{"+ns+"}:idx", "gone").Err() != goredis.Nil {
		t.Fatal("deleted key left in the index")
	}
	// A scan that fits one page registers no snapshot either.
	scanAll(t, s, "", 100, nil)
	if ks := keysMatching(t, raw, "{"+ns+"}:snap*"); len(ks) != 0 {
		t.Fatalf("single-page scan left %v", ks)
	}
}

func TestHistoryIsBoundedAndExpires(t *testing.T) {
	// The writes below must all land while the snapshot is open: with a
	// 300 ms TTL a loaded CI machine (-race, packages in parallel) once
	// took longer for the 51 writes, the snapshot expired half-way and the
	// delete kept no history. Two seconds leave a wide margin; the
	// elapsed-time check says so if even that is not enough.
	const ttl = 2 * time.Second
	s, raw, ns := snapshotTTLStore(t, ttl)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c", "d"} {
		put(t, s, k, "v0")
	}
	opened := time.Now()
	p, err := s.Scan(ctx, locstore.ScanRequest{Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	// Rewrite "b" many times and delete "c" while the snapshot is open:
	// only the record the snapshot can see is kept.
	for i := range 50 {
		put(t, s, "b", strconv.Itoa(i))
	}
	del(t, s, "c")
	if took := time.Since(opened); took >= ttl {
		t.Fatalf("the writes took %v, not within the snapshot TTL %v: the test's premise failed (machine overloaded)", took, ttl)
	}
	if n := raw.ZCard(ctx, "{"+ns+"}:h:b").Val(); n != 1 {
		t.Fatalf("history of b has %d entries, want 1", n)
	}
	if ks := keysMatching(t, raw, "{"+ns+"}:hv:*"); len(ks) != 2 {
		t.Fatalf("history values %v, want 2", ks)
	}
	got, err := s.Scan(ctx, locstore.ScanRequest{Limit: 2, Cursor: p.Next})
	if err != nil || len(got.Items) != 2 || string(got.Items[0].Value) != "v0" || got.Items[1].Key != "c" || got.Next == "" {
		t.Fatalf("second page: %s next=%q %v", itemsString(got.Items), got.Next, err)
	}

	// The scan is abandoned here: everything goes with the snapshot TTL.
	time.Sleep(ttl + 400*time.Millisecond) // snapshot TTL plus the 200ms history margin
	if got, err := s.Scan(ctx, locstore.ScanRequest{Limit: 10, Cursor: got.Next}); err != nil || !got.Expired {
		t.Fatalf("cursor after TTL: %+v %v", got, err)
	}
	for _, pat := range []string{"{" + ns + "}:h:*", "{" + ns + "}:hv:*", "{" + ns + "}:snap*"} {
		if ks := keysMatching(t, raw, pat); len(ks) != 0 {
			t.Fatalf("%s left after the snapshot TTL: %v", pat, ks)
		}
	}
	// The index entry of the deleted key goes at the next scan over it.
	if raw.ZScore(ctx, "{"+ns+"}:idx", "c").Err() != nil {
		t.Fatal("index entry of c vanished before a scan (test premise)")
	}
	scanAll(t, s, "", 100, nil)
	if idx := raw.ZRange(ctx, "{"+ns+"}:idx", 0, -1).Val(); !slices.Equal(idx, []string{"a", "b", "d"}) {
		t.Fatalf("index after cleanup: %v", idx)
	}
	// Writes after the snapshot is gone keep no history.
	put(t, s, "a", "v1")
	if ks := keysMatching(t, raw, "{"+ns+"}:h*"); len(ks) != 0 {
		t.Fatalf("history after all snapshots ended: %v", ks)
	}
}

func TestFinishedScanReleasesSnapshot(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	s := openStore(t, addr, ns, nil) // default 5 min TTL: nothing here waits for it
	raw := rawClient(t, addr)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		put(t, s, k, "v0")
	}
	openScan := func() string {
		p, err := s.Scan(ctx, locstore.ScanRequest{Limit: 1})
		if err != nil || p.Next == "" {
			t.Fatalf("first page: %+v %v", p, err)
		}
		return p.Next
	}
	finish := func(cursor string) {
		for cursor != "" {
			p, err := s.Scan(ctx, locstore.ScanRequest{Limit: 1, Cursor: cursor})
			if err != nil || p.Expired {
				t.Fatalf("scan: %+v %v", p, err)
			}
			cursor = p.Next
		}
	}
	hist := func(key string) int64 { return raw.ZCard(ctx, "{"+ns+"}:h:"+key).Val() }

	c1 := openScan()
	vb1 := put(t, s, "b", "v1") // replaces a record the open snapshot sees: kept
	if hist("b") != 1 {
		t.Fatalf("history of b: %d", hist("b"))
	}
	finish(c1)
	if ks := keysMatching(t, raw, "{"+ns+"}:snap*"); len(ks) != 0 {
		t.Fatalf("finished scan left %v", ks)
	}
	put(t, s, "a", "v1") // no snapshot open: no history
	if hist("a") != 0 {
		t.Fatalf("history of a with no open snapshot: %d", hist("a"))
	}
	// A later snapshot makes b's old entry useless; the next history append
	// on b trims it together with its value.
	c2 := openScan()
	put(t, s, "b", "v2")
	// Only the entry of v1 (durable, hence "<seq>:") is left.
	if h := raw.ZRange(ctx, "{"+ns+"}:h:b", 0, -1).Val(); !slices.Equal(h, []string{vb1 + ":"}) {
		t.Fatalf("history of b after trim: %v, want [%s:]", h, vb1)
	}
	if ks := keysMatching(t, raw, "{"+ns+"}:hv:*"); len(ks) != 1 {
		t.Fatalf("history values after trim: %v", ks)
	}
	finish(c2)
}

// The cursor key is per namespace and kept in Redis: another Store instance
// on the same namespace (another process) continues a scan; an instance on
// another namespace gets Expired.
func TestCursorAcrossInstances(t *testing.T) {
	ctx := context.Background()
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	a := openStore(t, addr, ns, nil)
	var muts []locstore.Mutation
	for i := 0; i < 25; i++ {
		muts = append(muts, locstore.Put(fmt.Sprintf("x:%02d", i), []byte("v")))
	}
	if res, err := a.Write(ctx, locstore.WriteRequest{Mutations: muts}); err != nil || !res.Applied {
		t.Fatalf("seed: %+v %v", res, err)
	}
	first, err := a.Scan(ctx, locstore.ScanRequest{Prefix: "x:", Limit: 10})
	if err != nil || first.Next == "" || len(first.Items) != 10 {
		t.Fatalf("first page: %d items, next %q, %v", len(first.Items), first.Next, err)
	}
	b := openStore(t, addr, ns, nil)
	seen := len(first.Items)
	for cur := first.Next; cur != ""; {
		p, err := b.Scan(ctx, locstore.ScanRequest{Prefix: "x:", Limit: 10, Cursor: cur})
		if err != nil || p.Expired {
			t.Fatalf("continuation on another instance: expired %v, %v", p.Expired, err)
		}
		seen += len(p.Items)
		cur = p.Next
	}
	if seen != 25 {
		t.Fatalf("saw %d keys across two instances, want 25", seen)
	}
	second, err := a.Scan(ctx, locstore.ScanRequest{Prefix: "x:", Limit: 10})
	if err != nil || second.Next == "" {
		t.Fatal(err)
	}
	other := openStore(t, addr, ns+"-other", nil)
	if p, err := other.Scan(ctx, locstore.ScanRequest{Prefix: "x:", Limit: 10, Cursor: second.Next}); err != nil || !p.Expired {
		t.Fatalf("cursor on another namespace: expired %v, %v; want Expired", p.Expired, err)
	}
}

// --- index entries of expired records ----------------------------------------

// snapshotTTLStore opens a store of a fresh namespace with the given
// snapshot TTL and a raw client to inspect it.
func snapshotTTLStore(t *testing.T, ttl time.Duration) (*Store, *goredis.Client, string) {
	t.Helper()
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	return openStore(t, addr, ns, func(o *Options) { o.SnapshotTTL = ttl }), rawClient(t, addr), ns
}

func putExpiring(t *testing.T, s locstore.Store, key string, retention time.Duration) {
	t.Helper()
	mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.PutExpiring(key, []byte("x"), retention)}})
}

// waitGone waits until Redis has physically removed every key of the
// pattern (their PEXPIREAT passed).
func waitGone(t *testing.T, c *goredis.Client, pattern string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// EXISTS expires a key whose time passed; SCAN alone may still list it.
		n := 0
		for _, k := range keysMatching(t, c, pattern) {
			n += int(c.Exists(context.Background(), k).Val())
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d keys of %s still present after 10s", n, pattern)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An expiring record that simply expires must not keep its index entry for
// good: the framework writes two expiring records per creation and never
// scans their prefixes, so before {ns}:exp the index grew by two entries
// per creation forever (found measuring creations: 60,000 entries after
// 20,000 creations, the ZADDs into it ~7.6 µs each).
func TestExpiredRecordsLeaveTheIndex(t *testing.T) {
	if !strings.Contains(writeSrc, "'LIMIT', 0, "+strconv.Itoa(reapBatch)+")") {
		t.Fatalf("reapLua's LIMIT is not reapBatch (%d)", reapBatch)
	}
	const snapTTL = 50 * time.Millisecond
	s, raw, ns := snapshotTTLStore(t, snapTTL)
	ctx := context.Background()
	idx := func() []string { return raw.ZRange(ctx, "{"+ns+"}:idx", 0, -1).Val() }
	exp := func() []string { return raw.ZRange(ctx, "{"+ns+"}:exp", 0, -1).Val() }

	put(t, s, "durable", "d")
	const n = 2*reapBatch + 3
	for i := range n {
		putExpiring(t, s, fmt.Sprintf("old%02d", i), 30*time.Millisecond)
	}
	// One expiring record is put durable again before it expires: its data
	// key stays, so its index entry must stay.
	putExpiring(t, s, "revived", 30*time.Millisecond)
	put(t, s, "revived", "r")
	waitGone(t, raw, "{"+ns+"}:k:old*")
	if got := len(idx()); got != n+2 {
		t.Fatalf("before any later write the index has %d entries, want %d (premise)", got, n+2)
	}

	// Each later batch with an expiring record reaps at most reapBatch due
	// entries; three of them reap all n+1.
	for i := range 3 {
		putExpiring(t, s, fmt.Sprintf("new%d", i), time.Hour)
		want := max(n+2-(i+1)*reapBatch, 2) + i + 1
		if got := len(idx()); got != want {
			t.Fatalf("after expiring write %d: index has %d entries, want %d: %v", i, got, want, idx())
		}
	}
	if got, want := idx(), []string{"durable", "new0", "new1", "new2", "revived"}; !slices.Equal(got, want) {
		t.Fatalf("index %v, want %v", got, want)
	}
	if got, want := exp(), []string{"new0", "new1", "new2"}; !slices.Equal(got, want) {
		t.Fatalf("{ns}:exp %v, want %v", got, want)
	}
	// An expiring record deleted before it expires leaves {ns}:exp at once.
	del(t, s, "new1")
	if got, want := exp(), []string{"new0", "new2"}; !slices.Equal(got, want) {
		t.Fatalf("{ns}:exp after deleting new1: %v, want %v", got, want)
	}
	// A scan still lists exactly the live records.
	var keys []string
	for _, it := range scanAll(t, s, "", 100, nil) {
		keys = append(keys, it.Key)
	}
	if want := []string{"durable", "new0", "new2", "revived"}; !slices.Equal(keys, want) {
		t.Fatalf("scan %v, want %v", keys, want)
	}
}

// A key deleted while a snapshot can see it keeps its index entry for its
// history; once the history is gone a later expiring write reaps it.
func TestDeletedKeysIndexEntryGoesWithItsHistory(t *testing.T) {
	const snapTTL = 300 * time.Millisecond
	s, raw, ns := snapshotTTLStore(t, snapTTL)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		put(t, s, k, "v")
	}
	p, err := s.Scan(ctx, locstore.ScanRequest{Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %+v %v", p, err)
	}
	del(t, s, "b")
	if raw.ZScore(ctx, "{"+ns+"}:idx", "b").Err() != nil || raw.Exists(ctx, "{"+ns+"}:h:b").Val() != 1 {
		t.Fatal("b's history or index entry missing while the snapshot is open (premise)")
	}
	if raw.ZScore(ctx, "{"+ns+"}:exp", "b").Err() != nil {
		t.Fatal("deleted b with history is not scheduled in {ns}:exp")
	}
	// The history outlives the instant it was scheduled for (as when it is
	// extended): a reap at that instant keeps the entry and looks again later.
	if !raw.PExpire(ctx, "{"+ns+"}:h:b", snapTTL+time.Second).Val() {
		t.Fatal("PEXPIRE of b's history")
	}
	time.Sleep(snapTTL + 300*time.Millisecond) // past b's scheduled instant
	putExpiring(t, s, "e1", time.Hour)
	if raw.ZScore(ctx, "{"+ns+"}:idx", "b").Err() != nil {
		t.Fatal("b's index entry reaped while its history exists")
	}
	score := raw.ZScore(ctx, "{"+ns+"}:exp", "b")
	if score.Err() != nil || int64(score.Val()) <= time.Now().UnixMilli() {
		t.Fatalf("b not rescheduled to its history's end: %v", score)
	}
	waitGone(t, raw, "{"+ns+"}:h:b")
	time.Sleep(20 * time.Millisecond) // the rescheduled instant is the history's end + 1 ms
	putExpiring(t, s, "e2", time.Hour)
	if got, want := raw.ZRange(ctx, "{"+ns+"}:idx", 0, -1).Val(), []string{"a", "c", "e1", "e2"}; !slices.Equal(got, want) {
		t.Fatalf("index %v, want %v", got, want)
	}
}

// --- refusals ----------------------------------------------------------------

// A Redis that refuses writes outright — at its maxmemory, fewer replicas
// than min-replicas-to-write, a read-only replica — makes Write fail saying
// what to do about it; nothing is written, reads go on, and writes work
// again once the cause is gone. Out of memory is ErrWriteRefused (the
// framework stops asking); a read-only replica (a failover until the client
// reaches the new master) and too few replicas (one reconnecting) pass by
// themselves, and stay ordinary failures that the framework retries.
func TestWriteRefusedByRedis(t *testing.T) {
	srv := testredis.NewServer(t)
	ctx := context.Background()
	raw := rawClient(t, srv.Addr)
	cases := []struct {
		name       string
		set, unset []any
		hint       string
		lasting    bool
	}{
		{"out of memory", []any{"CONFIG", "SET", "maxmemory", "1"}, []any{"CONFIG", "SET", "maxmemory", "0"}, "raise maxmemory", true},
		{"too few replicas", []any{"CONFIG", "SET", "min-replicas-to-write", "1"}, []any{"CONFIG", "SET", "min-replicas-to-write", "0"}, "min-replicas-to-write", false},
		{"read-only replica", []any{"REPLICAOF", "127.0.0.1", "1"}, []any{"REPLICAOF", "NO", "ONE"}, "read-only replica", false},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, srv.Addr, fmt.Sprintf("refused-%d", i), nil)
			ver := put(t, s, "a", "before")
			if err := raw.Do(ctx, tc.set...).Err(); err != nil {
				t.Fatal(err)
			}
			undo := func() {
				if err := raw.Do(ctx, tc.unset...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			defer undo()
			req := locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("a", ver)},
				Mutations: []locstore.Mutation{locstore.Put("a", []byte("after")), locstore.Put("b", []byte("new"))}}
			_, err := s.Write(ctx, req)
			if errors.Is(err, locstore.ErrWriteRefused) != tc.lasting || !errors.Is(err, locstore.ErrUnavailable) || !strings.Contains(err.Error(), tc.hint) {
				t.Fatalf("Write: %v, want a failure saying %q (a lasting refusal: %v)", err, tc.hint, tc.lasting)
			}
			t.Log(err)
			for key, want := range map[string]string{"a": "before", "b": ""} {
				rr, err := s.Read(ctx, key)
				if err != nil {
					t.Fatalf("read %s while writes are refused: %v", key, err)
				}
				if string(rr.Value) != want || (want == "") == rr.Found {
					t.Errorf("%s = %q (found %v) after the refused write, want %q", key, rr.Value, rr.Found, want)
				}
			}
			undo()
			if res, err := s.Write(ctx, req); err != nil || !res.Applied {
				t.Fatalf("Write once the cause is gone: %+v %v", res, err)
			}
		})
	}
}

package redis

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
)

// breakingConn is a client connection that, once armed, lets one command
// containing marker reach the server, gives the server time to run it, and
// then breaks: the client reads io.EOF instead of the reply — a server
// that died, or a connection reset, after it applied the command.
type breakingConn struct {
	net.Conn
	marker *atomic.Pointer[[]byte]
	armed  *atomic.Bool // the next command containing marker breaks its connection
	broken atomic.Bool
	sent   *atomic.Int32 // commands containing marker written, on any connection
}

func (c *breakingConn) Write(b []byte) (int, error) {
	if c.broken.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Write(b)
	if m := c.marker.Load(); m != nil && bytes.Contains(b, *m) {
		c.sent.Add(1)
		if c.armed.CompareAndSwap(true, false) {
			time.Sleep(50 * time.Millisecond) // the server runs it
			c.broken.Store(true)
		}
	}
	return n, err
}

func (c *breakingConn) Read(b []byte) (int, error) {
	if c.broken.Load() {
		return 0, io.EOF
	}
	return c.Conn.Read(b)
}

// breakingCluster is a Cluster client on addr, built as the providers build
// theirs (redisconn.NewClient: no client retries, context deadlines, the
// default MaxRedirects), whose next command containing marker, once arm is
// called, applies on the server and loses its reply. sent counts the
// commands containing the armed marker that were written.
func breakingCluster(t *testing.T, addr string) (client *goredis.ClusterClient, arm func(marker string), sent *atomic.Int32) {
	var marked atomic.Pointer[[]byte]
	var armed atomic.Bool
	sent = new(atomic.Int32)
	client = goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs: []string{addr}, MaxRetries: -1, ContextTimeoutEnabled: true, Protocol: 2,
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second,
		Dialer: func(ctx context.Context, network, a string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, a)
			if err != nil {
				return nil, err
			}
			return &breakingConn{Conn: c, marker: &marked, armed: &armed, sent: sent}, nil
		},
	})
	t.Cleanup(func() { _ = client.Close() })
	arm = func(marker string) {
		sent.Store(0)
		m := []byte(marker)
		marked.Store(&m)
		armed.Store(true)
	}
	return client, arm, sent
}

// On a Redis Cluster, go-redis's ClusterClient sends a command again after
// a broken connection (io.EOF is retryable, up to MaxRedirects, 3 by
// default — MaxRetries -1 covers only the per-node clients) unless the
// command is NoRetry. The Location Store's scripts are NoRetry
// (noRetryCmd): a write whose reply was lost after it applied is reported
// as an unknown outcome (ErrUnavailable) and applied once — never a second
// time, and a conditional write never comes back as a Conflict with its own
// first application. The Relocation Store's commands are not NoRetry and
// are sent again; every one of its operations is idempotent by contract
// (a Put of the same bytes is Stored or AlreadyStored, never Conflict), so
// the re-send reports the first application as AlreadyStored and changes
// nothing else (docs/store-relocation.md).
func TestClusterResendAfterABrokenConnection(t *testing.T) {
	addr := startClusterNode(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		acks int // replica_acks, with no replica: the first write waits (WAIT on the slot's master), the next go on without
	}{{"location store", 0}, {"location store waiting for a replica", 1}, {"location store with its replicas behind", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			client, arm, sent := breakingCluster(t, addr)
			s, err := NewWithClient(client, Options{Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Second,
				ReplicaAcks: tc.acks, ReplicaAckTimeout: 100 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var before string
			if tc.name == "location store waiting for a replica" {
				// The script loaded, nothing judged yet: this write waits.
				if err := client.ScriptLoad(ctx, writeScript.src).Err(); err != nil {
					t.Fatal(err)
				}
				v, err := client.Get(ctx, s.seqK).Result()
				if errors.Is(err, goredis.Nil) {
					v, err = "0", nil
				}
				if err != nil {
					t.Fatal(err)
				}
				before = v
			} else {
				before = put(t, s, "other", "x")
			}
			if got := s.ReplicasBehind(); got != (tc.name == "location store with its replicas behind") {
				t.Fatalf("replicas behind: %v", got)
			}
			arm("evalsha")
			res, err := s.Write(ctx, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfMissing("k")},
				Mutations: []locstore.Mutation{locstore.Put("k", []byte("v"))}})
			if err == nil {
				t.Fatalf("a write whose reply was lost: %+v and no error (applied %v); want an unknown outcome — a Conflict here is the write's own first application, sent again",
					res, res.Applied)
			}
			if !errors.Is(err, locstore.ErrUnavailable) {
				t.Fatalf("a write whose reply was lost: %v, want ErrUnavailable (outcome unknown)", err)
			}
			if n := sent.Load(); n != 1 {
				t.Fatalf("the write was sent %d times", n)
			}
			r, err := s.Read(ctx, "k")
			if err != nil || !r.Found {
				t.Fatalf("read k: %+v %v; the write applied on the server", r, err)
			}
			b, _ := strconv.ParseInt(before, 10, 64)
			if v, _ := strconv.ParseInt(r.Version, 10, 64); v != b+1 {
				t.Fatalf("k's version %s after %s: the write drew more than one version", r.Version, before)
			}
			seq, err := client.Get(ctx, s.seqK).Int64()
			if err != nil || seq != b+1 {
				t.Fatalf("commit sequence %d (%v) after one write from %d: applied more than once", seq, err, b)
			}
		})
	}
	t.Run("relocation store", func(t *testing.T) {
		client, arm, sent := breakingCluster(t, addr)
		s, err := relocredis.NewWithClient(client, relocredis.Options{Namespace: testredis.Namespace(t), OperationTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		payload := []byte("activation payload")
		// The script loaded first: a NOSCRIPT answer would not have run it.
		if _, err := s.Put(ctx, "warm", payload, time.Minute); err != nil {
			t.Fatal(err)
		}
		arm("evalsha")
		res, err := s.Put(ctx, "ref", payload, time.Minute)
		t.Logf("Put whose first reply was lost: %v, %v (the command was written %d times)", res.Outcome, err, sent.Load())
		switch {
		case err != nil:
			if !errors.Is(err, relocstore.ErrUnavailable) {
				t.Fatalf("Put: %v, want ErrUnavailable (outcome unknown)", err)
			}
		case res.Outcome == relocstore.Conflict:
			t.Fatal("Put answered Conflict with its own first application")
		}
		r, err := s.Read(ctx, "ref")
		if err != nil || !r.Found || !bytes.Equal(r.Bytes, payload) {
			t.Fatalf("read back: found %v, %v", r.Found, err)
		}
		// A retry by the caller is safe whatever happened.
		if res, err := s.Put(ctx, "ref", payload, time.Minute); err != nil || res.Outcome != relocstore.AlreadyStored {
			t.Fatalf("the caller's retry: %v, %v; want AlreadyStored", res.Outcome, err)
		}
	})
}

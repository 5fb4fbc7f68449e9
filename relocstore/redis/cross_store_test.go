package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	locredis "github.com/meshnode/meshnode/locstore/redis"
	"github.com/meshnode/meshnode/relocstore"
	relocredis "github.com/meshnode/meshnode/relocstore/redis"
)

// The Location Store and the Relocation Store are separate stores (§1.2,
// §10): they may share one Redis (with different namespaces, or even one
// namespace, since their key segments differ), share one client, or live on
// two servers. These tests run the §10 order against the real Location Store
// provider in each arrangement: store and re-verify the payload, CAS the
// location record to point at it, resolve it back, record end of use, then
// delete the payload.

type pair struct {
	loc   locstore.Store
	reloc relocstore.Store
}

// cycle runs one full use of a payload through both stores and checks what
// each store observes.
func cycle(t *testing.T, p pair, key, ref string, payload []byte) {
	t.Helper()
	ctx := t.Context()

	// 1. Store the payload and re-verify it before anything points at it.
	if r, err := p.reloc.Put(ctx, ref, payload, time.Hour); err != nil || r.Outcome != relocstore.Stored {
		t.Fatalf("relocation Put = %+v, %v", r, err)
	}
	if r, err := p.reloc.Read(ctx, ref); err != nil || !r.Found || !bytes.Equal(r.Bytes, payload) {
		t.Fatalf("relocation re-verify = found %v, %v", r.Found, err)
	}
	sum := sha256.Sum256(payload)
	record := []byte(ref + "\x00" + hex.EncodeToString(sum[:]))

	// 2. CAS the location record to point at the reference.
	w, err := p.loc.Write(ctx, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfMissing(key)},
		Mutations:  []locstore.Mutation{locstore.Put(key, record)},
	})
	if err != nil || !w.Applied {
		t.Fatalf("location CAS = %+v, %v", w, err)
	}

	// 3. Resolve: location record -> reference -> bytes, checksum verified.
	lr, err := p.loc.Read(ctx, key)
	if err != nil || !lr.Found {
		t.Fatalf("location Read = %+v, %v", lr, err)
	}
	gotRef, gotSum, _ := strings.Cut(string(lr.Value), "\x00")
	rr, err := p.reloc.Read(ctx, gotRef)
	if err != nil || !rr.Found {
		t.Fatalf("relocation Read of the referenced payload = %+v, %v", rr, err)
	}
	if s := sha256.Sum256(rr.Bytes); hex.EncodeToString(s[:]) != gotSum {
		t.Fatal("referenced payload does not match the checksum in the location record")
	}

	// 4. End of use is committed in the Location Store first, then the
	// payload goes.
	w, err = p.loc.Write(ctx, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion(key, lr.Version)},
		Mutations:  []locstore.Mutation{locstore.Delete(key)},
	})
	if err != nil || !w.Applied {
		t.Fatalf("location end-of-use = %+v, %v", w, err)
	}
	if err := p.reloc.Delete(ctx, ref); err != nil {
		t.Fatalf("relocation Delete: %v", err)
	}
	if r, err := p.reloc.Read(ctx, ref); err != nil || r.Found {
		t.Fatalf("payload still readable after Delete: %+v, %v", r, err)
	}
	if r, err := p.loc.Read(ctx, key); err != nil || r.Found {
		t.Fatalf("location record still there: %+v, %v", r, err)
	}
}

// scanAll lists every key the Location Store's scan returns.
func scanAll(t *testing.T, s locstore.Store) []string {
	t.Helper()
	var keys []string
	req := locstore.ScanRequest{Limit: 1000}
	for {
		page, err := s.Scan(t.Context(), req)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if page.Expired {
			t.Fatal("scan snapshot expired")
		}
		for _, it := range page.Items {
			keys = append(keys, it.Key)
		}
		if page.Next == "" {
			return keys
		}
		req.Cursor = page.Next
	}
}

func newLoc(t *testing.T, addr, ns string) *locredis.Store {
	t.Helper()
	s, err := locredis.New(t.Context(), locredis.Options{Addrs: []string{addr}, Namespace: ns})
	if err != nil {
		t.Fatalf("locstore redis New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newReloc(t *testing.T, addr, ns string) *relocredis.Store {
	t.Helper()
	s := newStore(t, relocredis.Options{Addrs: []string{addr}, Namespace: ns})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// bothKinds runs cycle, keeping one payload and one record alive
// afterwards, and checks each store sees only its own entries.
func bothKinds(t *testing.T, p pair) {
	t.Helper()
	ctx := t.Context()
	cycle(t, p, "loc/one", "reloc/one", []byte("creation info + first message"))
	cycle(t, p, "loc/large", "reloc/large", bytes.Repeat([]byte("0123456789abcdef"), 64<<10))

	if r, err := p.reloc.Put(ctx, "reloc/kept", []byte("kept"), time.Hour); err != nil || r.Outcome != relocstore.Stored {
		t.Fatalf("Put = %+v, %v", r, err)
	}
	if w, err := p.loc.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("loc/kept", []byte("kept"))}}); err != nil || !w.Applied {
		t.Fatalf("Write = %+v, %v", w, err)
	}
	if keys := scanAll(t, p.loc); len(keys) != 1 || keys[0] != "loc/kept" {
		t.Fatalf("Location Store scan sees %q, want only its own record", keys)
	}
	if r, err := p.loc.Read(ctx, "reloc/kept"); err != nil || r.Found {
		t.Fatalf("Location Store sees the relocation payload: %+v, %v", r, err)
	}
	if r, err := p.reloc.Read(ctx, "loc/kept"); err != nil || r.Found {
		t.Fatalf("Relocation Store sees the location record: %+v, %v", r, err)
	}
}

// keysIn lists the server's keys inside the hash tag of ns.
func keysIn(t *testing.T, c *goredis.Client, ns string) []string {
	t.Helper()
	keys, err := c.Keys(t.Context(), "{"+ns+"}*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestCrossStoreOneServerTwoNamespaces(t *testing.T) {
	addr := testredis.Addr(t)
	locNS, relocNS := testredis.Namespace(t)+"-loc", testredis.Namespace(t)+"-reloc"
	bothKinds(t, pair{loc: newLoc(t, addr, locNS), reloc: newReloc(t, addr, relocNS)})

	c := rawClient(t, addr)
	for _, k := range keysIn(t, c, locNS) {
		if strings.HasPrefix(k, "{"+locNS+"}:rs1:") {
			t.Errorf("relocation key %q in the Location Store namespace", k)
		}
	}
	rk := keysIn(t, c, relocNS)
	if len(rk) == 0 {
		t.Fatal("no relocation keys found")
	}
	for _, k := range rk {
		if !strings.HasPrefix(k, "{"+relocNS+"}:rs1:") {
			t.Errorf("key %q in the Relocation Store namespace is not a relocation key", k)
		}
	}
}

// One namespace for both stores also works: the Relocation Store only uses
// keys under "{ns}:rs1:", which no Location Store key starts with.
func TestCrossStoreOneServerSameNamespace(t *testing.T) {
	addr := testredis.Addr(t)
	ns := testredis.Namespace(t)
	bothKinds(t, pair{loc: newLoc(t, addr, ns), reloc: newReloc(t, addr, ns)})
}

// One client shared by both stores: closing either store leaves the client
// to its owner.
func TestCrossStoreSharedClient(t *testing.T) {
	addr := testredis.Addr(t)
	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	loc, err := locredis.NewWithClient(client, locredis.Options{Namespace: testredis.Namespace(t) + "-loc"})
	if err != nil {
		t.Fatal(err)
	}
	reloc, err := relocredis.NewWithClient(client, relocredis.Options{Namespace: testredis.Namespace(t) + "-reloc"})
	if err != nil {
		t.Fatal(err)
	}
	bothKinds(t, pair{loc: loc, reloc: reloc})
	if err := reloc.Close(); err != nil {
		t.Fatal(err)
	}
	if r, err := loc.Read(t.Context(), "loc/kept"); err != nil || !r.Found {
		t.Fatalf("Location Store after the Relocation Store closed: %+v, %v", r, err)
	}
	if err := loc.Close(); err != nil {
		t.Fatal(err)
	}
}

// Two servers: each store's keys live only on its own server, and losing the
// Relocation Store's server is a provider failure there while the Location
// Store carries on.
func TestCrossStoreTwoServers(t *testing.T) {
	locAddr := testredis.Addr(t)
	relocSrv := testredis.NewServer(t)
	ns := testredis.Namespace(t)
	p := pair{loc: newLoc(t, locAddr, ns), reloc: newReloc(t, relocSrv.Addr, ns)}
	bothKinds(t, p)

	if k := rawClient(t, locAddr).Keys(t.Context(), "{"+ns+"}:rs1:*").Val(); len(k) != 0 {
		t.Errorf("relocation keys on the Location Store's server: %v", k)
	}
	for _, k := range rawClient(t, relocSrv.Addr).Keys(t.Context(), "*").Val() {
		if !strings.HasPrefix(k, "{"+ns+"}:rs1:") {
			t.Errorf("non-relocation key %q on the Relocation Store's server", k)
		}
	}

	relocSrv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := p.reloc.Read(ctx, "reloc/kept"); !errors.Is(err, relocstore.ErrUnavailable) {
		t.Fatalf("Relocation Store with its server down: %v, want ErrUnavailable", err)
	}
	if r, err := p.loc.Read(ctx, "loc/kept"); err != nil || !r.Found {
		t.Fatalf("Location Store after the other server stopped: %+v, %v", r, err)
	}
}

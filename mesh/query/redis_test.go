package query

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// The §7.4 state tables and the snapshot-under-writers scenario already run
// on Redis through forEachBackend; these cover what is Redis-specific.

func TestRedisPaging(t *testing.T) {
	b := redisBackend(t)
	putLease(t, b.store, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("user", 2500) {
		objs = append(objs, obj{id: id})
	}
	for _, id := range ids("room", 300) {
		objs = append(objs, obj{id: id, kind: record.ObjectInstanceSpot, typ: "Room"})
	}
	all := seed(t, b.store, objs...)
	checkPaging(t, b.store, all, 2500, []int{7, 100, 1000})
}

// TestRedisContinuationOtherInstance: the Redis provider's cursors belong to
// the Store instance that issued them (docs/store-redis.md), so a
// continuation carried to another process — "ctl list" run twice — is
// ErrScanExpired with the restart advice, never a wrong page.
func TestRedisContinuationOtherInstance(t *testing.T) {
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	a := redisStore(t, addr, ns)
	putLease(t, a, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("u", 30) {
		objs = append(objs, obj{id: id})
	}
	seed(t, a, objs...)
	req := ListRequest{Kind: record.ObjectActor, Limit: 10}
	first, err := List(context.Background(), a, req)
	if err != nil || first.Next == "" || len(first.Entries) != 10 {
		t.Fatalf("%d entries, %v", len(first.Entries), err)
	}
	b := redisStore(t, addr, ns)
	req.Continuation = first.Next
	p, err := List(context.Background(), b, req)
	if !errors.Is(err, ErrScanExpired) || len(p.Entries) != 0 {
		t.Fatalf("other instance: err = %v, %d entries; want ErrScanExpired", err, len(p.Entries))
	}
	if !strings.Contains(err.Error(), "restart from the first page") {
		t.Fatalf("message: %v", err)
	}
	// The issuing instance continues the cycle.
	got := keysOf(t, append([]Page{first}, collect(t, Reader{Store: a}, req)...))
	if len(got) != 30 {
		t.Fatalf("%d rows", len(got))
	}
}

// TestRedisServerDown: a real outage, not an injected one: the server stops
// between two pages. Locate and List answer ErrUnavailable, never a partial
// page.
func TestRedisServerDown(t *testing.T) {
	srv := testredis.NewServer(t)
	st := redisStore(t, srv.Addr, testredis.Namespace(t))
	putLease(t, st, "node-1", 5, 0)
	var objs []obj
	for _, id := range ids("u", 30) {
		objs = append(objs, obj{id: id})
	}
	seed(t, st, objs...)
	req := ListRequest{Kind: record.ObjectActor, Limit: 10}
	first, err := List(context.Background(), st, req)
	if err != nil || first.Next == "" {
		t.Fatal(err)
	}
	srv.Stop()
	req.Continuation = first.Next
	p, err := List(context.Background(), st, req)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, locstore.ErrUnavailable) || !reflect.DeepEqual(p, Page{}) {
		t.Fatalf("list: err = %v, page %+v", err, p)
	}
	req.Continuation = ""
	if p, err := List(context.Background(), st, req); !errors.Is(err, ErrUnavailable) || !reflect.DeepEqual(p, Page{}) {
		t.Fatalf("first page: err = %v", err)
	}
	if e, ok, err := Locate(context.Background(), st, record.IdentityActor, "u:00001"); !errors.Is(err, ErrUnavailable) || ok || !reflect.DeepEqual(e, Entry{}) {
		t.Fatalf("locate: %v %v %+v", err, ok, e)
	}
}

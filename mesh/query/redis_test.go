package query

import (
	"context"
	"errors"
	"reflect"
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

// TestRedisContinuationOtherInstance: the Redis provider's cursor key and
// snapshots are per namespace and live in Redis (docs/store-redis.md), so a
// continuation carried to another Store instance — "ctl list" run twice —
// continues the same snapshot, and the cycle has every row exactly once.
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
	got := keysOf(t, append([]Page{first}, collect(t, Reader{Store: b}, req)...))
	if len(got) != 30 {
		t.Fatalf("%d rows across two instances, want 30", len(got))
	}
	// Another namespace's instance cannot use it.
	c := redisStore(t, addr, ns+"-other")
	if _, err := List(context.Background(), c, req); !errors.Is(err, ErrScanExpired) && !errors.Is(err, ErrInvalidContinuation) {
		t.Fatalf("other namespace: err = %v, want the restart advice", err)
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

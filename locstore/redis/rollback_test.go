package redis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

func TestSeqWatch(t *testing.T) {
	type step struct {
		before   int // -1: take it now; else the value a write took earlier
		versions []string
		lost     bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"writes draw larger numbers", []step{{-1, []string{"5"}, false}, {-1, []string{"9", "10"}, false}, {-1, []string{"11"}, false}}},
		{"a delete draws no version to judge", []step{{-1, []string{"7"}, false}, {-1, []string{""}, false}, {-1, nil, false}}},
		{"overlapping writes are not compared", []step{{-1, []string{"20"}, false}, {0, []string{"12"}, false}, {-1, []string{"21"}, false}}},
		{"a number already reached is a rollback", []step{{-1, []string{"30"}, false}, {-1, []string{"30"}, true}}},
		{"a smaller number is a rollback", []step{{-1, []string{"30"}, false}, {-1, []string{"3"}, true}}},
		{"the highest version of a batch counts", []step{{-1, []string{"40", "41"}, false}, {-1, []string{"", "42"}, false}}},
		{"once lost, every write is refused", []step{{-1, []string{"50"}, false}, {-1, []string{"2"}, true}, {-1, []string{"99"}, true}, {-1, nil, true}}},
		{"a version that is no number is not judged", []step{{-1, []string{"8"}, false}, {-1, []string{"x"}, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w seqWatch
			for i, st := range tc.steps {
				b := uint64(st.before)
				if st.before < 0 {
					b = w.before()
				}
				err := w.drew(b, st.versions)
				if got := err != nil; got != st.lost {
					t.Fatalf("step %d (%v): err %v, want lost %v", i, st.versions, err, st.lost)
				}
				if err != nil && !errors.Is(err, locstore.ErrDataLost) {
					t.Fatalf("step %d: %v is not ErrDataLost", i, err)
				}
				if (w.err() != nil) != st.lost {
					t.Fatalf("step %d: sticky state %v, want lost %v", i, w.err(), st.lost)
				}
			}
		})
	}
}

// A namespace restored from an older copy while a Store uses it (what a
// Sentinel failover to a replica that missed the last writes does): the
// marker and every record look fine, only the commit sequence tells. The
// Store's next write reports the data loss, and from then on it refuses
// everything; a new Store (a restarted process) works on the namespace.
func TestRollbackIsDataLost(t *testing.T) {
	s := newTestStore(t, nil)
	ctx := context.Background()
	addr := firstAddr(t, s)
	put(t, s, "a", "1")
	backup := testredis.TakeSnapshot(t, addr, s.prefix)
	for i := 0; i < 5; i++ {
		put(t, s, "b", "later")
	}
	testredis.RollBack(t, addr, backup)

	_, err := s.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("c", []byte("x"))}})
	var rb *RollbackError
	if !errors.Is(err, locstore.ErrDataLost) || !errors.Is(err, locstore.ErrUnavailable) || !errors.As(err, &rb) {
		t.Fatalf("write after the rollback: %v, want a data-lost provider error", err)
	}
	if rb.Drew > rb.Seen || !strings.Contains(err.Error(), "went back in time") || !strings.Contains(err.Error(), "restart this process") {
		t.Fatalf("rollback error %+v: %v", rb, err)
	}
	// Sticky: reads and scans too.
	if _, err := s.Read(ctx, "a"); !errors.Is(err, locstore.ErrDataLost) {
		t.Fatalf("read after the rollback: %v", err)
	}
	if _, err := s.Scan(ctx, locstore.ScanRequest{Limit: 10}); !errors.Is(err, locstore.ErrDataLost) {
		t.Fatalf("scan after the rollback: %v", err)
	}
	// A new process starts from what the store holds now.
	fresh := openStore(t, addr, s.ns, nil)
	put(t, fresh, "d", "after restart")
	if r, err := fresh.Read(ctx, "a"); err != nil || !r.Found {
		t.Fatalf("read on a new Store: %+v %v", r, err)
	}
}

// Concurrent writes of one Store never raise the alarm: only a write that
// began after another completed is compared with it.
func TestRollbackWatchConcurrentWrites(t *testing.T) {
	s := newTestStore(t, func(o *Options) { o.PoolSize = 32 })
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				_, err := s.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{
					locstore.Put("k"+string(rune('a'+g)), []byte("v")), locstore.Delete("gone")}})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func firstAddr(t *testing.T, s *Store) string {
	t.Helper()
	c, ok := s.client.(*goredis.Client)
	if !ok {
		t.Fatalf("client is %T", s.client)
	}
	return c.Options().Addr
}

func TestSeqWatchReads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		wrote  []string // versions of a write completed before the read
		before int      // -1: taken after the write; else this value
		reply  any
		lost   bool
	}{
		{"no write yet: nothing to judge", nil, -1, "0", false},
		{"the sequence where the write left it", []string{"12"}, -1, "12", false},
		{"the sequence past it", []string{"12"}, -1, "40", false},
		{"a read overlapping the write is not compared", []string{"12"}, 0, "3", false},
		{"the sequence below it: the store went back", []string{"12"}, -1, "11", true},
		{"the sequence gone (a store restarted empty)", []string{"12"}, -1, "0", true},
		{"not a number: not judged", []string{"12"}, -1, "x", false},
		{"not a string: not judged", []string{"12"}, -1, int64(3), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w seqWatch
			if err := w.drew(w.before(), tc.wrote); err != nil {
				t.Fatal(err)
			}
			b := uint64(tc.before)
			if tc.before < 0 {
				b = w.before()
			}
			err := w.saw(b, tc.reply)
			if got := err != nil; got != tc.lost {
				t.Fatalf("read of %v after a write of %v: err %v, want lost %v", tc.reply, tc.wrote, err, tc.lost)
			}
			if err == nil {
				return
			}
			var rb *RollbackError
			if !errors.Is(err, locstore.ErrDataLost) || !errors.As(err, &rb) || !rb.Read || !strings.Contains(err.Error(), "a read found the commit sequence") {
				t.Fatalf("%v (%+v), want a read's RollbackError", err, rb)
			}
			if w.err() == nil || w.drew(w.before(), []string{"99"}) == nil {
				t.Fatal("not sticky: a later write was let through")
			}
		})
	}
}

// A store restarted empty (no persistence, FLUSHALL) while a Store uses
// it: a read, not only the next write, reports the loss. Before, every
// read answered "absent" — objects not found, which an application takes
// for destroyed — until the node's next write or marker check.
func TestReadAfterTheStoreWasEmptiedIsDataLost(t *testing.T) {
	s := newTestStore(t, nil)
	ctx := context.Background()
	put(t, s, "a", "1")
	if r, err := s.Read(ctx, "a"); err != nil || !r.Found {
		t.Fatalf("read before: %+v %v", r, err)
	}
	// A second process of the namespace, so that each read call meets
	// the loss first in a Store of its own.
	other := openStore(t, firstAddr(t, s), s.ns, nil)
	put(t, other, "b", "2")
	rdb := goredis.NewClient(&goredis.Options{Addr: firstAddr(t, s)})
	defer rdb.Close()
	keys, err := rdb.Keys(ctx, s.prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("namespace keys: %v %v", keys, err)
	}
	if err := rdb.Del(ctx, keys...).Err(); err != nil {
		t.Fatal(err)
	}
	for _, read := range []struct {
		name string
		do   func() error
	}{
		{"ReadMany", func() error { _, err := other.ReadMany(ctx, []string{"a", "b"}); return err }},
		{"Read", func() error { _, err := s.Read(ctx, "a"); return err }},
	} {
		err := read.do()
		var rb *RollbackError
		if !errors.Is(err, locstore.ErrDataLost) || !errors.As(err, &rb) || !rb.Read {
			t.Fatalf("%s of an emptied namespace: %v, want a read's data-lost provider error", read.name, err)
		}
	}
	// A Store that never wrote has nothing to judge by: a new process
	// starts from what the store holds.
	fresh := openStore(t, firstAddr(t, s), s.ns, nil)
	if r, err := fresh.Read(ctx, "a"); err != nil || r.Found {
		t.Fatalf("read on a new Store: %+v %v", r, err)
	}
}

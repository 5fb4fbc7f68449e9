package directory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// node publishes one descriptor under its own lease.
type node struct {
	lease *testLease
	pub   *directory.Publisher
	desc  record.MeshNodeDescriptor
}

func newNode(t *testing.T, s locstore.Store, l *testLease, mesh string, rid []byte) *node {
	t.Helper()
	n := &node{lease: l, pub: newPublisher(t, s, l, nil, mesh, rid), desc: descriptor(mesh, rid, fmt.Sprintf("tcp://%x:1", rid))}
	mustPublish(t, n.pub, n.desc, directory.Published)
	return n
}

func rids(s directory.Snapshot) []string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, fmt.Sprintf("%s/%x", e.Descriptor.MeshName, e.Descriptor.RoutingID))
	}
	return out
}

func TestListFiltersDecodesAndChecksLeases(t *testing.T) {
	mem, clock := newMem(t)
	short := grantLease(t, mem, "owner-short", 1, leaseTTL)
	long := grantLease(t, mem, "owner-long", 2, 10*leaseTTL)
	newNode(t, mem, short, "a", []byte{0x03})
	newNode(t, mem, long, "a", []byte{0x01})
	newNode(t, mem, long, "a", []byte{0x02, 0x00})
	newNode(t, mem, short, "b", []byte{0x00})
	// Two values that must be skipped, not fail the list: garbage under the
	// descriptor prefix, and a valid descriptor copied to a wrong key.
	put(t, mem, "mesh-node:garbage", []byte("{"))
	copied, _ := stored(t, mem, mustKey(t, "a", []byte{0x01}))
	v, _ := copied.Encode()
	put(t, mem, "mesh-node:"+fmt.Sprintf("%064x", 1), v)

	for _, pageSize := range []int{1, 2, 1000} {
		snap, err := directory.List(context.Background(), mem, "a", pageSize)
		if err != nil {
			t.Fatalf("page %d: %v", pageSize, err)
		}
		if got, want := fmt.Sprint(rids(snap)), "[a/01 a/0200 a/03]"; got != want {
			t.Fatalf("page %d: entries %s, want %s", pageSize, got, want)
		}
		if !snap.Complete || snap.Undecodable != 2 || snap.ChangeNumber != 4 || snap.Attempts != 1 || snap.MeshName != "a" {
			t.Fatalf("page %d: snapshot %+v", pageSize, snap)
		}
		for _, e := range snap.Entries {
			wantExp := storeBase.Add(leaseTTL)
			if e.Descriptor.OwnerID == "owner-long" {
				wantExp = storeBase.Add(10 * leaseTTL)
			}
			if !e.LeaseValid || !e.LeaseExpiresAt.Equal(wantExp) || !e.LeaseCheckedAt.Equal(storeBase) {
				t.Fatalf("entry %x lease %v %v %v", e.Descriptor.RoutingID, e.LeaseValid, e.LeaseExpiresAt, e.LeaseCheckedAt)
			}
			if e.Key != mustKey(t, "a", e.Descriptor.RoutingID) || e.Version == "" {
				t.Fatalf("entry key %q version %q", e.Key, e.Version)
			}
		}
	}

	all, err := directory.List(context.Background(), mem, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(rids(all)), "[a/01 a/0200 a/03 b/00]"; got != want {
		t.Fatalf("all meshes: %s, want %s", got, want)
	}

	// The short lease runs out: its descriptors stay listed, not valid.
	clock.Advance(leaseTTL)
	snap, err := directory.List(context.Background(), mem, "a", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range snap.Entries {
		wantValid := e.Descriptor.OwnerID == "owner-long"
		if e.LeaseValid != wantValid || (!wantValid && !e.LeaseExpiresAt.IsZero()) {
			t.Fatalf("after expiry, %x: valid %v expires %v", e.Descriptor.RoutingID, e.LeaseValid, e.LeaseExpiresAt)
		}
	}
	// A new run of the same owner id with another generation is not the
	// descriptor's run.
	putLease(t, mem, "owner-short", 9, leaseTTL)
	snap, _ = directory.List(context.Background(), mem, "a", 10)
	for _, e := range snap.Entries {
		if e.Descriptor.OwnerID == "owner-short" && e.LeaseValid {
			t.Fatal("lease of another generation accepted")
		}
	}
}

func mustKey(t *testing.T, mesh string, rid []byte) string {
	t.Helper()
	k, err := record.MeshNodeKey(mesh, rid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestListRetriesWhenCounterMoves(t *testing.T) {
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	newNode(t, mem, l, "a", []byte{1})
	late := newPublisher(t, mem, l, nil, "a", []byte{2})

	// A publish lands while the first scan runs: that list is not used.
	hs.setScan(func(n int64, _ locstore.ScanRequest) (bool, error) {
		if n == 1 {
			mustPublish(t, late, descriptor("a", []byte{2}, "tcp://2:1"), directory.Published)
		}
		return false, nil
	})
	snap, err := directory.List(context.Background(), hs, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Attempts != 2 || len(snap.Entries) != 2 || snap.ChangeNumber != 2 {
		t.Fatalf("snapshot after a concurrent publish: %+v", snap)
	}

	// Publishing on every scan: never complete.
	rev := 0
	hs.setScan(func(n int64, req locstore.ScanRequest) (bool, error) {
		if req.Cursor == "" {
			rev++
			d := descriptor("a", []byte{2}, fmt.Sprintf("tcp://2:%d", rev+1))
			mustPublish(t, late, d, directory.Published)
		}
		return false, nil
	})
	_, err = directory.Lister{Store: hs, PageSize: 1, MaxAttempts: 3, Logger: quiet()}.List(context.Background(), "a")
	if !errors.Is(err, directory.ErrListChanged) {
		t.Fatalf("List = %v, want ErrListChanged", err)
	}
	if rev != 3 {
		t.Fatalf("%d attempts, want 3", rev)
	}
}

func TestListScanExpired(t *testing.T) {
	mem, _ := newMem(t)
	hs := &hookStore{Store: mem}
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	for i := byte(1); i <= 3; i++ {
		newNode(t, mem, l, "a", []byte{i})
	}
	// The cursor of the first walk expires on its second page.
	hs.setScan(func(n int64, req locstore.ScanRequest) (bool, error) { return n == 2, nil })
	snap, err := directory.List(context.Background(), hs, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Attempts != 2 || len(snap.Entries) != 3 {
		t.Fatalf("after ScanExpired: %+v", snap)
	}
	hs.setScan(func(_ int64, req locstore.ScanRequest) (bool, error) { return req.Cursor != "", nil })
	if _, err := directory.List(context.Background(), hs, "a", 1); !errors.Is(err, directory.ErrScanExpired) {
		t.Fatalf("List = %v, want ErrScanExpired", err)
	}
}

func TestListFailures(t *testing.T) {
	mem, _ := newMem(t)
	l := grantLease(t, mem, "owner-a", 1, leaseTTL)
	newNode(t, mem, l, "a", []byte{1})
	leaseKey, _ := l.Fence()

	args := map[string]func() error{
		"page size 0":    func() error { _, err := directory.List(context.Background(), mem, "a", 0); return err },
		"page size 1001": func() error { _, err := directory.List(context.Background(), mem, "a", 1001); return err },
		"NUL in mesh":    func() error { _, err := directory.List(context.Background(), mem, "a\x00b", 10); return err },
		"no store":       func() error { _, err := directory.List(context.Background(), nil, "a", 10); return err },
	}
	for name, f := range args {
		if err := f(); !errors.Is(err, directory.ErrInvalidArgument) {
			t.Fatalf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}

	tests := map[string]func(hs *hookStore){
		"scan fails": func(hs *hookStore) {
			hs.setScan(func(int64, locstore.ScanRequest) (bool, error) { return false, errReset })
		},
		"counter read fails": func(hs *hookStore) {
			hs.setRead(func(n int64, key string) error {
				if n == 2 {
					return errReset
				}
				return nil
			})
		},
		"lease read fails": func(hs *hookStore) {
			hs.setRead(func(_ int64, key string) error {
				if key == leaseKey {
					return errReset
				}
				return nil
			})
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			hs := &hookStore{Store: mem}
			setup(hs)
			snap, err := directory.List(context.Background(), hs, "a", 10)
			if !errors.Is(err, locstore.ErrUnavailable) || snap.Complete || snap.Entries != nil {
				t.Fatalf("List = %+v, %v; want a store failure and no partial list", snap, err)
			}
		})
	}

	corrupt := &hookStore{Store: mem}
	name, _ := record.DescriptorCounter(record.KindMeshNode)
	ck, _ := record.CounterKey(name)
	put(t, mem, ck, []byte("junk"))
	if _, err := directory.List(context.Background(), corrupt, "a", 10); !errors.Is(err, directory.ErrCounter) {
		t.Fatalf("List with a corrupt counter = %v", err)
	}
}

// TestListConcurrentPublishers lists while publishers keep changing their
// descriptors. Each publish bumps the counter by one and its publisher's
// revision by one, so a list taken at one point in time satisfies
// sum(revisions) == change number exactly; a list mixing two points in
// time almost never does.
func TestListConcurrentPublishers(t *testing.T) {
	mem, _ := newMem(t)
	const publishers, rounds, lists = 4, 40, 30
	pubs := make([]*node, publishers)
	for i := range pubs {
		l := grantLease(t, mem, fmt.Sprintf("owner-%d", i), record.Generation(i+1), time.Hour)
		pubs[i] = &node{lease: l, pub: newPublisher(t, mem, l, nil, "a", []byte{byte(i)}), desc: descriptor("a", []byte{byte(i)}, "tcp://x:1")}
	}
	var wg sync.WaitGroup
	errs := make(chan error, publishers+lists)
	for _, n := range pubs {
		wg.Add(1)
		go func(n *node) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				n.desc.Endpoint = fmt.Sprintf("tcp://x:%d", r+1)
				if res, err := n.pub.Publish(context.Background(), n.desc); err != nil || res.Outcome != directory.Published {
					errs <- fmt.Errorf("publish: %+v %v", res, err)
					return
				}
			}
		}(n)
	}
	complete := 0
	var mu sync.Mutex
	for i := 0; i < lists; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snap, err := directory.Lister{Store: mem, PageSize: 1, MaxAttempts: 2, Logger: quiet()}.List(context.Background(), "a")
			if errors.Is(err, directory.ErrListChanged) {
				return
			}
			if err != nil {
				errs <- err
				return
			}
			var sum record.Generation
			for _, e := range snap.Entries {
				sum += e.Descriptor.DescriptorRevision
			}
			if sum != snap.ChangeNumber {
				errs <- fmt.Errorf("list at change number %d has revisions summing to %d", snap.ChangeNumber, sum)
			}
			mu.Lock()
			complete++
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	final, err := directory.List(context.Background(), mem, "a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(final.Entries) != publishers || final.ChangeNumber != publishers*rounds {
		t.Fatalf("final list %d entries at change %d", len(final.Entries), final.ChangeNumber)
	}
	for _, e := range final.Entries {
		if e.Descriptor.DescriptorRevision != rounds || !bytes.Equal([]byte(e.Descriptor.Endpoint), []byte(fmt.Sprintf("tcp://x:%d", rounds))) {
			t.Fatalf("final entry %+v", e.Descriptor)
		}
	}
	t.Logf("%d of %d concurrent lists complete", complete, lists)
}

// RunStopped tells a run's clean stop from its descriptor: stopped (that
// very run) or gone; serving, draining, or a later run's descriptor do not
// (a route switch's barrier reads it, mesh/route_barrier.go).
func TestRunStopped(t *testing.T) {
	mem, _ := newMem(t)
	ctx := context.Background()
	rid := []byte{0x0a, 0x0b}
	ask := func() bool {
		t.Helper()
		stopped, err := directory.RunStopped(ctx, mem, "a", rid, 3)
		if err != nil {
			t.Fatal(err)
		}
		return stopped
	}
	if !ask() {
		t.Error("no descriptor: want stopped (an orderly stop removes it)")
	}
	for _, tc := range []struct {
		gen   record.Generation
		state record.State
		want  bool
	}{
		{3, record.StateServing, false},
		{3, record.StateDraining, false},
		{3, record.StateStopped, true},
		{4, record.StateStopped, false}, // another run's: says nothing of run 3
		{4, record.StateServing, false},
	} {
		d := descriptor("a", rid, "tcp://127.0.0.1:7000")
		d.LifecycleGeneration, d.State = tc.gen, tc.state
		v, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		put(t, mem, mustKey(t, "a", rid), v)
		if got := ask(); got != tc.want {
			t.Errorf("descriptor of run %d %s: stopped %v, want %v", tc.gen, tc.state, got, tc.want)
		}
	}
	put(t, mem, mustKey(t, "a", rid), []byte("{"))
	if _, err := directory.RunStopped(ctx, mem, "a", rid, 3); err == nil {
		t.Error("undecodable descriptor: no error")
	}
	if _, err := directory.RunStopped(ctx, mem, "a", nil, 3); !errors.Is(err, directory.ErrInvalidArgument) {
		t.Errorf("no rid: %v, want ErrInvalidArgument", err)
	}
}

package directory_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

var (
	watcherRID = []byte{0x0c}
	pausedRID  = []byte{0x0b}
	watcher    = &directory.Remover{OwnerID: "owner-w", RoutingID: watcherRID}
)

// removalWorld publishes two serving runs of mesh m on s: the watcher
// (owner-w, 0c) and the run it watches (owner-p, 0b), and returns the
// watched run.
func removalWorld(t *testing.T, s locstore.Store) *node {
	t.Helper()
	w := newNode(t, s, grantLease(t, s, "owner-w", 1, 3*time.Hour), "m", watcherRID)
	w.desc.State = record.StateServing
	mustPublish(t, w.pub, w.desc, directory.Published)
	p := newNode(t, s, grantLease(t, s, "owner-p", 2, 3*time.Hour), "m", pausedRID)
	p.desc.State = record.StateServing
	mustPublish(t, p.pub, p.desc, directory.Published)
	return p
}

// removalRecord reads the removal record of m/0b, if any.
func removalRecord(t *testing.T, s locstore.Store) (record.RemovedMeshNode, locstore.ReadResult) {
	t.Helper()
	key, err := record.RemovedMeshNodeKey("m", pausedRID)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := s.Read(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !rr.Found {
		return record.RemovedMeshNode{}, rr
	}
	r, err := record.DecodeRemovedMeshNode(rr.Value)
	if err != nil {
		t.Fatal(err)
	}
	return r, rr
}

// topology is what `meshnode ctl topology --mesh m` prints.
func topology(t *testing.T, s locstore.Store) string {
	t.Helper()
	l := directory.Lister{Store: s, PageSize: 1000, Logger: quiet()}
	snap, err := l.List(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	removed, err := l.ListRemoved(context.Background(), "m")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := directory.RenderTable(&b, directory.Rows(snap, removed...)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// rowOf returns the table line of RID rid ("" when there is none).
func rowOf(table string, rid []byte) string {
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == fmt.Sprintf("%x", rid) {
			return l
		}
	}
	return ""
}

// Only a watcher's removal of a run found without its lease (RemovedBy)
// writes a removal record, holding the descriptor as stored, when and by
// whom. A crashed run reclaimed past the reclaim age has shown as expired
// all that time, and a run that says stopped left in order: neither gets
// one.
func TestRemovalRecordOnlyOnTheWatcherPath(t *testing.T) {
	ctx := context.Background()
	key := mustKey(t, "m", pausedRID)
	tests := []struct {
		name    string
		stopped bool
		age     time.Duration
		remove  func(s locstore.Store) (directory.ReclaimResult, error)
		want    bool
	}{
		{name: "a watcher removes a run without its lease", age: leaseTTL, want: true,
			remove: func(s locstore.Store) (directory.ReclaimResult, error) {
				return directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{MinAge: time.Nanosecond, RemovedBy: watcher, Logger: quiet()})
			}},
		{name: "a watcher removes a run whose descriptor says stopped", stopped: true, age: leaseTTL,
			remove: func(s locstore.Store) (directory.ReclaimResult, error) {
				return directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{MinAge: time.Nanosecond, RemovedBy: watcher, Logger: quiet()})
			}},
		{name: "the reclaim round removes a crashed run past the reclaim age", age: directory.DefaultReclaimAge + time.Minute,
			remove: func(s locstore.Store) (directory.ReclaimResult, error) {
				return directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{Logger: quiet()})
			}},
		{name: "a reclaim scan removes a crashed run past the reclaim age", age: directory.DefaultReclaimAge + time.Minute,
			remove: func(s locstore.Store) (directory.ReclaimResult, error) {
				return directory.Reclaim(ctx, s, directory.ReclaimOptions{Logger: quiet()})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, clock := newMem(t)
			p := removalWorld(t, mem)
			if tt.stopped {
				p.desc.State = record.StateStopped
				mustPublish(t, p.pub, p.desc, directory.Published)
			}
			before, _ := stored(t, mem, key)
			p.lease.revoke()
			clock.Advance(tt.age)
			res, err := tt.remove(mem)
			if err != nil || res.Deleted != 1 {
				t.Fatalf("removal = %+v, %v; want the descriptor deleted", res, err)
			}
			r, rr := removalRecord(t, mem)
			if rr.Found != tt.want {
				t.Fatalf("removal record stored: %v, want %v", rr.Found, tt.want)
			}
			if !tt.want {
				return
			}
			want := record.RemovedMeshNode{Descriptor: before, RemovedAt: record.EpochMillisOf(rr.StoreNow),
				RemovedByOwnerID: "owner-w", RemovedByRoutingID: watcherRID}
			if !reflect.DeepEqual(r, want) {
				t.Fatalf("removal record\n%+v\nwant\n%+v", r, want)
			}
			if got := rr.ExpiresAt.Sub(rr.StoreNow); got != directory.RemovedRetention {
				t.Fatalf("removal record kept %v, want %v", got, directory.RemovedRetention)
			}
		})
	}
}

// A removed run shows in the topology as removed until it publishes
// again, and not again once it stopped in order afterwards; the record
// expires after RemovedRetention. advance moves the store's clock (nil on
// a real Redis: the expiry is then checked from the record's expiry).
func removalScenario(t *testing.T, s locstore.Store, advance func(time.Duration)) {
	ctx := context.Background()
	p := removalWorld(t, s)
	key := mustKey(t, "m", pausedRID)
	manual := advance != nil
	if !manual {
		// A real store's clock moves by itself: wait until it has moved a
		// little (a removal needs the descriptor older than MinAge, 1 ns,
		// in store milliseconds).
		advance = func(time.Duration) {
			t.Helper()
			start := time.Time{}
			for {
				rr, err := s.Read(ctx, "removal-test:clock")
				if err != nil {
					t.Fatal(err)
				}
				if start.IsZero() {
					start = rr.StoreNow
				} else if rr.StoreNow.Sub(start) >= 2*time.Millisecond {
					return
				}
			}
		}
	}
	p.lease.revoke() // paused past its TTL, its links up
	advance(leaseTTL)
	if res, err := directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{MinAge: time.Nanosecond, RemovedBy: watcher, Logger: quiet()}); err != nil || res.Deleted != 1 {
		t.Fatalf("watcher removal = %+v, %v", res, err)
	}
	table := topology(t, s)
	row := rowOf(table, pausedRID)
	if !strings.Contains(row, " removed ") || !strings.Contains(row, "ended (removed ") || !strings.Contains(row, "tcp://0b:1") {
		t.Fatalf("the removed run's row %q in\n%s", row, table)
	}
	if !strings.Contains(table, directory.RemovedNote) || !strings.Contains(rowOf(table, watcherRID), " serving ") {
		t.Fatalf("topology\n%s", table)
	}
	_, rr := removalRecord(t, s)
	if got := rr.ExpiresAt.Sub(rr.StoreNow); got <= 0 || got > directory.RemovedRetention {
		t.Fatalf("removal record expires in %v, want within %v", got, directory.RemovedRetention)
	}

	// It runs again: it reacquires its lease and publishes; the removal
	// record stays but is not shown.
	l3 := grantLease(t, s, "owner-p", 3, 3*time.Hour)
	back := newPublisher(t, s, l3, nil, "m", pausedRID)
	d := p.desc
	d.LeaseGeneration = 3
	mustPublish(t, back, d, directory.Published)
	table = topology(t, s)
	if row := rowOf(table, pausedRID); !strings.Contains(row, " serving ") || strings.Count(table, "tcp://0b:1") != 1 || strings.Contains(table, directory.RemovedNote) {
		t.Fatalf("a run that published again is not shown as it is now:\n%s", table)
	}
	if _, rr := removalRecord(t, s); !rr.Found {
		t.Fatal("the removal record is gone (it only stops being shown)")
	}

	// It stops in order: its descriptor and the old removal record go.
	d.State = record.StateStopped
	mustPublish(t, back, d, directory.Published)
	l3.revoke()
	if res, err := directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{Logger: quiet()}); err != nil || res.Deleted != 1 {
		t.Fatalf("orderly stop's removal = %+v, %v", res, err)
	}
	if table := topology(t, s); rowOf(table, pausedRID) != "" {
		t.Fatalf("a run that stopped in order shows again as removed:\n%s", table)
	}
	if _, rr := removalRecord(t, s); rr.Found {
		t.Fatal("the orderly stop left the old removal record")
	}
	if !manual {
		return
	}

	// Removed again; the record expires after RemovedRetention.
	l4 := grantLease(t, s, "owner-p", 4, 3*time.Hour)
	d.State, d.LeaseGeneration = record.StateServing, 4
	mustPublish(t, newPublisher(t, s, l4, nil, "m", pausedRID), d, directory.Published)
	l4.revoke()
	advance(leaseTTL)
	if res, err := directory.ReclaimKey(ctx, s, key, directory.ReclaimOptions{MinAge: time.Nanosecond, RemovedBy: watcher, Logger: quiet()}); err != nil || res.Deleted != 1 {
		t.Fatalf("second watcher removal = %+v, %v", res, err)
	}
	advance(10 * time.Minute)
	if row := rowOf(topology(t, s), pausedRID); !strings.Contains(row, "ended (removed 10m0s ago)") {
		t.Fatalf("ten minutes later: %q", row)
	}
	advance(directory.RemovedRetention - 10*time.Minute - time.Millisecond)
	if rowOf(topology(t, s), pausedRID) == "" {
		t.Fatal("the removed run left the topology before RemovedRetention")
	}
	advance(time.Millisecond)
	if table := topology(t, s); rowOf(table, pausedRID) != "" || strings.Contains(table, directory.RemovedNote) {
		t.Fatalf("the removed run is still shown after RemovedRetention:\n%s", table)
	}
}

func TestRemovalScenarioMemory(t *testing.T) {
	mem, clock := newMem(t)
	removalScenario(t, mem, clock.Advance)
}

func TestRemovalScenarioRedis(t *testing.T) { removalScenario(t, redisStore(t), nil) }

// Discovery rounds never read a removal record: neither the Tracker (its
// counter, journal, changed descriptors, leases, whole-list fallback) nor
// List scans or reads the removal records' prefix, so they cost what they
// cost before (docs/DISCOVERY.md §3.1).
func TestDiscoveryNeverReadsRemovalRecords(t *testing.T) {
	ctx := context.Background()
	mem, clock := newMem(t)
	hs := &hookStore{Store: mem}
	prefix := record.KindPrefix(record.KindRemovedMeshNode)
	var touched []string
	hs.setRead(func(_ int64, key string) error {
		if strings.HasPrefix(key, prefix) {
			touched = append(touched, "read "+key)
		}
		return nil
	})
	hs.setScan(func(_ int64, req locstore.ScanRequest) (bool, error) {
		if strings.HasPrefix(prefix, req.Prefix) {
			touched = append(touched, "scan "+req.Prefix)
		}
		return false, nil
	})
	p := removalWorld(t, mem)
	followed := &directory.Tracker{Store: hs, PageSize: 1, Self: watcherRID, Linked: func([]byte, uint64) bool { return true }}
	relisted := &directory.Tracker{Store: hs, PageSize: 1, Self: watcherRID, Linked: func([]byte, uint64) bool { return true }, FullRelist: true}
	round := func() {
		t.Helper()
		for _, tr := range []*directory.Tracker{followed, relisted} {
			if _, _, err := tr.Round(ctx, "m"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := directory.List(ctx, hs, "m", 1); err != nil {
			t.Fatal(err)
		}
	}
	round()
	p.lease.revoke()
	clock.Advance(leaseTTL)
	round() // the watcher finds the lease ended
	if res, err := directory.ReclaimKey(ctx, mem, mustKey(t, "m", pausedRID), directory.ReclaimOptions{MinAge: time.Nanosecond, RemovedBy: watcher, Logger: quiet()}); err != nil || res.Deleted != 1 {
		t.Fatalf("watcher removal = %+v, %v", res, err)
	}
	if _, rr := removalRecord(t, mem); !rr.Found {
		t.Fatal("no removal record: the test would prove nothing")
	}
	round() // the removal, from the journal and from a whole list
	round()
	if len(touched) > 0 {
		t.Fatalf("discovery touched removal records: %v", touched)
	}
}

// ListRemoved skips a value that does not decode, or not for its key (a
// record copied elsewhere would show a run that was never removed), and
// keeps only the mesh asked for.
func TestListRemovedSkipsWhatDoesNotBelong(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMem(t)
	r := record.RemovedMeshNode{Descriptor: descriptor("m", pausedRID, "tcp://0b:1"), RemovedAt: 5,
		RemovedByOwnerID: "owner-w", RemovedByRoutingID: watcherRID}
	v, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	key, _ := record.RemovedMeshNodeKey("m", pausedRID)
	put(t, mem, key, v)
	put(t, mem, record.KindPrefix(record.KindRemovedMeshNode)+fmt.Sprintf("%064x", 1), v) // copied
	put(t, mem, record.KindPrefix(record.KindRemovedMeshNode)+"garbage", []byte("{"))
	other := r
	other.Descriptor = descriptor("n", pausedRID, "tcp://0b:1")
	ov, _ := other.Encode()
	okey, _ := record.RemovedMeshNodeKey("n", pausedRID)
	put(t, mem, okey, ov)
	for _, tc := range []struct {
		mesh string
		want []string
	}{{"m", []string{key}}, {"", []string{key, okey}}} {
		got, err := directory.Lister{Store: mem, PageSize: 1, Logger: quiet()}.ListRemoved(ctx, tc.mesh)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, g := range got {
			keys = append(keys, g.Key)
		}
		slices.Sort(keys)
		slices.Sort(tc.want)
		if fmt.Sprint(keys) != fmt.Sprint(tc.want) {
			t.Fatalf("ListRemoved(%q) = %v, want %v", tc.mesh, keys, tc.want)
		}
	}
}

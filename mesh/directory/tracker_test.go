package directory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
)

// valid maps "mesh/rid" to LeaseValid.
func valid(s directory.Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, e := range s.Entries {
		out[fmt.Sprintf("%s/%x", e.Descriptor.MeshName, e.Descriptor.RoutingID)] = e.LeaseValid
	}
	return out
}

// The Tracker reads only what may have changed, and its verdicts equal a
// full List's at every step (the same-point list and §3.1 lease rule).
func TestTrackerReadsOnlyWhatChanged(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	la := grantLease(t, mem, "owner-a", 1, leaseTTL)
	lb := grantLease(t, mem, "owner-b", 2, leaseTTL)
	newNode(t, mem, la, "m", []byte{0x01})
	newNode(t, mem, lb, "m", []byte{0x02})
	tr := &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet()}
	same := func(step string) directory.Snapshot {
		t.Helper()
		got, st, err := tr.Round(ctx, "m")
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		full, err := directory.List(ctx, mem, "m", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(rids(got)) != fmt.Sprint(rids(full)) || fmt.Sprint(valid(got)) != fmt.Sprint(valid(full)) {
			t.Fatalf("%s: tracker %v %v, full list %v %v", step, rids(got), valid(got), rids(full), valid(full))
		}
		t.Logf("%s: %+v", step, st)
		lastStats = st
		return got
	}
	type want struct {
		listed, followed             bool
		leaseReads, counter, journal int
	}
	check := func(step string, w want) {
		t.Helper()
		same(step)
		if lastStats.Listed != w.listed || lastStats.Followed != w.followed || lastStats.LeaseReads != w.leaseReads ||
			lastStats.CounterReads != w.counter || lastStats.JournalReads != w.journal {
			t.Fatalf("%s: stats %+v, want %+v", step, lastStats, w)
		}
	}
	check("first round", want{listed: true, leaseReads: 2, counter: 3})
	check("nothing changed", want{listed: false, leaseReads: 0, counter: 1})
	clock.Advance(leaseTTL / 3)
	la.renew(leaseTTL, true)
	check("a renewed, no expiry due", want{listed: false, leaseReads: 0, counter: 1})
	// b stops renewing; a keeps renewing. When the expiries last read
	// come, both are read again: a is valid to a later expiry, b invalid.
	clock.Advance(leaseTTL/3 + leaseTTL/3)
	la.renew(leaseTTL, true)
	clock.Advance(leaseTTL / 3)
	got := same("expiry due")
	if lastStats.LeaseReads != 2 || !valid(got)["m/01"] || valid(got)["m/02"] {
		t.Fatalf("expiry due: %+v %v; want both read, a valid, b not", lastStats, valid(got))
	}
	check("b stays invalid without reads", want{listed: false, leaseReads: 0, counter: 1})
	// A joined node: the counter moved; the journal names its descriptor,
	// which is read with the counter again (no list), and only its lease.
	lc := grantLease(t, mem, "owner-c", 3, leaseTTL)
	newNode(t, mem, lc, "m", []byte{0x03})
	check("a node joined", want{followed: true, leaseReads: 1, counter: 2, journal: 2})
	if !valid(lastSnap(t, tr, ctx))["m/03"] {
		t.Fatal("the joined node is not valid")
	}
	// A change that keeps the state (a capacity copy) is followed without
	// a lease read: its publish was fenced on the live lease.
	nb := newNode(t, mem, grantLease(t, mem, "owner-d", 4, leaseTTL), "m", []byte{0x04})
	check("another joined", want{followed: true, leaseReads: 1, counter: 2, journal: 2})
	nb.desc.Capacity.Actors.Active = 7
	mustPublish(t, nb.pub, nb.desc, directory.Published)
	check("capacity copy changed", want{followed: true, leaseReads: 0, counter: 2, journal: 2})
}

var lastStats directory.RoundStats

func lastSnap(t *testing.T, tr *directory.Tracker, ctx context.Context) directory.Snapshot {
	t.Helper()
	s, _, err := tr.Round(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A lease deleted before its expiry (an orderly stop releases it) is always
// followed by a descriptor change; the Tracker re-reads the lease of a
// changed descriptor at once.
func TestTrackerReadsTheLeaseOfAChangedDescriptor(t *testing.T) {
	mem, _ := newMem(t)
	ctx := context.Background()
	la := grantLease(t, mem, "owner-a", 1, leaseTTL)
	n := newNode(t, mem, la, "m", []byte{0x01})
	tr := &directory.Tracker{Store: mem, PageSize: 2, Logger: quiet()}
	if s, _, err := tr.Round(ctx, "m"); err != nil || !valid(s)["m/01"] {
		t.Fatalf("first round: %v %v", valid(s), err)
	}
	d := n.desc
	d.State = "stopped"
	mustPublish(t, n.pub, d, directory.Published)
	la.revoke()
	s, st, err := tr.Round(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Followed || st.LeaseReads != 1 || valid(s)["m/01"] {
		t.Fatalf("after stop: %+v %v; want the change followed and the lease read, invalid", st, valid(s))
	}
}

// With watching, a run whose known expiry came is read again only by its
// watchers (ring successors) and by nodes without a link to it; the others
// keep it valid while listed. A watched run that lost its lease while its
// links are up is reported for removal.
func TestTrackerWatching(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	var leases []*testLease
	for i := 1; i <= 6; i++ {
		l := grantLease(t, mem, fmt.Sprintf("owner-%d", i), 1, leaseTTL)
		leases = append(leases, l)
		newNode(t, mem, l, "m", []byte{byte(i)})
	}
	linked := map[byte]bool{}
	for i := 1; i <= 6; i++ {
		linked[byte(i)] = true
	}
	// This node is RID 02: it watches 03 and 04.
	tr := &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet(), Self: []byte{2}, Watchers: 2,
		Linked: func(rid []byte, _ uint64) bool { return linked[rid[0]] }}
	if _, st, err := tr.Round(ctx, "m"); err != nil || st.LeaseReads != 6 {
		t.Fatalf("first round: %+v %v", st, err)
	}
	// Everyone but 04 renews; 05 loses its link. At the expiry: 03 and 04
	// (watched) and 05 (unlinked) are read; 01, 02, 06 are trusted.
	clock.Advance(leaseTTL - time.Second)
	for i, l := range leases {
		if i+1 != 4 {
			l.renew(leaseTTL, true)
		}
	}
	linked[5] = false
	clock.Advance(2 * time.Second)
	s, st, err := tr.Round(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaseReads != 3 {
		t.Fatalf("expiry round read %d leases, want 3 (two watched, one unlinked)", st.LeaseReads)
	}
	v := valid(s)
	for rid, want := range map[string]bool{"m/01": true, "m/02": true, "m/03": true, "m/04": false, "m/05": true, "m/06": true} {
		if v[rid] != want {
			t.Errorf("%s valid %v, want %v", rid, v[rid], want)
		}
	}
	// 04 died with its links up (a zombie): its watcher reports it.
	if dead := tr.DeadWatched(); len(dead) != 1 || dead[0] != mustKey(t, "m", []byte{4}) {
		t.Fatalf("dead watched %v, want 04's key", dead)
	}
	// Without links to it, it is not reported (every node reads it itself).
	linked[4] = false
	if _, _, err := tr.Round(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if dead := tr.DeadWatched(); len(dead) != 0 {
		t.Fatalf("dead watched %v, want none (its links are down)", dead)
	}
}

// A watched run whose lease expired and was reacquired by the same OwnerId
// under a newer generation is alive: its descriptor still names the old
// generation for a moment (it republishes right after re-adopting its
// objects). It is not valid for placement, but it is not reported dead
// either — removing it made every node drop a live node, and a creation
// placed on it at that moment failed "(1 failed)".
func TestTrackerReacquiredRunIsNotDead(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	l3 := grantLease(t, mem, "owner-3", 1, leaseTTL)
	newNode(t, mem, l3, "m", []byte{3})
	l4 := grantLease(t, mem, "owner-4", 1, leaseTTL)
	newNode(t, mem, l4, "m", []byte{4})
	tr := &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet(), Self: []byte{2}, Watchers: 2,
		Linked: func([]byte, uint64) bool { return true }}
	if _, _, err := tr.Round(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	// 03 lost its lease and reacquired generation 2; 04 just lost it.
	clock.Advance(leaseTTL + time.Second)
	putLease(t, mem, "owner-3", 2, leaseTTL)
	s, _, err := tr.Round(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range s.Entries {
		rid := e.Descriptor.RoutingID[0]
		if e.LeaseValid || e.LeaseReacquired != (rid == 3) {
			t.Errorf("%02x: valid %v, reacquired %v", rid, e.LeaseValid, e.LeaseReacquired)
		}
	}
	if dead := tr.DeadWatched(); len(dead) != 1 || dead[0] != mustKey(t, "m", []byte{4}) {
		t.Fatalf("dead watched %v, want only 04's key", dead)
	}
}

// sixRuns publishes runs 01..06 of mesh "m", each with its lease (owner-i,
// generation 1, leaseTTL), and returns the leases in RID order.
func sixRuns(t *testing.T, mem locstore.Store) []*testLease {
	t.Helper()
	var leases []*testLease
	for i := 1; i <= 6; i++ {
		l := grantLease(t, mem, fmt.Sprintf("owner-%d", i), 1, leaseTTL)
		leases = append(leases, l)
		newNode(t, mem, l, "m", []byte{byte(i)})
	}
	return leases
}

// A run whose two ring predecessors are known to be without their lease
// (crashed: their links dropped, their descriptors kept listed until the
// reclaim age) must still be watched by a live node: the watch ring passes
// over the runs known to be without their lease. Before, the ring counted
// them, and 04 — watched by 02 and 03 only — lost its lease with its links
// up (cut off from the store, still reaching its peers) while every live
// node trusted it for good: its lease never read, never reported.
func TestTrackerWatchesPastRunsWithoutTheirLease(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	leases := sixRuns(t, mem)
	linked := map[byte]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true}
	var live []*directory.Tracker // 01, 05, 06
	for _, self := range []byte{1, 5, 6} {
		live = append(live, &directory.Tracker{Store: mem, PageSize: 1000, Logger: quiet(), Self: []byte{self}, Watchers: 2,
			Linked: func(rid []byte, _ uint64) bool { return linked[rid[0]] }})
	}
	// rounds runs one round on every live node and removes what each finds
	// dead as it watches, as the node does (removeDeadWatched).
	removed := 0
	rounds := func() {
		t.Helper()
		for _, tr := range live {
			if _, _, err := tr.Round(ctx, "m"); err != nil {
				t.Fatal(err)
			}
			for _, key := range tr.DeadWatched() {
				res, err := directory.ReclaimKey(ctx, mem, key, directory.ReclaimOptions{Logger: quiet(), MinAge: time.Nanosecond})
				if err != nil {
					t.Fatal(err)
				}
				removed += res.Deleted
			}
		}
	}
	renew := func(rids ...int) {
		for _, rid := range rids {
			leases[rid-1].renew(leaseTTL, true)
		}
	}
	rounds()
	// 02 and 03 crash: links down, leases end, descriptors kept.
	linked[2], linked[3] = false, false
	clock.Advance(leaseTTL - time.Second)
	renew(1, 4, 5, 6)
	clock.Advance(2 * time.Second)
	rounds()
	// Then 04, whose ring watchers are 02 and 03, loses its lease with its
	// links up.
	clock.Advance(leaseTTL - 3*time.Second)
	renew(1, 5, 6)
	clock.Advance(4 * time.Second)
	rounds()
	rounds()
	for _, tr := range live {
		s, _, err := tr.Round(ctx, "m")
		if err != nil {
			t.Fatal(err)
		}
		if v := valid(s); v["m/04"] || !v["m/01"] || !v["m/05"] || !v["m/06"] {
			t.Errorf("node %x: %v; want 04 not valid (its lease ended), 01, 05, 06 valid", tr.Self, v)
		}
	}
	if removed == 0 {
		t.Error("no live node removed 04 (dead with its links up)")
	}
}

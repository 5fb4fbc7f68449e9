package directory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/record"
)

// view is what a list says of each entry: its key, store version and lease
// verdict, in order.
func view(s directory.Snapshot) string {
	out := ""
	for _, e := range s.Entries {
		out += fmt.Sprintf("%s/%x@%s:%v ", e.Descriptor.MeshName, e.Descriptor.RoutingID, e.Version, e.LeaseValid)
	}
	return out
}

// trackerRound runs one round and checks it against a full List read at the
// same moment: the journal path must give exactly the same-point-in-time
// list a whole read gives.
func trackerRound(t *testing.T, tr *directory.Tracker, st locstore.Store, mesh, step string) directory.RoundStats {
	t.Helper()
	ctx := context.Background()
	got, stats, err := tr.Round(ctx, mesh)
	if err != nil {
		t.Fatalf("%s: %v", step, err)
	}
	full, err := directory.List(ctx, st, mesh, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if view(got) != view(full) || got.ChangeNumber != full.ChangeNumber {
		t.Fatalf("%s: tracker %s (change %d)\n full list %s (change %d)", step, view(got), got.ChangeNumber, view(full), full.ChangeNumber)
	}
	return stats
}

// Random publishes, content changes, orderly stops (two changes: stopped,
// then the descriptor removed), and nodes of another mesh, a few per round: after every round
// the Tracker's list equals a full List, and it got there from the journal
// (no scan) whenever the journal covered the changes.
func TestTrackerJournalFollowsRandomChanges(t *testing.T) {
	mem, _ := newMem(t)
	tr := &directory.Tracker{Store: mem, PageSize: 3, Logger: quiet()}
	rng := rand.New(rand.NewPCG(7, 16))
	type run struct {
		n       *node
		stopped bool
	}
	var runs []*run
	next := 0
	add := func(mesh string) {
		next++
		l := grantLease(t, mem, fmt.Sprintf("owner-%d", next), record.Generation(next), leaseTTL)
		runs = append(runs, &run{n: newNode(t, mem, l, mesh, []byte{byte(next >> 8), byte(next)})})
	}
	for range 5 {
		add("m")
	}
	trackerRound(t, tr, mem, "m", "first")
	followed, listed := 0, 0
	for round := range 60 {
		changes := 1 + rng.IntN(4)
		if round%15 == 14 {
			changes = record.MaxJournalEntries + 3 // more than the journal keeps
		}
		for done := 0; done < changes; done++ {
			switch op := rng.IntN(10); {
			case op < 3 || len(runs) < 3:
				mesh := "m"
				if op == 0 {
					mesh = "other"
				}
				add(mesh)
			case op < 8:
				r := runs[rng.IntN(len(runs))]
				if r.stopped {
					done--
					continue
				}
				r.n.desc.Endpoint = fmt.Sprintf("tcp://h%d:%d", round, rng.IntN(1000))
				mustPublish(t, r.n.pub, r.n.desc, directory.Published)
			default:
				r := runs[rng.IntN(len(runs))]
				if r.stopped {
					done--
					continue
				}
				r.n.desc.State = record.StateStopped
				mustPublish(t, r.n.pub, r.n.desc, directory.Published)
				r.n.lease.revoke()
				res, err := directory.ReclaimKey(context.Background(), mem, r.n.pub.Key(), directory.ReclaimOptions{})
				if err != nil || res.Deleted != 1 {
					t.Fatalf("reclaim: %+v %v", res, err)
				}
				r.stopped = true
			}
		}
		st := trackerRound(t, tr, mem, "m", fmt.Sprintf("round %d (%d changes)", round, changes))
		switch {
		case st.Followed:
			followed++
			if st.ScanPages != 0 {
				t.Fatalf("round %d: followed the journal but scanned: %+v", round, st)
			}
		case st.Listed:
			listed++
			if changes <= record.MaxJournalEntries {
				t.Fatalf("round %d: %d changes, within the journal, but listed: %+v", round, changes, st)
			}
		}
	}
	if followed < 50 || listed != 4 {
		t.Fatalf("followed %d, listed %d rounds; want ≥ 50 and exactly the 4 with too many changes", followed, listed)
	}
}

// What the journal cannot prove sends the Tracker back to the whole list,
// and the list is still exact.
func TestTrackerJournalFallbacks(t *testing.T) {
	ctx := context.Background()
	journal, _ := record.DescriptorJournalKey(record.KindMeshNode)
	counterName, _ := record.DescriptorCounter(record.KindMeshNode)
	counter, _ := record.CounterKey(counterName)

	setup := func(t *testing.T) (*hookStore, *directory.Tracker, []*node) {
		mem, _ := newMem(t)
		hs := &hookStore{Store: mem}
		var nodes []*node
		for i := 1; i <= 3; i++ {
			l := grantLease(t, mem, fmt.Sprintf("owner-%d", i), record.Generation(i), leaseTTL)
			nodes = append(nodes, newNode(t, mem, l, "m", []byte{byte(i)}))
		}
		tr := &directory.Tracker{Store: hs, PageSize: 1000, Logger: quiet()}
		trackerRound(t, tr, hs, "m", "first")
		return hs, tr, nodes
	}
	change := func(t *testing.T, n *node, endpoint string) {
		n.desc.Endpoint = endpoint
		mustPublish(t, n.pub, n.desc, directory.Published)
	}

	t.Run("journal missing", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		change(t, nodes[0], "tcp://x:1")
		del(t, hs.Store, journal)
		if st := trackerRound(t, tr, hs, "m", "no journal"); !st.Listed {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("an older writer bumped the counter alone", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		rr, err := hs.Read(ctx, counter)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := record.DecodeCounter(rr.Value)
		v, _ := record.Counter{Value: c.Value + 1}.Encode()
		put(t, hs.Store, counter, v)
		if st := trackerRound(t, tr, hs, "m", "gap"); !st.Listed {
			t.Fatalf("%+v", st)
		}
		// The next writer starts the journal again after the gap; the
		// Tracker, now at the gap's change number, follows it.
		change(t, nodes[1], "tcp://y:1")
		if st := trackerRound(t, tr, hs, "m", "after the gap"); !st.Followed {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("a change while the keys are read", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		change(t, nodes[0], "tcp://x:1")
		var once bool
		hs.setRead(func(_ int64, key string) error {
			if key == nodes[0].pub.Key() && !once {
				once = true
				change(t, nodes[2], "tcp://z:1") // lands between the journal and the closing counter
			}
			return nil
		})
		st := trackerRound(t, tr, hs, "m", "moved during the read")
		if st.Followed || !st.Listed || !once {
			t.Fatalf("%+v (hook ran %v)", st, once)
		}
	})
	t.Run("undecodable changed value", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		change(t, nodes[0], "tcp://x:1")
		put(t, hs.Store, nodes[0].pub.Key(), []byte("{")) // no counter bump: the journal still names it
		if st := trackerRound(t, tr, hs, "m", "garbage"); !st.Listed {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("journal that does not decode", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		change(t, nodes[0], "tcp://x:1")
		put(t, hs.Store, journal, []byte(`{"changes":[],"recordVersion":9}`))
		if st := trackerRound(t, tr, hs, "m", "journal of another version"); !st.Listed {
			t.Fatalf("%+v", st)
		}
		// Writers replace it; following works again.
		change(t, nodes[1], "tcp://y:1")
		trackerRound(t, tr, hs, "m", "list again")
		change(t, nodes[2], "tcp://z:1")
		if st := trackerRound(t, tr, hs, "m", "replaced"); !st.Followed {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("FullRelist", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		tr.FullRelist = true
		change(t, nodes[0], "tcp://x:1")
		if st := trackerRound(t, tr, hs, "m", "full relist"); !st.Listed || st.JournalReads != 0 {
			t.Fatalf("%+v", st)
		}
	})
	t.Run("store failure on a changed key", func(t *testing.T) {
		hs, tr, nodes := setup(t)
		change(t, nodes[0], "tcp://x:1")
		hs.setRead(func(_ int64, key string) error {
			if key == nodes[0].pub.Key() {
				return errReset
			}
			return nil
		})
		if _, _, err := tr.Round(ctx, "m"); err == nil {
			t.Fatal("a failed read must fail the round")
		}
		hs.setRead(nil)
		if st := trackerRound(t, tr, hs, "m", "after the failure"); !st.Followed {
			t.Fatalf("%+v", st)
		}
	})
}

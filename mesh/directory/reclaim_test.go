package directory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

// reclaimWorld publishes, at store time 0:
//
//	01 live: lease valid for 3h
//	02 gone: lease revoked
//	03 reacquired: its run lost its lease and holds a newer generation now
//	   (the same OwnerId: alive, about to republish)
//
// and at +50min
//
//	04 gone recently: lease revoked
//
// plus an undecodable value, then moves the clock to +70min.
func reclaimWorld(t *testing.T) (locstore.Store, *hookStore) {
	t.Helper()
	mem, clock := newMem(t)
	live := grantLease(t, mem, "owner-live", 1, 3*time.Hour)
	gone := grantLease(t, mem, "owner-gone", 2, time.Hour)
	regen := grantLease(t, mem, "owner-regen", 3, time.Hour)
	newNode(t, mem, live, "a", []byte{1})
	newNode(t, mem, gone, "a", []byte{2})
	newNode(t, mem, regen, "b", []byte{3})
	gone.revoke()
	putLease(t, mem, "owner-regen", 4, 3*time.Hour)
	clock.Advance(50 * time.Minute)
	recent := grantLease(t, mem, "owner-recent", 5, time.Hour)
	newNode(t, mem, recent, "a", []byte{4})
	recent.revoke()
	put(t, mem, "mesh-node:zz-garbage", []byte("nope"))
	clock.Advance(20 * time.Minute)
	return mem, &hookStore{Store: mem}
}

func TestReclaim(t *testing.T) {
	tests := []struct {
		name    string
		opts    directory.ReclaimOptions
		want    directory.ReclaimResult
		remains string
	}{
		{
			name:    "default age 1h",
			want:    directory.ReclaimResult{Scanned: 5, Deleted: 1, Live: 2, Young: 1, Undecodable: 1},
			remains: "[a/01 a/04 b/03]",
		},
		{
			name:    "age 10min",
			opts:    directory.ReclaimOptions{MinAge: 10 * time.Minute, PageSize: 1},
			want:    directory.ReclaimResult{Scanned: 5, Deleted: 2, Live: 2, Undecodable: 1},
			remains: "[a/01 b/03]",
		},
		{
			name:    "age 2h",
			opts:    directory.ReclaimOptions{MinAge: 2 * time.Hour},
			want:    directory.ReclaimResult{Scanned: 5, Live: 2, Young: 2, Undecodable: 1},
			remains: "[a/01 a/02 a/04 b/03]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem, _ := reclaimWorld(t)
			counter := counterValue(t, mem)
			tt.opts.Logger = quiet()
			got, err := directory.Reclaim(context.Background(), mem, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Reclaim = %+v, want %+v", got, tt.want)
			}
			all, err := directory.List(context.Background(), mem, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			if r := fmt.Sprint(rids(all)); r != tt.remains {
				t.Fatalf("remaining %s, want %s", r, tt.remains)
			}
			// Every delete counts as a change for List.
			if c := counterValue(t, mem); c != counter+record.Generation(tt.want.Deleted) {
				t.Fatalf("counter %d, want %d", c, counter+record.Generation(tt.want.Deleted))
			}
		})
	}
}

func TestReclaimConcurrentChanges(t *testing.T) {
	t.Run("descriptor taken over after the scan: left alone", func(t *testing.T) {
		mem, hs := reclaimWorld(t)
		taker := grantLease(t, mem, "owner-taker", 9, time.Hour)
		first := true
		hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) {
			if first {
				first = false
				mustPublish(t, newPublisher(t, mem, taker, nil, "a", []byte{2}), descriptor("a", []byte{2}, "tcp://new:1"), directory.Published)
			}
			return false, nil
		})
		got, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if got.Changed != 1 || got.Deleted != 0 {
			t.Fatalf("Reclaim = %+v", got)
		}
		if d, _ := stored(t, mem, mustKey(t, "a", []byte{2})); d.OwnerID != "owner-taker" {
			t.Fatalf("takeover descriptor touched: %+v", d)
		}
	})
	t.Run("counter moved: retried", func(t *testing.T) {
		mem, hs := reclaimWorld(t)
		hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) {
			if n == 1 {
				bumpCounter(t, mem)
			}
			return false, nil
		})
		got, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()})
		if err != nil || got.Deleted != 1 || hs.writes.Load() != 2 {
			t.Fatalf("Reclaim = %+v, %v after %d writes", got, err, hs.writes.Load())
		}
	})
	t.Run("owner came back with the same run: not deleted", func(t *testing.T) {
		// Cannot happen with the lease manager (a gone lease never
		// returns), but the batch's lease condition guarantees it anyway.
		mem, hs := reclaimWorld(t)
		key := mustKey(t, "a", []byte{2})
		hs.setWrite(func(_ int64, req locstore.WriteRequest) (bool, error) {
			if req.Mutations[0].Key == key {
				putLease(t, mem, "owner-gone", 2, time.Hour)
			}
			return false, nil
		})
		got, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if got.Live != 3 || got.Deleted != 0 {
			t.Fatalf("Reclaim = %+v", got)
		}
		stored(t, mem, mustKey(t, "a", []byte{2}))
	})
	t.Run("gate closed: nothing deleted", func(t *testing.T) {
		mem, _ := reclaimWorld(t)
		before := dump(t, mem)
		g := &gate{}
		g.close(lease.ErrLeaseExpired)
		if _, err := directory.Reclaim(context.Background(), mem, directory.ReclaimOptions{Gate: g, Logger: quiet()}); !errors.Is(err, lease.ErrLeaseExpired) {
			t.Fatalf("Reclaim = %v", err)
		}
		sameDump(t, before, dump(t, mem))
	})
	t.Run("lost delete answer settled by re-read", func(t *testing.T) {
		_, hs := reclaimWorld(t)
		hs.setWrite(func(n int64, _ locstore.WriteRequest) (bool, error) { return true, errReset })
		got, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()})
		if err != nil || got.Deleted != 1 {
			t.Fatalf("Reclaim = %+v, %v", got, err)
		}
	})
	t.Run("deletes refused by the store: the refusal, after one write", func(t *testing.T) {
		mem, hs := reclaimWorld(t)
		before := dump(t, mem)
		refused := &locstore.ProviderError{Provider: "test", Op: "write", Refused: true, Err: errors.New("OOM command not allowed")}
		hs.setWrite(func(int64, locstore.WriteRequest) (bool, error) { return false, refused })
		if _, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()}); !errors.Is(err, locstore.ErrWriteRefused) || errors.Is(err, directory.ErrContention) {
			t.Fatalf("Reclaim = %v, want the refusal", err)
		}
		if n := hs.writes.Load(); n != 1 {
			t.Errorf("%d writes, want 1", n)
		}
		sameDump(t, before, dump(t, mem))
	})
	t.Run("store down", func(t *testing.T) {
		_, hs := reclaimWorld(t)
		hs.setScan(func(int64, locstore.ScanRequest) (bool, error) { return false, errReset })
		if _, err := directory.Reclaim(context.Background(), hs, directory.ReclaimOptions{Logger: quiet()}); !errors.Is(err, locstore.ErrUnavailable) {
			t.Fatalf("Reclaim = %v", err)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		mem, _ := reclaimWorld(t)
		for _, o := range []directory.ReclaimOptions{{MinAge: -1}, {PageSize: 1001}, {MaxAttempts: -1}} {
			if _, err := directory.Reclaim(context.Background(), mem, o); !errors.Is(err, directory.ErrInvalidArgument) {
				t.Fatalf("Reclaim(%+v) = %v", o, err)
			}
		}
	})
}

// A descriptor that says `stopped` (an orderly §11 stop) goes as soon as
// its owner lease is gone, without waiting MinAge; while the lease holds it
// stays, and other states still wait MinAge.
func TestReclaimStopped(t *testing.T) {
	// publishAs publishes rid's descriptor in state under a fresh lease
	// and returns that lease.
	publishAs := func(t *testing.T, mem locstore.Store, owner string, gen record.Generation, rid []byte, state record.State) *testLease {
		t.Helper()
		l := grantLease(t, mem, owner, gen, time.Hour)
		n := newNode(t, mem, l, "a", rid)
		if state != record.StatePreparing {
			d := n.desc
			d.State = state
			mustPublish(t, n.pub, d, directory.Published)
		}
		return l
	}
	tests := []struct {
		name    string
		state   record.State
		release bool
		want    directory.ReclaimResult
	}{
		{"stopped, lease released: deleted at once", record.StateStopped, true, directory.ReclaimResult{Scanned: 1, Deleted: 1}},
		{"stopped, lease held: kept", record.StateStopped, false, directory.ReclaimResult{Scanned: 1, Live: 1}},
		{"serving, lease gone: waits MinAge", record.StateServing, true, directory.ReclaimResult{Scanned: 1, Young: 1}},
	}
	for _, tt := range tests {
		for _, one := range []bool{false, true} {
			name := tt.name + " (Reclaim)"
			if one {
				name = tt.name + " (ReclaimKey)"
			}
			t.Run(name, func(t *testing.T) {
				mem, _ := newMem(t)
				l := publishAs(t, mem, "owner-1", 1, []byte{1}, tt.state)
				if tt.release {
					l.revoke()
				}
				var got directory.ReclaimResult
				var err error
				var logs bytes.Buffer
				opts := directory.ReclaimOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				if one {
					got, err = directory.ReclaimKey(context.Background(), mem, mustKey(t, "a", []byte{1}), opts)
				} else {
					got, err = directory.Reclaim(context.Background(), mem, opts)
				}
				if err != nil || got != tt.want {
					t.Fatalf("= %+v, %v; want %+v", got, err, tt.want)
				}
				// Reclaim says which descriptor it deleted; ReclaimKey's
				// caller (a stopping node) knows it already.
				wantLine := !one && tt.want.Deleted == 1
				if line := "reclaimed MeshNode descriptor of a gone host run"; strings.Contains(logs.String(), line) != wantLine ||
					wantLine && !strings.Contains(logs.String(), "gone_owner=owner-1") {
					t.Fatalf("log (want the line %q: %v):\n%s", line, wantLine, logs.String())
				}
				all, err := directory.List(context.Background(), mem, "", 100)
				if err != nil || len(all.Entries) != 1-tt.want.Deleted {
					t.Fatalf("%d descriptors left, want %d (%v)", len(all.Entries), 1-tt.want.Deleted, err)
				}
			})
		}
	}
	t.Run("ReclaimKey: a takeover by a live run is left alone", func(t *testing.T) {
		mem, _ := newMem(t)
		old := publishAs(t, mem, "owner-old", 1, []byte{1}, record.StateStopped)
		old.revoke()
		publishAs(t, mem, "owner-new", 2, []byte{1}, record.StateServing)
		got, err := directory.ReclaimKey(context.Background(), mem, mustKey(t, "a", []byte{1}), directory.ReclaimOptions{Logger: quiet()})
		if err != nil || got != (directory.ReclaimResult{Scanned: 1, Live: 1}) {
			t.Fatalf("= %+v, %v", got, err)
		}
		if d, _ := stored(t, mem, mustKey(t, "a", []byte{1})); d.OwnerID != "owner-new" {
			t.Fatalf("descriptor of the new run touched: %+v", d)
		}
	})
	t.Run("ReclaimKey: missing key", func(t *testing.T) {
		mem, _ := newMem(t)
		got, err := directory.ReclaimKey(context.Background(), mem, mustKey(t, "a", []byte{9}), directory.ReclaimOptions{Logger: quiet()})
		if err != nil || got != (directory.ReclaimResult{}) {
			t.Fatalf("= %+v, %v", got, err)
		}
	})
}

// A watcher removes the descriptor of a run whose lease it found gone
// (Node.removeDeadWatched: ReclaimKey with MinAge 1 ns). After a store
// outage longer than the lease TTL every run reacquires its lease under a
// newer generation; a watcher whose round saw the lease gone and whose
// ReclaimKey reads it reacquired must leave the live run's descriptor
// alone. Once that newer lease ends (the run died before republishing),
// the descriptor goes.
func TestReclaimKeyLeavesARunThatReacquiredItsLease(t *testing.T) {
	mem, clock := newMem(t)
	ctx := context.Background()
	l := grantLease(t, mem, "owner-back", 1, leaseTTL)
	n := newNode(t, mem, l, "m", []byte{7})
	clock.Advance(leaseTTL + time.Second) // the store outage: gen 1 ends
	putLease(t, mem, "owner-back", 2, leaseTTL)
	opts := directory.ReclaimOptions{MinAge: time.Nanosecond, Logger: quiet()}
	res, err := directory.ReclaimKey(ctx, mem, n.pub.Key(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 0 || res.Live != 1 {
		t.Fatalf("ReclaimKey of a run that reacquired its lease = %+v, want it left alone as live", res)
	}
	if _, rr := stored(t, mem, n.pub.Key()); !rr.Found {
		t.Fatal("the descriptor of a live run was deleted")
	}
	clock.Advance(leaseTTL + time.Second) // died before republishing: gen 2 ends too
	res, err = directory.ReclaimKey(ctx, mem, n.pub.Key(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 {
		t.Fatalf("ReclaimKey once the reacquired lease ended = %+v, want the descriptor deleted", res)
	}
}

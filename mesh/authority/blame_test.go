package authority

import (
	"context"
	"slices"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

func TestMovedCounters(t *testing.T) {
	gen, sec := "counter:gen", "capacity:sec"
	conds := []locstore.Condition{locstore.IfVersion(gen, "7"), locstore.IfVersion(sec, "3"), locstore.IfMissing("capacity:act")}
	for _, tc := range []struct {
		name   string
		seen   []keyRow
		judged bool
		want   []string
	}{
		{"nothing moved", []keyRow{{gen, found("7")}, {sec, found("3")}, {"capacity:act", locstore.ReadResult{}}}, true, nil},
		{"the generation moved", []keyRow{{gen, found("9")}, {sec, found("3")}, {"capacity:act", locstore.ReadResult{}}}, true, []string{gen}},
		{"a row expected absent appeared", []keyRow{{gen, found("7")}, {sec, found("3")}, {"capacity:act", found("1")}}, true, []string{"capacity:act"}},
		{"a row expected present is gone", []keyRow{{gen, found("7")}, {sec, locstore.ReadResult{}}, {"capacity:act", locstore.ReadResult{}}}, true, []string{sec}},
		{"a row the read lacks", []keyRow{{gen, found("7")}, {"capacity:act", locstore.ReadResult{}}}, true, []string{sec}},
		{"not judged: all", []keyRow{{gen, found("7")}, {sec, found("3")}, {"capacity:act", locstore.ReadResult{}}}, false, []string{gen, sec, "capacity:act"}},
		{"no read: all", nil, false, []string{gen, sec, "capacity:act"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := movedCounters(conds, tc.seen, tc.judged); !slices.Equal(got, tc.want) {
				t.Errorf("movedCounters = %v, want %v", got, tc.want)
			}
		})
	}
	if got := movedCounters(nil, nil, false); got != nil {
		t.Errorf("no conditions: %v", got)
	}
}

func found(version string) locstore.ReadResult {
	return locstore.ReadResult{Found: true, Value: []byte("v"), Version: version}
}

// A Reserve refused because another process's Reserve on another target
// moved the store-wide ObjectGeneration counter blames that counter alone:
// its own target's capacity counter did not move, so the lane of that
// counter stays uncontended (a Commit after it plans on the hand-over) and
// only the generation's prefetched values are left unused.
func TestRefusalBlamesOnlyTheCountersThatMoved(t *testing.T) {
	ctx := context.Background()
	mem, _ := newMemory(t)
	putLease(t, mem, ownerA)
	putLease(t, mem, ownerB)
	g := &gateStore{Store: mem, reads: map[string]int{}}
	clock := &manualNow{}
	e := newExecutor(t, g, hinted(clock))
	gen, sec := objGenKey(t), secKey(t, actorsOf(nodeA))
	var contended map[string]bool
	g.before = func(n int) {
		switch n {
		case 1: // another process's creation on node B takes the next generation
			reserveOther(t, mem, Object{ID: "user:9", Kind: record.ObjectActor, StableType: "Player"}, targetB(), "res-9")
		case 2: // the Reserve's second batch, in its lanes' turn
			now := e.lanes.clock()
			e.lanes.mu.Lock()
			contended = map[string]bool{}
			for k, ln := range e.lanes.m {
				contended[k] = ln.contended(now)
			}
			e.lanes.mu.Unlock()
		}
	}
	obj := Object{ID: "user:1", Kind: record.ObjectActor, StableType: "Player"}
	r, err := e.Reserve(ctx, ReserveRequest{Object: obj, Target: targetA(), Creation: pending("res-1")})
	if err != nil || r.Attempts != 2 {
		t.Fatalf("Reserve: %d batches, %v (want one refused, then one applied)", r.Attempts, err)
	}
	if !contended[gen] {
		t.Errorf("the generation counter's lane is not contended after it moved (lanes %v)", contended)
	}
	if c, ok := contended[sec]; !ok || c {
		t.Errorf("the capacity counter's lane: held %v, contended %v; want held and not contended (lanes %v)", ok, c, contended)
	}
	e.hints.mu.Lock()
	_, genLost := e.hints.lost[gen]
	_, secLost := e.hints.lost[sec]
	e.hints.mu.Unlock()
	if !genLost || secLost {
		t.Errorf("prefetched values blamed: generation %v, capacity %v; want true, false", genLost, secLost)
	}
}

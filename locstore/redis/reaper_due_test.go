package redis

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// The reaper runs in the very millisecond an expiring record's data key is
// due (its {ns}:exp score == its PEXPIREAT). Redis expires a key only when
// now > when, so the data key still EXISTS in that millisecond: the reaper
// schedules it again a millisecond later. Before, it dropped the key from
// {ns}:exp only, and its index entry stayed for good (nothing scheduled it
// again) — the leak the reaper exists to stop, hit by most due entries at
// ~1,000 expiring writes a second.
func TestReaperAtTheDueMillisecondLeavesNoIndexEntry(t *testing.T) {
	s, raw, ns := snapshotTTLStore(t, time.Millisecond)
	ctx := context.Background()
	var muts []locstore.Mutation
	for i := range reapBatch {
		muts = append(muts, locstore.PutExpiring(fmt.Sprintf("old%d", i), []byte("x"), 30*time.Millisecond))
	}
	mustWrite(t, s, locstore.WriteRequest{Mutations: muts})
	expK, idxK := "{"+ns+"}:exp", "{"+ns+"}:idx"
	gone := int64(raw.ZScore(ctx, expK, "old0").Val())
	for {
		tm, err := raw.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if tm.UnixMilli() >= gone-3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// Expiring writes, each running the reaper, until one's StoreNow reaches gone.
	var at int64
	for i := 0; ; i++ {
		res := mustWrite(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
			locstore.PutExpiring(fmt.Sprintf("tick%d", i), []byte("x"), time.Hour)}})
		if at = res.StoreNow.UnixMilli(); at >= gone {
			break
		}
	}
	if at > gone {
		t.Logf("no write ran in the due millisecond %d (first at %d): this run checks the ordinary reaping only", gone, at)
	}
	waitGone(t, raw, "{"+ns+"}:k:old*")
	// Later expiring writes reap whatever is due.
	for i := range 3 {
		putExpiring(t, s, fmt.Sprintf("later%d", i), time.Hour)
	}
	var leaked []string
	for _, k := range raw.ZRange(ctx, idxK, 0, -1).Val() {
		if strings.HasPrefix(k, "old") {
			leaked = append(leaked, k)
		}
	}
	inExp := raw.ZRange(ctx, expK, 0, -1).Val()
	if len(leaked) > 0 {
		t.Fatalf("index entries of expired, physically gone records stay for good: %v (in {ns}:exp: %v)", leaked, inExp)
	}
}

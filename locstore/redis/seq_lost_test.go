package redis

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/meshnode/meshnode/internal/syncbuf"
	"github.com/meshnode/meshnode/internal/testredis"
	"github.com/meshnode/meshnode/locstore"
)

// The commit sequence {ns}:seq lost on its own while the
// records stay (evicted under an allkeys-* maxmemory policy, removed by an
// operator, a partial restore) — the namespace marker and every record are
// intact, so neither the framework's marker check nor a fresh process's
// rollback watch (it has no earlier write to compare with) notices. The
// write script then draws numbers the namespace already handed out and
// stores one on the very key whose record held it: a caller still holding
// that version (read before the rewrite) passes a Version condition on a
// record it never saw — a lost update, the thing "every object has exactly
// one owner" rests on. A review found it (2026-12-07): the script had the
// evidence at hand (the record it replaces carries a sequence number at
// least the one just drawn) but did not check it; now it raises the
// sequence past such a record first, and the provider WARNs.
func TestLostCommitSequenceIsNotReissuedOverARecord(t *testing.T) {
	ctx := context.Background()
	addr, ns := testredis.Addr(t), testredis.Namespace(t)
	a := openStore(t, addr, ns, nil)
	put(t, a, "k", "first")
	put(t, a, "k", "second")
	stale := put(t, a, "k", "third") // what a stale holder keeps
	for range 5 {
		put(t, a, "z", "written later") // a's rollback watch now holds 8
	}
	n, err := strconv.Atoi(stale)
	if err != nil {
		t.Fatalf("version %q is not a number", stale)
	}

	if err := rawClient(t, addr).Del(ctx, a.prefix+"seq").Err(); err != nil {
		t.Fatal(err)
	}

	// A process started after the loss (no rollback watch state).
	var logs syncbuf.Buffer
	b := openStore(t, addr, ns, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for i := 1; i < n; i++ {
		put(t, b, "x", "filler")
	}
	res, err := b.Write(ctx, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("k", stale)},
		Mutations:  []locstore.Mutation{locstore.Put("k", []byte("fourth"))},
	})
	if err != nil || !res.Applied {
		t.Fatalf("rewrite of k: %+v, %v", res, err)
	}
	if res.Versions[0] == stale {
		t.Errorf("the rewrite of k drew version %q, the version of the record it replaced", stale)
	}
	// The stale holder's conditional write must be a Conflict.
	res, err = b.Write(ctx, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfVersion("k", stale)},
		Mutations:  []locstore.Mutation{locstore.Put("k", []byte("stale holder's update"))},
	})
	if err != nil || res.Applied {
		t.Errorf("a write conditioned on the replaced version %q: %+v, %v; want a Conflict", stale, res, err)
	}
	// The process that wrote before the loss writes on: its rollback watch
	// (highest number drawn: the replaced record's) is not taken for a
	// store gone back in time — the sequence was raised far past it.
	if _, err := a.Write(ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("y", []byte("after"))}}); err != nil {
		t.Errorf("the earlier process's next write: %v", err)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"Location Store: the commit sequence stood below a record it had numbered"); n != 1 {
		t.Errorf("%d WARNs of the lost sequence, want 1:\n%s", n, logs.String())
	}
}

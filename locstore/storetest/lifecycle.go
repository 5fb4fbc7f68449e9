package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
)

// testCancelledBeforeStart: a context that is already done is reported as
// a provider error wrapping the context's error, for every operation.
func testCancelledBeforeStart(t *testing.T, h Harness) {
	s := h.open(t)
	for i := range 5 {
		put(t, s, fmt.Sprintf("cc/%d", i), []byte("x"))
	}
	p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cc/", Limit: 2})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: next %q, err %v", p.Next, err)
	}
	past, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel()
	ctxs := []struct {
		name  string
		ctx   context.Context
		cause error
	}{
		{"cancelled", ctxDone(t), context.Canceled},
		{"deadline passed", past, context.DeadlineExceeded},
	}
	for _, c := range ctxs {
		ops := []struct {
			name string
			do   func() error
		}{
			{"Read", func() error { _, err := s.Read(c.ctx, "cc/0"); return err }},
			{"Write", func() error {
				_, err := s.Write(c.ctx, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("cc/new", []byte("y"))}})
				return err
			}},
			{"Scan first page", func() error {
				_, err := s.Scan(c.ctx, locstore.ScanRequest{Prefix: "cc/", Limit: 2})
				return err
			}},
			{"Scan next page", func() error {
				_, err := s.Scan(c.ctx, locstore.ScanRequest{Prefix: "cc/", Limit: 2, Cursor: p.Next})
				return err
			}},
		}
		for _, op := range ops {
			t.Run(c.name+"/"+op.name, func(t *testing.T) {
				err := op.do()
				wantUnavailable(t, op.name, err)
				if !errors.Is(err, c.cause) {
					t.Errorf("%s: error %v does not wrap %v", op.name, err, c.cause)
				}
			})
		}
	}
	// The genuine scan goes on with a live context.
	if p2, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cc/", Limit: 2, Cursor: p.Next}); err != nil || p2.Expired {
		t.Errorf("scan after cancelled attempts: expired %v, err %v", p2.Expired, err)
	}
}

// testCancellation: a Write whose context ends while it runs has an unknown
// outcome; the framework reconstructs it by re-reading (spec §10). The check
// cancels writes at random short delays and, after each, re-reads both keys
// of the batch: the state must be exactly "not applied" or "applied as one
// commit", and a returned result must be true (no Applied that did not
// happen, no Conflict that was not observed: no one else writes here).
func testCancellation(t *testing.T, h Harness) {
	s := h.open(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rounds := 200
	if testing.Short() {
		rounds = 60
	}
	const ka, kb = "cx/a", "cx/b"
	apply(t, s, locstore.WriteRequest{Mutations: []locstore.Mutation{
		locstore.Put(ka, []byte("init")), locstore.Put(kb, []byte("init")),
	}})
	var applied, failed, lostApplied, errNotApplied, lateCommits int
	lateFrom := "" // value of the previous round if it ended in an error
	for round := range rounds {
		// Settled here too: the previous round's failed write may land
		// between the two reads of a plain readState (a CI run read
		// "round 177" / "round 178" at a round's start, 2026-12-08).
		cur := readSettled(t, s, []string{ka, kb})
		if cur[ka].Value != cur[kb].Value {
			t.Fatalf("round %d (seed %d): keys of one batch disagree: %v / %v", round, seed, cur[ka], cur[kb])
		}
		val := fmt.Sprintf("round %d", round)
		req := locstore.WriteRequest{
			Conditions: []locstore.Condition{locstore.IfVersion(ka, cur[ka].Version), locstore.IfVersion(kb, cur[kb].Version)},
			Mutations:  []locstore.Mutation{locstore.Put(ka, []byte(val)), locstore.Put(kb, []byte(val))},
		}
		var mode string
		var ctx context.Context
		var cancel context.CancelFunc
		r := rng.IntN(10)
		if round == 0 {
			r = 0 // at least one write is surely cancelled before it starts
		}
		switch {
		case r == 0:
			mode = "pre-cancelled"
			ctx, cancel = context.WithCancel(t.Context())
			cancel()
		case r == 1:
			mode = "timeout"
			ctx, cancel = context.WithTimeout(t.Context(), time.Duration(rng.IntN(1500))*time.Microsecond)
		case r < 5:
			mode = "cancel within 300µs"
			ctx, cancel = context.WithCancel(t.Context())
			time.AfterFunc(time.Duration(rng.IntN(300))*time.Microsecond, cancel)
		default:
			mode = "cancel within 3ms"
			ctx, cancel = context.WithCancel(t.Context())
			time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, cancel)
		}
		res, err := s.Write(ctx, req)
		cancel()
		after := readSettled(t, s, []string{ka, kb})
		unchanged := after[ka] == cur[ka] && after[kb] == cur[kb]
		committed := after[ka].Value == val && after[kb].Value == val &&
			after[ka].Version != cur[ka].Version && after[kb].Version != cur[kb].Version
		switch {
		case err == nil && res.Applied:
			applied++
			if after[ka].Version != res.Versions[0] || after[kb].Version != res.Versions[1] || !committed {
				t.Fatalf("round %d (%s, seed %d): Applied with versions %q, re-read %v / %v", round, mode, seed, res.Versions, after[ka], after[kb])
			}
		case err == nil && lateFrom != "" && after[ka].Value == lateFrom && after[kb].Value == lateFrom:
			// The previous round's write failed on our side but reached the
			// store after our re-read (a request sent before the
			// cancellation may still run): its late commit is the writer
			// this Conflict observed. The batch itself stayed atomic.
			lateCommits++
		case err == nil:
			t.Fatalf("round %d (%s, seed %d): Conflict reported although every condition held and nothing else writes (state %v / %v)", round, mode, seed, after[ka], after[kb])
		default:
			wantUnavailable(t, fmt.Sprintf("round %d (%s)", round, mode), err)
			if mode == "pre-cancelled" && !errors.Is(err, context.Canceled) {
				t.Errorf("round %d: pre-cancelled write: error %v does not wrap context.Canceled", round, err)
			}
			switch {
			case unchanged:
				errNotApplied++
			case committed:
				lostApplied++
			case lateFrom != "" && after[ka].Value == lateFrom && after[kb].Value == lateFrom:
				// The previous round's failed write landed late (see
				// above); this round's conditions can then never hold.
				lateCommits++
				unchanged = false
			default:
				t.Fatalf("round %d (%s, seed %d): after error %v the state is neither before (%v / %v) nor the batch (%v / %v)",
					round, mode, seed, err, cur[ka], cur[kb], after[ka], after[kb])
			}
		}
		lateFrom = ""
		if err != nil {
			failed++
			if unchanged {
				lateFrom = val
			}
		}
	}
	t.Logf("%s: %d rounds (seed %d): %d applied, %d errors (%d found not applied, %d found applied on re-read, %d committed late)",
		h.Name, rounds, seed, applied, failed, errNotApplied, lostApplied, lateCommits)
	if failed == 0 {
		t.Errorf("no round ended in an error: pre-cancelled writes must fail")
	}
}

// testIsolation: two stores from h.New (for Redis: two namespaces) never see
// each other's keys, conditions, scans or cursors.
func testIsolation(t *testing.T, h Harness) {
	a, b := h.open(t), h.open(t)
	va := put(t, a, "iso/k", []byte("A"))
	if r := read(t, b, "iso/k"); r.Found {
		t.Fatalf("store b sees store a's key: %v", stateOf(r))
	}
	// b's Missing condition holds although a has the key.
	apply(t, b, locstore.WriteRequest{
		Conditions: []locstore.Condition{locstore.IfMissing("iso/k")},
		Mutations:  []locstore.Mutation{locstore.Put("iso/k", []byte("B")), locstore.Put("iso/only-b", []byte("b"))},
	})
	// a's version means nothing in b, whatever the providers' version format.
	if r := read(t, b, "iso/k"); r.Version != va {
		conflict(t, b, locstore.WriteRequest{Conditions: []locstore.Condition{locstore.IfVersion("iso/k", va)}})
	}
	if r := read(t, a, "iso/k"); string(r.Value) != "A" || r.Version != va {
		t.Fatalf("store a's key changed by writes to b: %v", stateOf(r))
	}
	apply(t, b, locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete("iso/k")}})
	if r := read(t, a, "iso/k"); !r.Found {
		t.Fatalf("a delete in b removed a's key")
	}
	for i := range 5 {
		put(t, a, fmt.Sprintf("iso/a%d", i), []byte("a"))
	}
	itemsA, _ := scanAll(t, a, "", 2)
	itemsB, _ := scanAll(t, b, "", 2)
	if len(itemsA) != 6 || len(itemsB) != 1 || itemsB[0].Key != "iso/only-b" {
		t.Fatalf("scans leak across stores: a lists %d keys (want 6), b lists %d (want only iso/only-b)", len(itemsA), len(itemsB))
	}
	pa, err := a.Scan(t.Context(), locstore.ScanRequest{Prefix: "iso/", Limit: 2})
	if err != nil || pa.Next == "" {
		t.Fatalf("scan a: next %q err %v", pa.Next, err)
	}
	if pb, err := b.Scan(t.Context(), locstore.ScanRequest{Prefix: "iso/", Limit: 2, Cursor: pa.Next}); err != nil || !pb.Expired {
		t.Fatalf("a's cursor used on b: expired %v, %d items, err %v; want Expired", pb.Expired, len(pb.Items), err)
	}
}

// testClose: after Close every operation fails as a provider failure.
func testClose(t *testing.T, h Harness) {
	s, closeNow := h.openClosable(t)
	for i := range 3 {
		put(t, s, fmt.Sprintf("cl/%d", i), []byte("x"))
	}
	p, err := s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cl/", Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: next %q, err %v", p.Next, err)
	}
	if err := closeNow(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	_, err = s.Read(t.Context(), "cl/0")
	wantUnavailable(t, "Read after Close", err)
	_, err = s.Write(t.Context(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Put("cl/9", []byte("y"))}})
	wantUnavailable(t, "Write after Close", err)
	_, err = s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cl/", Limit: 1})
	wantUnavailable(t, "Scan after Close", err)
	_, err = s.Scan(t.Context(), locstore.ScanRequest{Prefix: "cl/", Limit: 1, Cursor: p.Next})
	wantUnavailable(t, "Scan with a cursor after Close", err)
}

// readSettled reads keys until two reads in a row agree. The keys are read
// one by one, and a write that failed on our side may still reach the
// store a moment later (a request sent before its deadline): landing
// between the two reads of one readState it showed one key before and one
// after an atomic batch — a torn state the store never held (seen once in
// a CI run with replica acknowledgements, whose WAIT makes such late
// commits likelier; after a write and, since 2026-12-08, at each round's
// start).
func readSettled(t *testing.T, s locstore.Store, keys []string) map[string]state {
	t.Helper()
	prev := readState(t, s, keys)
	for i := 0; i < 20; i++ {
		cur := readState(t, s, keys)
		if maps.Equal(prev, cur) {
			return cur
		}
		prev = cur
		time.Sleep(10 * time.Millisecond)
	}
	return prev
}

package lease_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/meshnode/meshnode/internal/syncbuf"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/gen"
	"github.com/meshnode/meshnode/mesh/lease"
	"github.com/meshnode/meshnode/mesh/record"
)

func TestAcquireAndRenewTicks(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()

	if id := m.OwnerID(); len(id) != 32 || strings.ToLower(id) != id {
		t.Fatalf("OwnerID %q is not 32 lowercase hex characters", id)
	} else if _, err := hex.DecodeString(id); err != nil {
		t.Fatalf("OwnerID %q: %v", id, err)
	}
	if m.Generation() != 1 {
		t.Fatalf("Generation = %d, want 1 on an empty store", m.Generation())
	}
	if c, ok := e.counter(); !ok || c != 1 {
		t.Fatalf("counter = %d, %v; want 1", c, ok)
	}
	g := m.Gate()
	// Acquired at t0 = start with the defaults: deadline = start + 15s - 5s.
	if d := g.Deadline(); d != start+10*sec {
		t.Fatalf("Deadline = %v, want %v", d, start+10*sec)
	}
	rec, rr := e.readRecord(m)
	if rec.OwnerID != m.OwnerID() || uint64(rec.LeaseGeneration) != 1 {
		t.Fatalf("stored record %+v", rec)
	}
	if !rr.ExpiresAt.Equal(rr.StoreNow.Add(lease.DefaultTTL)) {
		t.Fatalf("stored expiry %v, want StoreNow + TTL", rr.ExpiresAt)
	}
	if rec.AcquiredAt != record.EpochMillisOf(storeBase) || rec.UpdatedAt != rec.AcquiredAt {
		t.Fatalf("acquired record timestamps %+v", rec)
	}

	for i := 1; i <= 3; i++ {
		e.waitIdle(m, 2) // next tick + gate expiry timer
		e.clock.Advance(lease.DefaultRenewInterval)
		ev := e.expect(lease.EventRenewed)
		want := start + time.Duration(i)*lease.DefaultRenewInterval + 10*sec
		if ev.Deadline != want || g.Deadline() != want {
			t.Fatalf("renew %d: deadline %v / %v, want %v", i, ev.Deadline, g.Deadline(), want)
		}
		if err := g.Admit(); err != nil {
			t.Fatalf("renew %d: Admit = %v", i, err)
		}
		rec2, rr2 := e.readRecord(m)
		if rr2.Version == rr.Version {
			t.Fatalf("renew %d did not change the record version", i)
		}
		// Same host run; updatedAt is the StoreNow of the previous write.
		if rec2.OwnerID != rec.OwnerID || rec2.LeaseGeneration != rec.LeaseGeneration || rec2.AcquiredAt != rec.AcquiredAt {
			t.Fatalf("renew %d changed the host run: %+v, was %+v", i, rec2, rec)
		}
		if want := record.EpochMillisOf(storeBase.Add(time.Duration(i-1) * lease.DefaultRenewInterval)); rec2.UpdatedAt != want {
			t.Fatalf("renew %d: updatedAt %v, want %v", i, rec2.UpdatedAt, want)
		}
		if !rr2.ExpiresAt.Equal(storeBase.Add(time.Duration(i)*lease.DefaultRenewInterval + lease.DefaultTTL)) {
			t.Fatalf("renew %d: store expiry %v", i, rr2.ExpiresAt)
		}
		rr = rr2
	}
	if c, _ := e.counter(); c != 1 {
		t.Fatalf("renewals changed the counter to %d", c)
	}
	if m.Generation() != 1 {
		t.Fatalf("renewals changed the generation to %d", m.Generation())
	}
}

func TestSlowRenewAnchorsAtSend(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	// The renew sent at start+5 is answered at start+7.5 (the store commits
	// at start+7.5 too). The deadline is anchored at the send time:
	// start+5 + (TTL - margin) = start+15, not start+17.5.
	e.store.onceWrite(hold)
	e.clock.Advance(5 * sec)
	e.waitBlocked("write")
	e.clock.Advance(2500 * time.Millisecond)
	e.store.release <- struct{}{}
	ev := e.expect(lease.EventRenewed)
	if ev.Deadline != start+15*sec {
		t.Fatalf("deadline = %v, want %v (anchored at t0)", ev.Deadline, start+15*sec)
	}
	_, rr := e.readRecord(m)
	if !rr.ExpiresAt.Equal(storeBase.Add(7500*time.Millisecond + lease.DefaultTTL)) {
		t.Fatalf("store expiry %v", rr.ExpiresAt)
	}
}

func TestRenewTimeoutKeepsDeadline(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	e.store.onceWrite(block)
	e.clock.Advance(5 * sec)
	e.waitBlocked("write")
	e.clock.Advance(lease.DefaultRenewTimeout - time.Nanosecond)
	e.noEvent()
	e.clock.Advance(time.Nanosecond)
	ev := e.expect(lease.EventRenewFailed)
	if !errors.Is(ev.Err, lease.ErrRenewTimeout) || !errors.Is(ev.Err, locstore.ErrUnavailable) {
		t.Fatalf("renew failure %v does not match ErrRenewTimeout and ErrUnavailable", ev.Err)
	}
	if ev.Deadline != start+10*sec || m.Gate().Deadline() != start+10*sec {
		t.Fatalf("a failed renew moved the deadline to %v", ev.Deadline)
	}
	if err := m.Gate().Admit(); err != nil {
		t.Fatalf("Admit before the deadline = %v", err)
	}
}

// A renew the store refused (Redis out of memory) is reported by
// RenewFailure until a renew succeeds, and is not settled by a re-read: it
// wrote nothing, so the next tick simply writes again.
func TestRenewRefusedIsReported(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	if err := m.RenewFailure(); err != nil {
		t.Fatalf("RenewFailure after the acquire = %v", err)
	}
	e.store.onceWrite(refuse)
	e.clock.Advance(5 * sec)
	ev := e.expect(lease.EventRenewFailed)
	if !errors.Is(ev.Err, locstore.ErrWriteRefused) || !errors.Is(m.RenewFailure(), locstore.ErrWriteRefused) {
		t.Fatalf("renew failure %v, RenewFailure %v; want the refusal", ev.Err, m.RenewFailure())
	}
	reads := e.store.reads.Load()
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // the next tick comes at the admission deadline (defaults)
	e.expect(lease.EventExpired)
	e.expect(lease.EventRenewed)
	if n := e.store.reads.Load() - reads; n != 0 {
		t.Errorf("%d reads after a refused renew: it was settled as if its outcome were unknown", n)
	}
	if err := m.RenewFailure(); err != nil {
		t.Fatalf("RenewFailure after a renew succeeded = %v", err)
	}
}

func TestAcquireSuccessiveGenerations(t *testing.T) {
	e := newEnv(t)
	seen := map[string]bool{}
	for want := uint64(1); want <= 3; want++ {
		m := e.acquire()
		if m.Generation() != want {
			t.Fatalf("Generation = %d, want %d", m.Generation(), want)
		}
		if seen[m.OwnerID()] {
			t.Fatalf("OwnerID %s reused", m.OwnerID())
		}
		seen[m.OwnerID()] = true
	}
	if c, _ := e.counter(); c != 3 {
		t.Fatalf("counter = %d, want 3", c)
	}
}

func TestAcquireCounterBoundaries(t *testing.T) {
	encode := func(v uint64) []byte {
		b, err := record.Counter{Value: record.Generation(v)}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		stored  []byte
		wantGen uint64
		wantErr error
	}{
		{"counter 2^63-3 issues 2^63-2, the last issuable value", encode(gen.MaxIssued - 1), gen.MaxIssued, nil},
		{"counter 2^63-2: the next value would be the sentinel", encode(gen.MaxIssued), 0, gen.ErrGenerationExhausted},
		{"counter at the sentinel 2^63-1", encode(gen.Sentinel), 0, gen.ErrGenerationExhausted},
		{"counter value 0 is corrupt", []byte(`{"recordVersion":1,"value":"0"}`), 0, gen.ErrInvalidCounter},
		{"counter above 2^63-1 is corrupt", []byte(`{"recordVersion":1,"value":"9223372036854775808"}`), 0, gen.ErrInvalidCounter},
		{"unknown recordVersion is corrupt", []byte(`{"recordVersion":2,"value":"5"}`), 0, gen.ErrInvalidCounter},
		{"garbage is corrupt", []byte("not json"), 0, gen.ErrInvalidCounter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.put(counterKey(t), tt.stored, 0)
			before := e.snapshot()
			if tt.wantErr == nil {
				m := e.acquire()
				if m.Generation() != tt.wantGen {
					t.Fatalf("Generation = %d, want %d", m.Generation(), tt.wantGen)
				}
				if c, _ := e.counter(); c != tt.wantGen {
					t.Fatalf("counter = %d, want %d", c, tt.wantGen)
				}
				return
			}
			base := runtime.NumGoroutine()
			// The same answer every time, and the store never changes.
			for attempt := 0; attempt < 3; attempt++ {
				m, err := lease.Acquire(context.Background(), e.config())
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("attempt %d: Acquire error = %v, want %v", attempt, err, tt.wantErr)
				}
				if m != nil {
					t.Fatalf("attempt %d: a manager was returned with the error", attempt)
				}
				if after := e.snapshot(); !equal(before, after) {
					t.Fatalf("attempt %d changed the store:\nbefore %v\nafter  %v", attempt, before, after)
				}
			}
			if e.store.writes.Load() != 0 {
				t.Fatalf("%d writes sent for an unissuable counter", e.store.writes.Load())
			}
			if e.clock.Pending() != 0 {
				t.Fatalf("%d timers left after a failed Acquire", e.clock.Pending())
			}
			waitGoroutines(t, base)
			e.noEvent()
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAcquireConflictRetries(t *testing.T) {
	e := newEnv(t)
	// Another host takes generation 1 between our counter read and our write.
	other, err := record.Counter{Value: 1}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	e.store.beforeOnce = func() { e.put(counterKey(t), other, 0) }
	m := e.acquire()
	if m.Generation() != 2 {
		t.Fatalf("Generation = %d, want 2 after losing the race for 1", m.Generation())
	}
	if got := e.store.writes.Load(); got != 2 {
		t.Fatalf("writes = %d, want 2 (conflict + retry)", got)
	}
}

func TestAcquireLostResult(t *testing.T) {
	tests := []struct {
		name       string
		first      behavior
		wantWrites int64
	}{
		{"write applied but the answer was lost: settled by re-read", applyThenFail, 1},
		{"write failed before applying: re-read finds nothing, retried", fail, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.store.onceWrite(tt.first)
			m := e.acquire()
			if m.Generation() != 1 {
				t.Fatalf("Generation = %d, want 1", m.Generation())
			}
			if got := e.store.writes.Load(); got != tt.wantWrites {
				t.Fatalf("writes = %d, want %d", got, tt.wantWrites)
			}
			// The manager knows the stored version: the next renew applies.
			e.waitIdle(m, 2)
			e.clock.Advance(5 * sec)
			e.expect(lease.EventRenewed)
		})
	}
}

func TestAcquireStoreDown(t *testing.T) {
	e := newEnv(t)
	e.store.setModes(fail, fail)
	base := runtime.NumGoroutine()
	_, err := lease.Acquire(context.Background(), e.config())
	if !errors.Is(err, locstore.ErrUnavailable) {
		t.Fatalf("Acquire error = %v, want ErrUnavailable", err)
	}
	waitGoroutines(t, base)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.store.setModes(pass, pass)
	if _, err := lease.Acquire(ctx, e.config()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v", err)
	}
}

// A store that refuses writes outright (Redis out of memory, a read-only
// replica) fails Acquire at once with the refusal, instead of being asked
// again and again as after a conflict: a node started against it exits
// saying why.
func TestAcquireRefusedWrite(t *testing.T) {
	e := newEnv(t)
	e.store.setModes(pass, refuse)
	_, err := lease.Acquire(context.Background(), e.config())
	if !errors.Is(err, locstore.ErrWriteRefused) {
		t.Fatalf("Acquire error = %v, want ErrWriteRefused", err)
	}
	if got := e.store.writes.Load(); got != 1 {
		t.Fatalf("writes = %d, want 1", got)
	}
}

// A store whose account may not run the write (a Redis ACL rule without a
// command the write script runs) fails Acquire at once, like a refusal:
// asking again does not help until an operator changes the rule. Before
// (operator try-out, 2026-12-07), a node started with such an account
// retried its acquire until stopped, a WARN every tenth attempt.
func TestAcquireDeniedWrite(t *testing.T) {
	e := newEnv(t)
	e.store.setModes(pass, deny)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := lease.Acquire(ctx, e.config())
		done <- err
	}()
	var err error
	for err == nil {
		select {
		case err = <-done:
		default:
			if e.store.writes.Load() > 1 {
				cancel() // asked again: it would go on asking
				err = <-done
			}
			runtime.Gosched()
		}
	}
	if !errors.Is(err, locstore.ErrPermission) || errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire error = %v, want ErrPermission at once", err)
	}
	if got := e.store.writes.Load(); got != 1 {
		t.Fatalf("writes = %d, want 1", got)
	}
}

// A store that answers reads but fails every write (a read-only replica
// in a failover): Acquire retries once at once, then paced, doubling —
// before, it asked again at once, thousands of times a second, each with a
// WARN line — and succeeds once the store takes writes again.
func TestAcquirePacesFailedWrites(t *testing.T) {
	e := newEnv(t)
	e.store.setModes(pass, fail)
	type result struct {
		m   *lease.Manager
		err error
	}
	done := make(chan result, 1)
	go func() {
		m, err := lease.Acquire(context.Background(), e.config())
		done <- result{m, err}
	}()
	// Two writes (the first retry goes at once), then a pause of 50 ms on
	// the manual clock: nothing more until it advances.
	if !e.clock.WaitForNext(func(n int, next time.Duration) bool { return n == 1 && next == 50*time.Millisecond }, guard) {
		t.Fatal("Acquire did not pause after its failed writes")
	}
	time.Sleep(20 * time.Millisecond) // real time: a spinning loop would write meanwhile
	if n := e.store.writes.Load(); n != 2 {
		t.Fatalf("%d writes before the first pause ended, want 2", n)
	}
	e.clock.Advance(50 * time.Millisecond)
	// The third write arms its own timeout timer on the clock first: one
	// pending timer alone may be that one, not the next pause (a CI run
	// failed so: "2 writes"), even with the third write counted — it is
	// counted as it starts (a CI run hung so: the 100 ms advance below came
	// before the pause was armed, and nothing advanced the clock again). So
	// the one pending timer must be the doubled pause.
	if !e.clock.WaitForNext(func(n int, next time.Duration) bool {
		return n == 1 && next == 100*time.Millisecond && e.store.writes.Load() == 3
	}, guard) {
		t.Fatalf("after 50 ms: %d writes, want 3 and a pause of 100 ms", e.store.writes.Load())
	}
	e.store.setModes(pass, pass)
	e.clock.Advance(100 * time.Millisecond) // the pause doubled
	r := <-done
	if r.err != nil {
		t.Fatalf("Acquire once the store takes writes: %v", r.err)
	}
	t.Cleanup(func() { _ = r.m.Close() })
	if n := e.store.writes.Load(); n != 4 {
		t.Errorf("%d writes in all, want 4", n)
	}
}

func TestAcquireInvalidConfig(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  lease.Config
		want error
	}{
		{"no store", lease.Config{}, lease.ErrInvalidConfig},
		{"bad timing", lease.Config{Store: e.store, Timing: lease.Timing{RenewInterval: 8 * sec, TTL: 15 * sec, RenewTimeout: 3 * sec, FencingMargin: 5 * sec}}, lease.ErrInvalidTiming},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lease.Acquire(context.Background(), tt.cfg)
			if !errors.Is(err, tt.want) || !errors.Is(err, lease.ErrInvalidConfig) {
				t.Fatalf("error = %v, want %v", err, tt.want)
			}
		})
	}
	if e.store.reads.Load()+e.store.writes.Load() != 0 {
		t.Fatal("an invalid configuration reached the store")
	}
}

// TestStoreStopsAnswering is the §5 scenario: the store stops answering; new
// work is admitted until exactly the deadline and refused from it on; once
// the store answers again after the record expired there, the lease is lost.
func TestStoreStopsAnswering(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	g := m.Gate()
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // start+5: renew OK
	e.expect(lease.EventRenewed)
	deadline := start + 15*sec
	if g.Deadline() != deadline {
		t.Fatalf("Deadline = %v, want %v", g.Deadline(), deadline)
	}
	closing := g.Closing()

	e.store.setModes(block, block)
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // start+10: renew blocks
	e.waitBlocked("write")
	e.clock.Advance(3 * sec) // start+13: renew timeout
	if ev := e.expect(lease.EventRenewFailed); !errors.Is(ev.Err, lease.ErrRenewTimeout) {
		t.Fatalf("renew failure %v, want ErrRenewTimeout", ev.Err)
	}
	e.waitIdle(m, 2) // parked on the next tick (start+15) and the gate's timer

	e.clock.AdvanceTo(deadline - time.Nanosecond)
	if err := g.Admit(); err != nil {
		t.Fatalf("Admit 1ns before the deadline = %v", err)
	}
	if isClosed(closing) {
		t.Fatal("Closing fired before the deadline")
	}
	e.noEvent()

	e.clock.AdvanceTo(deadline) // the gate's timer and the next tick are both due
	if err := g.Admit(); !errors.Is(err, lease.ErrLeaseExpired) {
		t.Fatalf("Admit at the deadline = %v, want ErrLeaseExpired", err)
	}
	if !isClosed(closing) {
		t.Fatal("Closing not closed at the deadline")
	}
	e.expect(lease.EventExpired)
	e.waitBlocked("read") // the tick re-reads first: the last write's outcome is unknown
	e.clock.Advance(3 * sec)
	e.expect(lease.EventRenewFailed)
	if err := g.Admit(); !errors.Is(err, lease.ErrLeaseExpired) {
		t.Fatalf("Admit after the deadline = %v", err)
	}

	// The store answers again at start+20, the instant the store expires the
	// record (last renew start+5 + TTL 15): the re-read finds it missing.
	e.store.setModes(pass, pass)
	e.waitIdle(m, 1) // only the tick: the gate's timer has fired
	e.clock.AdvanceTo(start + 20*sec)
	ev := e.expect(lease.EventLost)
	if !errors.Is(ev.Err, lease.ErrLeaseLost) {
		t.Fatalf("lost event error %v", ev.Err)
	}
	if err := g.Admit(); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Admit after loss = %v", err)
	}
	e.waitIdle(m, 0) // the loop has ended and left no timer
	writes := e.store.writes.Load()
	e.clock.Advance(time.Minute)
	if e.store.writes.Load() != writes {
		t.Fatal("a lost lease was renewed")
	}
}

// TestStoreRecoversBeforeExpiryReopens: the gate closed at the deadline, but
// the store answered again before it expired the record; the renew under the
// same version proves nobody could have taken over, so the gate reopens.
func TestStoreRecoversBeforeExpiryReopens(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	g := m.Gate()
	e.store.onceWrite(block)
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec) // start+5: renew blocks
	e.waitBlocked("write")
	e.clock.Advance(3 * sec) // start+8: timeout, outcome unknown
	e.expect(lease.EventRenewFailed)
	e.waitIdle(m, 2)

	e.clock.AdvanceTo(start + 10*sec) // deadline and the next tick
	evs := e.expectSet(lease.EventExpired, lease.EventReconstructed, lease.EventRenewed)
	// The re-read saw the record with 5s left of which the margin takes 5s.
	if d := evs[lease.EventReconstructed].Deadline; d != start+10*sec {
		t.Fatalf("deadline from the re-read = %v, want %v", d, start+10*sec)
	}
	if d := evs[lease.EventRenewed].Deadline; d != start+20*sec {
		t.Fatalf("deadline after the renew = %v, want %v", d, start+20*sec)
	}
	if err := g.Admit(); err != nil {
		t.Fatalf("Admit after recovery = %v", err)
	}
}

// TestLostRenewResultIsReconstructed: a renew applied but its answer was
// lost. Renewing again under the old version would Conflict and wrongly
// declare the lease lost; the manager re-reads first (§10).
func TestLostRenewResultIsReconstructed(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.store.onceWrite(applyThenFail)
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec)
	if ev := e.expect(lease.EventRenewFailed); ev.Deadline != start+10*sec {
		t.Fatalf("lost answer moved the deadline to %v", ev.Deadline)
	}
	e.waitIdle(m, 2)
	e.clock.Advance(5*sec - time.Millisecond)
	e.noEvent()
	e.clock.Advance(time.Millisecond) // start+10: deadline and tick
	evs := e.expectSet(lease.EventExpired, lease.EventReconstructed, lease.EventRenewed)
	// The applied renew at start+5 made the store expiry start+20: the
	// re-read at start+10 sees 10s left, minus the 5s margin.
	if d := evs[lease.EventReconstructed].Deadline; d != start+15*sec {
		t.Fatalf("reconstructed deadline = %v, want %v", d, start+15*sec)
	}
	if d := evs[lease.EventRenewed].Deadline; d != start+20*sec {
		t.Fatalf("renewed deadline = %v, want %v", d, start+20*sec)
	}
	if m.Gate().Admit() != nil {
		t.Fatal("gate closed after reconstruction")
	}
}

func TestLeaseLost(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(e *env, m *lease.Manager)
		at     time.Duration // advance to this reading
		events []lease.EventKind
		// dataLost: the loss is reported as store data loss (the record
		// vanished while it was still valid by the store's clock).
		dataLost bool
		// record: what LostRecord says became of the owner-lease record.
		record lease.LostRecord
	}{
		{
			name: "another generation stored under our key: renew conflicts",
			setup: func(e *env, m *lease.Manager) {
				e.putLease(m, m.OwnerID(), m.Generation()+1)
			},
			at: start + 5*sec, events: []lease.EventKind{lease.EventLost}, record: lease.RecordNotOurs,
		},
		{
			name: "record deleted: renew conflicts",
			setup: func(e *env, m *lease.Manager) {
				key, _ := record.OwnerLeaseKey(m.OwnerID())
				if _, err := e.mem.Write(context.Background(), locstore.WriteRequest{Mutations: []locstore.Mutation{locstore.Delete(key)}}); err != nil {
					e.t.Fatal(err)
				}
			},
			at: start + 5*sec, events: []lease.EventKind{lease.EventLost}, dataLost: true, record: lease.RecordDataLost,
		},
		{
			name: "another owner found on the re-read after a lost answer",
			setup: func(e *env, m *lease.Manager) {
				e.store.onceWrite(fail)
				e.clock.Advance(5 * sec)
				e.expect(lease.EventRenewFailed)
				e.waitIdle(m, 2)
				e.putLease(m, "someone-else", m.Generation())
			},
			// The failed renew left the deadline at start+10, where the
			// next tick also runs.
			at: start + 10*sec, events: []lease.EventKind{lease.EventExpired, lease.EventLost}, record: lease.RecordNotOurs,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.acquire()
			e.waitIdle(m, 2)
			tt.setup(e, m)
			closing := m.Gate().Closing()
			e.clock.AdvanceTo(tt.at)
			ev := e.expectSet(tt.events...)[lease.EventLost]
			if !errors.Is(ev.Err, lease.ErrLeaseLost) {
				t.Fatalf("lost event %v", ev.Err)
			}
			if got := errors.Is(ev.Err, locstore.ErrDataLost); got != tt.dataLost {
				t.Fatalf("lost event %v: store data lost = %v, want %v", ev.Err, got, tt.dataLost)
			}
			if err := m.Gate().Admit(); !errors.Is(err, lease.ErrLeaseLost) {
				t.Fatalf("Admit = %v, want ErrLeaseLost", err)
			}
			if got := m.LostRecord(); got != tt.record {
				t.Errorf("LostRecord = %d, want %d", got, tt.record)
			}
			if !isClosed(closing) {
				t.Fatal("Closing not closed on loss")
			}
			e.waitIdle(m, 0)
			writes := e.store.writes.Load()
			e.clock.Advance(time.Minute)
			if err := m.Gate().Admit(); !errors.Is(err, lease.ErrLeaseLost) {
				t.Fatalf("loss is not permanent: %v", err)
			}
			if e.store.writes.Load() != writes {
				t.Fatal("a lost lease was renewed")
			}
			e.noEvent()
		})
	}
}

func (e *env) putLease(m *lease.Manager, owner string, g uint64) {
	e.t.Helper()
	b, err := record.OwnerLease{OwnerID: owner, LeaseGeneration: record.Generation(g)}.Encode()
	if err != nil {
		e.t.Fatal(err)
	}
	key, err := record.OwnerLeaseKey(m.OwnerID())
	if err != nil {
		e.t.Fatal(err)
	}
	e.put(key, b, lease.DefaultTTL)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestRelease(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	closing := m.Gate().Closing()
	if err := m.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	e.expect(lease.EventReleased)
	if _, rr := e.readRecord(m); rr.Found {
		t.Fatal("owner-lease record still stored after Release")
	}
	if c, _ := e.counter(); c != 1 {
		t.Fatalf("Release changed the counter to %d", c)
	}
	if err := m.Gate().Admit(); !errors.Is(err, lease.ErrLeaseReleased) {
		t.Fatalf("Admit after Release = %v", err)
	}
	if !isClosed(closing) {
		t.Fatal("Closing not closed by Release")
	}
	if e.clock.Pending() != 0 {
		t.Fatalf("%d timers after Release", e.clock.Pending())
	}
	calls := e.store.reads.Load() + e.store.writes.Load()
	if err := m.Release(context.Background()); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if got := e.store.reads.Load() + e.store.writes.Load(); got != calls {
		t.Fatal("second Release touched the store")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	e.noEvent()
}

func TestReleaseCases(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(e *env, m *lease.Manager)
		wantErr     error
		wantDeleted bool
		wantAdmit   error
	}{
		{
			name: "after a lost renew answer: re-read, then delete under the stored version",
			setup: func(e *env, m *lease.Manager) {
				e.store.onceWrite(applyThenFail)
				e.clock.Advance(5 * sec)
				e.expect(lease.EventRenewFailed)
			},
			wantDeleted: true, wantAdmit: lease.ErrLeaseReleased,
		},
		{
			name: "during a blocked renew: the renew is cancelled, then the record deleted",
			setup: func(e *env, m *lease.Manager) {
				e.store.onceWrite(block)
				e.clock.Advance(5 * sec)
				e.waitBlocked("write")
			},
			wantDeleted: true, wantAdmit: lease.ErrLeaseReleased,
		},
		{
			name: "after loss: nothing of ours to delete",
			setup: func(e *env, m *lease.Manager) {
				e.putLease(m, m.OwnerID(), m.Generation()+1)
				e.clock.Advance(5 * sec)
				e.expect(lease.EventLost)
			},
			wantDeleted: false, wantAdmit: lease.ErrLeaseLost,
		},
		{
			name: "store down: error returned, gate closed anyway",
			setup: func(e *env, m *lease.Manager) {
				e.store.setModes(fail, fail)
			},
			wantErr: locstore.ErrUnavailable, wantDeleted: false, wantAdmit: lease.ErrLeaseReleased,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.acquire()
			e.waitIdle(m, 2)
			tt.setup(e, m)
			err := m.Release(context.Background())
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("Release = %v, want %v", err, tt.wantErr)
			}
			e.store.setModes(pass, pass)
			if _, rr := e.readRecord(m); rr.Found == tt.wantDeleted {
				t.Fatalf("record found = %v after Release, want deleted = %v", rr.Found, tt.wantDeleted)
			}
			if a := m.Gate().Admit(); !errors.Is(a, tt.wantAdmit) {
				t.Fatalf("Admit = %v, want %v", a, tt.wantAdmit)
			}
			// Exactly once: the same result again, with no store call.
			calls := e.store.reads.Load() + e.store.writes.Load()
			if again := m.Release(context.Background()); !errors.Is(again, tt.wantErr) && again != err {
				t.Fatalf("second Release = %v, first %v", again, err)
			}
			if e.store.reads.Load()+e.store.writes.Load() != calls {
				t.Fatal("second Release touched the store")
			}
			if e.clock.Pending() != 0 {
				t.Fatalf("%d timers after Release", e.clock.Pending())
			}
		})
	}
}

func TestCloseLeavesNothingRunning(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
	}{
		{"idle", func(e *env) {}},
		{"during a blocked renew", func(e *env) {
			e.store.onceWrite(block)
			e.clock.Advance(5 * sec)
			e.waitBlocked("write")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			base := runtime.NumGoroutine()
			m := e.acquire()
			e.waitIdle(m, 2)
			tt.setup(e)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatal("second Close:", err)
			}
			if e.clock.Pending() != 0 {
				t.Fatalf("%d timers after Close", e.clock.Pending())
			}
			waitGoroutines(t, base)
			if err := m.Gate().Admit(); !errors.Is(err, lease.ErrLeaseReleased) {
				t.Fatalf("Admit after Close = %v", err)
			}
			// Close does not touch the store: the record expires by TTL.
			if _, rr := e.readRecord(m); !rr.Found {
				t.Fatal("Close deleted the record")
			}
		})
	}
}

// waitGoroutines waits until the goroutine count is back to base (goroutines
// that have finished their work may take a moment to be reaped).
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	limit := time.Now().Add(guard)
	for runtime.NumGoroutine() > base {
		if time.Now().After(limit) {
			buf := make([]byte, 1<<16)
			t.Fatalf("goroutines %d > %d\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLogsUseStableKeys(t *testing.T) {
	e := newEnv(t)
	var buf syncbuf.Buffer
	cfg := e.config()
	cfg.Logger = slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e.expect(lease.EventAcquired)
	e.store.onceWrite(fail)
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec)
	e.expect(lease.EventRenewFailed)

	msgs := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		msgs[rec["msg"].(string)] = rec
	}
	for _, msg := range []string{"owner lease acquired", "owner lease renew failed; deadline not extended"} {
		rec, ok := msgs[msg]
		if !ok {
			t.Fatalf("no %q log line in %v", msg, buf.String())
		}
		for _, k := range []string{"owner", "lease_gen", "deadline", "remaining"} {
			if _, ok := rec[k]; !ok {
				t.Fatalf("%q log line lacks key %q: %v", msg, k, rec)
			}
		}
		// The deadline is shown as a wall-clock time, not as the offset
		// of the process-private monotonic clock (which reads in seconds
		// since the manager started here).
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["deadline"]))
		if err != nil || at.Before(time.Now().Add(-time.Hour)) || at.After(time.Now().Add(time.Hour)) {
			t.Fatalf("%q: deadline %v is not a wall-clock time near now (%v)", msg, rec["deadline"], err)
		}
		if rec["owner"] != m.OwnerID() {
			t.Fatalf("owner key = %v", rec["owner"])
		}
	}
}

// With Config.Reacquire, a lease lost to an outage longer than the TTL is
// acquired again — same OwnerId, a new LeaseGeneration — once the store
// answers; the gate stays shut (the owner must first re-adopt what it
// holds) until Resume, and the renew loop goes on under the new generation.
func TestReacquireAfterLoss(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Reacquire = true
	var logs syncbuf.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	e.expect(lease.EventAcquired)
	g, first := m.Gate(), m.Generation()
	e.waitIdle(m, 2)
	if m.Resume(m.Generation()) {
		t.Fatal("Resume without a reacquisition reopened something")
	}

	// The store stops answering until past the record's expiry.
	e.store.setModes(fail, fail)
	e.clock.AdvanceTo(start + 20*sec)
	e.store.setModes(pass, pass)
	deadlineLost := time.After(guard)
	var lost lease.Event
	for lost.Kind != lease.EventLost {
		select {
		case lost = <-e.events:
		case <-deadlineLost:
			t.Fatal("no EventLost")
		case <-time.After(20 * time.Millisecond):
			e.clock.Advance(sec / 4)
		}
	}
	if errors.Is(lost.Err, locstore.ErrDataLost) {
		t.Fatalf("an expiry reported as data loss: %v", lost.Err)
	}
	// At once, without a renew interval's wait (the clock stands still):
	// reacquired under a new generation, gate shut.
	var re lease.Event
	select {
	case re = <-e.events:
	case <-time.After(guard):
	}
	if re.Kind != lease.EventReacquired {
		t.Fatalf("after the loss: event %v (%v), want EventReacquired at once", re.Kind, re.Err)
	}
	if re.Generation <= first || m.Generation() != re.Generation || re.OwnerID != m.OwnerID() {
		t.Fatalf("reacquired %s/%d, want the same owner with a generation above %d", re.OwnerID, re.Generation, first)
	}
	if err := g.Admit(); !errors.Is(err, lease.ErrLeaseLost) {
		t.Fatalf("Admit before Resume = %v, want the gate still shut", err)
	}
	if key, v := m.Fence(); key == "" || v == "" {
		t.Fatal("no fence after the reacquisition: the owner could not write its re-adoption")
	}
	if m.Resume(first) {
		t.Fatal("Resume for the generation before the reacquisition reopened the gate")
	}
	if !m.Resume(re.Generation) {
		t.Fatal("Resume refused after a reacquisition")
	}
	if err := g.Admit(); err != nil {
		t.Fatalf("Admit after Resume = %v", err)
	}
	// The resume line names the new generation, once.
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "owner lease resumed") &&
			(strings.Count(line, " lease_gen=") != 1 || !strings.Contains(line, fmt.Sprintf(" lease_gen=%d", re.Generation))) {
			t.Errorf("resume log line %q: want lease_gen=%d once", line, re.Generation)
		}
	}
	if m.Resume(re.Generation) {
		t.Fatal("a second Resume reopened again")
	}
	// Renewals go on under the new generation.
	e.waitIdle(m, 2)
	e.clock.Advance(5 * sec)
	for {
		ev := <-e.events
		if ev.Kind == lease.EventRenewed {
			if ev.Generation != re.Generation {
				t.Fatalf("renewed generation %d, want %d", ev.Generation, re.Generation)
			}
			break
		}
	}
}

// An owner with nothing to re-adopt resumes at once — from the very
// EventReacquired callback, before the manager's own goroutine runs again.
// The manager is resumable by then: a Resume that came too early used to
// find it not yet resumable and left the gate shut for good (seen as nodes
// that never served again after a store outage, once re-adoption got fast).
func TestResumeFromTheReacquiredEvent(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.Reacquire = true
	var mgr atomic.Pointer[lease.Manager]
	resumed := make(chan bool, 1)
	forward := cfg.OnEvent
	cfg.OnEvent = func(ev lease.Event) {
		if ev.Kind == lease.EventReacquired {
			resumed <- mgr.Load().Resume(ev.Generation)
		}
		forward(ev)
	}
	m, err := lease.Acquire(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mgr.Store(m)
	t.Cleanup(func() { _ = m.Close() })
	e.expect(lease.EventAcquired)
	e.waitIdle(m, 2)
	e.store.setModes(fail, fail)
	e.clock.AdvanceTo(start + 20*sec)
	e.store.setModes(pass, pass)
	deadline := time.After(guard)
	for {
		select {
		case ok := <-resumed:
			if !ok {
				t.Fatal("Resume from the EventReacquired callback refused: the gate would stay shut")
			}
			if err := m.Gate().Admit(); err != nil {
				t.Fatalf("Admit after Resume = %v", err)
			}
			return
		case <-e.events:
		case <-deadline:
			t.Fatal("no EventReacquired")
		case <-time.After(20 * time.Millisecond):
			e.clock.Advance(sec / 4)
		}
	}
}

// The loss line tells the operator what comes next: a node that will
// reacquire its lease must not be reported as needing a restart (seen in
// an operator try-out: every node of a mesh logged "until the process
// restarts" during a Redis pause past the TTL, then served again by
// itself), and one that will not must say so.
func TestLossLineSaysWhatComesNext(t *testing.T) {
	const restart, again = "until the process restarts", "no restart needed"
	replaced := func(e *env, m *lease.Manager) { e.putLease(m, m.OwnerID(), m.Generation()+1) }
	deleted := (*env).deleteLease // still valid by the store's clock: data loss
	tests := []struct {
		name      string
		reacquire bool
		lose      func(e *env, m *lease.Manager)
		fail      error // lost through Fail instead of a renew
		want      string
	}{
		{name: "replaced, reacquiring", reacquire: true, lose: replaced, want: again},
		{name: "replaced, not reacquiring", lose: replaced, want: restart},
		{name: "data lost, reacquiring", reacquire: true, lose: deleted, want: restart},
		{name: "Fail, reacquiring", reacquire: true, fail: errors.New("stopped by the node"), want: restart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			cfg.Reacquire = tt.reacquire
			var logs syncbuf.Buffer
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			m, err := lease.Acquire(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			e.expect(lease.EventAcquired)
			e.waitIdle(m, 2)
			if tt.fail != nil {
				m.Fail(tt.fail)
			} else {
				tt.lose(e, m)
				e.clock.AdvanceTo(start + 5*sec)
			}
			e.expect(lease.EventLost)
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, "owner lease lost") {
					line = l
				}
			}
			if !strings.Contains(line, tt.want) || strings.Contains(line, restart) && strings.Contains(line, again) {
				t.Fatalf("loss line %q, want it to say %q", line, tt.want)
			}
		})
	}
}

// ReleaseRetrying, after a delete that failed with its answer lost (it
// applied) and a store down for a while, re-reads and finishes: the record
// is gone and the result is nil, where Release returns the store error.
func TestReleaseRetryingRidesOutAStoreFailure(t *testing.T) {
	e := newEnv(t)
	m := e.acquire()
	e.waitIdle(m, 2)
	e.store.onceWrite(applyThenFail) // the delete applies, its answer is lost
	waits := 0
	err := m.ReleaseRetrying(context.Background(), func(context.Context) error {
		if waits++; waits == 1 {
			e.store.setModes(fail, fail) // down for the next try
		} else {
			e.store.setModes(pass, pass) // back
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReleaseRetrying = %v, want nil once the store answered", err)
	}
	if waits < 2 {
		t.Fatalf("%d waits, want at least 2 (a lost answer, then a failure)", waits)
	}
	if _, rr := e.readRecord(m); rr.Found {
		t.Fatal("owner-lease record still stored after ReleaseRetrying")
	}
	e.expect(lease.EventReleased)
}

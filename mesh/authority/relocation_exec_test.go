package authority

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/record"
)

// Executor scenarios of a relocation against a store; each runs on
// locstore/memory here and on a real redis-server in redis_test.go.

// relocEnv is one object, Active on nodeA owned by ownerA, to be moved to
// nodeB / ownerB.
type relocEnv struct {
	s      locstore.Store
	e      *Executor
	obj    Object
	objGen uint64
	v      string // the authority version after the last step
	move   [16]byte
	res    [16]byte
}

func newRelocEnv(t *testing.T, s locstore.Store, obj Object) *relocEnv {
	t.Helper()
	ctx := context.Background()
	putLease(t, s, ownerA)
	putLease(t, s, ownerB)
	e := newExecutor(t, s)
	r, err := e.Reserve(ctx, ReserveRequest{Object: obj, Target: targetA(), Creation: pending("res-" + obj.ID)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Commit(ctx, CommitRequest{Object: obj, ReservationID: "res-" + obj.ID, Owner: ownerA})
	if err != nil {
		t.Fatal(err)
	}
	return &relocEnv{s: s, e: e, obj: obj, objGen: uint64(r.Plan.Record.ObjectGeneration), v: c.Version, move: moveID, res: resID}
}

func (r *relocEnv) target() Target {
	return Target{Node: nodeB, Owner: ownerB, Limits: Limits{Actors: 100}}
}

func (r *relocEnv) ref(attempt uint64) *RelocationRef {
	return &RelocationRef{RelocationID: r.move, TargetAttempt: attempt, ReservationID: r.res}
}

func (r *relocEnv) secureReq(authVersion string) CapacityRequest {
	b, err := BundleFor(r.obj.Kind, r.obj.StableType)
	if err != nil {
		panic(err)
	}
	return CapacityRequest{Target: r.target(), Bundle: b, ReservationID: r.res, Object: r.obj, ObjectGeneration: r.objGen,
		AuthorityVersion: authVersion, Source: partyA}
}

func (r *relocEnv) captureReq(attempt uint64) CaptureRequest {
	return CaptureRequest{Object: r.obj, ObjectGeneration: r.objGen, IfVersion: r.v, Source: partyA, Target: partyB, Move: *r.ref(attempt)}
}

func (r *relocEnv) prepareReq(ifVersion string, attempt uint64) PrepareRequest {
	return PrepareRequest{Object: r.obj, ObjectGeneration: r.objGen, IfVersion: ifVersion, Target: partyB, Move: *r.ref(attempt)}
}

func (r *relocEnv) newOwnerReq(ifVersion string, attempt uint64) NewOwnerRequest {
	return NewOwnerRequest{Object: r.obj, ObjectGeneration: r.objGen, IfVersion: ifVersion, Target: r.target(), Relocation: r.ref(attempt)}
}

func (r *relocEnv) completeReq() CompleteRequest {
	return CompleteRequest{Object: r.obj, ObjectGeneration: r.objGen, Owner: ownerB, RelocationID: r.move}
}

// secure and capture run the source's two batches with a plain executor.
func (r *relocEnv) secure(t *testing.T) {
	t.Helper()
	if _, err := r.e.SecureCapacity(context.Background(), r.secureReq(r.v)); err != nil {
		t.Fatal(err)
	}
}

func (r *relocEnv) capture(t *testing.T, attempt uint64) {
	t.Helper()
	res, err := r.e.RecordCaptured(context.Background(), r.captureReq(attempt))
	if err != nil {
		t.Fatal(err)
	}
	r.v = res.Version
}

func (r *relocEnv) row(t *testing.T) AuthorityRow { t.Helper(); return readAuthorityRow(t, r.s, r.obj) }

func (r *relocEnv) reservationFound(t *testing.T) bool {
	t.Helper()
	rr, err := r.s.Read(context.Background(), resKey(t, r.res))
	if err != nil {
		t.Fatal(err)
	}
	return rr.Found
}

func wantUsage(t *testing.T, s locstore.Store, id CounterID, want Usage) {
	t.Helper()
	if u := readUsage(t, s, id); u != want {
		t.Errorf("%s = %+v, want %+v", id, u, want)
	}
}

// runRelocation drives one Actor through a whole move: keyed
// SecureCapacity (and its repeat), RecordCaptured, RecordPrepared with a new
// target attempt, a refused NewOwner of the previous attempt, the NewOwner
// of the current one (and its repeat), CompleteRelocation (and its repeat).
func runRelocation(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	r := newRelocEnv(t, s, player)
	e := r.e
	first := r.v

	res, err := e.SecureCapacity(ctx, r.secureReq(first))
	if err != nil || res.AlreadyApplied || res.Attempts != 1 {
		t.Fatalf("SecureCapacity: %+v, %v", res, err)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Reserved: 1})
	again, err := e.SecureCapacity(ctx, r.secureReq(first))
	if err != nil || !again.AlreadyApplied || again.Attempts != 0 || !again.Plan.Reservation.Equal(*res.Plan.Reservation) {
		t.Fatalf("repeated SecureCapacity: %+v, %v", again, err)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Reserved: 1})
	if _, err := e.SecureCapacity(ctx, r.secureReq("some other version")); !errors.Is(err, ErrConflict) {
		t.Errorf("same reservation id, other content: %v", err)
	}
	if row := r.row(t); row.Version != first {
		t.Fatal("SecureCapacity changed the authority row")
	}

	r.capture(t, 1)
	if p := r.row(t).Record.Relocation; p == nil || p.Stage != record.RelocationCaptured || r.row(t).Record.OwnerID != ownerA.ID {
		t.Fatalf("after RecordCaptured: %+v", r.row(t).Record)
	}
	prep, err := e.RecordPrepared(ctx, r.prepareReq(r.v, 2))
	if err != nil {
		t.Fatal(err)
	}
	if p := r.row(t).Record.Relocation; p.Stage != record.RelocationPrepared || p.TargetAttempt != 2 || r.row(t).Record.OwnerID != ownerA.ID {
		t.Fatalf("after RecordPrepared: %+v", p)
	}

	// §8.2: a previous attempt cannot change the owner; nothing changes.
	if _, err := e.NewOwner(ctx, r.newOwnerReq(prep.Version, 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("NewOwner of the previous attempt: %v", err)
	}
	if row := r.row(t); row.Version != prep.Version || !r.reservationFound(t) {
		t.Fatal("a refused NewOwner changed the store")
	}

	n, err := e.NewOwner(ctx, r.newOwnerReq(prep.Version, 2))
	if err != nil || n.AlreadyApplied {
		t.Fatalf("NewOwner: %+v, %v", n, err)
	}
	row := r.row(t)
	p := row.Record.Relocation
	if row.Version != n.Version || row.Record.OwnerID != ownerB.ID || row.Record.AuthorityOwnerGeneration != 2 || uint64(row.Record.ObjectGeneration) != r.objGen ||
		!NodeOf(row.Record).Equal(nodeB) || p == nil || p.Stage != record.RelocationCommitted || p.TargetAttempt != 2 || p.PreviousAuthorityOwnerGeneration != 1 {
		t.Fatalf("after NewOwner: %+v", row.Record)
	}
	if r.reservationFound(t) {
		t.Error("the reservation survived its NewOwner")
	}
	wantUsage(t, s, actorsOf(nodeA), Usage{})
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: 1})

	// §10: repeating the owner CAS converges to success without writing.
	n2, err := e.NewOwner(ctx, r.newOwnerReq(prep.Version, 2))
	if err != nil || !n2.AlreadyApplied || n2.Version != n.Version {
		t.Fatalf("repeated NewOwner: %+v, %v", n2, err)
	}
	// The reservation was consumed: releasing it is nothing to do.
	if rel, err := e.ReleaseCapacity(ctx, CapacityRequest{ReservationID: r.res}); err != nil || !rel.AlreadyApplied {
		t.Fatalf("ReleaseCapacity after NewOwner: %+v, %v", rel, err)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: 1})

	c, err := e.CompleteRelocation(ctx, r.completeReq())
	if err != nil || c.AlreadyApplied {
		t.Fatalf("CompleteRelocation: %+v, %v", c, err)
	}
	row = r.row(t)
	if row.Record.Relocation != nil || row.Record.OwnerID != ownerB.ID || row.Record.AuthorityOwnerGeneration != 2 || row.Version != c.Version {
		t.Fatalf("after CompleteRelocation: %+v", row.Record)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: 1})
	if c2, err := e.CompleteRelocation(ctx, r.completeReq()); err != nil || !c2.AlreadyApplied {
		t.Fatalf("repeated CompleteRelocation: %+v, %v", c2, err)
	}
}

func TestExecutorRelocationMemory(t *testing.T) {
	s, _ := newMemory(t)
	runRelocation(t, s)
}

// runRelocationCancel: a move cancelled after Captured (§9.4) releases its
// reservation without writing the authority row; the cancelled move can no
// longer change the owner, and the owner's next move replaces the stale
// progress.
func runRelocationCancel(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	r := newRelocEnv(t, s, room)
	r.secure(t)
	r.capture(t, 1)
	captured := r.v
	wantUsage(t, s, spotsOf(nodeB), Usage{Reserved: 1})

	rel, err := r.e.ReleaseCapacity(ctx, CapacityRequest{ReservationID: r.res})
	if err != nil || rel.AlreadyApplied {
		t.Fatalf("ReleaseCapacity: %+v, %v", rel, err)
	}
	wantUsage(t, s, spotsOf(nodeB), Usage{})
	wantUsage(t, s, spotTypeOf(nodeB, record.ObjectUserSpot, "Room"), Usage{})
	if r.reservationFound(t) || r.row(t).Version != captured {
		t.Fatal("release left the reservation or wrote the authority row")
	}
	if rel, err := r.e.ReleaseCapacity(ctx, CapacityRequest{ReservationID: r.res}); err != nil || !rel.AlreadyApplied {
		t.Fatalf("second ReleaseCapacity: %+v, %v", rel, err)
	}
	if _, err := r.e.NewOwner(ctx, r.newOwnerReq(captured, 1)); !errors.Is(err, ErrConflict) {
		t.Fatalf("NewOwner of the cancelled move: %v", err)
	}
	if row := r.row(t); row.Version != captured || row.Record.OwnerID != ownerA.ID {
		t.Fatal("the cancelled move changed the owner")
	}

	// The next move of the same owner replaces the stale progress.
	r.move, r.res = [16]byte{0xa2}, [16]byte{0xb3}
	r.secure(t)
	r.capture(t, 1)
	if p := r.row(t).Record.Relocation; p == nil || p.RelocationID != r.move || p.Stage != record.RelocationCaptured {
		t.Fatalf("next move's progress: %+v", p)
	}
}

func TestExecutorRelocationCancelMemory(t *testing.T) {
	s, _ := newMemory(t)
	runRelocationCancel(t, s)
}

// runRelocationLost covers §10 for every relocation batch: a lost answer is
// decided by re-reading (the reservation row for the keyed capacity
// batches, the authority row for the stage changes), never guessed, and the
// batch applies exactly once.
func runRelocationLost(t *testing.T, newStore func(t *testing.T) locstore.Store) {
	ctx := context.Background()

	t.Run("keyed SecureCapacity applied, answer lost: confirmed by the reservation row", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		fs := lostAfter(r.s, 1)
		res, err := newExecutor(t, fs).SecureCapacity(ctx, r.secureReq(r.v))
		if err != nil || !res.Recovered || fs.writes.Load() != 1 {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
		wantUsage(t, r.s, actorsOf(nodeB), Usage{Reserved: 1})
	})
	t.Run("keyed SecureCapacity not applied, answer lost: re-read, apply once", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		fs := lostBefore(r.s, 1)
		res, err := newExecutor(t, fs).SecureCapacity(ctx, r.secureReq(r.v))
		if err != nil || res.Recovered || fs.writes.Load() != 2 {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
		wantUsage(t, r.s, actorsOf(nodeB), Usage{Reserved: 1})
	})
	t.Run("RecordCaptured answer lost", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		fs := lostAfter(r.s, 1)
		res, err := newExecutor(t, fs).RecordCaptured(ctx, r.captureReq(1))
		if err != nil || !res.Recovered || res.Version != r.row(t).Version || fs.writes.Load() != 1 {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
	})
	t.Run("relocation NewOwner answer lost: the row names the target with this attempt", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		r.capture(t, 1)
		fs := lostAfter(r.s, 1)
		res, err := newExecutor(t, fs).NewOwner(ctx, r.newOwnerReq(r.v, 1))
		if err != nil || !res.Recovered || fs.writes.Load() != 1 || r.row(t).Record.OwnerID != ownerB.ID {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
		wantUsage(t, r.s, actorsOf(nodeA), Usage{})
		wantUsage(t, r.s, actorsOf(nodeB), Usage{Active: 1})
	})
	t.Run("relocation NewOwner not applied, answer lost: re-read, apply once", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		r.capture(t, 1)
		fs := lostBefore(r.s, 1)
		res, err := newExecutor(t, fs).NewOwner(ctx, r.newOwnerReq(r.v, 1))
		if err != nil || res.Recovered || fs.writes.Load() != 2 || r.row(t).Record.AuthorityOwnerGeneration != 2 {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
		wantUsage(t, r.s, actorsOf(nodeB), Usage{Active: 1})
	})
	t.Run("keyed ReleaseCapacity answer lost: the missing row decides", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		fs := lostAfter(r.s, 1)
		res, err := newExecutor(t, fs).ReleaseCapacity(ctx, CapacityRequest{ReservationID: r.res})
		if err != nil || !res.Recovered || fs.writes.Load() != 1 {
			t.Fatalf("res %+v, err %v, %d writes", res, err, fs.writes.Load())
		}
		wantUsage(t, r.s, actorsOf(nodeB), Usage{})
	})
	t.Run("CompleteRelocation answer lost", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		r.capture(t, 1)
		if _, err := r.e.NewOwner(ctx, r.newOwnerReq(r.v, 1)); err != nil {
			t.Fatal(err)
		}
		fs := lostAfter(r.s, 1)
		res, err := newExecutor(t, fs).CompleteRelocation(ctx, r.completeReq())
		if err != nil || !res.Recovered || r.row(t).Record.Relocation != nil {
			t.Fatalf("res %+v, err %v", res, err)
		}
	})
	t.Run("re-read impossible: outcome unknown, no guess", func(t *testing.T) {
		r := newRelocEnv(t, newStore(t), player)
		r.secure(t)
		r.capture(t, 1)
		cctx, cancel := context.WithCancel(ctx)
		fs := &faultStore{Store: r.s, after: func(int64) error { cancel(); return lostAnswer() }}
		_, err := newExecutor(t, fs).NewOwner(cctx, r.newOwnerReq(r.v, 1))
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, locstore.ErrUnavailable) {
			t.Fatalf("err = %v, want an unknown outcome", err)
		}
		// The target repeats the CAS later (§10) and converges to success.
		res, err := r.e.NewOwner(ctx, r.newOwnerReq(r.v, 1))
		if err != nil || !res.AlreadyApplied {
			t.Fatalf("repeated NewOwner: %+v, %v", res, err)
		}
	})
}

func TestExecutorRelocationLostMemory(t *testing.T) {
	runRelocationLost(t, func(t *testing.T) locstore.Store { s, _ := newMemory(t); return s })
}

// runOwnerRace races, for each of rounds objects, the owner CAS of target
// attempt 1 against a re-prepare to attempt 2 followed by attempt 2's owner
// CAS, all from the same first-read version: exactly one attempt changes
// the owner, once. Then n callers repeat one attempt's CAS at the same
// time: exactly one writes, the others find it applied.
func runOwnerRace(t *testing.T, s locstore.Store, rounds, n int) {
	ctx := context.Background()
	wins := map[uint64]int{}
	for i := range rounds {
		r := newRelocEnv(t, s, Object{ID: fmt.Sprintf("race:%d", i), Kind: record.ObjectActor, StableType: "Player"})
		r.move, r.res = [16]byte{0xa0, byte(i + 1)}, [16]byte{0xb0, byte(i + 1)}
		r.secure(t)
		r.capture(t, 1)
		start := make(chan struct{})
		var wg sync.WaitGroup
		var err1, err2 error
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, err1 = r.e.NewOwner(ctx, r.newOwnerReq(r.v, 1))
		}()
		go func() {
			defer wg.Done()
			<-start
			p, err := r.e.RecordPrepared(ctx, r.prepareReq(r.v, 2))
			if err != nil {
				err2 = err
				return
			}
			_, err2 = r.e.NewOwner(ctx, r.newOwnerReq(p.Version, 2))
		}()
		close(start)
		wg.Wait()
		if (err1 == nil) == (err2 == nil) {
			t.Fatalf("round %d: attempt 1 err %v, attempt 2 err %v: want exactly one winner", i, err1, err2)
		}
		for _, err := range []error{err1, err2} {
			if err != nil && !errors.Is(err, ErrConflict) {
				t.Fatalf("round %d: loser error %v, want ErrConflict", i, err)
			}
		}
		row := r.row(t)
		p := row.Record.Relocation
		if row.Record.OwnerID != ownerB.ID || row.Record.AuthorityOwnerGeneration != 2 || p == nil || p.Stage != record.RelocationCommitted {
			t.Fatalf("round %d: row %+v", i, row.Record)
		}
		wins[uint64(p.TargetAttempt)]++
	}
	t.Logf("winning attempts over %d rounds: %v", rounds, wins)
	wantUsage(t, s, actorsOf(nodeA), Usage{})
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: rounds})

	r := newRelocEnv(t, s, Object{ID: "race:same", Kind: record.ObjectActor, StableType: "Player"})
	r.secure(t)
	r.capture(t, 1)
	start := make(chan struct{})
	results := make(chan error, n)
	var writers sync.WaitGroup
	var mu sync.Mutex
	wrote := 0
	for range n {
		writers.Add(1)
		go func() {
			defer writers.Done()
			<-start
			res, err := r.e.NewOwner(ctx, r.newOwnerReq(r.v, 1))
			if err == nil && !res.AlreadyApplied {
				mu.Lock()
				wrote++
				mu.Unlock()
			}
			results <- err
		}()
	}
	close(start)
	writers.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("a repeat of the same attempt failed: %v", err)
		}
	}
	if wrote != 1 {
		t.Errorf("%d callers wrote the owner change, want exactly 1", wrote)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: rounds + 1})
}

func TestExecutorOwnerRaceMemory(t *testing.T) {
	s, _ := newMemory(t)
	runOwnerRace(t, s, 30, 20)
}

// runTornSnapshot: a snapshot is read row by row, so another batch can
// apply between the authority read and the counter reads. Here the
// competing attempt 2 commits right before the losing attempt 1 reads the
// source's counter, which then holds fewer active slots than the (stale)
// record releases. That is a torn read, not a corrupt store: the loser must
// end with ErrConflict after re-reading, not with ErrCorruptRecord.
func runTornSnapshot(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	r := newRelocEnv(t, s, player)
	r.secure(t)
	r.capture(t, 1)
	srcCounter := actKey(t, actorsOf(nodeA)) // the first row of the counter read
	var once sync.Once
	fs := &faultStore{Store: s, onRead: func(key string) {
		if key != srcCounter {
			return
		}
		once.Do(func() {
			p, err := r.e.RecordPrepared(ctx, r.prepareReq(r.v, 2))
			if err != nil {
				t.Errorf("competing prepare: %v", err)
				return
			}
			if _, err := r.e.NewOwner(ctx, r.newOwnerReq(p.Version, 2)); err != nil {
				t.Errorf("competing NewOwner: %v", err)
			}
		})
	}}
	_, err := newExecutor(t, fs).NewOwner(ctx, r.newOwnerReq(r.v, 1))
	wantErr(t, err, ErrConflict)
	wantUsage(t, s, actorsOf(nodeA), Usage{})
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: 1})
}

func TestExecutorTornSnapshotMemory(t *testing.T) {
	s, _ := newMemory(t)
	runTornSnapshot(t, s)
}

// runTornReservation: the same target attempt's owner CAS applies (by a
// concurrent caller, e.g. a retry) between the rows this caller reads. The
// reservation is read before the authority row, so the caller sees the
// committed row and converges to success instead of concluding "reservation
// missing" next to a row still Captured.
func runTornReservation(t *testing.T, s locstore.Store) {
	ctx := context.Background()
	r := newRelocEnv(t, s, player)
	r.secure(t)
	r.capture(t, 1)
	var once sync.Once
	fs := &faultStore{Store: s, onRead: func(key string) {
		if key != resKey(t, r.res) {
			return
		}
		once.Do(func() {
			if _, err := r.e.NewOwner(ctx, r.newOwnerReq(r.v, 1)); err != nil {
				t.Errorf("competing NewOwner: %v", err)
			}
		})
	}}
	res, err := newExecutor(t, fs).NewOwner(ctx, r.newOwnerReq(r.v, 1))
	if err != nil || !res.AlreadyApplied {
		t.Fatalf("NewOwner next to a concurrent identical one: %+v, %v", res, err)
	}
	wantUsage(t, s, actorsOf(nodeB), Usage{Active: 1})
}

func TestExecutorTornReservationMemory(t *testing.T) {
	s, _ := newMemory(t)
	runTornReservation(t, s)
}

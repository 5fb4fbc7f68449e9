package mesh

import (
	"context"
	"errors"
	"time"

	"github.com/meshnode/meshnode/internal/ctxsleep"
	"github.com/meshnode/meshnode/mesh/authority"
	"github.com/meshnode/meshnode/mesh/record"
)

// An authority batch whose result was lost and that no re-read could
// decide (authority.ErrOutcomeUnknown) leaves the instance it concerns in
// between: its record may have gone Ready (a Commit) or away (a Delete), or
// not. Acting as if it had not applied broke the one-owner promise both
// ways — a target that closed its new instance left a Ready record naming
// it with nothing hosted ("not found" for every message, for good), and an
// owner that reopened an instance whose record was gone kept it running,
// timers and all, reachable through cached routes. So the instance stays
// as it is (held, or refusing messages) and the authority row decides,
// read again until the store answers.

// Pauses between the reads that settle an unknown outcome: the store did
// not answer just now, so the first comes soon and they slow down to one
// a second.
const (
	settleFirstPause = 50 * time.Millisecond
	settleMaxPause   = time.Second
)

// untilAnswered runs step, on a goroutine of its own, until it reports
// done — pausing after each failure, from settleFirstPause up to
// settleMaxPause, and warning every tenth — or until the node begins
// stopping. The returned channel is closed then. It fails when the node is
// already stopping (stop waits for the goroutine, which ends at halt).
func (o *objects) untilAnswered(what, id string, step func(ctx context.Context) (bool, error)) (<-chan struct{}, error) {
	if err := o.begin(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer o.work.Done()
		defer close(done)
		pause := settleFirstPause
		for attempt := 1; ; attempt++ {
			rctx, cancel := context.WithTimeout(o.halt, storeWriteTimeout)
			ok, err := step(rctx)
			cancel()
			if ok || o.halt.Err() != nil {
				return
			}
			if attempt%10 == 0 {
				o.log.Warn(what+": still not done, the store does not answer", "object", id, "attempts", attempt, "err", err)
			}
			if ctxsleep.For(o.halt, pause) != nil {
				return
			}
			pause = min(2*pause, settleMaxPause)
		}
	}()
	return done, nil
}

// settleUnknown reads the authority row of (kind, id) until the store
// answers, then runs decide with it (untilAnswered): the caller may stop
// waiting (its deadline) while the instance is still undecided. The
// returned channel is closed once decide ran, or once the node began
// stopping without an answer (stop then ends every instance).
func (o *objects) settleUnknown(kind record.ObjectKind, id, what string, cause error, decide func(authority.AuthorityRow)) (<-chan struct{}, error) {
	o.log.Warn(what+": the store did not confirm the write; the instance waits until a read of its record decides",
		"object", id, "kind", string(kind), "err", cause)
	return o.untilAnswered(what, id, func(ctx context.Context) (bool, error) {
		row, _, err := o.readAuthorityAt(ctx, kind, id)
		if err != nil {
			return false, err
		}
		decide(row)
		return true, nil
	})
}

// returnReservationLater returns a creation's reservation that an Abort
// could not return just now (the store silent or refusing writes), once
// the store takes it: while the record is Reserved under this reservation
// it stands in the way of every creation of the Id (a Create says it
// exists, a GetOrCreate waits) and only its owner's death let recovery
// remove it — a live owner's stayed for good. owner is set when this node
// owns the record (the target). Nothing is done while this node may not
// write (§5); once its lease has ended, recovery by others takes over (and
// this loop, reading the record gone, stops). req.Terminal, when set, is
// the factory's verdict, recorded with the return (the target's Abort of a
// rejection or failure that the store refused).
func (o *objects) returnReservationLater(req authority.AbortRequest, cause error) {
	o.log.Warn("creation: reservation not returned; returning it once the store takes it",
		"object", req.Object.ID, "err", cause)
	_, _ = o.untilAnswered("creation reservation return", req.Object.ID, func(ctx context.Context) (bool, error) {
		// Waits for the lease too; one that is lost for good makes the
		// record's owner run dead, and recovery returns it then.
		row, err := o.admittedRow(ctx, req.Object.Kind, req.Object.ID)
		if err != nil {
			return false, err
		}
		a := row.Record
		if !row.Found || a.Allocation.State != record.AllocationReserved || a.PendingCreation == nil ||
			a.PendingCreation.ReservationID != req.ReservationID {
			return true, nil // returned by someone, or decided otherwise
		}
		r := req
		r.IfVersion = row.Version
		_, err = o.exec.Abort(ctx, r)
		if err != nil && r.Terminal != nil && errors.Is(err, authority.ErrInvalidOperation) {
			// The verdict cannot be stored (another request's result holds
			// the OperationId): the reservation is returned all the same.
			r.Terminal = nil
			_, err = o.exec.Abort(ctx, r)
		}
		if err != nil && !errors.Is(err, authority.ErrConflict) {
			return false, err
		}
		o.log.Info("creation: reservation returned", "object", req.Object.ID)
		return true, nil
	})
}

// settleEnd finishes an object end (Destroy, Close) whose Delete has an
// unknown outcome: the record gone, or of another generation, ends the
// instance (end); the record still there reopens it (reopen). The caller
// gets the decision if it comes before ctx ends, else ErrUnavailable
// saying the object refuses messages until it comes.
func (o *objects) settleEnd(ctx context.Context, kind record.ObjectKind, id string, gen uint64, cause error, end, reopen func()) (bool, error) {
	var deleted, decided bool
	done, err := o.settleUnknown(kind, id, "object end", cause, func(row authority.AuthorityRow) {
		decided = true
		deleted = !row.Found || uint64(row.Record.ObjectGeneration) != gen
		if deleted {
			end()
		} else {
			reopen()
		}
		o.log.Info("object end: decided by a read of its record", "object", id, "kind", string(kind), "object_gen", gen, "deleted", deleted)
	})
	if err != nil {
		// The node is stopping: its shutdown ends the instance.
		return false, wrapErr(ErrUnavailable, cause, "end of %s", id)
	}
	select {
	case <-done:
		switch {
		case !decided:
			return false, wrapErr(ErrUnavailable, ErrClosed, "end of %s: node stopping before the store answered", id)
		case deleted:
			return true, nil
		}
		return false, wrapErr(ErrUnavailable, cause, "end of %s: the store did not take the Delete", id)
	case <-ctx.Done():
		return false, wrapErr(ErrUnavailable, cause, "end of %s: outcome unknown; the object refuses messages until a read of its record decides", id)
	}
}

// settleCommit finishes a creation on its target whose Commit has an
// unknown outcome; the new instance stays held meanwhile. The record
// Active under this reservation's ObjectGeneration and owner means the
// Commit applied: the instance runs (created) and the creator is told
// Created. Anything else means it did not: the instance goes (unhost) and
// a reservation still ours is returned (abort). A decision after ctx ended
// (the creation's deadline) still runs the instance or ends it; the
// creator, told the deadline passed, learns the rest from the store like
// any creator whose answer was lost.
func (o *objects) settleCommit(ctx context.Context, ord createOrder, self authority.Owner, cause error,
	created func(version string), unhost, abort func(), done targetOutcome) targetOutcome {
	err := o.settleCommitted(ctx, ord.kind, ord.id, "creation", ord.objGen, ord.ownerGen, self, cause, created,
		func(row *authority.AuthorityRow) {
			unhost()
			if row != nil && row.Found && row.Record.PendingCreation != nil && row.Record.PendingCreation.ReservationID == ord.reservationID {
				abort()
			}
		})
	if err != nil {
		return targetOutcome{framework: true, err: err}
	}
	return done
}

// abortApplied reports whether an Abort of ord's reservation that failed
// with err applied after all: only an unknown outcome can have, and a read
// of the record decides it (the record no longer Reserved under this
// reservation), within ctx. An Abort that recorded a rejection or failure
// and applied must be answered as such, or the creator, told of a failure
// before the factory, runs the factory again elsewhere although a final
// result is stored.
func (o *objects) abortApplied(ctx context.Context, ord createOrder, err error) bool {
	if !errors.Is(err, authority.ErrOutcomeUnknown) {
		return false
	}
	var applied bool
	done, serr := o.settleUnknown(ord.kind, ord.id, "creation result", err, func(row authority.AuthorityRow) {
		a := row.Record
		applied = !(row.Found && a.Allocation.State == record.AllocationReserved && a.PendingCreation != nil &&
			a.PendingCreation.ReservationID == ord.reservationID)
	})
	if serr != nil {
		return false
	}
	select {
	case <-done:
		return applied
	case <-ctx.Done():
		return false
	}
}

// committedTo reports a record that went Ready under the given generations
// with owner as its owner: the Commit that would have put it there applied.
func committedTo(row authority.AuthorityRow, objGen, ownerGen uint64, owner authority.Owner) bool {
	a := row.Record
	return row.Found && uint64(a.ObjectGeneration) == objGen && a.Allocation.State == record.AllocationActive &&
		authority.OwnerOf(a) == owner && uint64(a.AuthorityOwnerGeneration) == ownerGen
}

// settleInstanceCommit is settleCommit for an Instance Spot's cold
// activation: the instance, its first message queued, stays held until a
// read of the record decides; Ready under this activation → it runs
// (ready), else it goes and the reservation is returned (drop). The
// sender is answered with the decision, or with the deadline when ctx ends
// first (the decision then still runs the instance or ends it).
func (o *objects) settleInstanceCommit(ctx context.Context, id string, objGen, ownerGen uint64, self authority.Owner,
	cause error, ready func(version string), drop func(why error)) error {
	return o.settleCommitted(ctx, record.ObjectInstanceSpot, id, "instance activation", objGen, ownerGen, self, cause, ready,
		func(*authority.AuthorityRow) { drop(cause) })
}

// settleCommitted decides a Commit of (kind, id) whose outcome is unknown
// by a read of the record (settleUnknown): committed → ready with the
// record's version, and nil; else notCommitted with the row (nil when the
// node began stopping first: nothing it hosts survives that) and an
// ErrUnavailable. When ctx ends first it returns ErrDeadlineExceeded and
// the decision still runs later.
func (o *objects) settleCommitted(ctx context.Context, kind record.ObjectKind, id, what string, objGen, ownerGen uint64,
	self authority.Owner, cause error, ready func(version string), notCommitted func(row *authority.AuthorityRow)) error {
	var committed, decided bool
	done, err := o.settleUnknown(kind, id, what, cause, func(row authority.AuthorityRow) {
		decided = true
		committed = committedTo(row, objGen, ownerGen, self)
		if committed {
			ready(row.Version)
		} else {
			notCommitted(&row)
		}
		o.log.Info(what+": decided by a read of its record", "object", id, "object_gen", objGen, "committed", committed)
	})
	if err != nil {
		notCommitted(nil)
		return wrapErr(ErrUnavailable, cause, "%s of %s", what, id)
	}
	select {
	case <-done:
		switch {
		case !decided:
			return wrapErr(ErrUnavailable, ErrClosed, "%s of %s: node stopping before the store answered", what, id)
		case committed:
			return nil
		}
		return wrapErr(ErrUnavailable, cause, "%s of %s: the store did not take the Commit", what, id)
	case <-ctx.Done():
		return deadlineErr("%s of %s: the Commit's outcome is not known yet (%v)", what, id, cause)
	}
}

// removeOwnedLater deletes a record this node owns and could not delete
// just now (req, its IfVersion ignored: the row read decides), once the
// store answers: while the row names this node at req's generation under
// its owner it is deleted at the version read; then done runs. A record
// naming a live node that hosts nothing is never recovered by anyone else.
func (o *objects) removeOwnedLater(req authority.DeleteRequest, cause error, done func()) {
	o.log.Warn("record not removed; removing it once the store takes it", "object", req.Object.ID, "err", cause)
	_, _ = o.untilAnswered("record removal", req.Object.ID, func(ctx context.Context) (bool, error) {
		row, err := o.admittedRow(ctx, req.Object.Kind, req.Object.ID)
		if err != nil {
			return false, err
		}
		a := row.Record
		if !row.Found || uint64(a.ObjectGeneration) != req.ObjectGeneration || authority.OwnerOf(a) != req.Owner {
			return true, nil // removed, or no longer this node's to remove
		}
		r := req
		r.IfVersion = row.Version
		if _, err := o.exec.Delete(ctx, r); err != nil && !errors.Is(err, authority.ErrConflict) {
			return false, err
		} else if err != nil {
			return false, err // changed since the read: read again
		}
		done()
		o.log.Info("record removed", "object", req.Object.ID)
		return true, nil
	})
}

// rebuildLater finishes an Instance Spot recovery whose takeover had an
// unknown outcome: once the store answers, a record that names this node
// with its first message not done, and that nothing here hosts, is
// rebuilt here (recoverInstance). Nobody else would: the record names a
// live owner.
func (o *objects) rebuildLater(id string, cause error) {
	o.log.Warn("instance spot recovery: the store did not confirm the takeover; the record decides once it answers", "object", id, "err", cause)
	_, _ = o.untilAnswered("instance spot recovery", id, func(ctx context.Context) (bool, error) {
		row, _, err := o.readAuthorityAt(ctx, record.ObjectInstanceSpot, id)
		if err != nil {
			return false, err
		}
		a := row.Record
		ownerID, leaseGen := o.n.Owner()
		if !row.Found || a.PendingCreation == nil || authority.OwnerOf(a) != (authority.Owner{ID: ownerID, LeaseGeneration: leaseGen}) ||
			o.hostedInstance(id) {
			return true, nil // not ours, done, or rebuilt already
		}
		if _, err := o.recoverInstance(ctx, row, false); err != nil {
			return false, err
		}
		// Busy elsewhere on this node (its claim held): look again.
		return o.hostedInstance(id), nil
	})
}

// admittedRow reads the authority row of (kind, id) for a write this node
// is about to make: it fails while the lease gate does not admit writes
// (§5), before reading anything.
func (o *objects) admittedRow(ctx context.Context, kind record.ObjectKind, id string) (authority.AuthorityRow, error) {
	if err := o.n.lease.Gate().Admit(); err != nil {
		return authority.AuthorityRow{}, err
	}
	row, _, err := o.readAuthorityAt(ctx, kind, id)
	return row, err
}

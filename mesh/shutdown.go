package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/lease"
)

// The store steps of the §11 shutdown, as ShutdownIncompleteError names
// them.
const (
	stepSweep         = "owner sweep"
	stepStopped       = "publish stopped"
	stepRelease       = "release owner lease"
	stepRemoveStopped = "remove descriptor"
)

// ShutdownIncompleteError is Close's (and a drain's) error when store steps
// of the §11 shutdown did not complete: the store did not answer before the
// shutdown deadline, refused for good, or the owner lease had ended before
// the steps that write in this run's name (LeaseEnded). It says in one line
// which steps were not done and what they leave in the store, so that an
// operator reading `meshnode run: shutdown: …` knows what is left and that
// the other nodes clean it up. Err is the last store error (errors.Is works
// through it, e.g. locstore.ErrUnavailable, and through LeaseEnded, e.g.
// lease.ErrLeaseLost).
type ShutdownIncompleteError struct {
	NotDone  []string // the steps not done, in the shutdown's order
	Left     []string // what they leave behind
	Deadline bool     // the shutdown deadline ended the retries
	// Cancelled: the caller cancelled Close's context (no deadline passed)
	// and that ended the retries — a second Ctrl-C, say. Until 2026-12-07
	// it read as Deadline, blaming shutdown_deadline (review of the CLI).
	Cancelled bool
	// LeaseEnded is why the owner lease no longer admitted writes in this
	// run's name when the shutdown reached them (lost, expired); nil when
	// it did.
	LeaseEnded error
	Err        error
}

func (e *ShutdownIncompleteError) Error() string {
	var why []string
	if e.LeaseEnded != nil {
		why = append(why, "the owner lease ended before the shutdown, nothing may be written in this run's name: "+oneLine(e.LeaseEnded))
	}
	switch {
	case e.Deadline:
		why = append(why, "the store did not answer before shutdown_deadline")
	case e.Cancelled:
		why = append(why, "the shutdown was cancelled before the store answered")
	case e.Err != nil || e.LeaseEnded == nil:
		why = append(why, "a store step failed for good")
	}
	msg := fmt.Sprintf("incomplete (%s): not done: %s; left behind: %s",
		strings.Join(why, "; "), strings.Join(e.NotDone, ", "), strings.Join(e.Left, "; "))
	if e.Err != nil {
		msg += "; last error: " + oneLine(e.Err)
	}
	return msg
}

// ApplicationStuckError is part of Close's error when application code had
// not returned once the shutdown could wait no longer (shutdown_deadline
// less its store steps' share): handlers still in a turn (Turns) — those
// objects were closed without waiting, their queued requests answered,
// their timers stopped, their records swept with the others — or other
// calls into the application, a factory's New or a snapshot adapter that
// ignores its context (Calls). The shutdown went on without them; the
// goroutines in that code run until it returns. A handler should not block
// for long: a few workers run every object of a node (docs/EMBEDDING.md).
// Until 2026-12-07 Close waited for them without bound.
type ApplicationStuckError struct {
	Turns []string // "actor <id>" / "spot <id>", sorted
	// Calls: a creation or move was still in flight. InCalls names the
	// calls into the application it was in, oldest first ("Snapshot of
	// actor <id> (running 3s)"; New, Snapshot, Restore, Relocated); empty when the
	// order was not in one (its store call ends with the halt).
	Calls   bool
	InCalls []string
}

func (e *ApplicationStuckError) Error() string {
	var parts []string
	if len(e.Turns) > 0 {
		parts = append(parts, fmt.Sprintf("%d object handlers were still in a turn: %s", len(e.Turns), firstOf(e.Turns)))
	}
	switch {
	case len(e.InCalls) > 0:
		parts = append(parts, "calls into the application (a factory's New, a snapshot adapter, a Relocated callback) had not returned: "+firstOf(e.InCalls))
	case e.Calls:
		parts = append(parts, "a creation or move was still in a call into the application (a factory's New, a snapshot adapter or a Relocated callback that does not return)")
	}
	return "application code had not returned at the shutdown's deadline and was not waited for: " + strings.Join(parts, "; ")
}

// firstOf names the first 10 of names, and how many more there are.
func firstOf(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
}

// turnsWait is how long a shutdown waits for running turns: the time left
// less the store steps' share (drainReserve), and at least half of what is
// left.
func turnsWait(ctx context.Context, deadline time.Duration) time.Duration {
	left := deadline
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	return max(left-drainReserve(deadline), left/2)
}

// oneLine is err's text on one line: a sweep's error joins one error per
// record.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// Unwrap exposes the last store error and why the lease ended.
func (e *ShutdownIncompleteError) Unwrap() []error {
	var errs []error
	for _, err := range []error{e.Err, e.LeaseEnded} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// shutdownSteps records, for one Close, the store steps that did not
// complete, the last store error and why the lease ended.
type shutdownSteps struct {
	notDone    map[string]bool
	last       error
	leaseEnded error
	// lostRecord is what became of the owner-lease record when the lease
	// was lost (0: not lost): a lost lease is not released, so the release
	// step is not "not done", but the record is part of what is left.
	lostRecord lease.LostRecord
}

func (s *shutdownSteps) failed(step string, err error) {
	s.undone(step)
	// A step tried again after the deadline fails with the deadline; the
	// store's own error met before says more to the operator.
	if s.last == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		s.last = err
	}
}

// leaseGone records step as not done because the owner lease no longer
// admits writes in this run's name (reason: the gate's, or the loss's).
func (s *shutdownSteps) leaseGone(step string, reason error) {
	s.undone(step)
	if s.leaseEnded == nil {
		s.leaseEnded = reason
	}
}

func (s *shutdownSteps) undone(step string) {
	if s.notDone == nil {
		s.notDone = map[string]bool{}
	}
	s.notDone[step] = true
}

// result is the ShutdownIncompleteError of the steps not done, or nil.
func (s *shutdownSteps) result(ctx context.Context) error {
	if len(s.notDone) == 0 {
		return nil
	}
	e := &ShutdownIncompleteError{LeaseEnded: s.leaseEnded, Err: s.last}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.Deadline = true
	case ctx.Err() != nil:
		e.Cancelled = true
	}
	for _, step := range []string{stepSweep, stepStopped, stepRelease, stepRemoveStopped} {
		if s.notDone[step] {
			e.NotDone = append(e.NotDone, step)
		}
	}
	// After a loss of the store's data what this run wrote is gone, or
	// partly so (an eviction, a failover to a replica that missed the last
	// writes): what is left is what the store kept. Until 2026-12-07 the
	// line said the records and the descriptor were left, while the drain's
	// line just above said they went with the store's data (operator
	// try-out: Redis restarted empty, then SIGTERM).
	dataLost := s.lostRecord == lease.RecordDataLost
	if s.notDone[stepSweep] {
		if dataLost {
			e.Left = append(e.Left, "this run's authority records (of the objects not moved: their state is lost), as far as the store kept them when it lost its data: for reclaim by the other nodes once the owner lease has expired")
		} else {
			e.Left = append(e.Left, "this run's authority records (of the objects not moved: their state is lost), for reclaim by the other nodes once the owner lease has expired")
		}
	}
	if rec := lostRecordLeft(s.lostRecord); s.notDone[stepRelease] {
		e.Left = append(e.Left, "the owner lease record, until it expires (lease.ttl)")
	} else if rec != "" {
		e.Left = append(e.Left, rec)
	}
	switch {
	case s.notDone[stepStopped] && dataLost:
		e.Left = append(e.Left, "the descriptor (not stopped), if the store kept it when it lost its data: for reclaim by the other nodes (kept up to an hour, as a crashed run's; a restart under the same routing id takes it over)")
	case s.notDone[stepStopped]:
		// directory.ReclaimKey keeps a descriptor that does not say
		// stopped for DefaultReclaimAge, as the trace of a run that ended
		// otherwise; this run's own removal keeps that rule.
		e.Left = append(e.Left, "the descriptor (not stopped), for reclaim by the other nodes once the owner lease has expired (kept up to an hour, as a crashed run's; a restart under the same routing id takes it over)")
	case s.notDone[stepRelease] || s.notDone[stepRemoveStopped]:
		e.Left = append(e.Left, "the stopped descriptor, for reclaim by the other nodes")
	}
	return e
}

// lostRecordLeft says what became of the owner-lease record of a lease lost
// before the shutdown ("" when it was not lost). Until 2026-12-06 the
// left-behind list said nothing of it then: the release is skipped (a lost
// lease is not this run's to delete), so the record appeared neither among
// the steps not done nor among what is left.
func lostRecordLeft(rec lease.LostRecord) string {
	switch rec {
	case lease.RecordKept:
		return "the owner lease record, until it expires (lease.ttl): still this run's when the lease ended for good, not released, not renewed"
	case lease.RecordNotOurs:
		return "the owner lease record: none of this run's left, it had expired or been replaced when the loss was found (nothing to release)"
	case lease.RecordDataLost:
		return "the owner lease record: none left, it went with the store's data (nothing to release)"
	}
	return ""
}

// storeMayAnswerAgain reports whether err is a store failure that asking
// again may get past: the store unreachable, slow, or refusing writes for a
// while — not a loss of its data, which no retry undoes.
func storeMayAnswerAgain(err error) bool {
	return errors.Is(err, locstore.ErrUnavailable) && !errors.Is(err, locstore.ErrDataLost)
}

// shutdownPace paces a shutdown step's attempts while the store does not
// answer: 100 ms doubling to 1 s, so a store back within a second or two
// is found at once, and an unreachable one is not asked in a tight loop.
func shutdownPace() *backoff { return &backoff{d: 100 * time.Millisecond, ceil: time.Second} }

// retryStoreStep runs one store step of the shutdown, again — paced — while
// it fails because the store does not answer and ctx (the shutdown's
// deadline) has time left. gated steps write in this run's name and stop
// once the owner lease no longer admits them (it expired during the
// outage). It returns the step's last error: a store outage of a few
// seconds during a shutdown used to fail the step at once and leave the
// descriptor for the other nodes' reclaim (operator try-out).
func (n *Node) retryStoreStep(ctx context.Context, step string, gated bool, f func(context.Context) error) error {
	pace := shutdownPace()
	var storeErr error // the last store failure: more telling than the deadline's
	for tries := 1; ; tries++ {
		err := f(ctx)
		if err == nil {
			if storeErr != nil {
				n.log.Info("shutdown: the store answers again; step done", "step", step, "tries", tries)
			}
			return nil
		}
		if !storeMayAnswerAgain(err) {
			if storeErr != nil && ctx.Err() != nil {
				return storeErr
			}
			return err
		}
		storeErr = err
		if tries == 1 {
			left := time.Duration(0)
			if d, ok := ctx.Deadline(); ok {
				left = time.Until(d)
			}
			n.log.Warn("shutdown: the store does not answer; retrying until it does or shutdown_deadline passes",
				"step", step, "deadline_left", left, "err", err)
		}
		if gated && !n.lease.Gate().Open() || pace.sleep(ctx) != nil {
			return err
		}
	}
}

package mesh

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshnode/meshnode/locstore"
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
// shutdown deadline, or refused for good. It says in one line which steps
// were not done and what they leave in the store, so that an operator
// reading `meshnode run: shutdown: …` knows what is left and that the other
// nodes clean it up. Err is the last store error (errors.Is works through
// it, e.g. locstore.ErrUnavailable).
type ShutdownIncompleteError struct {
	NotDone  []string // the steps not done, in the shutdown's order
	Left     []string // what they leave behind
	Deadline bool     // the shutdown deadline ended the retries
	Err      error
}

func (e *ShutdownIncompleteError) Error() string {
	why := "a store step failed for good"
	if e.Deadline {
		why = "the store did not answer before shutdown_deadline"
	}
	cause := "none"
	if e.Err != nil {
		// One line: a sweep's error joins one error per record.
		cause = strings.ReplaceAll(e.Err.Error(), "\n", "; ")
	}
	return fmt.Sprintf("incomplete (%s): not done: %s; left behind: %s; last error: %s",
		why, strings.Join(e.NotDone, ", "), strings.Join(e.Left, "; "), cause)
}

// Unwrap exposes the last store error.
func (e *ShutdownIncompleteError) Unwrap() error { return e.Err }

// shutdownSteps records, for one Close, the store steps that did not
// complete and the last store error.
type shutdownSteps struct {
	notDone map[string]bool
	last    error
}

func (s *shutdownSteps) failed(step string, err error) {
	if s.notDone == nil {
		s.notDone = map[string]bool{}
	}
	s.notDone[step] = true
	// A step tried again after the deadline fails with the deadline; the
	// store's own error met before says more to the operator.
	if s.last == nil || !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		s.last = err
	}
}

// result is the ShutdownIncompleteError of the steps not done, or nil.
func (s *shutdownSteps) result(ctx context.Context) error {
	if len(s.notDone) == 0 {
		return nil
	}
	e := &ShutdownIncompleteError{Deadline: ctx.Err() != nil, Err: s.last}
	for _, step := range []string{stepSweep, stepStopped, stepRelease, stepRemoveStopped} {
		if s.notDone[step] {
			e.NotDone = append(e.NotDone, step)
		}
	}
	if s.notDone[stepSweep] {
		e.Left = append(e.Left, "this run's authority records (of the objects not moved: their state is lost), for reclaim by the other nodes once the owner lease has expired")
	}
	if s.notDone[stepRelease] {
		e.Left = append(e.Left, "the owner lease record, until it expires (lease.ttl)")
	}
	switch {
	case s.notDone[stepStopped]:
		e.Left = append(e.Left, "the descriptor (not stopped), for reclaim by the other nodes once the owner lease has expired")
	case s.notDone[stepRelease] || s.notDone[stepRemoveStopped]:
		e.Left = append(e.Left, "the stopped descriptor, for reclaim by the other nodes")
	}
	return e
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

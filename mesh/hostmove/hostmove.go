// Package hostmove is the pure bookkeeping of one host command — Relocate
// (move every Actor and Spot a node owns to the other serving nodes) and the
// drain before a shutdown: which object starts next under the concurrency
// bound, one final outcome per object, the progress counts, and the one end
// of the command (Completed, or ForceStopped when its deadline stopped it
// first, spec §11). It does no I/O and keeps no clock: mesh/host_relocate.go
// starts the moves it hands out and reports how each ended.
package hostmove

import (
	"errors"
	"fmt"
	"time"
)

// Outcome is where one object of the command stands.
type Outcome uint8

// Object outcomes. Moved, Skipped, Failed, Gone and NotStarted are final.
const (
	// Pending: not started yet.
	Pending Outcome = iota
	// Running: its move is in flight.
	Running
	// Moved: the new owner serves it.
	Moved
	// Skipped: its factory's policy is DisableRelocation; it stays here.
	Skipped
	// Failed: the move ended without moving it (Reason says why); it stays
	// owned and working on this node (§9.4).
	Failed
	// Gone: it was no longer hosted here when its turn came (destroyed,
	// closed, or moved by someone else).
	Gone
	// NotStarted: the command ended before its move began — its deadline,
	// the node's stop (Reason says which: StopFor), or a command that
	// moves nothing (Decline) — and it stays on this node: owned and
	// working, or, at a drain, removed by the shutdown.
	NotStarted
)

var outcomeNames = []string{"pending", "running", "moved", "skipped", "failed", "gone", "notStarted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Final reports whether o is an end.
func (o Outcome) Final() bool { return o >= Moved }

// End is how the whole command ended.
type End uint8

// Command ends.
const (
	// Open: objects are still pending or running.
	Open End = iota
	// Completed: every object reached a final outcome.
	Completed
	// ForceStopped: the deadline (or the node's stop) came while objects
	// were still pending or running (the pending ones are NotStarted).
	ForceStopped
)

var endNames = []string{"open", "completed", "forceStopped"}

func (e End) String() string {
	if int(e) < len(endNames) {
		return endNames[e]
	}
	return fmt.Sprintf("End(%d)", uint8(e))
}

// Object is one object the command covers.
type Object struct {
	ID         string
	Spot       bool   // a Spot (else an Actor)
	Instance   bool   // the Spot is an Instance Spot (else a User Spot)
	Generation uint64 // ObjectGeneration
	// Disabled: the factory's policy is DisableRelocation (Skipped at once).
	Disabled bool
	// Unmovable, when set, is why no host command moves this object at all
	// (Skipped at once with this reason): an Instance Spot.
	Unmovable string
}

// Key identifies an object within a command.
type Key struct {
	ID   string
	Spot bool
}

// KeyOf is o's key.
func KeyOf(o Object) Key { return Key{ID: o.ID, Spot: o.Spot} }

// Result is one object's outcome.
type Result struct {
	Object  Object
	Outcome Outcome
	// Reason says why it failed (a relocation reason or an error).
	Reason string
	// Bytes is the Restore payload size of a Moved object.
	Bytes int
	// Target is the routing id of the node that took it (Moved).
	Target []byte
	// Took is how long its move took (0 when none ran), retries included.
	Took time.Duration
	// Targets counts the nodes its move was offered to, each once: more
	// than one when a move failed on its target and was tried on another;
	// 0 when no node could be tried.
	Targets int
}

// Progress is a snapshot of the command.
type Progress struct {
	Total, Moved, Skipped, Failed, Gone, NotStarted, Running, Pending int
	Bytes                                                             int64
	End                                                               End
}

// Remaining is what has no final outcome yet.
func (p Progress) Remaining() int { return p.Pending + p.Running }

// Errors of Finish.
var (
	ErrUnknown    = errors.New("hostmove: not an object of this command")
	ErrNotRunning = errors.New("hostmove: object is not running")
	ErrNotFinal   = errors.New("hostmove: outcome is not final")
	// ErrSealed is Add's answer once the list is closed (Seal, Stop).
	ErrSealed = errors.New("hostmove: the command's list is closed")
)

// Command is the bookkeeping of one host command. It is not safe for
// concurrent use; the caller serialises.
type Command struct {
	results []Result
	index   map[Key]int
	next    int // results[next:] may still hold Pending objects
	max     int
	running int
	stopped bool // nothing starts any more (Stop, Decline)
	forced  bool // the end is ForceStopped (Stop)
	// sealed: the list is final (Seal, Stop); until then the command
	// does not end, whatever has finished, because objects may still be
	// added (Add).
	sealed bool
	p      Progress
}

// New starts the bookkeeping for objs, at most maxConcurrent moves at once
// (at least 1), with its list final. Disabled objects are Skipped at once;
// a duplicate key is counted once.
func New(objs []Object, maxConcurrent int) *Command {
	c := NewOpen(objs, maxConcurrent)
	c.Seal()
	return c
}

// NewOpen is New with the list still open: the host command moves what it
// listed while objects on their way to the node (a creation, an incoming
// move that began before the command) land, and adds them once they have
// (Add); it ends only once sealed (Seal). Waiting for such arrivals before
// listing held every move back behind the slowest of them.
func NewOpen(objs []Object, maxConcurrent int) *Command {
	if maxConcurrent < 1 {
		maxConcurrent = 1
	}
	c := &Command{index: make(map[Key]int, len(objs)), max: maxConcurrent}
	c.add(objs)
	return c
}

// Add lists objs too, those not listed yet (by key: an object the command
// already covers, whatever its outcome, is not listed again); it returns
// how many it added. A closed list refuses them (ErrSealed).
func (c *Command) Add(objs []Object) (int, error) {
	if c.sealed {
		return 0, ErrSealed
	}
	return c.add(objs), nil
}

func (c *Command) add(objs []Object) int {
	n := 0
	for _, o := range objs {
		k := KeyOf(o)
		if _, dup := c.index[k]; dup {
			continue
		}
		c.index[k] = len(c.results)
		r := Result{Object: o, Outcome: Pending}
		switch {
		case o.Unmovable != "": // whatever its policy
			r.Outcome, r.Reason = Skipped, o.Unmovable
			c.p.Skipped++
		case o.Disabled:
			r.Outcome, r.Reason = Skipped, "DisableRelocation"
			c.p.Skipped++
		default:
			c.p.Pending++
		}
		c.results = append(c.results, r)
		n++
	}
	c.p.Total = len(c.results)
	return n
}

// Seal closes the list: the command ends once what it lists has ended.
func (c *Command) Seal() {
	c.sealed = true
	c.settle()
}

// Lists reports whether the command lists the object k (whatever its
// outcome).
func (c *Command) Lists(k Key) bool {
	_, ok := c.index[k]
	return ok
}

// Sealed reports whether the list is closed.
func (c *Command) Sealed() bool { return c.sealed }

// Next hands out the next object to move and marks it Running; false when
// none may start now (the concurrency bound is reached, the command was
// stopped, or every object has started).
func (c *Command) Next() (Object, bool) {
	if c.stopped || c.running >= c.max {
		return Object{}, false
	}
	for ; c.next < len(c.results); c.next++ {
		if r := &c.results[c.next]; r.Outcome == Pending {
			r.Outcome = Running
			c.running++
			c.p.Pending--
			c.p.Running++
			c.next++
			return r.Object, true
		}
	}
	return Object{}, false
}

// Finish records how a Running object ended (a final outcome).
func (c *Command) Finish(r Result) error {
	i, ok := c.index[KeyOf(r.Object)]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknown, r.Object.ID)
	}
	cur := &c.results[i]
	if cur.Outcome != Running {
		return fmt.Errorf("%w: %q is %s", ErrNotRunning, r.Object.ID, cur.Outcome)
	}
	if !r.Outcome.Final() || r.Outcome == NotStarted || r.Outcome == Skipped {
		return fmt.Errorf("%w: %s for a started move", ErrNotFinal, r.Outcome)
	}
	r.Object = cur.Object
	*cur = r
	c.running--
	c.p.Running--
	switch r.Outcome {
	case Moved:
		c.p.Moved++
		c.p.Bytes += int64(r.Bytes)
	case Failed:
		c.p.Failed++
	case Gone:
		c.p.Gone++
	}
	c.settle()
	return nil
}

// Stop is the deadline: nothing more starts, every Pending object becomes
// NotStarted, and the list closes. Moves in flight still Finish (they carry
// the same deadline).
func (c *Command) Stop() { c.StopFor("deadline") }

// StopFor is Stop with why as the reason of the objects it leaves
// NotStarted (the node stopping, rather than the deadline). The command
// ends ForceStopped. A command stopped already keeps its reasons.
func (c *Command) StopFor(why string) {
	if c.forced {
		return
	}
	c.forced = true
	c.end(why)
}

// Decline ends a command that decided to move nothing — a drain with no
// node to move to — before any move started: every Pending object becomes
// NotStarted with why, the list closes, and the command ends Completed
// (every object has its outcome; ForceStopped says a deadline came, and
// none did). After Stop it does nothing.
func (c *Command) Decline(why string) {
	if c.stopped {
		return
	}
	c.end(why)
}

// end starts nothing more, makes every Pending object NotStarted with why
// and closes the list.
func (c *Command) end(why string) {
	c.stopped, c.sealed = true, true
	for i := range c.results {
		if r := &c.results[i]; r.Outcome == Pending {
			r.Outcome, r.Reason = NotStarted, why
			c.p.Pending--
			c.p.NotStarted++
		}
	}
	c.settle()
}

// Abandon ends a stopped command whose moves in flight did not end in the
// grace after its deadline: each becomes Failed with reason, and the
// command ends ForceStopped now (§11: the command completes exactly once at
// its deadline, whatever a move is still waiting for). A move finishing
// later gets ErrNotRunning from Finish. Without Stop first it does nothing:
// a command is abandoned only past its deadline.
func (c *Command) Abandon(reason string) {
	if !c.forced || c.p.End != Open {
		return
	}
	for i := range c.results {
		if r := &c.results[i]; r.Outcome == Running {
			r.Outcome, r.Reason = Failed, reason
			c.running--
			c.p.Running--
			c.p.Failed++
		}
	}
	c.settle()
}

// settle sets the end once the list is closed and nothing is pending or
// running; it never changes an end already set.
func (c *Command) settle() {
	if c.p.End != Open || !c.sealed || c.p.Pending > 0 || c.p.Running > 0 {
		return
	}
	if c.forced {
		c.p.End = ForceStopped
	} else {
		c.p.End = Completed
	}
}

// Progress returns the counts and the end (Open while moves remain).
func (c *Command) Progress() Progress { return c.p }

// Results returns every object's outcome, in the order New received them.
func (c *Command) Results() []Result { return append([]Result(nil), c.results...) }

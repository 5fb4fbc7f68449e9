package mesh

import (
	"time"

	"github.com/meshnode/meshnode/internal/logbudget"
)

// A log line that one inbound record causes is limited to peerLogBurst
// lines per peerLogEvery for each such line: a peer sending well-formed
// records that this node refuses — a confused or hostile one; without CURVE
// a hello is not authenticated — otherwise writes one line per record. An
// operator try-out sent 45,000 such records from a fake peer in about a
// second, and the node wrote 3,235 lines (`relocation: Restore refused`,
// `command 44 ignored`). The same goes for the answers a requester that
// went away with many requests queued here never gets (`reply not sent`,
// `moved request's reply not sent`: 746 lines when that fake peer died).
// The first line after some were left out says how many (`suppressed`);
// the counters count every one.
const (
	peerLogBurst = 10
	peerLogEvery = 10 * time.Second
)

// recordLog is the budget of one such line, on the node's clock.
type recordLog struct {
	now func() time.Duration // n.clock.Now; tests replace it
	b   logbudget.Budget
}

func newRecordLog(now func() time.Duration) *recordLog { return &recordLog{now: now} }

// allow reports whether the line may be written now and, when it may, how
// many were left out before it.
func (g *recordLog) allow() (ok bool, suppressed int) {
	return g.b.Allow(g.now(), peerLogBurst, peerLogEvery)
}

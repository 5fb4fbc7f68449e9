package authority

import (
	"sync"
	"sync/atomic"
	"time"
)

// OpStats counts what one kind of operation of an Executor met: contention
// an operator can see (metrics). A refused batch (Conflict) means a row it
// was conditioned on moved between its read and its write — another process
// (or, without lanes, this one) wrote it; a lane wait means it queued
// behind operations of this process on a hot counter (lanes.go). Measured
// this way, the two bounds of issues 11 and 15 were found: a process's
// creations queueing on the ObjectGeneration counter's lane, and host
// relocation's owner CAS batches refused on the source's counter rows.
type OpStats struct {
	Conflicts uint64        // batches the store refused
	LaneWaits uint64        // times the operation queued on a hot counter's lane
	LaneWait  time.Duration // time spent queued
}

// CountedOps are the operations whose batches an Executor counts (every
// Op but OpTerminalLookup, a read that writes no batch), in the order the
// metrics list them: meshnode_authority_conflicts_total and the lane-wait
// counters export one series per entry. A new Op belongs here (a test in
// package mesh parses this package's Op constants and fails otherwise).
var CountedOps = []Op{OpReserve, OpCommit, OpAbort, OpPreserve, OpNewOwner, OpDelete, OpSecureCapacity, OpReleaseCapacity,
	OpRecordCaptured, OpRecordPrepared, OpCompleteRelocation, OpSweep, OpReclaim, OpReadopt}

type opCounters struct {
	conflicts, laneWaits atomic.Uint64
	laneWait             atomic.Int64 // nanoseconds
}

// execStats holds the counters by operation; operations are the package's
// constants, so the map stays small.
type execStats struct {
	mu  sync.Mutex
	ops map[Op]*opCounters
}

func (s *execStats) of(op Op) *opCounters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops == nil {
		s.ops = map[Op]*opCounters{}
	}
	c := s.ops[op]
	if c == nil {
		c = &opCounters{}
		s.ops[op] = c
	}
	return c
}

// Stats returns the counts so far, by operation (only operations that met
// something are listed).
func (e *Executor) Stats() map[Op]OpStats {
	e.stats.mu.Lock()
	defer e.stats.mu.Unlock()
	out := make(map[Op]OpStats, len(e.stats.ops))
	for op, c := range e.stats.ops {
		out[op] = OpStats{Conflicts: c.conflicts.Load(), LaneWaits: c.laneWaits.Load(), LaneWait: time.Duration(c.laneWait.Load())}
	}
	return out
}

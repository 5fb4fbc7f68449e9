package mesh

import (
	"sync"
	"time"
)

// targetPatience is a host command's wait for a usable target when a move
// finds none while other servers of the mesh served a moment ago (peers
// reacquiring their leases after a store outage, re-adopting their
// objects): the moves are tried again, paced, until the patience runs out,
// then they fail and the objects stay (a drain's shutdown removes them).
//
// Why the command's and not each move's: with more objects than
// max_concurrent, each wave of moves began its own wait, so a drain of a
// node whose peers were all stopping waited noTargetPatience once per
// wave (20 s for two, 32 retry lines; an operator try-out) where the
// documentation promised it once. A move that lands ends the episode: a
// later one gets the whole patience again.
type targetPatience struct {
	patience time.Duration
	now      func() time.Time

	mu    sync.Mutex
	since time.Time // when the moves began waiting; zero: none waits
}

func newTargetPatience(patience time.Duration, now func() time.Time) *targetPatience {
	return &targetPatience{patience: patience, now: now}
}

// wait reports whether a move that found no usable target should try
// again: the command has not waited patience since its moves began
// waiting.
func (p *targetPatience) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if p.since.IsZero() {
		p.since = now
	}
	return now.Sub(p.since) < p.patience
}

// landed ends the episode: a target took a move.
func (p *targetPatience) landed() {
	p.mu.Lock()
	p.since = time.Time{}
	p.mu.Unlock()
}

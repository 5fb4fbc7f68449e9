// Package gopool runs short functions on goroutines that are kept and
// reused, so that a function with a deep call chain does not grow a fresh
// goroutine's stack every time it runs.
//
// Why: a relocation's target starts several short-lived goroutines per
// move (the first read, the owner CAS, the completion), each of which goes
// through the store client and the authority executor. The runtime starts
// a goroutine with a small stack and copies it each time it doubles;
// across thousands of moves a second that stack growth (runtime.copystack)
// was several percent of a host relocation's CPU. A worker that already
// ran such a function keeps its grown stack for the next one.
package gopool

import "sync"

// Pool hands functions to idle workers and starts a worker when none is
// idle, so Go never waits for another function to finish. At most maxIdle
// workers wait for work; more end when their function returns. The zero
// Pool is not usable: use New.
type Pool struct {
	work    chan func()
	quit    chan struct{}
	mu      sync.Mutex
	idle    int // workers that will receive from work and were not claimed
	maxIdle int
	closed  bool
	// outside counts the workers not running a function: idle, claimed,
	// or ending (Wait waits for none of those to be left).
	outside int
	ended   *sync.Cond // on mu: a worker outside a function ended or took work
}

// New returns a pool keeping at most maxIdle idle workers (at least 1).
func New(maxIdle int) *Pool {
	if maxIdle < 1 {
		maxIdle = 1
	}
	p := &Pool{work: make(chan func()), quit: make(chan struct{}), maxIdle: maxIdle}
	p.ended = sync.NewCond(&p.mu)
	return p
}

// Go runs fn on an idle worker, or on a new one. After Close it still
// runs fn, on a goroutine of its own.
func (p *Pool) Go(fn func()) {
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		go fn()
		return
	case p.idle > 0:
		// Claimed: that worker receives from work (it may not be waiting
		// yet), so the send below waits at most for it to get there.
		p.idle--
		p.mu.Unlock()
		select {
		case p.work <- fn:
		case <-p.quit:
			go fn()
		}
		return
	}
	p.mu.Unlock()
	go func() {
		p.worker(fn)
		// Out of worker's frame: what Wait waited for has returned.
		p.mu.Lock()
		p.outside--
		p.ended.Broadcast()
		p.mu.Unlock()
	}()
}

// worker runs fn and then the functions it receives while idle; it
// returns outside a function (counted in outside).
func (p *Pool) worker(fn func()) {
	for {
		fn()
		p.mu.Lock()
		p.outside++
		if p.closed || p.idle >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle++
		p.mu.Unlock()
		select {
		case fn = <-p.work:
			// Back in a function: Wait may sleep for this worker too (it
			// took the work after Wait looked), and must not wait for fn.
			p.mu.Lock()
			p.outside--
			p.ended.Broadcast()
			p.mu.Unlock()
		case <-p.quit:
			return
		}
	}
}

// Close ends the idle workers; a worker still running a function ends when
// it returns. Close does not wait for those functions: they are bounded by
// their own contexts, as plain goroutines would be; Wait waits for the
// idle workers to end. Functions given to Go after Close run on goroutines of their
// own. Close may be called more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
}

// Wait returns once no worker is left outside a function: after Close,
// the idle workers end at once, and Wait returns once they did. A worker
// still running a function is not waited for (its function is bounded by
// its own context, as Close says), nor are the goroutines Go starts after
// Close. Call it after Close.
func (p *Pool) Wait() {
	p.mu.Lock()
	for p.outside > 0 {
		p.ended.Wait()
	}
	p.mu.Unlock()
}

// Closed reports whether Close was called.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

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
	// workers counts the worker goroutines (Wait). Added to under mu while
	// not closed, so every Add comes before a Wait that follows Close.
	workers sync.WaitGroup
}

// New returns a pool keeping at most maxIdle idle workers (at least 1).
func New(maxIdle int) *Pool {
	if maxIdle < 1 {
		maxIdle = 1
	}
	return &Pool{work: make(chan func()), quit: make(chan struct{}), maxIdle: maxIdle}
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
	p.workers.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.workers.Done()
		p.worker(fn)
	}()
}

func (p *Pool) worker(fn func()) {
	for {
		fn()
		p.mu.Lock()
		if p.closed || p.idle >= p.maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle++
		p.mu.Unlock()
		select {
		case fn = <-p.work:
		case <-p.quit:
			return
		}
	}
}

// Close ends the idle workers; a worker still running a function ends when
// it returns. Close does not wait for those functions: they are bounded by
// their own contexts, as plain goroutines would be; Wait waits for the
// workers. Functions given to Go after Close run on goroutines of their
// own. Close may be called more than once.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.quit)
	}
	p.mu.Unlock()
}

// Wait returns once every worker ended: after Close, the idle ones end at
// once and one still running a function when that function returns. The
// goroutines Go starts after Close are not workers and are not waited for.
// Call it after Close; the caller bounds how long it waits (a function
// that does not return holds it).
func (p *Pool) Wait() { p.workers.Wait() }

// Closed reports whether Close was called.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

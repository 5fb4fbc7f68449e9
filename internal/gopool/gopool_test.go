package gopool

import (
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every function given to Go runs exactly once, also when all workers are
// busy (Go never waits), and Close returns once they all returned.
func TestEveryFunctionRunsOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxIdle int
		n       int
		block   bool // functions wait until all were started
	}{
		{"sequential reuse", 1, 200, false},
		{"more concurrent than idle workers", 2, 64, true},
		{"zero max idle is one", 0, 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			p := New(tc.maxIdle)
			var ran atomic.Int64
			var started sync.WaitGroup
			release := make(chan struct{})
			done := make(chan struct{}, tc.n)
			for i := 0; i < tc.n; i++ {
				if tc.block {
					started.Add(1)
				}
				p.Go(func() {
					ran.Add(1)
					if tc.block {
						started.Done()
						<-release
					}
					done <- struct{}{}
				})
				if !tc.block {
					<-done
				}
			}
			if tc.block {
				started.Wait() // would hang if Go waited for a free worker
				close(release)
				for i := 0; i < tc.n; i++ {
					<-done
				}
			}
			p.Close()
			waitGoroutines(t, before)
			if got := ran.Load(); got != int64(tc.n) {
				t.Fatalf("ran %d functions, want %d", got, tc.n)
			}
		})
	}
}

// A worker is reused: sequential functions run on at most a few goroutines,
// and at most maxIdle wait after a burst.
func TestWorkersAreReusedAndBounded(t *testing.T) {
	p := New(3)
	defer p.Wait() // no worker of this test left for the next one
	defer p.Close()
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-release })
	}
	close(release)
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		idle := p.idle
		p.mu.Unlock()
		g := runtime.NumGoroutine() - before
		if idle <= 3 && g <= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a burst of 20: %d idle, %d extra goroutines; want at most 3", idle, g)
		}
		time.Sleep(time.Millisecond)
	}
	// Sequential work now reuses the idle workers: no new goroutine, also
	// when Go comes before the worker that ran the last function is back
	// waiting (it is claimed, and Go waits only for it to get there).
	before = runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Fatalf("sequential functions started goroutines: %d -> %d", before, g)
	}
}

// waitGoroutines waits until no more goroutines run than before: Close
// ends the idle workers.
func waitGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after Close, %d before the pool", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
}

// Close does not wait for a function still running; its worker ends when
// it returns.
func TestCloseDoesNotWaitForRunningFunctions(t *testing.T) {
	before := runtime.NumGoroutine()
	p := New(4)
	release := make(chan struct{})
	p.Go(func() { <-release })
	closed := make(chan struct{})
	go func() { p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a running function")
	}
	close(release)
	waitGoroutines(t, before)
}

// After Close, Go still runs the function (on a goroutine of its own) and
// leaves no worker behind.
func TestGoAfterClose(t *testing.T) {
	p := New(2)
	p.Go(func() {})
	p.Close()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a function given after Close did not run")
	}
	p.Close() // idempotent
	p.Wait()
}

// Wait returns once the idle workers ended (Close ends them), and does not
// wait for a worker whose function still runs: that function is bounded by
// its own context. Until 2026-12-07 nothing could wait for the idle ones,
// and a Close of the node using the pool returned while they were still
// ending.
func TestWaitEndsTheIdleWorkers(t *testing.T) {
	p := New(2)
	release, running := make(chan struct{}), make(chan struct{})
	p.Go(func() { close(running); <-release })
	<-running
	idle := make(chan struct{})
	p.Go(func() { close(idle) }) // on a second worker, which then waits for work
	<-idle
	for p.idleWorkers() == 0 { // back from its function, not yet waiting
		runtime.Gosched()
	}
	if n := workersRunning(); n != 2 {
		t.Fatalf("%d goroutines in (*Pool).worker, want 2", n)
	}
	p.Close()
	p.Wait() // would hang if it waited for the running function
	if n := workersRunning(); n != 1 {
		t.Fatalf("%d goroutines in (*Pool).worker after Wait returned, want the running one only", n)
	}
	close(release)
	for workersRunning() > 0 { // it ends with its function: none left for the next test
		runtime.Gosched()
	}
}

func (p *Pool) idleWorkers() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle
}

// workersRunning counts the goroutines with a (*Pool).worker frame.
func workersRunning() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2) // a strings.Builder takes every write
	return strings.Count(b.String(), "gopool.(*Pool).worker(")
}

// Wait also returns when the last worker outside a function leaves by
// taking work: the idle worker a Go hands its function to. Here Wait
// already sleeps when that happens; in a node's Close the same order comes
// from a Go that handed its function over just before Close, the worker
// counting itself in only after Wait looked. Until 2026-12-07 only a
// worker's end woke Wait, which then waited for that function (an owner
// CAS the store holds) — what it says it does not.
func TestWaitReturnsWhenTheLastIdleWorkerTakesWork(t *testing.T) {
	p := New(1)
	ran := make(chan struct{})
	p.Go(func() { close(ran) })
	<-ran
	for p.idleWorkers() == 0 { // back from its function, waiting for work
		runtime.Gosched()
	}
	waited := make(chan struct{})
	go func() { p.Wait(); close(waited) }()
	for !waitSleeping() {
		runtime.Gosched()
	}
	release, running := make(chan struct{}), make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	p.Go(func() { close(running); <-release }) // on the idle worker
	<-running
	p.Close()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return once the idle worker took a function: it waits for that function")
	}
	once.Do(func() { close(release) })
	for workersRunning() > 0 { // it ends with its function: none left for the next test
		runtime.Gosched()
	}
}

// waitSleeping reports whether a goroutine sleeps in Wait (on its Cond).
func waitSleeping() bool {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, "gopool.(*Pool).Wait(") && strings.Contains(g, "sync.(*Cond).Wait(") {
			return true
		}
	}
	return false
}

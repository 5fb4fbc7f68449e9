// Package logbudget limits how often one repeated log line is written: a
// peer streaming garbage or records this node refuses, a flood at a
// listener's cap, must cost a few lines, not one per event — and the line
// that is written says how many were left out.
package logbudget

import (
	"sync"
	"time"
)

// Budget lets burst lines through per window of every, windows starting at
// the first line let through after the last window ended. The zero value
// is ready; it is safe for concurrent use.
type Budget struct {
	mu         sync.Mutex
	started    bool
	start      time.Duration // of the current window
	used       int           // lines let through in it
	suppressed int           // lines left out since the last one let through
}

// Allow reports whether the line may be written at now (any monotonic
// reading: a clock's time since its origin) and, when it may, how many were
// left out before it. burst below 1 counts as 1.
func (b *Budget) Allow(now time.Duration, burst int, every time.Duration) (ok bool, suppressed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.started || now-b.start >= every {
		b.started, b.start, b.used = true, now, 0
	}
	if b.used >= max(burst, 1) {
		b.suppressed++
		return false, 0
	}
	b.used++
	s := b.suppressed
	b.suppressed = 0
	return true, s
}

// TakeSuppressed returns how many lines were left out since the last one
// let through, and counts them as reported: for a summary line written when
// no further line may come to carry the count (the next line let through
// then says 0).
func (b *Budget) TakeSuppressed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.suppressed
	b.suppressed = 0
	return s
}

// At is t as an Allow reading.
func At(t time.Time) time.Duration { return time.Duration(t.UnixNano()) }

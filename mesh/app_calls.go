package mesh

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/meshnode/meshnode/spot"
)

// appCalls are the calls into the application made outside a turn — a
// factory's New, a snapshot adapter's Snapshot or Restore, a handler's
// spot.Relocated — while they run.
// A stop whose wait for them ended before one returned names them
// (ApplicationStuckError.InCalls): until 2026-12-07 (night) it said only
// that "a creation or move was still in a call into the application", and
// an operator had to guess which object's code to look at.
type appCalls struct {
	mu sync.Mutex
	m  map[*appCall]struct{}
}

type appCall struct {
	what  string // "New", "Snapshot", "Restore", "Relocated"
	key   spot.Key
	start time.Time
}

// enter records a call of what for the object k; the func it returns ends
// the record (deferred by the caller: a panic the runner recovers from
// still ends it).
func (c *appCalls) enter(what string, k spot.Key) func() {
	a := &appCall{what: what, key: k, start: time.Now()}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[*appCall]struct{}{}
	}
	c.m[a] = struct{}{}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.m, a)
		c.mu.Unlock()
	}
}

// running names the calls still running, oldest first, each with how
// long it has run ("Snapshot of actor a1 (running 3.2s)").
func (c *appCalls) running(now time.Time) []string {
	c.mu.Lock()
	calls := make([]*appCall, 0, len(c.m))
	for a := range c.m {
		calls = append(calls, a)
	}
	c.mu.Unlock()
	sort.Slice(calls, func(i, j int) bool {
		if !calls[i].start.Equal(calls[j].start) {
			return calls[i].start.Before(calls[j].start)
		}
		return calls[i].key.ID < calls[j].key.ID
	})
	out := make([]string, len(calls))
	for i, a := range calls {
		out[i] = fmt.Sprintf("%s of %s (running %s)", a.what, keyName(a.key), now.Sub(a.start).Round(100*time.Millisecond))
	}
	return out
}

// keyName is "actor <id>" or "spot <id>", as ApplicationStuckError.Turns.
func keyName(k spot.Key) string {
	if k.Spot {
		return "spot " + k.ID
	}
	return "actor " + k.ID
}

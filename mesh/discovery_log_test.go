package mesh

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshnode/meshnode/config"
	"github.com/meshnode/meshnode/locstore"
	"github.com/meshnode/meshnode/mesh/directory"
)

// The discovery failure WARNs of one store outage, by store_failure_grace:
// one when the outage starts, one at the first failed round past the grace
// (the moment the kept list turns stale, said when it happens), and a
// reminder every discoveryFailEvery failed rounds — never one per round,
// in the grace or past it — then one INFO when the store answers again,
// saying whether the list had gone past the grace. A grace of 1 ns ends
// exactly at the second failed round (the first is measured at 0), so no
// clock is needed to know when it ends. Before 2026-12-06 every failed
// round logged the same WARN for as long as the store was away (720 lines an
// hour at the default interval, for good after a store lost its data).
func TestDiscoveryFailureLinesByGrace(t *testing.T) {
	const (
		keeping = "discovery: store failure, keeping the last complete list"
		past    = "discovery: store failure, the last list is past store_failure_grace"
	)
	tests := []struct {
		name  string
		grace time.Duration
		// want: how many lines of each kind for rounds failed rounds, and
		// the failed round the first past-the-grace line must name (0: none).
		want      func(rounds int) (keeping, past int)
		pastRound int
	}{
		{"within the grace throughout", time.Hour, func(r int) (int, int) { return (r + discoveryFailEvery - 1) / discoveryFailEvery, 0 }, 0},
		{"no grace", 0, func(r int) (int, int) { return 0, (r + discoveryFailEvery - 1) / discoveryFailEvery }, 1},
		{"the grace ends at the second round", time.Nanosecond, func(r int) (int, int) { return 1, 1 + (r-1)/discoveryFailEvery }, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			st := &outageStore{}
			logs := f.logNode(1)
			c := clusterWithStore1On(t, f, 2, func(inner locstore.Store) locstore.Store { st.Store = inner; return st },
				func(i int, cfg *config.Config) { cfg.StoreFailureGrace = tc.grace })
			n := c.nodes[1]
			st.down.Store(true)
			for range 2 * discoveryFailEvery {
				if err := n.Discover(context.Background()); err == nil {
					t.Fatal("a discovery round succeeded against a store that is down")
				}
			}
			n.discoverMu.Lock()
			rounds := n.discoveryFails.rounds // the node's own loop may have added rounds
			n.discoverMu.Unlock()
			out := logs.String()
			wantKeeping, wantPast := tc.want(rounds)
			if got := strings.Count(out, keeping); got != wantKeeping {
				t.Errorf("%d %q lines for %d failed rounds, want %d", got, keeping, rounds, wantKeeping)
			}
			if got := strings.Count(out, past); got != wantPast {
				t.Errorf("%d %q lines for %d failed rounds, want %d", got, past, rounds, wantPast)
			}
			if tc.pastRound > 0 {
				i := strings.Index(out, past)
				line, _, _ := strings.Cut(out[max(i, 0):], "\n")
				if i < 0 || !strings.Contains(line, fmt.Sprintf("failed_rounds=%d ", tc.pastRound)) {
					t.Errorf("the first line past the grace is not at failed round %d: %q", tc.pastRound, line)
				}
			}
			if t.Failed() {
				t.Logf("log:\n%s", out)
				return
			}
			st.down.Store(false)
			eventually(t, 10*time.Second, "a discovery round to succeed", func() bool { return n.Discover(context.Background()) == nil })
			wantBack := fmt.Sprintf("past_grace=%v", tc.pastRound > 0)
			if got := strings.Count(logs.String(), "discovery: the store answers again"); got != 1 {
				t.Fatalf("%d lines say the store answers again, want 1:\n%s", got, logs.String())
			}
			i := strings.Index(logs.String(), "discovery: the store answers again")
			line, _, _ := strings.Cut(logs.String()[i:], "\n")
			if !strings.Contains(line, wantBack) {
				t.Fatalf("the line saying the store answers again lacks %s: %q", wantBack, line)
			}
		})
	}
}

// The lines of one run of failed rounds, by the grace status of each round
// (no node, no clock): the defaults (5 s rounds, a 30 s grace) end the grace
// at the 7th failed round, said then and not at the 13th.
func TestDiscoveryFailuresLines(t *testing.T) {
	type line struct {
		round int
		msg   string
	}
	tests := []struct {
		name     string
		rounds   int
		graceEnd int // the first failed round past the grace; 0: never
		want     []line
	}{
		{"in the grace", 25, 0, []line{{1, discoveryFailKeeping}, {13, discoveryFailKeeping}, {25, discoveryFailKeeping}}},
		{"no grace", 25, 1, []line{{1, discoveryFailStale}, {13, discoveryFailStale}, {25, discoveryFailStale}}},
		{"the defaults' grace ends at round 7", 25, 7,
			[]line{{1, discoveryFailKeeping}, {7, discoveryFailStale}, {13, discoveryFailStale}, {25, discoveryFailStale}}},
		{"the grace ends at a reminder's round", 14, 13, []line{{1, discoveryFailKeeping}, {13, discoveryFailStale}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for episode := range 2 { // a second outage logs the same again
				var d discoveryFailures
				var got []line
				for r := 1; r <= tc.rounds; r++ {
					inGrace := tc.graceEnd == 0 || r < tc.graceEnd
					if msg, ok := d.failed(directory.GraceStatus{Failing: true, InGrace: inGrace, GraceElapsed: !inGrace}); ok {
						got = append(got, line{r, msg})
					}
				}
				if !slices.Equal(got, tc.want) {
					t.Fatalf("outage %d: lines %v, want %v", episode+1, got, tc.want)
				}
				ended, ok := d.answered()
				if !ok || ended.rounds != tc.rounds || ended.staleSaid != (tc.graceEnd > 0) {
					t.Fatalf("answered: %+v %v", ended, ok)
				}
				if _, ok := d.answered(); ok {
					t.Fatal("a second answer ended an outage again")
				}
			}
		})
	}
}

package mesh

import (
	"testing"
	"time"
)

// The source's commit wait average (lagAverage) follows the lag moves see,
// but a stall cannot blow it up: an observation counts at most twice the
// average (the first at most lagFirstMax) — an 8 s Redis pause used to
// leave every later move of the node sleeping ~1 s.
func TestLagAverageResistsStalls(t *testing.T) {
	const stall = 8 * time.Second
	cases := []struct {
		name    string
		seed    []time.Duration
		then    []time.Duration
		atMost  time.Duration
		atLeast time.Duration
	}{
		{name: "a stall first", then: []time.Duration{stall}, atMost: lagFirstMax, atLeast: lagFirstMax},
		{name: "one stall after 2 ms moves", seed: repeat(2*time.Millisecond, 50), then: []time.Duration{stall},
			atMost: 2*time.Millisecond + 2*time.Millisecond/8, atLeast: 2 * time.Millisecond},
		{name: "16 moves caught in one stall", seed: repeat(2*time.Millisecond, 50), then: repeat(stall, 16),
			atMost: 14 * time.Millisecond, atLeast: 2 * time.Millisecond},
		{name: "a slower store is followed", seed: repeat(2*time.Millisecond, 50), then: repeat(20*time.Millisecond, 40),
			atMost: 20 * time.Millisecond, atLeast: 18 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l lagAverage
			for _, d := range append(c.seed, c.then...) {
				l.observe(d)
			}
			if got := l.typical(); got > c.atMost || got < c.atLeast {
				t.Errorf("typical %v, want %v..%v", got, c.atLeast, c.atMost)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

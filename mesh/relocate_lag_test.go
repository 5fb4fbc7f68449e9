package mesh

import (
	"testing"
	"time"
)

// The source's commit wait average (lagAverage) follows the lag moves see,
// but a stall cannot blow it up: an observation counts at most twice the
// average (the first at most lagFirstMax) — an 8 s Redis pause used to
// leave every later move of the node sleeping ~1 s. And waits whose first
// look already finds the commit (counted half: the commit came during the
// wait) bring a high average down in tens of moves, not hundreds.
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
	// Coming down: the commit now lands at once (true lag ~0), each wait
	// sleeps 3/4 of the average and its first look finds the commit.
	var l lagAverage
	for range 200 {
		l.observe(500 * time.Millisecond)
	}
	moves := 0
	for ; l.typical() > 10*time.Millisecond; moves++ {
		l.observeWait(l.typical()*3/4, true)
	}
	if moves > 60 {
		t.Errorf("%d moves to come down from 500 ms to 10 ms, want at most 60", moves)
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

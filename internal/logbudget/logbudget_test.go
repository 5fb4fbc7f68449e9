package logbudget

import (
	"testing"
	"time"
)

// burst lines per window, and the next line let through names what was
// left out; with a burst of one, one line per window from the last one.
func TestAllow(t *testing.T) {
	const every = 10 * time.Second
	for _, burst := range []int{1, 10} {
		var b Budget
		var now time.Duration
		tests := []struct {
			name           string
			advance        time.Duration
			calls          int
			wantAllowed    int
			wantSuppressed int // reported by the first line let through
		}{
			{"first window", 0, 3 * burst, burst, 0},
			{"same window, later", every - time.Millisecond, 5, 0, 0},
			{"next window", time.Millisecond, 3, min(3, burst), 2*burst + 5},
			{"quiet window after", every, 1, 1, 3 - min(3, burst)},
		}
		for _, tt := range tests {
			now += tt.advance
			allowed, reported := 0, -1
			for i := 0; i < tt.calls; i++ {
				if ok, s := b.Allow(now, burst, every); ok {
					if allowed == 0 {
						reported = s
					}
					allowed++
				}
			}
			if allowed != tt.wantAllowed {
				t.Errorf("burst %d, %s: %d lines let through of %d, want %d", burst, tt.name, allowed, tt.calls, tt.wantAllowed)
			}
			if allowed > 0 && reported != tt.wantSuppressed {
				t.Errorf("burst %d, %s: first line says %d suppressed, want %d", burst, tt.name, reported, tt.wantSuppressed)
			}
		}
	}
}

func TestAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	if d := At(t0.Add(time.Second)) - At(t0); d != time.Second {
		t.Fatalf("At difference %v, want 1s", d)
	}
}

// TakeSuppressed hands over the count the next line let through would
// carry, once: that line then says 0.
func TestTakeSuppressed(t *testing.T) {
	const every = 10 * time.Second
	var b Budget
	if got := b.TakeSuppressed(); got != 0 {
		t.Fatalf("a fresh budget: %d taken, want 0", got)
	}
	for i := 0; i < 5; i++ {
		b.Allow(0, 2, every)
	}
	if got := b.TakeSuppressed(); got != 3 {
		t.Fatalf("%d taken after 5 lines with a burst of 2, want 3", got)
	}
	if got := b.TakeSuppressed(); got != 0 {
		t.Fatalf("taken again: %d, want 0", got)
	}
	if ok, s := b.Allow(every, 2, every); !ok || s != 0 {
		t.Fatalf("the next window's first line: allowed %v, suppressed %d; want allowed, 0 (already taken)", ok, s)
	}
}

package mesh

import (
	"slices"
	"testing"
)

func TestRoundBuckets(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []float64
	}{
		{0.0001, 5, []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}},
		{0.0005, 30, []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 30}},
		{0.3, 0.4, []float64{0.4}},
	}
	for _, tc := range tests {
		if got := roundBuckets(tc.lo, tc.hi); !slices.Equal(got, tc.want) {
			t.Errorf("roundBuckets(%v, %v) = %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
}

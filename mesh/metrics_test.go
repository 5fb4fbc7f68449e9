package mesh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/meshnode/meshnode/locstore"
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

func TestStoreOutcome(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, "ok"},
		{&locstore.ProviderError{Provider: "t", Op: "write", Refused: true, Err: errors.New("OOM")}, "refused"},
		{&locstore.ProviderError{Provider: "t", Op: "write", Err: errors.New("i/o timeout")}, "unavailable"},
		{fmt.Errorf("relocate: %w", context.DeadlineExceeded), "unavailable"},
		{errors.New("decode"), "error"},
	}
	for _, c := range cases {
		if got := storeOutcome(c.err); got != c.want {
			t.Errorf("storeOutcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

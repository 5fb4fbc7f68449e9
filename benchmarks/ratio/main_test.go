package main

import (
	"errors"
	"strings"
	"testing"
)

func TestParseAndMedian(t *testing.T) {
	in := `goos: linux
BenchmarkWrite-2   	   1000	      300 ns/op	  64 B/op	 2 allocs/op
BenchmarkWrite-2   	   1000	      100 ns/op	  64 B/op	 2 allocs/op
BenchmarkWrite-2   	   1000	      200 ns/op	  64 B/op	 2 allocs/op
BenchmarkRaw/sub-2 	   1000	      50 ns/op
BenchmarkRaw/sub-2 	   1000	      70 ns/op
PASS
`
	s, order, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 2 || order[0] != "BenchmarkWrite" || order[1] != "BenchmarkRaw/sub" {
		t.Fatalf("order = %v", order)
	}
	tests := []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkWrite", "ns/op", 200},
		{"BenchmarkWrite", "allocs/op", 2},
		{"BenchmarkRaw/sub", "ns/op", 60},
	}
	for _, tc := range tests {
		if got := median(s[tc.name][tc.unit]); got != tc.want {
			t.Errorf("median(%s %s) = %v, want %v", tc.name, tc.unit, got, tc.want)
		}
	}
}

func TestRatio(t *testing.T) {
	in := `BenchmarkMove-2   	   10	      4000 ns/op	  900 pause-p99-us	 30 req-p50-us
BenchmarkMove-2   	   10	      6000 ns/op	  1100 pause-p99-us	 50 req-p50-us
BenchmarkWire-2   	   10	      2000 ns/op
`
	s, _, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pair, want string
		err        error
	}{
		{"BenchmarkMove=BenchmarkWire", "BenchmarkMove / BenchmarkWire = 2.50", nil},
		{"BenchmarkMove@pause-p99-us=BenchmarkMove@req-p50-us", "BenchmarkMove pause-p99-us / BenchmarkMove req-p50-us = 25.00", nil},
		{"BenchmarkMove@ns/op=BenchmarkWire", "BenchmarkMove / BenchmarkWire = 2.50", nil},
		{"BenchmarkMove@nope-us=BenchmarkWire", "", errMissing},
		{"BenchmarkMove=BenchmarkGone", "", errMissing},
		{"BenchmarkMove", "", errBadPair},
		{"=BenchmarkWire", "", errBadPair},
	}
	for _, tc := range tests {
		got, err := ratio(s, tc.pair)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("ratio(%q) = %q, %v; want %q, %v", tc.pair, got, err, tc.want, tc.err)
		}
	}
}

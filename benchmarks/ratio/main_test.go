package main

import (
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

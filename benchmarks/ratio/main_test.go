package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
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

// Without the -GOMAXPROCS suffix (GOMAXPROCS=1: go test names a benchmark
// without it) a sub-benchmark's own trailing number is part of its name:
// creators-1 and creators-8 are two benchmarks, not one. The same holds
// with -cpu 1,2, where BenchmarkX (1) and BenchmarkX-2 (2) are two runs.
func TestNamesKeepTheirNumbersWithoutAProcsSuffix(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string][]float64 // name → ns/op samples
	}{
		{"GOMAXPROCS=1", `BenchmarkCreators/creators-1   	 10	 100 ns/op
BenchmarkCreators/creators-8   	 10	 400 ns/op
BenchmarkCreators/creators-1   	 10	 120 ns/op
BenchmarkCreators/creators-8   	 10	 420 ns/op
BenchmarkPlain                 	 10	 7 ns/op
`, map[string][]float64{"BenchmarkCreators/creators-1": {100, 120}, "BenchmarkCreators/creators-8": {400, 420}, "BenchmarkPlain": {7}}},
		{"GOMAXPROCS=2", `BenchmarkCreators/creators-1-2   	 10	 100 ns/op
BenchmarkCreators/creators-8-2   	 10	 400 ns/op
BenchmarkPlain-2                 	 10	 7 ns/op
`, map[string][]float64{"BenchmarkCreators/creators-1": {100}, "BenchmarkCreators/creators-8": {400}, "BenchmarkPlain": {7}}},
		{"-cpu 1,2", `BenchmarkPlain   	 10	 9 ns/op
BenchmarkPlain-2 	 10	 5 ns/op
`, map[string][]float64{"BenchmarkPlain": {9}, "BenchmarkPlain-2": {5}}},
		{"only numbered sub-benchmarks, GOMAXPROCS=1", `BenchmarkScale/nodes-1000   	 1	 100 ns/op
BenchmarkScale/nodes-5000   	 1	 500 ns/op
`, map[string][]float64{"BenchmarkScale/nodes-1000": {100}, "BenchmarkScale/nodes-5000": {500}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := parse(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(s) != len(tc.want) {
				t.Errorf("parsed %d benchmarks %v, want %d", len(s), s, len(tc.want))
			}
			for name, want := range tc.want {
				if got := s[name]["ns/op"]; !slices.Equal(got, want) {
					t.Errorf("%s ns/op = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// runMain runs the command (this test binary, re-run as main) on in with
// args, and returns what it printed and its exit status.
func runMain(t *testing.T, in string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	cmd.Stdin = strings.NewReader(in)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatal(err)
	return "", 0
}

const envRunMain = "RATIO_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) != "" {
		main()
		return
	}
	os.Exit(m.Run())
}

// What a run reports beside its figures reaches the reader: a failed
// benchmark with its message, a panic, and the lines a benchmark logs with
// "!!!" (a framework defect kept out of the figures, e.g. a request never
// answered during a move) — which a median over -count runs hides when
// one run of five saw it. make bench keeps go test's own output in a
// file, so ratio's output is where they must show.
func TestMainShowsFailuresAndWarnings(t *testing.T) {
	in := `goos: linux
BenchmarkMove-2    	       1	     98976 ns/op	 0 req-unanswered
BenchmarkMove-2    	       1	     91522 ns/op	 2 req-unanswered
--- BENCH: BenchmarkMove-2
    relocation_bench_test.go:311: !!! 2 request(s) never answered within 250ms during 1 moves
BenchmarkMove-2    	       1	     91000 ns/op	 0 req-unanswered
BenchmarkSub/n-8-2         	       1	       622.0 ns/op
--- BENCH: BenchmarkSub/n-8-2
    x_test.go:9: an ordinary log line
`
	out, status := runMain(t, in, "BenchmarkMove=BenchmarkSub/n-8")
	if status != 0 || !strings.Contains(out, "BenchmarkMove-2: relocation_bench_test.go:311: !!! 2 request(s) never answered") ||
		strings.Contains(out, "ordinary log line") {
		t.Errorf("a warning: exit %d, printed\n%s", status, out)
	}
	failed := in + `--- FAIL: BenchmarkBad
    x_test.go:5: move 3: boom
FAIL
exit status 1
FAIL	toyb	0.033s
FAIL
`
	out, status = runMain(t, failed, "BenchmarkMove=BenchmarkSub/n-8")
	if status == 0 || !strings.Contains(out, "--- FAIL: BenchmarkBad") || !strings.Contains(out, "x_test.go:5: move 3: boom") ||
		!strings.Contains(out, "BenchmarkMove / BenchmarkSub/n-8 = ") {
		t.Errorf("a failure: exit %d, printed\n%s", status, out)
	}
	out, status = runMain(t, "BenchmarkA-2 \t 1\t 5 ns/op\npanic: test timed out after 10m0s\n\trunning tests:\n")
	if status == 0 || !strings.Contains(out, "panic: test timed out after 10m0s") {
		t.Errorf("a panic: exit %d, printed\n%s", status, out)
	}
	out, status = runMain(t, "BenchmarkA-2 \t 1\t 5 ns/op\nPASS\nok  \tpkg\t1s\n", "BenchmarkA=BenchmarkA")
	if status != 0 || strings.Contains(out, "!!!") || strings.Contains(out, "FAIL") {
		t.Errorf("a clean run: exit %d, printed\n%s", status, out)
	}
}

// A ratio against a baseline whose median is 0 is no figure: an error,
// not "+Inf".
func TestRatioOfAZeroBaseline(t *testing.T) {
	s, _, err := parse(strings.NewReader("BenchmarkMove-2 \t 1\t 10 ns/op\t 900 pause-p99-us\t 0 req-p50-us\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ratio(s, "BenchmarkMove@pause-p99-us=BenchmarkMove@req-p50-us"); err == nil {
		t.Fatalf("ratio = %q against a zero baseline, no error", got)
	}
}

// Command ratio reads `go test -bench` output (several -count runs) on stdin,
// takes the median of every metric per benchmark, and prints each requested
// subject/baseline pair as a ratio. Machines here are shared and noisy, so a
// figure is only ever reported as a median and next to a baseline measured
// in the same run.
//
//	go test -run '^$' -bench . -count 5 ./pkg | go run ./benchmarks/ratio 'BenchmarkA=BenchmarkRawA'
//
// A pair compares ns/op unless a side names another metric after '@':
// 'BenchmarkA@pause-p99-us=BenchmarkA@req-p50-us' divides two metrics that a
// benchmark reports itself.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// samples maps benchmark name (without the -GOMAXPROCS suffix) → unit → values.
type samples map[string]map[string][]float64

func parse(r io.Reader) (samples, []string, error) {
	s := samples{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		if _, ok := s[name]; !ok {
			s[name] = map[string][]float64{}
			order = append(order, name)
		}
		// f[1] is the iteration count; then value/unit pairs.
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			s[name][f[i+1]] = append(s[name][f[i+1]], v)
		}
	}
	return s, order, sc.Err()
}

func median(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	n := len(c)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func main() {
	s, order, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	fmt.Println("medians:")
	for _, name := range order {
		units := make([]string, 0, len(s[name]))
		for u := range s[name] {
			units = append(units, u)
		}
		sort.Strings(units)
		parts := make([]string, 0, len(units))
		for _, u := range units {
			parts = append(parts, fmt.Sprintf("%.4g %s (n=%d)", median(s[name][u]), u, len(s[name][u])))
		}
		fmt.Printf("  %-60s %s\n", name, strings.Join(parts, ", "))
	}
	if len(os.Args) > 1 {
		fmt.Println("ratios (subject / same-run baseline, ns/op unless @unit; >1 means slower or more than the baseline):")
	}
	status := 0
	for _, pair := range os.Args[1:] {
		line, err := ratio(s, pair)
		switch {
		case errors.Is(err, errBadPair):
			fmt.Fprintln(os.Stderr, "ratio:", err)
			status = 2
			continue
		case err != nil:
			fmt.Printf("  %v\n", err)
			status = 1
			continue
		}
		fmt.Println("  " + line)
	}
	os.Exit(status)
}

var (
	errBadPair = errors.New("bad pair (want subject[@unit]=baseline[@unit])")
	errMissing = errors.New("missing samples")
)

// ratio renders one pair "subject[@unit]=baseline[@unit]" (unit ns/op by
// default) as the ratio of the two medians.
func ratio(s samples, pair string) (string, error) {
	subj, base, ok := strings.Cut(pair, "=")
	if !ok || subj == "" || base == "" {
		return "", fmt.Errorf("%w: %q", errBadPair, pair)
	}
	side := func(spec string) (name, unit string) {
		name, unit, ok := strings.Cut(spec, "@")
		if !ok {
			unit = "ns/op"
		}
		return name, unit
	}
	sn, su := side(subj)
	bn, bu := side(base)
	a, b := s[sn][su], s[bn][bu]
	if len(a) == 0 || len(b) == 0 {
		return "", fmt.Errorf("%s vs %s: %w", subj, base, errMissing)
	}
	if su == "ns/op" && bu == "ns/op" {
		return fmt.Sprintf("%s / %s = %.2f", sn, bn, median(a)/median(b)), nil
	}
	return fmt.Sprintf("%s %s / %s %s = %.2f", sn, su, bn, bu, median(a)/median(b)), nil
}

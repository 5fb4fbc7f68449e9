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
	"bytes"
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

// parse reads the result lines of `go test -bench` output. go test appends
// -GOMAXPROCS to every name unless GOMAXPROCS is 1, so a trailing -N is
// taken for that suffix only when every result line ends with the same
// one: with GOMAXPROCS=1 (or -cpu 1,2) a name such as creators-8 keeps its
// number, and creators-1 and creators-8 stay two benchmarks. Dropping one
// suffix that every name has cannot make two names one.
func parse(r io.Reader) (samples, []string, error) {
	type line struct {
		name   string
		fields []string
	}
	var lines []line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil { // not a result: no iteration count
			continue
		}
		lines = append(lines, line{f[0], f[2:]})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	procs := ""
	for i, l := range lines {
		suffix := ""
		if j := strings.LastIndexByte(l.name, '-'); j > 0 {
			if _, err := strconv.Atoi(l.name[j+1:]); err == nil {
				suffix = l.name[j:]
			}
		}
		if i > 0 && suffix != procs {
			procs = ""
			break
		}
		procs = suffix
	}
	s := samples{}
	var order []string
	for _, l := range lines {
		name := strings.TrimSuffix(l.name, procs)
		if _, ok := s[name]; !ok {
			s[name] = map[string][]float64{}
			order = append(order, name)
		}
		// value/unit pairs.
		for i := 0; i+1 < len(l.fields); i += 2 {
			v, err := strconv.ParseFloat(l.fields[i], 64)
			if err != nil {
				break
			}
			s[name][l.fields[i+1]] = append(s[name][l.fields[i+1]], v)
		}
	}
	return s, order, nil
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
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	s, order, err := parse(bytes.NewReader(in))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratio:", err)
		os.Exit(1)
	}
	problems, failed := notes(bytes.NewReader(in))
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
	if len(problems) > 0 {
		fmt.Println("!!! failures and warnings in the run (the medians above do not show them):")
		for _, p := range problems {
			fmt.Println("  " + p)
		}
	}
	if failed && status == 0 {
		status = 1
	}
	os.Exit(status)
}

// notes returns what a run reported beside its figures: each failed
// test or benchmark with the lines it logged, a panic, the package's
// FAIL line, and every line a benchmark logged with "!!!" (a defect the
// benchmark keeps out of its figures rather than failing, named with its
// benchmark); failed is whether the run failed.
func notes(r io.Reader) (lines []string, failed bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	bench := ""     // the benchmark of the --- BENCH block we are in
	inFail := false // in a --- FAIL block
	for sc.Scan() {
		l := sc.Text()
		indented := strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t")
		switch {
		case strings.HasPrefix(l, "--- FAIL:"):
			lines, failed, inFail, bench = append(lines, l), true, true, ""
		case inFail && indented:
			lines = append(lines, l)
		case strings.HasPrefix(l, "--- BENCH:"):
			bench, inFail = strings.TrimSpace(strings.TrimPrefix(l, "--- BENCH:")), false
		case bench != "" && indented:
			if strings.Contains(l, "!!!") {
				lines = append(lines, bench+": "+strings.TrimSpace(l))
			}
		case strings.HasPrefix(l, "panic:"), strings.HasPrefix(l, "FAIL\t"):
			lines, failed = append(lines, l), true
			bench, inFail = "", false
		default:
			bench, inFail = "", false
		}
	}
	return lines, failed
}

var (
	errBadPair = errors.New("bad pair (want subject[@unit]=baseline[@unit])")
	errMissing = errors.New("missing samples")
	// errZeroBaseline: a ratio against a baseline whose median is 0 is no
	// figure (it printed +Inf or NaN).
	errZeroBaseline = errors.New("baseline median is 0")
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
	if median(b) == 0 {
		return "", fmt.Errorf("%s vs %s: %w", subj, base, errZeroBaseline)
	}
	if su == "ns/op" && bu == "ns/op" {
		return fmt.Sprintf("%s / %s = %.2f", sn, bn, median(a)/median(b)), nil
	}
	return fmt.Sprintf("%s %s / %s %s = %.2f", sn, su, bn, bu, median(a)/median(b)), nil
}

// Command driver runs Hangar's benchmarks several times, takes the median of each, and prints
// every API benchmark beside the raw baseline measured in the same run, with their ratio. It
// needs the emulators: `make bench` runs it under `hangar emulators`.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"time"
)

// pair is an API benchmark and the raw operation it stands on ("" when it has none).
type pair struct {
	name, baseline, what string
}

var pairs = []pair{
	{"CreateTask", "RawFirestoreCreate", "CreateTask round trip vs bare Firestore create"},
	{"GetTask", "RawFirestoreGet", "GetTask round trip vs bare Firestore get"},
	{"AuthCached", "", "auth interceptor, key verified recently (cache hit)"},
	{"AuthUncached", "RawFirestoreGet", "auth interceptor, cache expired vs bare Firestore get"},
}

var line = regexp.MustCompile(`^Benchmark(\w+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op`)

func main() {
	count := flag.Int("count", 5, "runs of each benchmark; the median is reported")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	flag.Parse()

	args := []string{"test", "-run", "^$", "-bench", ".", "-count", strconv.Itoa(*count), "-benchtime", *benchtime, "./e2e/"}
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		os.Stdout.Write(out)
		fmt.Fprintln(os.Stderr, "driver: go test -bench failed:", err)
		os.Exit(1)
	}
	samples := map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			samples[m[1]] = append(samples[m[1]], v)
		}
	}
	fmt.Printf("Medians of %d runs (%s each), %s\n\n", *count, *benchtime, time.Now().UTC().Format(time.DateOnly))
	fmt.Printf("| %-55s | %12s | %12s | %6s |\n", "benchmark", "median", "baseline", "ratio")
	fmt.Printf("|%s|%s|%s|%s|\n", dashes(57), dashes(14), dashes(14), dashes(8))
	for _, p := range pairs {
		v, ok := median(samples[p.name])
		if !ok {
			fmt.Fprintf(os.Stderr, "driver: no result for %s\n", p.name)
			os.Exit(1)
		}
		base, ratio := "", ""
		if b, ok := median(samples[p.baseline]); ok {
			base, ratio = human(b), fmt.Sprintf("%.2f×", v/b)
		}
		fmt.Printf("| %-55s | %12s | %12s | %6s |\n", p.what, human(v), base, ratio)
	}
}

func median(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2], true
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2, true
}

// human shows a duration with three significant digits or so.
func human(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}

func dashes(n int) string { return string(bytes.Repeat([]byte("-"), n)) }

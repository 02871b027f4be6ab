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
	"strings"
	"time"
)

// pair is an API benchmark and the raw operation it stands on ("" when it has none). bytes is
// what one operation of either moves, for a throughput column (for a parse, the payload it is
// named after, not the JSON around it); target is the ratio the API should stay within, from the
// issue that set it (0: none).
type pair struct {
	name, baseline, what string
	bytes                int64
	target               float64
	// minMiBs is the throughput the API benchmark should reach, from the issue that set it (0:
	// none).
	minMiBs float64
	// optional rows need more than the machine must have (the real agent CLIs, `make
	// agent-clis`): without results they are left out.
	optional bool
}

const mib = 1 << 20

var pairs = []pair{
	{name: "CreateTask", baseline: "RawFirestoreCreate", what: "CreateTask round trip vs bare Firestore create"},
	{name: "GetTask", baseline: "RawFirestoreGet", what: "GetTask round trip vs bare Firestore get"},
	{name: "AuthCached", what: "auth interceptor, key verified recently (cache hit)"},
	{name: "AuthUncached", baseline: "RawFirestoreGet", what: "auth interceptor, cache expired vs bare Firestore get"},
	{name: "SessionCreateToFirstExec", baseline: "RawRuncRun", what: "CreateSession to first output (warm pool) vs runc run", target: 1.3},
	{name: "SessionCreateToFirstExecCold", baseline: "RawRuncRun", what: "CreateSession to first output, cold boot, vs runc run"},
	{name: "SessionExecTrue", baseline: "RawRuncExec", what: "Exec `true` to its exit frame vs runc exec", target: 0.25},
	{name: "SessionExecTrueTraced", baseline: "SessionExecTrue", what: "Exec `true`, every span sampled (100%) vs tracing off"},
	{name: "SessionCreateToFirstExecTraced", baseline: "SessionCreateToFirstExec", what: "CreateSession to first output, every span sampled (100%) vs tracing off"},
	{name: "SessionWriteFile", baseline: "RawCp", what: "WriteFile 64 MiB vs cp", bytes: 64 * mib},
	{name: "SessionReadFile", baseline: "RawCp", what: "ReadFile 64 MiB vs cp", bytes: 64 * mib},
	{name: "SessionSnapshot100MiB", baseline: "RawTarCreate100MiB", what: "Snapshot of 100 MiB fresh data vs tar -c", bytes: 100 * mib},
	{name: "SessionResume100MiB", baseline: "RawTarExtract100MiB", what: "Resume of 100 MiB (chunks cached) vs tar -x", bytes: 100 * mib},
	{name: "SessionEventDelivery", baseline: "SessionWriteTinyFile", what: "tiny WriteFile until its event streams vs the write alone"},
	{name: "SessionPromptFirstEvent", baseline: "SessionExecEcho", what: "prompt to first assistant message (bash harness) vs exec echo"},
	{name: "ParsePerEvent", baseline: "RawJSONLineSplit/PerEvent", what: "harness plugin parse of one event vs the same in native Go"},
	{name: "ParseMiB", baseline: "RawJSONLineSplit/MiB", what: "harness plugin parse of 1 MiB of output vs native Go", bytes: mib},
	{name: "ParseSmallEvents", baseline: "NativeSmallEvents", what: "claude-code plugin parse of a turn of 1 MiB of small events vs native", bytes: mib},
	{name: "ParseToolResult10MiB", baseline: "NativeToolResult10MiB", what: "claude-code plugin parse of a turn with a 10 MiB tool result vs native", bytes: 10 * mib, minMiBs: 20},
	{name: "ClaudeCodeToolTurnInSession", baseline: "ClaudeCodeToolTurnInSession host-ns/op", what: "real claude-code tool turn in a session (agent image, plugin, egress proxy) vs the CLI on the host", target: 1.10, optional: true},
	{name: "ClaudeCodeToolTurnInSession first-request-ns/op", baseline: "ClaudeCodeToolTurnInSession host-first-request-ns/op", what: "the same, until the CLI's first request reaches the fake", optional: true},
	{name: "ClaudeCodeToolTurnInSession after-last-request-ns/op", baseline: "ClaudeCodeToolTurnInSession host-after-last-request-ns/op", what: "the same, from the CLI's last request to turn.done (to its exit on the host)", optional: true},
	{name: "ClaudeCodeToolTurn", baseline: "RawClaudeCodeToolTurn", what: "real claude-code edit turn outside a sandbox: its plugin plan and parse alone vs the CLI", optional: true},
	{name: "LoadWarmCache", baseline: "LoadCold", what: "harness plugin load, warm compilation cache vs cold"},
	{name: "FilterEval", baseline: "RawCELEval", what: "CEL filter on a pull_request event (cost-limited) vs raw cel-go"},
	{name: "CompileCached", baseline: "RawCELCompile", what: "CEL compile, cached vs uncached"},
	{name: "EvalWarm", baseline: "EvalFresh", what: "EvalCode small script, warm pool vs a fresh instance"},
	{name: "EvalWarm", baseline: "EvalNativeGoja", what: "EvalCode small script, warm pool vs goja in-process"},
	{name: "TestRenderTenBlocks", baseline: "RenderRawTemplates", what: "TestRender of a ten-block automation vs its raw CEL evals"},
	{name: "WebhookToPublished/serial", baseline: "RawPublish/serial", what: "signed webhook to acknowledged publish vs bare publish"},
	{name: "WebhookToPublished/parallel", baseline: "RawPublish/parallel", what: "the same from 16 senders, per delivery"},
	{name: "WebhookToRunStarted", baseline: "PublishToReceive", what: "signed webhook to its run started vs a bare Pub/Sub hop"},
	{name: "WebhookDeliveriesSustained", what: "sustained deliveries (16 senders, each sent twice), per delivery"},
	{name: "EnabledImageCreateToFirstExec", baseline: "RawRuncRun", what: "CreateSession of an enabled image to first output (warm pool) vs runc run", target: 0.5},
	{name: "EnabledImageCreateToFirstExecCold", baseline: "RawRuncRun", what: "the same, cold boot, vs runc run", target: 1.2},
	{name: "RuncRunEchoSandboxConfig", baseline: "RuncRunEchoBare", what: "runc run alone with a sandbox's config (seccomp filter, cgroup limits) vs bare: a cold boot's floor"},
	{name: "ImageEnable200MiB", baseline: "RawCranePullTarX200MiB", what: "enable a 200 MiB image end to end vs crane pull + tar -x", bytes: 200 * mib, target: 1.5},
	{name: "ImageEnable200MiB cpu-ns/op", baseline: "RawCranePullTarX200MiB cpu-ns/op", what: "the same, CPU of the session (process, emulators, tar) vs crane + tar"},
	{name: "WarmImageFirstExec", baseline: "WarmCommandInSession", what: "first exec on a warm-captured image vs running its 2 s warm command", target: 0.1},
	{name: "ProxyHTTPSInjected p50-ns", baseline: "RawHTTPSDirect p50-ns", what: "HTTPS request from a sandbox, captured, intercepted, key injected vs direct (p50)", target: 1.5},
	{name: "ProxyHTTPSInjected", baseline: "RawHTTPSDirect", what: "the same, mean"},
	{name: "ProxyHTTPSInjected cpu-ns/op", baseline: "RawHTTPSDirect cpu-ns/op", what: "the same, CPU of every party (client, proxy, server) per request"},
	{name: "ProxyHTTPSPassThrough p50-ns", baseline: "RawHTTPSDirect p50-ns", what: "the same request to a host no secret goes to: captured and spliced, not intercepted (p50)"},
	{name: "ProxyHTTPSNewConnection p50-ns", baseline: "RawHTTPSNewConnection p50-ns", what: "the same on a new connection per request, TLS session resumed (p50)"},
	{name: "ProxyDownload100MiB", baseline: "RawDownload100MiB", what: "100 MiB HTTPS download through the intercepting proxy vs direct (target: ≥ 0.7× throughput)", bytes: 100 * mib, target: 1 / 0.7},
	{name: "ProxyDownload100MiB cpu-ns/op", baseline: "RawDownload100MiB cpu-ns/op", what: "the same, CPU of every party per download"},
	{name: "DashboardEventOnPage", baseline: "DashboardEventOnPage stream-ns/op", what: "an event appended to a session, shown on the open session page (Chromium) vs on StreamEvents", target: 1.5},
	{name: "DashboardEventOnPage arrive-ns/op", baseline: "DashboardEventOnPage stream-ns/op", what: "the same, until its bytes reach the page's JavaScript (the rest is rendering)"},
	{name: "NetworkSetup", what: "what networking adds to a sandbox create: namespace, rules, listeners (target: ≤ 5 ms)"},
}

// line is a benchmark's result; metric each of its "value unit" columns. A pair names a metric
// other than ns/op as "Name unit" (a latency percentile, the CPU an operation costs).
var (
	line   = regexp.MustCompile(`^Benchmark([\w/]+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op`)
	metric = regexp.MustCompile(`\s([\d.]+) ([^\s\d][^\s]*)`)
)

func main() {
	count := flag.Int("count", 5, "runs of each benchmark; the median is reported")
	benchtime := flag.String("benchtime", "1s", "go test -benchtime")
	only := flag.String("bench", ".", "go test -bench: run only these benchmarks (rows without results are left out)")
	flag.Parse()

	// Each round runs every benchmark once, so an API benchmark and its baseline are measured
	// minutes apart at most, round after round: on a shared machine whose load moves, a ratio of
	// two medians taken far apart would compare the load, not the code. The ratio reported is
	// the median of the rounds' ratios.
	rounds := make([]map[string]float64, 0, *count)
	for range *count {
		round, err := runRound(*only, *benchtime)
		if err != nil {
			fmt.Fprintln(os.Stderr, "driver:", err)
			os.Exit(1)
		}
		rounds = append(rounds, round)
	}
	samples := map[string][]float64{}
	for _, round := range rounds {
		for name, v := range round {
			samples[name] = append(samples[name], v)
		}
	}
	fmt.Printf("Medians of %d runs (%s each), %s\n\n", *count, *benchtime, time.Now().UTC().Format(time.DateOnly))
	fmt.Printf("| %-60s | %22s | %22s | %6s | %14s |\n", "benchmark", "median", "baseline", "ratio", "target")
	fmt.Printf("|%s|%s|%s|%s|%s|\n", dashes(62), dashes(24), dashes(24), dashes(8), dashes(16))
	// A required row without a result fails the run, but only after the table: the rows that
	// did run are worth having.
	var missing []string
	for _, p := range pairs {
		v, ok := median(samples[p.name])
		if !ok && (*only != "." || p.optional) {
			continue
		}
		if !ok {
			missing = append(missing, p.name)
			continue
		}
		base, ratio, target := "", "", ""
		if b, ok := median(samples[p.baseline]); ok {
			r, _ := median(pairedRatios(rounds, p.name, p.baseline))
			base, ratio = cell(b, p.bytes), fmt.Sprintf("%.2f×", r)
			if p.target > 0 {
				verdict := "met"
				if r > p.target {
					verdict = "missed"
				}
				target = fmt.Sprintf("≤ %.2f× %s", p.target, verdict)
			}
		}
		if p.minMiBs > 0 {
			verdict := "met"
			if got := float64(p.bytes) / mib / (v / 1e9); got < p.minMiBs {
				verdict = "missed"
			}
			target = fmt.Sprintf("≥ %.0f MiB/s %s", p.minMiBs, verdict)
		}
		fmt.Printf("| %-60s | %22s | %22s | %6s | %14s |\n", p.what, cell(v, p.bytes), base, ratio, target)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "driver: no result for %s (go test -v -bench NAME shows why it was skipped)\n", strings.Join(missing, ", "))
		os.Exit(1)
	}
}

// runRound runs every benchmark matching only once and returns each one's result, and each of
// its other metrics as "Name unit".
func runRound(only, benchtime string) (map[string]float64, error) {
	// -p 1: no package's test binary is built while another's benchmarks are timed (e2e's, first
	// in the list, shared the two cores with the other packages' links).
	args := []string{"test", "-p", "1", "-run", "^$", "-bench", only, "-count", "1", "-benchtime", benchtime, "./e2e/", "./harnesses/harness/",
		"./automation/expr/", "./automation/jsbox/", "./automation/render/", "./functions/webhooks/", "./platform/pubsub/", "./sandboxhosts/egressproxy/", "./sandboxhosts/container/", "./cmd/hangar/"}
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		os.Stdout.Write(out)
		return nil, fmt.Errorf("go test -bench failed: %w", err)
	}
	round := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := line.FindStringSubmatch(sc.Text()); m != nil {
			round[m[1]], _ = strconv.ParseFloat(m[2], 64)
			for _, c := range metric.FindAllStringSubmatch(sc.Text(), -1) {
				if c[2] != "ns/op" {
					round[m[1]+" "+c[2]], _ = strconv.ParseFloat(c[1], 64)
				}
			}
		}
	}
	return round, nil
}

// pairedRatios is name's result over baseline's in each round that has both.
func pairedRatios(rounds []map[string]float64, name, baseline string) []float64 {
	var rs []float64
	for _, round := range rounds {
		v, okV := round[name]
		b, okB := round[baseline]
		if okV && okB && b > 0 {
			rs = append(rs, v/b)
		}
	}
	return rs
}

// cell shows a median time and, for operations that move bytes, the throughput it amounts to.
// The throughput is derived here from the median ns/op rather than parsed from go test's MB/s:
// that column is per run and in decimal megabytes, while this one matches the median beside it
// and the MiB the benchmarks are named in.
func cell(ns float64, n int64) string {
	if n == 0 {
		return human(ns)
	}
	return fmt.Sprintf("%s (%.0f MiB/s)", human(ns), float64(n)/mib/(ns/1e9))
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
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	case d >= time.Microsecond:
		return d.Round(10 * time.Nanosecond).String()
	}
	return d.String()
}

func dashes(n int) string { return string(bytes.Repeat([]byte("-"), n)) }

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

// BenchmarkDashboardEventOnPage times an event appended to a session (an Exec's exec.started)
// until the open session page shows it in Chromium (web/e2e/event-latency.mjs), beside the time
// until a StreamEvents client gets the same event, both from the same moment in the same round:
// ns/op is the page's median, stream-ns/op StreamEvents' (bench/driver prints their ratio), and
// arrive-ns/op the time until the event's bytes reached the page's JavaScript (the rest of the
// page's time is decoding and rendering).
func BenchmarkDashboardEventOnPage(b *testing.B) {
	web, node := browserTools(b, "node")
	dev := serveDev(b)
	key := readDevFile(b, dev, "admin.key")
	image := readDevFile(b, dev, "image", "registry-addr") + "/hangar/dev:latest"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Clients of their own, without a timeout that would cut the long-lived stream.
	sessions := appv1connect.NewSessionServiceClient(&http.Client{}, dev.url+"/rpc", auth.WithKey(key))
	created, err := sessions.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: image}))
	if err != nil {
		b.Fatalf("create a session: %v\n%s", err, dev.out)
	}
	id := created.Msg.GetSessionId()
	// exec appends exec.started (and runs the command to its end, answering on done): the
	// clocks stop at the event, not at the command's end.
	exec1 := func(command string, done chan<- error) {
		stream, err := sessions.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: id, Command: &command}))
		if err != nil {
			done <- err
			return
		}
		for stream.Receive() {
		}
		done <- stream.Err()
	}
	events, err := sessions.StreamEvents(ctx, connect.NewRequest(&appv1.StreamEventsRequest{SessionId: id}))
	if err != nil {
		b.Fatal(err)
	}
	defer events.Close()
	streamed := func(marker string) {
		for events.Receive() {
			if ev := events.Msg(); ev.GetKind() == "exec.started" && strings.Contains(ev.GetPayloadJson(), marker) {
				return
			}
		}
		b.Fatalf("the event stream ended before %s: %v", marker, events.Err())
	}

	page := exec.CommandContext(ctx, node, filepath.Join(web, "e2e", "event-latency.mjs"))
	page.Dir = web
	page.Env = append(os.Environ(), "HANGAR_URL="+dev.url, "HANGAR_API_KEY="+key, "HANGAR_SESSION="+id)
	page.Stderr = os.Stderr
	toPage, err := page.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	fromPage, err := page.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := page.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		toPage.Close()
		_ = page.Wait()
	}()
	lines := bufio.NewScanner(fromPage)
	ask := func(line string) string {
		if line != "" {
			if _, err := io.WriteString(toPage, line+"\n"); err != nil {
				b.Fatal(err)
			}
		}
		if !lines.Scan() {
			b.Fatalf("the browser stopped (after %q): %v", line, lines.Err())
		}
		return lines.Text()
	}
	if got := ask(""); got != "ready" {
		b.Fatalf("the browser said %q, not ready", got)
	}

	var onPage, onArrival, onStream []float64
	round := func(marker string) (page, arrived, stream time.Duration) {
		if got := ask("arm " + marker); got != "armed" {
			b.Fatalf("the browser said %q, not armed", got)
		}
		done := make(chan error, 1)
		start := time.Now()
		go exec1("echo "+marker, done)
		streamed(marker)
		stream = time.Since(start)
		if err := <-done; err != nil {
			b.Fatalf("exec %s: %v", marker, err)
		}
		said := ask("wait")
		var seenMs, arrivedMs float64
		if _, err := fmt.Sscanf(said, "seen %g %g", &seenMs, &arrivedMs); err != nil {
			b.Fatalf("the browser said %q: %v", said, err)
		}
		since := func(ms float64) time.Duration { return time.Duration(ms*1e6 - float64(start.UnixNano())) }
		return since(seenMs), since(arrivedMs), stream
	}
	// One round before the clock: the page's first render of an exec, the stream's backlog.
	round("warm-up")
	for i := 0; b.Loop(); i++ {
		page, arrived, stream := round(fmt.Sprintf("marker-%d", i))
		onPage = append(onPage, float64(page))
		onArrival = append(onArrival, float64(arrived))
		onStream = append(onStream, float64(stream))
	}
	b.ReportMetric(median(onPage), "ns/op")
	b.ReportMetric(median(onArrival), "arrive-ns/op")
	b.ReportMetric(median(onStream), "stream-ns/op")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// browserTools stops tb (testkit.Missing) unless everything a browser test needs is here: the
// emulators, runc and the plugins for hangar dev, the dashboard's build, and what browserDriver
// needs. It returns the web directory and the path of command (node or npm).
func browserTools(tb testing.TB, command string) (web, path string) {
	tb.Helper()
	testenv.RequireEmulators(tb)
	testenv.RequireSandboxes(tb)
	testenv.RequirePlugins(tb)
	web, path = browserDriver(tb, command)
	if _, err := os.Stat(filepath.Join(web, "dist", "index.html")); err != nil {
		testkit.Missing(tb, "the browser tests need the built dashboard (make web builds it into the binary)")
	}
	return web, path
}

// browserDriver stops tb (testkit.Missing) unless Chromium, the dashboard's npm packages
// (playwright-core among them) and the Node.js command that drives the browser (node or npm)
// are here: what a browser test of Hangar's server-rendered pages needs, which runs no sandbox.
// It returns the web directory and that command's path.
func browserDriver(tb testing.TB, command string) (web, path string) {
	tb.Helper()
	web, err := filepath.Abs("../../web")
	if err != nil {
		tb.Fatal(err)
	}
	for what, path := range map[string]string{
		"Chromium (make system-deps-browser installs it)":       "/usr/bin/chromium",
		"the dashboard's npm packages (make web installs them)": filepath.Join(web, "node_modules", ".package-lock.json"),
	} {
		if _, err := os.Stat(path); err != nil {
			testkit.Missing(tb, "the browser tests need "+what)
		}
	}
	path, err = exec.LookPath(command)
	if err != nil {
		testkit.Missing(tb, "the browser tests need Node.js's "+command)
	}
	return web, path
}

// readDevFile reads a file hangar dev wrote under its .data directory, trimmed.
func readDevFile(tb testing.TB, dev devServer, path ...string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{dev.dir, ".data"}, path...)...))
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

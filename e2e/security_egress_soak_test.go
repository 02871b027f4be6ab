package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
)

// The soak of the egress proxy's limits (issue 23): users at their session limit whose every
// sandbox opens connections as fast as it can and holds them, while another user works.
const (
	// soakFlood is how long the host stays full while the quiet user works (soakFloodShort
	// under -short).
	soakFlood      = 30 * time.Second
	soakFloodShort = 8 * time.Second
	// soakUsers flood, each with soakPerUser sessions (their limit); soakWorkers is how many
	// connections of each kind (a silent tunnel, a request its upstream never answers) one
	// sandbox keeps trying to hold: 6 sandboxes x 16 is twice the host's cap.
	soakUsers   = 3
	soakPerUser = 2
	soakWorkers = 8
	// soakHostCap is the host-wide cap (HANGAR_EGRESS_MAX_CONNECTIONS), low enough for the
	// flood to hit it. soakMinShare is below the cap over the 7 sandboxes, so every sandbox's
	// fair share is the cap's split and the quiet one always has a way in.
	soakHostCap  = 48
	soakMinShare = 4
	// soakIdle is the idle timeout: a request the flood left in flight when its client was
	// killed is released by it (the proxy cannot tell a client that went away from one that
	// half-closed), so it bounds how long the release takes.
	soakIdle = 10 * time.Second
	// soakCallDeadline bounds each of the quiet user's calls: generous, since a loaded 2-core
	// machine under -race is slow; the latencies are logged, never asserted.
	soakCallDeadline = 2 * time.Minute
	// After the flood, the test process's descriptors and goroutines come back to their count
	// before it within these margins (pooled connections of clients the test does not own).
	soakFDMargin        = 16
	soakGoroutineMargin = 48
)

// soakFloodScript makes a sandbox open connections to api.anthropic.com (its harness's host, on
// the test's upstream) as fast as it can and hold them, of both kinds the proxy serves: captured
// tunnels that never speak (nc reading a FIFO no one writes) and proxied requests to /hold,
// which the upstream never answers. A reset connection is opened again at once. It prints
// "flooding" when its workers run, and once /tmp/stop exists, kills them and what they hold
// and prints "stopped".
var soakFloodScript = fmt.Sprintf(`ln -sf /bin/busybox /tmp/nc && busybox mkfifo /tmp/hold || exit 1
pids=""
i=0
while [ $i -lt %d ]; do
	( while [ ! -e /tmp/stop ]; do /tmp/nc api.anthropic.com 80 <>/tmp/hold; done ) >/dev/null 2>&1 &
	pids="$pids $!"
	( while [ ! -e /tmp/stop ]; do wget -q -O /dev/null http://api.anthropic.com/hold; done ) >/dev/null 2>&1 &
	pids="$pids $!"
	i=$((i+1))
done
echo flooding
while [ ! -e /tmp/stop ]; do sleep 0.2; done
# The workers first, so that none opens another after the holders are killed.
kill $pids
wait
busybox killall -q nc wget
echo stopped
`, soakWorkers)

// soakFetch is the quiet user's command: it execs, and reaches its allowed host through the
// explicit proxy and through the capture.
const soakFetch = `echo alive && wget -q -O- http://api.anthropic.com/hello && env -u http_proxy -u HTTP_PROXY wget -q -O- http://api.anthropic.com/hello`

const soakFetched = "alive\nreached\nreached\n"

// soakUpstream is the loopback server standing for api.anthropic.com: /hold answers only when
// its request is abandoned, anything else answers "reached". open counts its connections.
type soakUpstream struct {
	*httptest.Server
	open, holding atomic.Int64
}

func newSoakUpstream(t *testing.T) *soakUpstream {
	u := &soakUpstream{}
	done := make(chan struct{})
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			u.holding.Add(1)
			defer u.holding.Add(-1)
			select {
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		io.WriteString(w, "reached\n")
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.open.Add(-1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	// Before Close, which waits for the requests in flight.
	t.Cleanup(func() { close(done) })
	return u
}

// soakUser is one user with a SessionService client of their own, one without a whole-call
// timeout (the tests bound each call with a context).
type soakUser struct {
	key string
	svc appv1connect.SessionServiceClient
}

func (s *sandboxStack) soakUser(t *testing.T, email string) soakUser {
	key := s.mintKey(t, email, false)
	return soakUser{key: key, svc: appv1connect.NewSessionServiceClient(streamClient, s.rpcURL(), auth.WithKey(key))}
}

// create makes a session of the user's, with the claude-code harness: its egress allows
// api.anthropic.com.
func (u soakUser) create(ctx context.Context) (string, error) {
	resp, err := u.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("claude-code")}))
	if err != nil {
		return "", err
	}
	if resp.Msg.GetStatus() != "running" {
		return "", fmt.Errorf("new session is %q, want running", resp.Msg.GetStatus())
	}
	return resp.Msg.GetSessionId(), nil
}

// sh runs command in session within soakCallDeadline and fails t unless it exits 0.
func (u soakUser) sh(t *testing.T, session, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), soakCallDeadline)
	defer cancel()
	res, err := collectExec(ctx, u.svc, &appv1.ExecRequest{SessionId: session, Command: &command})
	if err != nil || res.exit.GetExitStatus() != 0 {
		t.Fatalf("%q in %s: %v, exit %d: %s", command, session, err, res.exit.GetExitStatus(), res.stderr)
	}
	return res.stdout
}

// openFDs counts the test process's open descriptors: the hosts, their proxies and the
// upstreams all run in it.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// percentile is the p-th percentile (0-100) of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// The attack: sandboxes that open connections through the egress proxy as fast as they can
// held a host's descriptors and goroutines until it had none left for anyone. Now, with three
// users at their session limit flooding, the host's cap holds, a fourth user's session still
// execs and reaches its allowed host on every call, and once the flood ends every connection,
// descriptor and goroutine it took is released.
func TestSecuritySoakOfConnectionFloodsLeavesOthersServed(t *testing.T) {
	testenv.RequirePlugins(t)
	flood := soakFlood
	if testing.Short() {
		flood = soakFloodShort
	}
	up := newSoakUpstream(t)
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.Limits.MaxSessionsPerUser = soakPerUser
		// No warm sandbox booting in the middle of the counts.
		sb.Config.Host.WarmSandboxes = 0
		sb.Config.Host.SandboxMemoryBytes = 128 << 20
		sb.Config.Host.Egress.MaxConnections = soakHostCap
		sb.Config.Host.Egress.MinShare = soakMinShare
		sb.Config.Host.Egress.IdleTimeout = soakIdle
		sb.EgressResolve = map[string]string{"api.anthropic.com:80": up.Listener.Addr().String()}
	})
	h := s.hosts[0].Host
	ctx := t.Context()

	type floodSession struct {
		user soakUser
		id   string
	}
	var floods []floodSession
	for i := range soakUsers {
		u := s.soakUser(t, fmt.Sprintf("flood%d@example.com", i))
		for range soakPerUser {
			id, err := u.create(ctx)
			if err != nil {
				t.Fatalf("flooding user %d's session: %v", i, err)
			}
			floods = append(floods, floodSession{u, id})
		}
		_, err := u.create(ctx)
		testenv.WantCode(t, err, connect.CodeResourceExhausted)
	}
	quiet := s.soakUser(t, "quiet@example.com")
	q, err := quiet.create(ctx)
	if err != nil {
		t.Fatalf("the quiet user's session: %v", err)
	}

	// Every sandbox reaches the upstream once before the counts, so what a first connection sets
	// up for good (the proxy's pooled upstream, the clients' connections) is in the baseline.
	for _, f := range floods {
		if got := f.user.sh(t, f.id, "wget -q -O- http://api.anthropic.com/hello"); got != "reached\n" {
			t.Fatalf("session %s before the flood: %q", f.id, got)
		}
	}
	if got := quiet.sh(t, q, soakFetch); got != soakFetched {
		t.Fatalf("the quiet session before the flood: %q", got)
	}
	closeIdle := http.DefaultTransport.(*http.Transport).CloseIdleConnections
	testkit.Eventually(t, time.Minute, "the warm-up's connections are released", func() (bool, string) {
		return h.EgressConnections() == 0, fmt.Sprint(h.EgressConnections(), " held")
	})
	closeIdle()
	baseFDs, baseGoroutines, baseUpstream := openFDs(t), runtime.NumGoroutine(), up.open.Load()
	t.Logf("before the flood: %d descriptors, %d goroutines, %d upstream connections", baseFDs, baseGoroutines, baseUpstream)

	// The flood: each sandbox runs the script until /tmp/stop appears.
	type floodResult struct {
		res execResult
		err error
	}
	results := make([]floodResult, len(floods))
	var flooding sync.WaitGroup
	for i, f := range floods {
		flooding.Add(1)
		go func() {
			defer flooding.Done()
			script := soakFloodScript
			results[i].res, results[i].err = collectExec(ctx, f.user.svc, &appv1.ExecRequest{SessionId: f.id, Command: &script})
		}()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for _, f := range floods {
			f.user.sh(t, f.id, "touch /tmp/stop")
		}
		flooding.Wait()
	}
	// A failure below stops the flood too, before the stack's cleanup.
	defer stop()

	var peakConns, peakFDs, peakGoroutines int
	sample := func() {
		n := h.EgressConnections()
		if n > soakHostCap {
			t.Errorf("the host's sandboxes hold %d connections, over its cap of %d", n, soakHostCap)
		}
		peakConns, peakFDs, peakGoroutines = max(peakConns, n), max(peakFDs, openFDs(t)), max(peakGoroutines, runtime.NumGoroutine())
	}
	testkit.Eventually(t, 2*time.Minute, "the flood fills the host's connections", func() (bool, string) {
		sample()
		n := h.EgressConnections()
		return n == soakHostCap, fmt.Sprintf("%d of %d held", n, soakHostCap)
	})

	// While the host is full, the quiet user's session execs and fetches, each time.
	var took []time.Duration
	for end := time.Now().Add(flood); len(took) == 0 || time.Now().Before(end); {
		start := time.Now()
		if got := quiet.sh(t, q, soakFetch); got != soakFetched {
			t.Fatalf("the quiet session's call %d during the flood: %q, want %q", len(took), got, soakFetched)
		}
		took = append(took, time.Since(start))
		sample()
	}
	slices.Sort(took)
	t.Logf("during the flood: %d calls of the quiet session, p50 %s, p99 %s, max %s; peaks: %d connections, %d descriptors, %d goroutines, %d requests held upstream",
		len(took), percentile(took, 50), percentile(took, 99), took[len(took)-1], peakConns, peakFDs, peakGoroutines, up.holding.Load())

	stop()
	for i, r := range results {
		if r.err != nil || r.res.exit.GetExitStatus() != 0 || r.res.stdout != "flooding\nstopped\n" {
			t.Errorf("flood in %s: %v, exit %d, out %q, err %q", floods[i].id, r.err, r.res.exit.GetExitStatus(), r.res.stdout, r.res.stderr)
		}
	}
	// Each flooding sandbox was over its share, so it was refused connections.
	for _, f := range floods {
		testkit.Eventually(t, time.Minute, "session "+f.id+"'s refusals are counted", func() (bool, string) {
			status, u := s.networkUsage(t, f.id, f.user.key)
			return status == http.StatusOK && u.ConnectionsDenied > 0, fmt.Sprintf("status %d, usage %+v", status, u)
		})
	}

	// Everything the flood took is released: the proxy's connections (the requests its killed
	// clients left in flight at the idle timeout), their upstreams, descriptors and goroutines.
	testkit.Eventually(t, 2*time.Minute+soakIdle, "the flood's connections, descriptors and goroutines are released", func() (bool, string) {
		closeIdle()
		conns, fds, gs, upOpen := h.EgressConnections(), openFDs(t), runtime.NumGoroutine(), up.open.Load()
		return conns == 0 && upOpen <= baseUpstream && fds <= baseFDs+soakFDMargin && gs <= baseGoroutines+soakGoroutineMargin,
			fmt.Sprintf("%d connections held, %d upstream connections (%d before), %d descriptors (%d before), %d goroutines (%d before)",
				conns, upOpen, baseUpstream, fds, baseFDs, gs, baseGoroutines)
	})
	t.Logf("after the flood: %d descriptors, %d goroutines, %d upstream connections", openFDs(t), runtime.NumGoroutine(), up.open.Load())

	// And the quiet session still works, as does every flooding one.
	if got := quiet.sh(t, q, soakFetch); got != soakFetched {
		t.Fatalf("the quiet session after the flood: %q", got)
	}
	for _, f := range floods {
		if got := f.user.sh(t, f.id, "wget -q -O- http://api.anthropic.com/hello"); got != "reached\n" {
			t.Errorf("session %s after the flood: %q", f.id, got)
		}
	}
}

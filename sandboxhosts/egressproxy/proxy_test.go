package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"codeberg.org/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

const (
	placeholder = "hangar-placeholder-0123456789abcdef"
	realKey     = "sk-real-key-never-in-the-sandbox"
)

// upstream is a loopback HTTPS server standing for a real host; it records the Authorization
// headers it gets.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newUpstream(t *testing.T, tlsOn bool) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		io.WriteString(w, "hello from "+r.Host)
	})
	if tlsOn {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) lastAuth() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.auths) == 0 {
		return ""
	}
	return u.auths[len(u.auths)-1]
}

// fixture is a proxy serving one session in a real network namespace, with loopback upstreams
// for api.example.com (https, gets the secret), other.example.com (https) and
// plain.example.com (http).
type fixture struct {
	ns                *sandboxnet.Namespace
	sb                *Sandbox
	api, other, plain *upstream
	// slow (slow.example.com, http) sends its first bytes, then holds the answer open; tcp
	// (tcp.example.com:7000, no protocol) does the same on a bare connection.
	slow   *httptest.Server
	tcp    net.Listener
	caFile string
	mu     sync.Mutex
	events []Connection
}

// newFixture serves a session with rules and the anthropic-key secret (for api.example.com),
// plus more secrets: a session is given whole to Serve, never changed under its proxy.
func newFixture(t *testing.T, rules Rules, more ...Secret) *fixture {
	t.Helper()
	if unix.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	f := &fixture{api: newUpstream(t, true), other: newUpstream(t, true), plain: newUpstream(t, false)}
	f.slow = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(f.slow.Close)
	var err error
	if f.tcp, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	var heldMu sync.Mutex
	var held []net.Conn
	t.Cleanup(func() {
		f.tcp.Close()
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := f.tcp.Accept()
			if err != nil {
				return
			}
			io.WriteString(c, "partial\n")
			heldMu.Lock()
			held = append(held, c)
			heldMu.Unlock()
		}
	}()
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(f.api.Certificate())
	roots.AddCert(f.other.Certificate())
	p := mustNew(t, Options{
		CA: ca,
		Resolve: map[string]string{
			"api.example.com:443":   f.api.Listener.Addr().String(),
			"other.example.com:443": f.other.Listener.Addr().String(),
			"plain.example.com:80":  f.plain.Listener.Addr().String(),
			"slow.example.com:80":   f.slow.Listener.Addr().String(),
			"tcp.example.com:7000":  f.tcp.Addr().String(),
		},
		RootCAs: roots,
		Audit: func(_ string, c Connection) {
			f.mu.Lock()
			f.events = append(f.events, c)
			f.mu.Unlock()
		},
	})
	dir := t.TempDir()
	f.caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(f.caFile, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if f.ns, err = sandboxnet.Create(filepath.Join(dir, "netns")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.ns.Close() })
	f.sb, err = p.Serve(Session{ID: "sess-1", Rules: rules, Secrets: append([]Secret{{
		Name: "anthropic-key", Placeholder: placeholder, Value: realKey, AllowHosts: []string{"api.example.com"}, Slots: APIKeySlots,
	}}, more...)}, f.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.sb.Close)
	return f
}

// curl runs curl in the namespace, as a sandbox's process would, and returns its output
// (body, then the status code on the last line) or its error.
func (f *fixture) curl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"--net=" + f.ns.Path, "curl", "-sS", "-m", "10", "--cacert", f.caFile, "-w", "\n%{http_code}"}, args...)
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	return string(out), err
}

func TestProxyDecidesAndInjects(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com", "other.example.com", "plain.example.com"}})
	// A public address stands for the name; SNI and Host decide.
	resolve := func(host string, port int) string { return host + ":" + itoa(port) + ":93.184.216.34" }
	for _, tc := range []struct {
		name     string
		args     []string
		wantOut  string
		wantAuth string
		up       *upstream
	}{
		{"captured https to a secret's host gets the real value", []string{"--resolve", resolve("api.example.com", 443), "-H", "Authorization: Bearer " + placeholder, "https://api.example.com/v1"}, "hello from api.example.com", "Bearer " + realKey, nil},
		{"https_proxy to a secret's host gets the real value", []string{"-x", sandboxnet.ProxyURL, "-H", "Authorization: Bearer " + placeholder, "https://api.example.com/v1"}, "hello from api.example.com", "Bearer " + realKey, nil},
		{"captured plain http passes", []string{"--resolve", resolve("plain.example.com", 80), "http://plain.example.com/"}, "hello from plain.example.com", "", nil},
		{"http_proxy plain http passes", []string{"-x", sandboxnet.ProxyURL, "http://plain.example.com/"}, "hello from plain.example.com", "", nil},
		{"the placeholder sent over plain http elsewhere is refused", []string{"-x", sandboxnet.ProxyURL, "-H", "Authorization: Bearer " + placeholder, "http://plain.example.com/"}, "secret \"anthropic-key\", which may not go to this host", "", nil},
		{"a host no rule names gets a readable 403", []string{"-x", sandboxnet.ProxyURL, "http://denied.example.com/"}, "denied.example.com:80 refused (default deny", "", nil},
		{"a CONNECT no rule names gets a readable 403", []string{"-x", sandboxnet.ProxyURL, "https://denied.example.com/"}, "CONNECT tunnel failed, response 403", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := f.curl(t, tc.args...)
			if !strings.Contains(out, tc.wantOut) {
				t.Fatalf("curl said %q, want it to contain %q", out, tc.wantOut)
			}
			if tc.wantAuth != "" && f.api.lastAuth() != tc.wantAuth {
				t.Fatalf("upstream got Authorization %q, want %q", f.api.lastAuth(), tc.wantAuth)
			}
		})
	}
	if strings.Contains(strings.Join(f.plain.auths, ","), realKey) || strings.Contains(strings.Join(f.other.auths, ","), realKey) {
		t.Fatal("the real key reached a host it may not go to")
	}
}

// A client that refuses the interception leaf (it does not trust the deployment's CA) leaves
// an audited connection naming the failed handshake, not silence.
func TestProxyAuditsAFailedInterceptedHandshake(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}})
	empty := filepath.Join(t.TempDir(), "none.pem")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := f.curl(t, "--cacert", empty, "-x", sandboxnet.ProxyURL, "https://api.example.com/v1"); err == nil {
		t.Fatalf("curl trusted the leaf without the CA: %q", out)
	}
	testkit.Eventually(t, 10*time.Second, "an audited failed handshake", func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.events {
			if c.Host == "api.example.com" && c.Mode == "intercepted" && strings.Contains(c.Error, "TLS handshake with the sandbox's client") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("events %+v", f.events)
	})
}

func TestProxyNeverReachesPrivateAddresses(t *testing.T) {
	f := newFixture(t, Rules{DefaultAllow: true, AllowHosts: []string{"169.254.169.254", "10.0.0.1", "127.0.0.1"}})
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"metadata by address", []string{"-x", sandboxnet.ProxyURL, "http://169.254.169.254/computeMetadata/v1/"}},
		{"metadata by name", []string{"-x", sandboxnet.ProxyURL, "http://metadata.google.internal/"}},
		{"metadata captured", []string{"http://169.254.169.254/"}},
		{"a private address", []string{"-x", sandboxnet.ProxyURL, "http://10.0.0.1/"}},
		{"the host's loopback", []string{"-x", sandboxnet.ProxyURL, "http://127.0.0.1:" + itoa(f.plain.Listener.Addr().(*net.TCPAddr).Port) + "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _ := f.curl(t, tc.args...)
			if strings.Contains(out, "hello") || strings.HasSuffix(out, "\n200") {
				t.Fatalf("reached: %q", out)
			}
		})
	}
}

func TestProxyDNSAnswersSyntheticAddresses(t *testing.T) {
	f := newFixture(t, Rules{})
	var answer string
	f.inSandbox(t, func() {
		m := dns.NewMsg("api.example.com.", dns.TypeA)
		r, err := dns.Exchange(context.Background(), m, "udp", "127.0.0.1:53")
		if err != nil {
			t.Error(err)
			return
		}
		if len(r.Answer) == 1 {
			answer = r.Answer[0].(*dns.A).Addr.String()
		}
	})
	if !strings.HasPrefix(answer, "198.18.") {
		t.Fatalf("answer %q, want a synthetic 198.18.x.y address", answer)
	}
}

// inSandbox runs fn in the sandbox's network namespace, as a sandbox's process would connect,
// on an OS thread of its own that it never gives back (it is left in the namespace).
func (f *fixture) inSandbox(t *testing.T, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		fd, err := unix.Open(f.ns.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestProxyPassesServerFirstProtocolsThrough(t *testing.T) {
	for _, tc := range []struct {
		name string
		// dial connects from inside the sandbox to mail.example.com:25.
		dial func(f *fixture) (net.Conn, error)
	}{
		{"captured", func(f *fixture) (net.Conn, error) {
			return net.Dial("tcp4", f.sb.names.addr("mail.example.com").String()+":25")
		}},
		// The tunnel outlives the CONNECT request: waiting for the client's first bytes must
		// not cancel the dial to the server that speaks first.
		{"through a CONNECT", func(f *fixture) (net.Conn, error) {
			c, err := net.Dial("tcp4", strings.TrimPrefix(sandboxnet.ProxyURL, "http://"))
			if err != nil {
				return nil, err
			}
			io.WriteString(c, "CONNECT mail.example.com:25 HTTP/1.1\r\nHost: mail.example.com:25\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				c.Close()
				return nil, fmt.Errorf("CONNECT answered %v: %v", resp, err)
			}
			return &bufferedConn{Conn: c, r: br}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A server that greets first, as SMTP does; the client sends nothing until it has.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err == nil {
					io.WriteString(c, "220 mail.example.com ready\r\n")
					c.Close()
				}
			}()
			f := newFixture(t, Rules{AllowHosts: []string{"mail.example.com"}})
			f.sb.p.opts.Resolve["mail.example.com:25"] = ln.Addr().String()
			f.sb.names.addr("mail.example.com") // as a DNS answer would have made it
			var greeting string
			f.inSandbox(t, func() {
				c, err := tc.dial(f)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				// The greeting's line, not to EOF: the server's close reaches a CONNECT client
				// only when the tunnel's end is closed, which this test does not look at.
				greeting, _ = bufio.NewReader(c).ReadString('\n')
			})
			if !strings.HasPrefix(greeting, "220 mail.example.com") {
				t.Fatalf("the client got %q, want the server's greeting", greeting)
			}
		})
	}
}

func TestInterceptionLeavesSuitEachClientAndSessionsResume(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.sb.p.opts.CA.CertPEM())
	// request makes one intercepted request on a new connection from inside the sandbox and
	// returns its TLS state; reading the answer also reads TLS 1.3's session tickets.
	request := func(t *testing.T, cfg *tls.Config) tls.ConnectionState {
		t.Helper()
		c, err := dialIn(f.ns.Path, "93.184.216.34:443")
		if err != nil {
			t.Fatal(err)
		}
		tc := tls.Client(c, cfg)
		defer tc.Close()
		req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1", nil)
		req.Header.Set("Authorization", "Bearer "+placeholder)
		if err := req.Write(tc); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), "hello from api.example.com") || f.api.lastAuth() != "Bearer "+realKey {
			t.Fatalf("answer %q, upstream got %q: want the request through with the key", body, f.api.lastAuth())
		}
		return tc.ConnectionState()
	}
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		want x509.PublicKeyAlgorithm
	}{
		{"a client that checks ECDSA gets the cheaper ECDSA leaf", &tls.Config{ServerName: "api.example.com", RootCAs: roots}, x509.ECDSA},
		{"a client that checks RSA only gets an RSA leaf", &tls.Config{ServerName: "api.example.com", RootCAs: roots, MaxVersion: tls.VersionTLS12,
			CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}, x509.RSA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := request(t, tc.cfg).PeerCertificates[0].PublicKeyAlgorithm; got != tc.want {
				t.Fatalf("leaf key %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("a new connection resumes the session of an earlier one", func(t *testing.T) {
		cfg := &tls.Config{ServerName: "api.example.com", RootCAs: roots, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		if request(t, cfg).DidResume {
			t.Fatal("the first connection resumed a session")
		}
		if !request(t, cfg).DidResume {
			t.Fatal("the second connection made a full handshake, want its session resumed")
		}
	})
}

// The counters are the sum of what the audit reports, each connection counted once as allowed
// or denied, with the bytes the sandbox's side carried.
func TestProxyCountersAddUpTheAuditedConnections(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com", "plain.example.com"}})
	resolve := func(host string, port int) string { return host + ":" + itoa(port) + ":93.184.216.34" }
	for _, args := range [][]string{
		{"--resolve", resolve("plain.example.com", 80), "http://plain.example.com/"},
		{"-x", sandboxnet.ProxyURL, "http://plain.example.com/"},
		{"-x", sandboxnet.ProxyURL, "-H", "Authorization: Bearer " + placeholder, "https://api.example.com/v1"},
		{"-x", sandboxnet.ProxyURL, "http://denied.example.com/"},
		{"--resolve", resolve("denied.example.com", 443), "https://denied.example.com/"},
	} {
		_, _ = f.curl(t, args...)
	}
	testkit.Eventually(t, 10*time.Second, "five audited connections", func() (bool, string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.events) == 5, strconv.Itoa(len(f.events))
	})
	var want httpapi.NetworkTotals
	for _, c := range f.events {
		want = want.Plus(httpapi.NetworkTotals{BytesOut: c.BytesOut, BytesIn: c.BytesIn})
		if c.Decision == Denied {
			want.ConnectionsDenied++
		} else {
			want.ConnectionsAllowed++
		}
	}
	got := f.sb.Counters.Usage()
	if got != want || got.ConnectionsAllowed != 3 || got.ConnectionsDenied != 2 || got.BytesIn < int64(3*len("hello from plain.example.com")) || got.BytesOut == 0 {
		t.Fatalf("counters %+v, want %+v with 3 allowed, 2 denied and the bodies' bytes in; events %+v", got, want, f.events)
	}
}

// Closing a sandbox's proxy ends its connections still open, and each is audited and counted
// with the bytes it carried: a sandbox that goes leaves no connection out of its log.
func TestProxyCloseAuditsTheConnectionsStillOpen(t *testing.T) {
	for _, tc := range []struct {
		name, host string
		args       []string
		mode       string
	}{
		{"captured http", "slow.example.com", []string{"--resolve", "slow.example.com:80:93.184.216.34", "http://slow.example.com/"}, "transparent"},
		{"http through a CONNECT tunnel", "slow.example.com", []string{"-p", "-x", sandboxnet.ProxyURL, "http://slow.example.com/"}, "proxy"},
		{"a captured bare connection, spliced", "tcp.example.com", []string{"telnet://tcp.example.com:7000"}, "transparent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Rules{AllowHosts: []string{"slow.example.com", "tcp.example.com"}})
			cmd := exec.Command("nsenter", append([]string{"--net=" + f.ns.Path, "curl", "-sS", "-N", "-m", "60"}, tc.args...)...)
			var out testkit.SyncBuffer
			cmd.Stdout, cmd.Stdin = &out, strings.NewReader("")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			testkit.Eventually(t, 10*time.Second, "the first bytes through", func() (bool, string) {
				return strings.Contains(out.String(), "partial"), out.String()
			})
			f.mu.Lock()
			before := len(f.events)
			f.mu.Unlock()
			if before != 0 {
				t.Fatalf("%d events before the close", before)
			}
			f.sb.Close()
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.events) != 1 || f.events[0].Host != tc.host || f.events[0].Mode != tc.mode || f.events[0].BytesIn < int64(len("partial")) {
				t.Fatalf("events after the close: %+v, want the open connection's with its bytes in", f.events)
			}
			if u := f.sb.Counters.Usage(); u.ConnectionsAllowed != 1 || u.BytesIn != f.events[0].BytesIn {
				t.Fatalf("counters %+v", u)
			}
		})
	}
}

// A secret whose value changes while the sandbox runs (an OAuth access token Hangar refreshes)
// is asked for at each request that carries its placeholder: each request gets the value of
// its moment, and one whose value cannot be had is refused without reaching the host.
func TestProxyInjectsASecretsCurrentValue(t *testing.T) {
	const oauthPlaceholder = "hangar-placeholder-oauth"
	var mu sync.Mutex
	current, unavailable := "access-token-1", error(nil)
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}}, Secret{
		Name: "oauth/acme", Placeholder: oauthPlaceholder, AllowHosts: []string{"api.example.com"}, Slots: APIKeySlots,
		Current: func(context.Context) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			return current, unavailable
		},
	})
	call := func() string {
		out, _ := f.curl(t, "-x", sandboxnet.ProxyURL, "-H", "Authorization: Bearer "+oauthPlaceholder, "https://api.example.com/v1")
		return out
	}
	for _, tc := range []struct {
		name, value string
		err         error
		wantOut     string
		wantAuth    string
	}{
		{"the value now", "access-token-1", nil, "hello from api.example.com", "Bearer access-token-1"},
		{"the value after it changed", "access-token-2", nil, "hello from api.example.com", "Bearer access-token-2"},
		{"no value to be had", "", errors.New("the acme credential is disconnected"), `secret "oauth/acme" is not available`, "Bearer access-token-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			current, unavailable = tc.value, tc.err
			mu.Unlock()
			if out := call(); !strings.Contains(out, tc.wantOut) {
				t.Fatalf("curl said %q, want %q", out, tc.wantOut)
			}
			if got := f.api.lastAuth(); got != tc.wantAuth {
				t.Fatalf("the upstream last got %q, want %q", got, tc.wantAuth)
			}
		})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var injected, refused int
	for _, e := range f.events {
		if len(e.Injected) == 1 && e.Injected[0] == "oauth/acme" {
			injected++
		}
		if e.Decision == Denied && strings.Contains(e.Error, "not available") {
			refused++
		}
	}
	if injected != 2 || refused != 1 {
		t.Fatalf("events: %d injections, %d refusals; want 2 and 1", injected, refused)
	}
}

func mustNew(tb testing.TB, opts Options) *Proxy {
	tb.Helper()
	p, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

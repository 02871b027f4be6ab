package egressproxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

const downloadBytes = 100 << 20

// benchUpstream is a loopback HTTPS server that answers /small with a few bytes and /big with
// 100 MiB, and checks that it got the real key.
func benchUpstream(b *testing.B) *httptest.Server {
	big := bytes.Repeat([]byte("x"), 1<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+realKey {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", strconv.Itoa(downloadBytes))
			for range downloadBytes / len(big) {
				w.Write(big)
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchClients are a client straight to the upstream and one from inside a sandbox's network
// namespace whose connections the proxy captures and intercepts to inject the key.
func benchClients(b *testing.B) (direct, proxied *http.Client, directKey, proxiedKey string) {
	direct, proxied, _ = benchSetup(b)
	return direct, proxied, realKey, placeholder
}

// benchSetup is benchClients' clients, and a third from inside the sandbox to example.com (the
// same upstream), a name no secret may go to: its connections are passed through untouched
// (spliced by the kernel), so it carries the real key itself. It measures what any proxy's
// extra hop costs here, with no TLS terminated.
func benchSetup(b *testing.B) (direct, proxied, passed *http.Client) {
	b.Helper()
	if unix.Geteuid() != 0 {
		b.Skip("needs root")
	}
	up := benchUpstream(b)
	ca, err := NewCA()
	if err != nil {
		b.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	p := mustNew(b, Options{CA: ca, Resolve: map[string]string{"api.example.com:443": up.Listener.Addr().String(),
		"example.com:443": up.Listener.Addr().String()}, RootCAs: roots})
	ns, err := sandboxnet.Create(filepath.Join(b.TempDir(), "netns"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Close() })
	sb, err := p.Serve(Session{ID: "bench", Rules: Rules{AllowHosts: []string{"api.example.com", "example.com"}}, Secrets: []Secret{{
		Name: "key", Placeholder: placeholder, Value: realKey, AllowHosts: []string{"api.example.com"}, Slots: APIKeySlots,
	}}}, ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Close)
	direct = up.Client()
	direct.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, up.Listener.Addr().String())
	}
	sandboxRoots := x509.NewCertPool()
	sandboxRoots.AppendCertsFromPEM(ca.CertPEM())
	proxied = &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: sandboxRoots},
		// Every dial is made inside the namespace, to a public address the capture redirects.
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialIn(ns.Path, "93.184.216.34:443")
		},
	}}
	passed = &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots},
		DialContext:     proxied.Transport.(*http.Transport).DialContext,
	}}
	return direct, proxied, passed
}

// dialIn connects from inside the network namespace at nsPath, as a sandbox's process would.
func dialIn(nsPath, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		fd, err := unix.Open(nsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- result{err: err}
			return
		}
		c, err := net.Dial("tcp4", addr)
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// get fetches path with key and returns the bytes read.
func get(b *testing.B, c *http.Client, url, key string) int64 {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return n
}

// requests times each small request and reports the median.
func requests(b *testing.B, c *http.Client, url, key string) {
	get(b, c, url, key) // the connection is made once, as a client's keep-alive does
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu := cpuClock(b)
	for b.Loop() {
		start := time.Now()
		get(b, c, url, key)
		times = append(times, time.Since(start))
	}
	cpu()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
}

// cpuClock starts counting the CPU time of the whole process (client, proxy and server all run
// in it) and returns what reports it per operation: on a shared machine, the work an operation
// costs is steadier than the wall time it takes.
func cpuClock(b *testing.B) func() {
	used := func() time.Duration {
		var ru unix.Rusage
		if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	return func() { b.ReportMetric(float64(used()-start)/float64(b.N), "cpu-ns/op") }
}

// BenchmarkProxyHTTPSInjected is a small HTTPS request from a sandbox, captured, intercepted
// and given the key; BenchmarkRawHTTPSDirect the same request straight to the server.
func BenchmarkProxyHTTPSInjected(b *testing.B) {
	_, proxied, _, key := benchClients(b)
	requests(b, proxied, "https://api.example.com/small", key)
}

// BenchmarkProxyHTTPSPassThrough is the small request from the sandbox to a host no secret may
// go to: captured and spliced, not intercepted.
func BenchmarkProxyHTTPSPassThrough(b *testing.B) {
	_, _, passed := benchSetup(b)
	requests(b, passed, "https://example.com/small", realKey)
}

func BenchmarkRawHTTPSDirect(b *testing.B) {
	direct, _, key, _ := benchClients(b)
	requests(b, direct, "https://api.example.com/small", key)
}

// BenchmarkProxyHTTPSNewConnection is the small request on a new connection each time, as a
// client without keep-alive makes it (resuming its TLS session, as curl and Node do);
// BenchmarkRawHTTPSNewConnection the same straight to the server.
func BenchmarkProxyHTTPSNewConnection(b *testing.B) {
	_, proxied, _, key := benchClients(b)
	requests(b, newConnections(proxied), "https://api.example.com/small", key)
}

func BenchmarkRawHTTPSNewConnection(b *testing.B) {
	direct, _, key, _ := benchClients(b)
	requests(b, newConnections(direct), "https://api.example.com/small", key)
}

// newConnections is c making a new connection for every request, with a TLS session cache.
func newConnections(c *http.Client) *http.Client {
	t := c.Transport.(*http.Transport).Clone()
	t.DisableKeepAlives = true
	t.TLSClientConfig.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	return &http.Client{Transport: t}
}

// BenchmarkProxyDownload100MiB downloads 100 MiB through the intercepting proxy;
// BenchmarkRawDownload100MiB straight from the server.
func BenchmarkProxyDownload100MiB(b *testing.B) {
	_, proxied, _, key := benchClients(b)
	b.SetBytes(downloadBytes)
	cpu := cpuClock(b)
	for b.Loop() {
		get(b, proxied, "https://api.example.com/big", key)
	}
	cpu()
}

func BenchmarkRawDownload100MiB(b *testing.B) {
	direct, _, key, _ := benchClients(b)
	b.SetBytes(downloadBytes)
	cpu := cpuClock(b)
	for b.Loop() {
		get(b, direct, "https://api.example.com/big", key)
	}
	cpu()
}

// BenchmarkNetworkSetup is what networking adds to a sandbox's create: its namespace, route,
// rules and listeners, served for a session, then torn down.
func BenchmarkNetworkSetup(b *testing.B) {
	if unix.Geteuid() != 0 {
		b.Skip("needs root")
	}
	ca, err := NewCA()
	if err != nil {
		b.Fatal(err)
	}
	p := mustNew(b, Options{CA: ca})
	dir := b.TempDir()
	i := 0
	for b.Loop() {
		i++
		ns, err := sandboxnet.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		sb, err := p.Serve(Session{ID: "bench"}, ns)
		if err != nil {
			b.Fatal(err)
		}
		sb.Close()
		if err := ns.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

package egressproxy

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// seenRequest is what the upstream got of one request.
type seenRequest struct {
	Host, Path, Auth string
	// Conn is the upstream connection's client address.
	Conn   string
	Header http.Header
	TE     []string
	Body   string
}

// recorder is api.example.com's upstream for the forwarder's tests: it records each request
// and answers by its path.
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seenRequest(nil), rec.seen...)
}

// bigAnswer is /big's body: larger than one copy buffer, so that it goes through the pump.
var bigAnswer = bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16)

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen = append(rec.seen, seenRequest{Conn: r.RemoteAddr, Host: r.Host, Path: r.URL.RequestURI(), Auth: r.Header.Get("Authorization"),
		Header: r.Header.Clone(), TE: r.TransferEncoding, Body: string(body)})
	rec.mu.Unlock()
	switch r.URL.Path {
	case "/ws":
		// An upgrade: 101, then whatever comes is echoed back.
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_, _ = io.Copy(c, brw)
	case "/cut":
		// The upstream goes away in the middle of its answer.
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial")
		c.Close()
	case "/flaky":
		// Answered on a new connection; on one that has answered before, closed without an
		// answer, as a server that closes an idle connection just as a request arrives.
		rec.mu.Lock()
		n := 0
		for _, s := range rec.seen {
			if s.Conn == r.RemoteAddr && s.Path == r.URL.RequestURI() {
				n++
			}
		}
		rec.mu.Unlock()
		if n > 1 {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
			return
		}
		fmt.Fprintf(w, "hello from %s %s: %s", r.Host, r.URL.Path, body)
	case "/hang":
		// A stream that never ends while the client is there.
		io.WriteString(w, "partial\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case "/head":
		w.Header().Set("Content-Length", "1000")
	case "/stream":
		w.Header().Set("Trailer", "X-Checksum")
		for _, part := range []string{"one ", "two ", "three"} {
			io.WriteString(w, part)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Checksum", "42")
	case "/big":
		w.Header().Set("Content-Length", strconv.Itoa(len(bigAnswer)))
		w.Write(bigAnswer)
	default:
		fmt.Fprintf(w, "hello from %s %s: %s", r.Host, r.URL.Path, body)
	}
}

// intercepted opens a captured TLS connection from inside the sandbox to api.example.com,
// offering h2 and http/1.1 as browsers and Node do.
func (f *fixture) intercepted(t *testing.T) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := dialIn(f.ns.Path, "93.184.216.34:443")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.sb.p.opts.CA.CertPEM())
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tc.Close() })
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	return tc, bufio.NewReader(tc)
}

// forwardFixture is a fixture whose api.example.com is a recorder, and whose session has a
// second secret that may go only to github.example.com.
func forwardFixture(t *testing.T) (*fixture, *recorder) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com", "other.example.com"}},
		Secret{Name: "github-token", Placeholder: githubPlaceholder, Value: "ghp-real", AllowHosts: []string{"github.example.com"}, Slots: APIKeySlots},
		Secret{Name: "spaced", Placeholder: spacedPlaceholder, Value: "a b\r\nX-Injected: 1", AllowHosts: []string{"api.example.com"}, Slots: []Slot{{Query: "key"}}})
	rec := &recorder{}
	f.api.Config.Handler = rec
	return f, rec
}

const (
	githubPlaceholder = "hangar-placeholder-github"
	spacedPlaceholder = "hangar-placeholder-spaced"
)

// readAnswer reads one answer to a request of method and its whole body.
func readAnswer(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body: %v", err)
	}
	return resp, string(body)
}

func bearer(placeholder string) string { return "Authorization: Bearer " + placeholder + "\r\n" }

// The forwarder of intercepted connections: each behaviour of HTTP/1.1 a client relies on,
// through one connection pinned to the upstream, with the key injected into every request.
func TestInterceptedConnectionsForwardHTTP11(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run plays the client on an intercepted connection and checks what it got.
		run func(t *testing.T, c *tls.Conn, br *bufio.Reader)
		// want checks what the upstream got.
		want func(t *testing.T, seen []seenRequest)
		// refused names the secret whose refusal must be in the audit.
		refused string
	}{
		{"the interception offers http/1.1 only, even to a client that offers h2", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Fatalf("negotiated %q", p)
			}
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			readAnswer(t, br, "GET")
		}, func(t *testing.T, seen []seenRequest) {}, ""},
		{"pipelined requests are each injected and answered in order", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /one HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n"+
				"GET /two HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n")
			for _, want := range []string{"/one", "/two"} {
				if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com "+want+": " {
					t.Fatalf("answer %q, want %s's", body, want)
				}
			}
		}, func(t *testing.T, seen []seenRequest) {
			if len(seen) != 2 || seen[0].Auth != "Bearer "+realKey || seen[1].Auth != "Bearer "+realKey {
				t.Fatalf("upstream got %+v, want two requests with the key", seen)
			}
		}, ""},
		{"a request naming another host on the connection still goes to the connection's host, and the secret is decided by it", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /first HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			readAnswer(t, br, "GET")
			io.WriteString(c, "GET /second HTTP/1.1\r\nHost: other.example.com\r\n"+bearer(placeholder)+"\r\n")
			if _, body := readAnswer(t, br, "GET"); !strings.HasPrefix(body, "hello from other.example.com /second") {
				t.Fatalf("answer %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {
			if len(seen) != 2 || seen[1].Host != "other.example.com" || seen[1].Auth != "Bearer "+realKey {
				t.Fatalf("upstream got %+v", seen)
			}
		}, ""},
		{"a placeholder the host may not get is refused with a 403, and the connection goes on", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /leak HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(githubPlaceholder)+"\r\n")
			resp, body := readAnswer(t, br, "GET")
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Hangar-Egress") != "denied" || !strings.Contains(body, `secret "github-token"`) {
				t.Fatalf("answer %d %q", resp.StatusCode, body)
			}
			io.WriteString(c, "GET /after HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n")
			if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com /after: " {
				t.Fatalf("the next request got %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {
			if len(seen) != 1 || seen[0].Path != "/after" {
				t.Fatalf("upstream got %+v, want only /after", seen)
			}
		}, "github-token"},
		{"a refused HEAD gets a 403 without a body, and the next request is read right after it", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "HEAD /leak HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(githubPlaceholder)+"\r\nGET /next HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			if resp, body := readAnswer(t, br, "HEAD"); resp.StatusCode != http.StatusForbidden || body != "" {
				t.Fatalf("HEAD answer %d %q", resp.StatusCode, body)
			}
			if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com /next: " {
				t.Fatalf("next answer %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {}, "github-token"},
		{"a chunked request body goes chunked and untouched, the placeholder swapped in the headers only", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "POST /upload HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"Transfer-Encoding: chunked\r\n\r\n"+
				"6\r\nhello \r\n"+fmt.Sprintf("%x\r\n%s\r\n", len(placeholder), placeholder)+"0\r\n\r\n")
			if resp, _ := readAnswer(t, br, "POST"); resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}, func(t *testing.T, seen []seenRequest) {
			if len(seen) != 1 || seen[0].Body != "hello "+placeholder || seen[0].Auth != "Bearer "+realKey || len(seen[0].TE) != 1 || seen[0].TE[0] != "chunked" {
				t.Fatalf("upstream got %+v", seen)
			}
		}, ""},
		{"Expect: 100-continue is answered by the upstream's 100 before the body is sent", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "PUT /put HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"Content-Length: 4\r\nExpect: 100-continue\r\n\r\n")
			line, err := br.ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
				t.Fatalf("first line %q %v, want a 100 Continue", line, err)
			}
			for line != "\r\n" {
				line, _ = br.ReadString('\n')
			}
			io.WriteString(c, "body")
			if _, body := readAnswer(t, br, "PUT"); body != "hello from api.example.com /put: body" {
				t.Fatalf("answer %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {}, ""},
		{"a WebSocket upgrade becomes a two-way stream after the 101", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("answer %v %v, want 101", resp, err)
			}
			for _, msg := range []string{"ping", "pong " + placeholder} {
				io.WriteString(c, msg)
				got := make([]byte, len(msg))
				if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
					t.Fatalf("echo %q %v, want %q", got, err, msg)
				}
			}
		}, func(t *testing.T, seen []seenRequest) {
			if len(seen) != 1 || seen[0].Auth != "Bearer "+realKey || seen[0].Header.Get("Upgrade") != "websocket" {
				t.Fatalf("upstream got %+v", seen)
			}
		}, ""},
		{"an answer to HEAD has no body, and the next request is read right after it", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "HEAD /head HTTP/1.1\r\nHost: api.example.com\r\n\r\nGET /next HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			if resp, body := readAnswer(t, br, "HEAD"); resp.ContentLength != 1000 || body != "" {
				t.Fatalf("HEAD answer: length %d body %q", resp.ContentLength, body)
			}
			if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com /next: " {
				t.Fatalf("next answer %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {}, ""},
		{"a chunked answer streams with its trailer", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			resp, body := readAnswer(t, br, "GET")
			if body != "one two three" || resp.Trailer.Get("X-Checksum") != "42" {
				t.Fatalf("answer %q trailer %v", body, resp.Trailer)
			}
		}, func(t *testing.T, seen []seenRequest) {}, ""},
		{"a large answer arrives whole", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: api.example.com\r\n\r\nGET /after HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			if _, body := readAnswer(t, br, "GET"); body != string(bigAnswer) {
				t.Fatalf("got %d bytes, want the %d sent", len(body), len(bigAnswer))
			}
			if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com /after: " {
				t.Fatalf("next answer %q", body)
			}
		}, func(t *testing.T, seen []seenRequest) {}, ""},
		{"an upstream that goes away mid-answer cuts the sandbox's answer short, never ends it cleanly", func(t *testing.T, c *tls.Conn, br *bufio.Reader) {
			io.WriteString(c, "GET /cut HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatal(err)
			}
			if body, err := io.ReadAll(resp.Body); err == nil {
				t.Fatalf("read %q to a clean end, want an error", body)
			}
		}, func(t *testing.T, seen []seenRequest) {}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, rec := forwardFixture(t)
			c, br := f.intercepted(t)
			tc.run(t, c, br)
			c.Close()
			tc.want(t, rec.requests())
			// The connection is audited once, as before the forwarder: its bytes and secrets.
			testkit.Eventually(t, 10*time.Second, "the connection's event", func() (bool, string) {
				f.mu.Lock()
				defer f.mu.Unlock()
				var conn, refused bool
				for _, e := range f.events {
					conn = conn || e.Mode == "intercepted" && e.Host == "api.example.com" && e.Decision == Allowed && e.BytesOut > 0 && e.BytesIn > 0
					refused = refused || e.Decision == Denied && e.Refused == tc.refused
				}
				return conn && (tc.refused == "" || refused), fmt.Sprintf("%+v", f.events)
			})
		})
	}
}

// The sandbox is untrusted: a request net/http's server would refuse is refused, never sent
// on, and one whose framing is ambiguous reaches the upstream framed one way only.
func TestInterceptedConnectionsRefuseMalformedRequests(t *testing.T) {
	f, rec := forwardFixture(t)
	for _, tc := range []struct {
		name, raw string
		want      int
	}{
		{"two different Content-Lengths", "POST / HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody", 400},
		{"two Transfer-Encodings", "POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", 501},
		{"a Transfer-Encoding other than chunked", "POST / HTTP/1.1\r\nHost: api.example.com\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 501},
		{"a header value with a bare CR", "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-A: a\rInjected: 1\r\n\r\n", 400},
		{"a header value with a NUL", "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-A: a\x00b\r\n\r\n", 400},
		{"a header name with a space", "GET / HTTP/1.1\r\nHost: api.example.com\r\nX A: 1\r\n\r\n", 400},
		{"two Host headers", "GET / HTTP/1.1\r\nHost: api.example.com\r\nHost: other.example.com\r\n\r\n", 400},
		{"no Host header", "GET / HTTP/1.1\r\n\r\n", 400},
		{"a malformed Host header", "GET / HTTP/1.1\r\nHost: api.example.com/x y\r\n\r\n", 400},
		{"a malformed request line", "GET /a b HTTP/1.1\r\nHost: api.example.com\r\n\r\n", 400},
		{"HTTP/2's preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"a CONNECT inside the interception", "CONNECT other.example.com:443 HTTP/1.1\r\nHost: other.example.com:443\r\n\r\n", 405},
		{"an Expect other than 100-continue", "GET / HTTP/1.1\r\nHost: api.example.com\r\nExpect: something\r\n\r\n", 417},
		{"a head larger than net/http's limit", "GET / HTTP/1.1\r\nHost: api.example.com\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := f.intercepted(t)
			go io.WriteString(c, tc.raw)
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
			io.Copy(io.Discard, resp.Body)
			if _, err := br.ReadByte(); err == nil {
				t.Fatal("the connection was read on after a malformed request")
			}
		})
	}
	if seen := rec.requests(); len(seen) != 0 {
		t.Fatalf("the upstream got %+v, want nothing", seen)
	}
	t.Run("both Content-Length and chunked reach the upstream chunked only, the body as the proxy read it", func(t *testing.T) {
		c, br := f.intercepted(t)
		// Read by its Content-Length the body would be "0\r\n\r" and the rest a second request.
		io.WriteString(c, "POST /smuggle HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
		readAnswer(t, br, "POST")
		readAnswer(t, br, "GET")
		seen := rec.requests()
		if len(seen) != 2 || seen[0].Header.Get("Content-Length") != "" || len(seen[0].TE) != 1 || seen[0].Body != "" || seen[1].Path != "/smuggled" {
			t.Fatalf("upstream got %+v, want the POST chunked with an empty body, then the GET the proxy read as a request too", seen)
		}
	})
	t.Run("a folded header line reaches the upstream as one line", func(t *testing.T) {
		c, br := f.intercepted(t)
		io.WriteString(c, "GET /fold HTTP/1.1\r\nHost: api.example.com\r\nX-A: a\r\n Injected: 1\r\n\r\n")
		readAnswer(t, br, "GET")
		seen := rec.requests()
		last := seen[len(seen)-1]
		if last.Path != "/fold" || last.Header.Get("X-A") != "a Injected: 1" || last.Header.Get("Injected") != "" {
			t.Fatalf("upstream got %+v", last)
		}
	})
}

// An upstream is kept when its client's connection ends cleanly, for the sandbox's next
// connection to the host (a client without keep-alive then costs no upstream handshake); one
// the server closed while idle is never used again, and the request goes on a new one.
func TestInterceptedUpstreamsAreReusedWhileOpen(t *testing.T) {
	f, rec := forwardFixture(t)
	get := func(t *testing.T, c *tls.Conn, br *bufio.Reader, path string) {
		t.Helper()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n")
		if _, body := readAnswer(t, br, "GET"); body != "hello from api.example.com "+path+": " {
			t.Fatalf("answer %q", body)
		}
	}
	// ended waits for n intercepted connections' events: each is reported once its upstream is
	// kept or closed.
	ended := func(n int) {
		testkit.Eventually(t, 10*time.Second, "the connections' events", func() (bool, string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			return len(f.events) >= n, fmt.Sprintf("%+v", f.events)
		})
	}
	// The first client says Connection: close, as a client without keep-alive does: its
	// connection ends after the answer, the upstream's does not.
	c, br := f.intercepted(t)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: api.example.com\r\nConnection: close\r\n\r\n")
	if resp, _ := readAnswer(t, br, "GET"); !resp.Close {
		t.Fatal("the answer to a Connection: close request did not say it closes")
	}
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the connection stayed open after Connection: close")
	}
	ended(1)
	c, br = f.intercepted(t)
	get(t, c, br, "/second")
	f.api.CloseClientConnections()
	time.Sleep(2 * idleProbeAfter)
	get(t, c, br, "/after-the-upstream-closed")
	c.Close()
	ended(2)
	f.api.CloseClientConnections()
	c, br = f.intercepted(t)
	get(t, c, br, "/new-connection-after-the-upstream-closed")
	seen := rec.requests()
	if len(seen) != 4 || seen[0].Conn != seen[1].Conn || seen[2].Conn == seen[1].Conn || seen[3].Conn == seen[2].Conn {
		t.Fatalf("upstream connections %+v: want the first reused by the second client connection, then new ones after each close", seen)
	}
	for i, s := range seen {
		if (i > 0 && s.Auth != "Bearer "+realKey) || s.Header.Get("Connection") != "" {
			t.Fatalf("upstream got %+v: want the key, and no sandbox's Connection header", s)
		}
	}
}

// A sandbox that goes while an intercepted answer is still streaming ends the connection, and
// the connection is audited and counted with the bytes it carried.
func TestCloseAuditsAnInterceptedConnectionMidAnswer(t *testing.T) {
	f, _ := forwardFixture(t)
	c, br := f.intercepted(t)
	io.WriteString(c, "GET /hang HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n")
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "partial\n" {
		t.Fatalf("first bytes %q %v", line, err)
	}
	f.sb.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.events) != 1 || f.events[0].Mode != "intercepted" || f.events[0].BytesIn < int64(len("partial")) ||
		len(f.events[0].Injected) != 1 || f.events[0].Injected[0] != "anthropic-key" {
		t.Fatalf("events after the close: %+v, want the open connection's with its bytes and secret", f.events)
	}
	if u := f.sb.Counters.Usage(); u.ConnectionsAllowed != 1 || u.BytesIn != f.events[0].BytesIn {
		t.Fatalf("counters %+v", u)
	}
}

// A reused upstream that closes as a request goes out, unanswered: a request that may be sent
// twice goes again on a new upstream, as net/http's Transport does; one that may not is a 502.
func TestInterceptedRequestsRetryOnlyWhatMayBeSentTwice(t *testing.T) {
	f, rec := forwardFixture(t)
	c, br := f.intercepted(t)
	for i, want := range []string{"hello from api.example.com /flaky: ", "hello from api.example.com /flaky: "} {
		io.WriteString(c, "GET /flaky HTTP/1.1\r\nHost: api.example.com\r\n"+bearer(placeholder)+"\r\n")
		if resp, body := readAnswer(t, br, "GET"); resp.StatusCode != http.StatusOK || body != want {
			t.Fatalf("GET %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// The new upstream has answered once: it drops the next request, a POST.
	io.WriteString(c, "POST /flaky HTTP/1.1\r\nHost: api.example.com\r\nContent-Length: 0\r\n\r\n")
	if resp, _ := readAnswer(t, br, "POST"); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("the POST on the closed upstream got %d, want 502", resp.StatusCode)
	}
	seen := rec.requests()
	if len(seen) != 4 || seen[1].Conn != seen[0].Conn || seen[2].Conn == seen[1].Conn || seen[2].Auth != "Bearer "+realKey {
		t.Fatalf("upstream got %+v: want the second GET dropped on the first connection and sent again, with the key, on a new one", seen)
	}
}

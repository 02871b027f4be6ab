// Package egressproxy is the sandbox host's egress proxy: every TCP connection a sandbox makes
// (captured in its network namespace by package sandboxnet, or sent to HTTP(S)_PROXY) and every
// DNS query it asks reaches this proxy, which decides it by the session's Rules, dials the
// destination through platform/egress's guarded dialer (no address that is not global unicast,
// such as loopback, private, link-local, documentation or benchmarking ones, and no address of
// the host's own interfaces is reached, whatever the rules say), injects secrets the sandbox
// only holds placeholders of, and reports each connection for the session's audit.
//
// Names decide, not addresses: DNS inside the sandbox answers every name with a synthetic
// address that maps back to it, and a captured connection's host is its TLS SNI, its HTTP Host,
// or the name its address was handed out for, in that order. The proxy resolves names itself.
//
// A connection to a host one of the session's secrets may go to is intercepted: the proxy
// terminates TLS with a leaf of the deployment's CA (which the sandbox trusts), swaps each
// secret's placeholder for its value in the request's headers and URL, and speaks TLS to the
// real host. A request that carries a placeholder to a host its secret may not go to is
// refused and reported. Any other TLS connection is passed through untouched, so a placeholder
// inside one is not seen; plain HTTP is always read.
package egressproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
)

// Secret is a value a sandbox sees only as Placeholder; the proxy puts Value in its place in
// the Slots of requests over TLS to AllowHosts / AllowHostPatterns (entries as in Rules), and
// puts Placeholder back in the place of Value in what those hosts answer (inject.go, scrub.go).
type Secret struct {
	// Name is how audit events and refusals name the secret (its ref); never the value.
	Name              string
	Placeholder       string
	Value             string
	AllowHosts        []string
	AllowHostPatterns []string
	// Slots are where a request may carry the placeholder; none: nowhere, the secret is
	// never injected.
	Slots []Slot
	// Current, when set, is asked for the value each time a request carries the placeholder
	// (Value is then unused): a value that changes while the sandbox runs, such as an OAuth
	// access token Hangar refreshes. An error refuses the request.
	Current func(context.Context) (string, error)
}

// Session is what the proxy knows of one sandbox's session.
type Session struct {
	ID      string
	Rules   Rules
	Secrets []Secret
}

// Options configure a Proxy.
type Options struct {
	// CA signs the leaves of intercepted hosts; without one no secret can be injected and
	// Serve refuses sessions that have secrets.
	CA *CA
	// Resolve maps "host:port" to a loopback "ip:port" the proxy dials instead, like curl's
	// --resolve: the only way a test upstream on this machine is reached, under its real name.
	Resolve map[string]string
	// RootCAs are the upstream TLS roots; nil is the system's.
	RootCAs *x509.CertPool
	// Allow is what the operator opens to sandboxes beyond public addresses
	// (HANGAR_SANDBOX_EGRESS_ALLOW: their own model gateways at private addresses), applied as
	// egress.Policy.ForSandboxes does: a session's Rules must still allow the destination.
	Allow egress.Policy
	// AllowCA is the operator's CA bundle (PEM, HANGAR_SANDBOX_EGRESS_CA_FILE), trusted beside
	// RootCAs for the proxy's upstream TLS to destinations Allow lists, and for no other.
	AllowCA []byte
	// Audit receives every connection of a session; it must not block for long.
	Audit func(sessionID string, c Connection)
	Log   *slog.Logger
	// Limits bound the connections of the proxy's sandboxes, all of them together and each.
	Limits Limits
}

// Proxy serves the sandboxes of one host.
type Proxy struct {
	opts      Options
	transport *http.Transport
	// dialer is the operator's Allow for sandboxes: no session's Rules open anything that is not
	// global unicast beyond what it lists, nor ever this host's own address, link-local or
	// metadata.
	dialer egress.Policy
	// forward sends every proxied request on, to the target in its context (targetKey).
	forward *httputil.ReverseProxy
	// upstreamTLS is the client side of the proxy's upstream TLS (ServerName set per dial), and
	// listedTLS the same trusting the operator's CA too, for destinations Allow lists. Each has
	// its own session cache: a session verified by the operator's CA is never resumed where
	// only RootCAs are trusted.
	upstreamTLS, listedTLS *tls.Config
	// intercepted terminates intercepted TLS. It is one config for every connection so that
	// its session tickets resume across them (a config's ticket keys are its own).
	intercepted *tls.Config
	limits      *limiter
}

// New returns a proxy, or why the operator's CA bundle cannot be used.
func New(opts Options) (*Proxy, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Audit == nil {
		opts.Audit = func(string, Connection) {}
	}
	p := &Proxy{opts: opts, limits: newLimiter(opts.Limits), dialer: opts.Allow.ForSandboxes(AllowSetting)}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.dial
	// TLS is the proxy's own (dialTLS), so that the operator's CA is trusted by the address a
	// connection reached. Upstream connections are kept (MaxIdleConnsPerHost) and, when one
	// must be made again, resume their TLS session instead of a full handshake. Every
	// upstream speaks HTTP/1.1 only.
	t.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return p.dialTLS(ctx, addr, host)
	}
	p.upstreamTLS = &tls.Config{RootCAs: opts.RootCAs, ClientSessionCache: tls.NewLRUClientSessionCache(256), NextProtos: []string{"http/1.1"}}
	if len(opts.AllowCA) > 0 {
		roots := opts.RootCAs
		if roots == nil {
			var err error
			if roots, err = x509.SystemCertPool(); err != nil {
				return nil, fmt.Errorf("egress proxy: the system's roots, beside the operator's CA: %w", err)
			}
		}
		roots = roots.Clone()
		if !roots.AppendCertsFromPEM(opts.AllowCA) {
			return nil, errors.New("egress proxy: the operator's CA bundle (" + CASetting + ") holds no PEM certificate")
		}
		p.listedTLS = &tls.Config{RootCAs: roots, ClientSessionCache: tls.NewLRUClientSessionCache(64), NextProtos: []string{"http/1.1"}}
	}
	t.MaxIdleConnsPerHost = 16
	p.transport = t
	p.forward = &httputil.ReverseProxy{
		Rewrite:        rewrite,
		ModifyResponse: scrubAnswer,
		Transport:      t,
		// Streamed answers (text/event-stream, unknown length) are flushed at once regardless.
		FlushInterval: 0,
		ErrorHandler:  forwardError,
		// One buffer per request in flight, not one allocated per request.
		BufferPool: make(bufferPool, 64),
	}
	if opts.CA != nil {
		p.intercepted = &tls.Config{
			GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
				host := hello.ServerName
				if c, ok := hello.Conn.(*bufferedConn); ok && c.host != "" {
					host = c.host
				}
				certs, err := opts.CA.leaf(host)
				if err != nil {
					return nil, err
				}
				for i := range certs {
					if hello.SupportsCertificate(&certs[i]) == nil {
						return &certs[i], nil
					}
				}
				return &certs[len(certs)-1], nil
			},
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		}
	}
	return p, nil
}

// The operator's settings the proxy's refusals and errors name.
const (
	AllowSetting = "HANGAR_SANDBOX_EGRESS_ALLOW"
	CASetting    = "HANGAR_SANDBOX_EGRESS_CA_FILE"
)

// bufferPool lends the buffers responses are copied through.
type bufferPool chan []byte

func (p bufferPool) Get() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, 32<<10)
	}
}

func (p bufferPool) Put(b []byte) {
	select {
	case p <- b:
	default:
	}
}

// dial connects to addr through the guarded dialer, or to its test override.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := p.opts.Resolve[strings.ToLower(addr)]; ok {
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
	return p.dialer.DialContext(ctx, network, addr)
}

// dialTLS connects to addr and speaks TLS to serverName over it, HTTP/1.1 only, trusting the
// operator's CA too when the operator's allow entries list the destination (by its name or by
// the address reached): a gateway at a private address with its own CA is verified by that CA,
// and a public host never by it.
func (p *Proxy) dialTLS(ctx context.Context, addr, serverName string) (*tls.Conn, error) {
	raw, err := p.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	base := p.upstreamTLS
	if p.listedTLS != nil {
		if ta, ok := raw.RemoteAddr().(*net.TCPAddr); ok && p.dialer.Lists(serverName, ta.AddrPort()) {
			base = p.listedTLS
		}
	}
	cfg := base.Clone()
	cfg.ServerName = serverName
	up := tls.Client(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	if err := up.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return up, nil
}

// Sandbox is one session's sandbox being served.
type Sandbox struct {
	p     *Proxy
	sess  Session
	names *names
	// Counters are the session's totals.
	Counters Counters
	context  context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	// handlers counts the connections being served; conns are their sockets (the sandbox's
	// side, and the upstream of a tunnel), closed by Close so that each ends, is audited and
	// counted before the sandbox goes. closed is set by Close; all under connsMu.
	handlers sync.WaitGroup
	connsMu  sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	// idle are the upstreams of ended intercepted connections, for the next ones.
	idle idleUpstreams
	// forms are what secrets' values looked like in requests, for answers to be scrubbed of.
	forms seenForms
	// share is the sandbox's part of the host's connections.
	share *share
}

// closeWait bounds how long Close waits for the connections it closed to be audited.
const closeWait = 5 * time.Second

// track makes Close close c; untrack when c is done. A connection tracked after Close is
// closed at once.
func (sb *Sandbox) track(c net.Conn) (untrack func()) {
	sb.connsMu.Lock()
	defer sb.connsMu.Unlock()
	if sb.closed {
		c.Close()
		return func() {}
	}
	sb.conns[c] = struct{}{}
	return func() {
		sb.connsMu.Lock()
		delete(sb.conns, c)
		sb.connsMu.Unlock()
	}
}

func (sb *Sandbox) ctx() context.Context { return sb.context }

// Close stops serving and ends the connections in flight, each audited and counted with the
// bytes it carried so far (waiting at most closeWait for them).
func (sb *Sandbox) Close() {
	sb.cancel()
	sb.wg.Wait()
	sb.connsMu.Lock()
	sb.closed = true
	for c := range sb.conns {
		c.Close()
	}
	sb.connsMu.Unlock()
	sb.idle.drain()
	done := make(chan struct{})
	go func() { sb.handlers.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
		sb.p.opts.Log.Warn("egress: connections still being served after close", "session", sb.sess.ID)
	}
}

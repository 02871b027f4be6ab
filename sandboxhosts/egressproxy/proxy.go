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
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
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

// value is the secret's value now.
func (s Secret) value(ctx context.Context) (string, error) {
	if s.Current == nil {
		return s.Value, nil
	}
	v, err := s.Current(ctx)
	if err == nil && v == "" {
		err = errors.New("it has no value now")
	}
	return v, err
}

// Session is what the proxy knows of one sandbox's session.
type Session struct {
	ID      string
	Rules   Rules
	Secrets []Secret
}

// Decision words of an audit event.
const (
	Allowed = "allow"
	Denied  = "deny"
)

// Connection is one audited connection (or, through an explicit HTTP proxy, one request).
type Connection struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Decision string `json:"decision"`
	Rule     string `json:"rule"`
	// Mode is "proxy" (HTTP(S)_PROXY), "transparent" (captured) or "intercepted" (TLS
	// terminated for an injection).
	Mode     string   `json:"mode"`
	BytesOut int64    `json:"bytes_out"`
	BytesIn  int64    `json:"bytes_in"`
	Duration float64  `json:"duration_seconds"`
	Injected []string `json:"secrets_injected,omitempty"`
	// Scrubbed names the secrets whose values an answer carried and the proxy replaced by
	// their placeholders before the sandbox read it.
	Scrubbed []string `json:"secrets_scrubbed,omitempty"`
	// Refused names a secret whose placeholder was sent where it may not go.
	Refused string `json:"placeholder_refused,omitempty"`
	Error   string `json:"error,omitempty"`
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
	// dialer is the zero Policy: no operator entry, and no session's Rules, open anything that
	// is not global unicast or that is this host's own address.
	dialer egress.Policy
	// forward sends every proxied request on, to the target in its context (targetKey).
	forward *httputil.ReverseProxy
	// upstreamTLS is the client side of an intercepted connection's upstream (ServerName set
	// per dial); it shares the Transport's session cache.
	upstreamTLS *tls.Config
	// intercepted terminates intercepted TLS. It is one config for every connection so that
	// its session tickets resume across them (a config's ticket keys are its own).
	intercepted *tls.Config
	limits      *limiter
}

// New returns a proxy.
func New(opts Options) *Proxy {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Audit == nil {
		opts.Audit = func(string, Connection) {}
	}
	p := &Proxy{opts: opts, limits: newLimiter(opts.Limits)}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.dial
	// Upstream connections are kept (MaxIdleConnsPerHost) and, when one must be made again,
	// resume their TLS session instead of a full handshake.
	t.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, ClientSessionCache: tls.NewLRUClientSessionCache(256)}
	// The forwarder of intercepted connections speaks HTTP/1.1 only, on both legs.
	p.upstreamTLS = &tls.Config{RootCAs: opts.RootCAs, ClientSessionCache: t.TLSClientConfig.ClientSessionCache, NextProtos: []string{"http/1.1"}}
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
	return p
}

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

// Counters are a sandbox's totals through the proxy since it was served. A connection counts
// once it ends (through the explicit proxy: once each request is answered), with the bytes the
// sandbox's side of it carried.
type Counters struct {
	BytesOut, BytesIn, Allowed, Denied atomic.Int64
}

// Usage is a snapshot of Counters, or totals over several sandboxes of one session.
type Usage struct {
	BytesOut           int64 `json:"bytes_out"`
	BytesIn            int64 `json:"bytes_in"`
	ConnectionsAllowed int64 `json:"connections_allowed"`
	ConnectionsDenied  int64 `json:"connections_denied"`
}

// Usage reads the counters.
func (c *Counters) Usage() Usage {
	return Usage{BytesOut: c.BytesOut.Load(), BytesIn: c.BytesIn.Load(), ConnectionsAllowed: c.Allowed.Load(), ConnectionsDenied: c.Denied.Load()}
}

// Plus is u and v added up.
func (u Usage) Plus(v Usage) Usage {
	return Usage{BytesOut: u.BytesOut + v.BytesOut, BytesIn: u.BytesIn + v.BytesIn,
		ConnectionsAllowed: u.ConnectionsAllowed + v.ConnectionsAllowed, ConnectionsDenied: u.ConnectionsDenied + v.ConnectionsDenied}
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

// Serve answers the DNS queries and captured connections of ns for sess until Close.
func (p *Proxy) Serve(sess Session, ns *sandboxnet.Namespace) (*Sandbox, error) {
	sb, err := p.Listen(sess, ns.Capture)
	if err != nil {
		return nil, err
	}
	sb.serveDNS(ns.DNS, ns.DNSStream)
	return sb, nil
}

// Listen serves sess's connections accepted from ln: captured ones (their original destination
// known) and explicit proxy ones.
func (p *Proxy) Listen(sess Session, ln *net.TCPListener) (*Sandbox, error) {
	if len(sess.Secrets) > 0 && p.opts.CA == nil {
		return nil, errors.New("egress proxy: the session has secrets to inject and the proxy has no CA")
	}
	ctx, cancel := context.WithCancel(context.Background())
	sb := &Sandbox{p: p, sess: sess, names: newNames(), context: ctx, cancel: cancel, conns: map[net.Conn]struct{}{},
		share: &share{l: p.limits}}
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			// Each connection holds descriptors and goroutines of the host's: one past the
			// sandbox's share of them is reset (limits.go).
			ls, ok := sb.share.admit(ctx, c)
			if !ok {
				// Counted, not logged: a loop of them must not flood the session's log.
				reset(c)
				sb.Counters.Denied.Add(1)
				continue
			}
			untrack := sb.track(c)
			sb.handlers.Add(1)
			go func() {
				defer func() { untrack(); sb.handlers.Done(); ls.release() }()
				sb.handle(ls.ctx, c)
			}()
		}
	}()
	go func() { <-ctx.Done(); ln.Close() }()
	return sb, nil
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

// audit reports c and adds it to the counters.
func (sb *Sandbox) audit(c Connection, start time.Time) {
	c.Duration = time.Since(start).Seconds()
	sb.Counters.BytesOut.Add(c.BytesOut)
	sb.Counters.BytesIn.Add(c.BytesIn)
	if c.Decision == Denied {
		sb.Counters.Denied.Add(1)
	} else {
		sb.Counters.Allowed.Add(1)
	}
	sb.p.opts.Audit(sb.sess.ID, c)
}

// handle serves one connection from the sandbox.
func (sb *Sandbox) handle(ctx context.Context, c *net.TCPConn) {
	defer c.Close()
	dst, captured, err := sandboxnet.OriginalDst(c)
	if err != nil {
		sb.p.opts.Log.Warn("egress: original destination", "session", sb.sess.ID, "err", err)
		return
	}
	if !captured {
		sb.serveHTTP(ctx, c, bufio.NewReader(c), nil)
		return
	}
	host := dst.Addr().String()
	if name, ok := sb.names.name(dst.Addr()); ok {
		host = name
	}
	sb.tunnel(ctx, c, bufio.NewReader(c), host, int(dst.Port()), "transparent")
}

// tunnel serves a connection bound for host:port (from the capture or a CONNECT): TLS is read
// for its SNI and intercepted when a secret may go to it; plain HTTP is read as HTTP; anything
// else is passed through.
func (sb *Sandbox) tunnel(ctx context.Context, c net.Conn, br *bufio.Reader, host string, port int, mode string) {
	start := time.Now()
	// A client that says nothing first (SMTP, databases: the server speaks first) is passed
	// through as it is, rather than waited on. A host a secret may go to is waited on longer:
	// its clients speak TLS first, and a client that parses its CA bundle after connecting can
	// be late on a loaded machine; passed through, its handshake would meet the real server
	// with the placeholder and fail.
	first, err := peekFirst(c, br, firstBytesWait)
	if isTimeout(err) && sb.intercepts(host, port) {
		first, err = peekFirst(c, br, interceptFirstBytesWait)
	}
	if err != nil && !isTimeout(err) {
		return
	}
	switch {
	case len(first) == 0:
	case first[0] == 0x16: // a TLS handshake record
		sni, _ := peekSNI(br)
		if sni != "" {
			host = sni
		}
		if sb.intercepts(host, port) {
			sb.intercept(ctx, c, br, host, port)
			return
		}
	case looksLikeHTTP(br):
		fixed := &target{host: host, port: port, scheme: "http", mode: mode}
		sb.serveHTTP(ctx, c, br, fixed)
		return
	}
	ok, rule := sb.sess.Rules.decide(host, port)
	ev := Connection{Host: host, Port: port, Mode: mode, Rule: rule, Decision: Allowed}
	if !ok {
		// Not HTTP: a reset is the readable refusal.
		ev.Decision = Denied
		reset(c)
		sb.audit(ev, start)
		return
	}
	up, err := sb.p.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		ev.Decision, ev.Error = Denied, err.Error()
		if errors.Is(err, egress.ErrRefused) {
			ev.Rule = "guarded dialer: " + err.Error()
		}
		reset(c)
		sb.audit(ev, start)
		return
	}
	defer up.Close()
	defer sb.track(up)()
	// An expired connection (limits.go) ends its upstream too, which may never close on its own.
	defer context.AfterFunc(ctx, func() { up.Close() })()
	ev.BytesOut, ev.BytesIn = splice(c, br, up)
	sb.audit(ev, start)
}

// splice copies both ways until both sides are done, and returns the bytes each way. The
// peeked bytes go first; then, between two TCP sockets, the kernel copies (splice).
func splice(c net.Conn, br *bufio.Reader, up net.Conn) (out, in int64) {
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(c, up)
		closeWrite(c)
		done <- n
	}()
	n, _ := br.WriteTo(up)
	out = n
	if n2, err := io.Copy(up, c); err == nil || n2 > 0 {
		out += n2
	}
	closeWrite(up)
	in = <-done
	return out, in
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// reset closes c with a TCP RST: a refusal that is immediate and never a hang.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// peekFirst waits up to wait for the connection's first byte.
func peekFirst(c net.Conn, br *bufio.Reader, wait time.Duration) ([]byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	defer c.SetReadDeadline(time.Time{})
	return br.Peek(1)
}

func isTimeout(err error) bool {
	var timeout net.Error
	return errors.As(err, &timeout) && timeout.Timeout()
}

// looksLikeHTTP reports whether the bytes received so far start an HTTP/1 request line.
func looksLikeHTTP(br *bufio.Reader) bool {
	b, _ := br.Peek(min(br.Buffered(), 8))
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS "} {
		if strings.HasPrefix(string(b), m) {
			return true
		}
	}
	return false
}

// Allows reports whether the secret may go to host:port.
func (s Secret) Allows(host string, port int) bool {
	_, ok := matchHost(host, port, s.AllowHosts, s.AllowHostPatterns)
	return ok
}

// intercepts reports whether some secret may be injected into requests to host:port.
func (sb *Sandbox) intercepts(host string, port int) bool {
	for _, s := range sb.sess.Secrets {
		if s.Allows(host, port) {
			return true
		}
	}
	return false
}

// intercept terminates the sandbox's TLS with a leaf for host and serves its requests.
// A handshake that fails (the client does not trust the CA, or leaves) is audited like any
// connection, with the error: otherwise a client's failure to reach an allowed host would leave
// no trace in the session's log.
func (sb *Sandbox) intercept(ctx context.Context, c net.Conn, br *bufio.Reader, host string, port int) {
	start := time.Now()
	bc := &bufferedConn{Conn: c, r: br, host: host}
	tc := tls.Server(bc, sb.p.intercepted)
	if err := tc.HandshakeContext(ctx); err != nil {
		ok, rule := sb.sess.Rules.decide(host, port)
		ev := Connection{Host: host, Port: port, Mode: "intercepted", Rule: rule, Decision: Allowed,
			Error: "TLS handshake with the sandbox's client: " + err.Error()}
		if !ok {
			ev.Decision = Denied
		}
		sb.audit(ev, start)
		return
	}
	sb.forward(ctx, bc, tc, &target{host: host, port: port, scheme: "https", mode: "intercepted"})
}

// peekSNI reads the server name of the TLS ClientHello at the front of br without consuming it.
func peekSNI(br *bufio.Reader) (string, error) {
	var sni string
	errGot := errors.New("got the hello")
	// Writes go nowhere: the aborted handshake must not answer the client.
	tc := tls.Server(&peekConn{r: br}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, errGot
	}})
	err := tc.Handshake()
	if errors.Is(err, errGot) {
		return sni, nil
	}
	return sni, err
}

// peekConn reads a bufio.Reader's buffered bytes without consuming them, and drops writes.
type peekConn struct {
	net.Conn
	r   *bufio.Reader
	off int
}

func (p *peekConn) Read(b []byte) (int, error) {
	// Ask for one byte more than was handed out: Peek blocks only until it has that many, so a
	// hello shorter than b never waits for bytes the client will not send before an answer.
	if p.r.Buffered() <= p.off {
		if _, err := p.r.Peek(p.off + 1); err != nil {
			return 0, err
		}
	}
	buf, _ := p.r.Peek(p.r.Buffered())
	n := copy(b, buf[p.off:])
	p.off += n
	return n, nil
}
func (p *peekConn) Write(b []byte) (int, error)      { return len(b), nil }
func (p *peekConn) Close() error                     { return nil }
func (p *peekConn) SetDeadline(time.Time) error      { return nil }
func (p *peekConn) SetReadDeadline(time.Time) error  { return nil }
func (p *peekConn) SetWriteDeadline(time.Time) error { return nil }
func (p *peekConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (p *peekConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }

// bufferedConn is a net.Conn whose reads come through r first; an intercepted one also says
// which host it is for, whose leaf its TLS is terminated with.
type bufferedConn struct {
	net.Conn
	r    *bufio.Reader
	host string
	// held and out are what Write keeps while the connection is held.
	mu   sync.Mutex
	held bool
	out  []byte
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// Write writes p, or, while the connection is held, keeps it until release: the TLS records
// of a large answer sent in one write cost the kernel (and the reader it wakes) once, not once
// a record. Writes stay in their order: TLS may write from another goroutine too (its answer
// to a KeyUpdate read beside the answer being sent).
func (b *bufferedConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held {
		b.out = append(b.out, p...)
		return len(p), nil
	}
	return b.Conn.Write(p)
}

func (b *bufferedConn) hold() {
	b.mu.Lock()
	b.held = true
	b.mu.Unlock()
}

func (b *bufferedConn) release() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.held = false
	_, err := b.Conn.Write(b.out)
	b.out = b.out[:0]
	return err
}

// countingConn counts bytes each way.
type countingConn struct {
	net.Conn
	r       io.Reader
	in, out atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.out.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.in.Add(int64(n))
	return n, err
}

// target is where the requests of an HTTP connection go when the connection itself says
// (captured, CONNECTed, intercepted); nil for an explicit proxy connection, whose requests name
// their own.
type target struct {
	host   string
	port   int
	scheme string
	mode   string
}

// oneConn is a listener that yields one connection, then waits for it to be done.
type oneConn struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
}

func (l *oneConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

// connState is what the requests of one HTTP connection share.
type connState struct {
	cc *countingConn
	// outMark and inMark are the counts at the end of the last request an event reported.
	outMark, inMark atomic.Int64
	start           time.Time
	// injected and scrubbed name the secrets put into a request that went out and taken out
	// of an answer; dialErr is why the connection's upstream could not be reached; guarded by
	// mu.
	injected, scrubbed map[string]bool
	dialErr            error
	// host is what the connection's last request was decided by (a captured plain HTTP
	// request's Host header), for the connection's event; guarded by mu.
	host string
	mu   sync.Mutex
}

// record adds what one request's exchange injected and scrubbed to the connection's.
func (cs *connState) record(injected, scrubbed []string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, n := range injected {
		cs.injected[n] = true
	}
	for _, n := range scrubbed {
		cs.scrubbed[n] = true
	}
}

// failed records that the connection's upstream could not be reached.
func (cs *connState) failed(err error) {
	cs.mu.Lock()
	cs.dialErr = err
	cs.mu.Unlock()
}

func newConnState(c net.Conn, r io.Reader) *connState {
	return &connState{cc: &countingConn{Conn: c, r: r}, start: time.Now(), injected: map[string]bool{}, scrubbed: map[string]bool{}}
}

type stateKey struct{}

// serveHTTP serves the HTTP/1 requests of c: forwarded to fixed, or, without it, to what each
// request names (an explicit proxy, which may also CONNECT).
func (sb *Sandbox) serveHTTP(ctx context.Context, c net.Conn, br *bufio.Reader, fixed *target) {
	cs := newConnState(c, br)
	l := &oneConn{c: cs.cc, done: make(chan struct{})}
	var closeOnce sync.Once
	// A hijacked connection (a CONNECT tunnel) ends Serve while its handler still runs.
	var handlers sync.WaitGroup
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			sb.serveRequest(w, r, fixed)
		}),
		ReadHeaderTimeout: time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithValue(ctx, stateKey{}, cs) },
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed || s == http.StateHijacked {
				closeOnce.Do(func() { close(l.done) })
			}
		},
		ErrorLog: slog.NewLogLogger(sb.p.opts.Log.Handler(), slog.LevelDebug),
	}
	_ = srv.Serve(l)
	handlers.Wait()
	if fixed != nil && fixed.mode != "" {
		sb.auditConnection(cs, fixed)
	}
}

// auditConnection reports a connection bound for fixed once its requests are done: one event
// with the bytes each way and the secrets injected into any of its requests that went out and
// scrubbed from any answer; an upstream the guarded dialer refused makes it a denial.
func (sb *Sandbox) auditConnection(cs *connState, fixed *target) {
	cs.mu.Lock()
	injected, scrubbed := slices.Sorted(maps.Keys(cs.injected)), slices.Sorted(maps.Keys(cs.scrubbed))
	host, dialErr := cmp.Or(cs.host, fixed.host), cs.dialErr
	cs.mu.Unlock()
	ok, rule := sb.sess.Rules.decide(host, fixed.port)
	ev := Connection{Host: host, Port: fixed.port, Mode: fixed.mode, Rule: rule, Decision: Allowed,
		BytesOut: cs.cc.out.Load(), BytesIn: cs.cc.in.Load(), Injected: injected, Scrubbed: scrubbed}
	if !ok {
		ev.Decision = Denied
	}
	unreached(&ev, dialErr)
	sb.audit(ev, cs.start)
}

// unreached marks ev as a connection whose upstream err says could not be reached (err nil:
// none): the guarded dialer's refusal is a denial.
func unreached(ev *Connection, err error) {
	if err == nil {
		return
	}
	ev.Error = err.Error()
	if errors.Is(err, egress.ErrRefused) {
		ev.Decision, ev.Rule = Denied, "guarded dialer: "+err.Error()
	}
}

// event is the audit event of a refused request bound for t.
func (ref *refusal) event(t *target) Connection {
	return Connection{Host: t.host, Port: t.port, Mode: t.mode, Decision: Denied, Refused: ref.secret, Rule: ref.rule, Error: ref.err}
}

// refuse answers 403 with a message that says which rule refused the request.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Hangar-Egress", "denied")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "hangar egress proxy: %s\n", msg)
}

// serveRequest decides, injects and forwards one request.
func (sb *Sandbox) serveRequest(w http.ResponseWriter, r *http.Request, fixed *target) {
	cs := r.Context().Value(stateKey{}).(*connState)
	start := time.Now()
	// ex is the request's exchange once it is forwarded; audited says a refusal's own event
	// was reported.
	var ex *exchange
	audited := false
	t := fixed
	if t == nil {
		var err error
		if t, err = requestTarget(r); err != nil {
			http.Error(w, "hangar egress proxy: "+err.Error(), http.StatusBadRequest)
			return
		}
		host, port := t.host, t.port
		if r.Method == http.MethodConnect {
			sb.connect(w, r, host, port)
			return
		}
		// An explicit proxy connection may carry requests for many hosts: each is an event.
		defer func() {
			// The answer is on the wire before its bytes are counted.
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			out, in := cs.cc.out.Load(), cs.cc.in.Load()
			bytesOut, bytesIn := out-cs.outMark.Swap(out), in-cs.inMark.Swap(in)
			if audited {
				return
			}
			ok, rule := sb.sess.Rules.decide(host, port)
			ev := Connection{Host: host, Port: port, Mode: "proxy", Rule: rule, Decision: Allowed, BytesOut: bytesOut, BytesIn: bytesIn}
			if !ok {
				ev.Decision = Denied
			}
			if ex != nil {
				ev.Injected, ev.Scrubbed = ex.sent(), ex.inj.scrub.scrubbed()
				unreached(&ev, ex.dialErr)
			}
			sb.audit(ev, start)
		}()
	}
	if t.scheme == "http" && fixed != nil {
		// A captured plain HTTP request says where it goes in its Host header.
		if h, _, err := net.SplitHostPort(r.Host); err == nil {
			t = &target{host: strings.ToLower(h), port: t.port, scheme: t.scheme, mode: t.mode}
		} else if r.Host != "" {
			t = &target{host: strings.ToLower(r.Host), port: t.port, scheme: t.scheme, mode: t.mode}
		}
	}
	if fixed != nil {
		cs.mu.Lock()
		cs.host = t.host
		cs.mu.Unlock()
	}
	if ok, rule := sb.sess.Rules.decide(t.host, t.port); !ok {
		refuse(w, fmt.Sprintf("%s:%d refused (%s)", t.host, t.port, rule))
		return
	}
	inj, ref := sb.inject(r, t)
	if ref != nil {
		sb.audit(ref.event(t), start)
		audited = true
		refuse(w, ref.msg)
		return
	}
	ex = &exchange{t: t, inj: inj}
	// The upstream request lives as long as the sandbox, not as the client's read side: clients
	// such as busybox wget shut their write side after the request, which would cancel it.
	sb.p.forward.ServeHTTP(w, r.WithContext(context.WithValue(connContext(r.Context(), sb.ctx()), targetKey{}, ex)))
	if fixed != nil {
		cs.record(ex.sent(), inj.scrub.scrubbed())
		if ex.dialErr != nil {
			cs.failed(ex.dialErr)
		}
	}
}

// exchange is one request forwarded by the ReverseProxy: where it goes, what was injected into
// it and scrubs its answer, and, set by forwardError, why its upstream could not be reached.
type exchange struct {
	t       *target
	inj     injection
	dialErr error
}

// sent names the secrets injected into the request, unless it never left the proxy.
func (ex *exchange) sent() []string {
	if ex.dialErr != nil {
		return nil
	}
	return ex.inj.injected
}

// targetKey is the context key of a forwarded request's *exchange.
type targetKey struct{}

// rewrite points a forwarded request at its target.
func rewrite(pr *httputil.ProxyRequest) {
	t := pr.In.Context().Value(targetKey{}).(*exchange).t
	pr.Out.URL.Scheme = t.scheme
	pr.Out.URL.Host = urlHost(t)
	pr.Out.Host = pr.In.Host
	pr.Out.Header["X-Forwarded-For"] = nil
}

// urlHost is t's host and port as a URL names them: the port left out when it is the scheme's,
// an IPv6 literal in brackets either way.
func urlHost(t *target) string {
	if (t.scheme == "http" && t.port == 80) || (t.scheme == "https" && t.port == 443) {
		if strings.Contains(t.host, ":") {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return net.JoinHostPort(t.host, strconv.Itoa(t.port))
}

// scrubAnswer scrubs the answer of a forwarded request from a host some secret may go to; an
// answer encoded though identity was asked for is refused (forwardError answers 502).
func scrubAnswer(resp *http.Response) error {
	ex := resp.Request.Context().Value(targetKey{}).(*exchange)
	s := ex.inj.scrub
	if s == nil {
		return nil
	}
	if encoded(resp) && resp.Body != http.NoBody {
		return fmt.Errorf("the answer is %s-encoded though identity was asked for, and the proxy cannot check it for secrets", resp.Header.Get("Content-Encoding"))
	}
	s.answer(resp)
	if resp.Body != http.NoBody {
		// Its length changes as values are replaced: net/http's server frames it anew.
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	}
	return nil
}

// forwardError answers a request its target could not be reached for: 403 when the guarded
// dialer refused it, 502 otherwise.
func forwardError(w http.ResponseWriter, r *http.Request, err error) {
	ex := r.Context().Value(targetKey{}).(*exchange)
	t := ex.t
	if dialFailed(err) {
		ex.dialErr = err
	}
	msg := fmt.Sprintf("cannot reach %s:%d: %v", t.host, t.port, err)
	if errors.Is(err, egress.ErrRefused) {
		refuse(w, msg)
		return
	}
	http.Error(w, "hangar egress proxy: "+msg, http.StatusBadGateway)
}

// dialFailed reports whether err is a failure to connect, before any request was sent.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.Is(err, egress.ErrRefused) || (errors.As(err, &op) && op.Op == "dial")
}

// requestTarget is the scheme, host and port an explicit proxy request names. An absolute
// https:// URL (what busybox wget sends) is fetched over TLS by the proxy itself.
func requestTarget(r *http.Request) (*target, error) {
	hostport, scheme := r.Host, "https"
	if r.Method != http.MethodConnect {
		if !r.URL.IsAbs() || (r.URL.Scheme != "http" && r.URL.Scheme != "https") {
			return nil, errors.New("an HTTP proxy request needs an absolute http:// or https:// URL, or CONNECT")
		}
		hostport, scheme = r.URL.Host, r.URL.Scheme
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		host, p = hostport, map[string]string{"http": "80", "https": "443"}[scheme]
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 1 || port > 65535 || host == "" {
		return nil, fmt.Errorf("bad target %q", hostport)
	}
	return &target{host: strings.ToLower(strings.Trim(host, "[]")), port: port, scheme: scheme, mode: "proxy"}, nil
}

// connect answers an explicit proxy's CONNECT: 403 naming the rule, or a tunnel.
func (sb *Sandbox) connect(w http.ResponseWriter, r *http.Request, host string, port int) {
	if ok, rule := sb.sess.Rules.decide(host, port); !ok {
		refuse(w, fmt.Sprintf("CONNECT %s:%d refused (%s)", host, port, rule))
		sb.audit(Connection{Host: host, Port: port, Mode: "proxy", Decision: Denied, Rule: rule}, time.Now())
		return
	}
	// A literal or metadata name the guarded dialer would refuse gets a 403, not a tunnel that
	// resets.
	if err := sb.p.dialer.CheckHost(host, uint16(port)); err != nil {
		refuse(w, err.Error())
		sb.audit(Connection{Host: host, Port: port, Mode: "proxy", Decision: Denied, Rule: "guarded dialer: " + err.Error()}, time.Now())
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "hangar egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// The connection's context, not the request's: net/http cancels a hijacked request's context
	// on any read error of its reader, which the tunnel's wait for a client's first bytes is.
	sb.tunnel(connContext(r.Context(), sb.ctx()), c, brw.Reader, host, port, "proxy")
}

// secretValueTimeout bounds the wait for a secret's current value (Secret.Current).
const secretValueTimeout = 10 * time.Second

// firstBytesWait is how long a captured connection's first bytes are waited for before it is
// taken for a protocol whose server speaks first.
const firstBytesWait = 500 * time.Millisecond

// interceptFirstBytesWait is how much longer a connection bound for a host a secret may go to
// is waited on for its first bytes.
const interceptFirstBytesWait = 30 * time.Second

// SyntheticPrefix is where the sandbox's DNS hands out addresses: each stands for one name.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

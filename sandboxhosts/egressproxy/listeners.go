package egressproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// The listeners: each accepted connection of a sandbox is admitted against its share
// (limits.go), then served by what it turns out to be: an explicit proxy connection, captured
// TLS (intercepted or passed through), captured plain HTTP, or any other TCP (spliced).

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
				telemetry.ProxyConnection(ctx, false)
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
		// The leaf is made for the host's normal form, the one its secrets were matched by.
		if h, err := egress.DestinationHost(host); err == nil && sb.intercepts(h, port) {
			sb.intercept(ctx, c, br, h, port)
			return
		}
	case looksLikeHTTP(br):
		fixed := &target{host: host, port: port, scheme: "http", mode: mode}
		sb.serveHTTP(ctx, c, br, fixed)
		return
	}
	d := sb.decide(host, port)
	ev := d.event(mode)
	if !d.allowed {
		// Not HTTP: a reset is the readable refusal.
		reset(c)
		sb.audit(ev, start)
		return
	}
	up, err := sb.p.dial(ctx, "tcp", net.JoinHostPort(d.host, strconv.Itoa(port)))
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

// looksLikeHTTP reports whether the bytes received so far start an HTTP/1 request line. A
// CONNECT is read as HTTP too, and refused (405) as inside an intercepted connection: spliced,
// it would open a tunnel, through an allowed host that is a proxy itself, to a host no rule was
// asked about (a captured GET with an absolute URL is decided by the URL's host).
func looksLikeHTTP(br *bufio.Reader) bool {
	b, _ := br.Peek(min(br.Buffered(), 8))
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ", "OPTIONS ", "TRACE ", "CONNECT "} {
		if strings.HasPrefix(string(b), m) {
			return true
		}
	}
	return false
}

// firstBytesWait is how long a captured connection's first bytes are waited for before it is
// taken for a protocol whose server speaks first.
const firstBytesWait = 500 * time.Millisecond

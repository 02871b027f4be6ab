package egressproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// TLS interception: a connection to a host some secret may go to is terminated with a leaf
// of the CA and its requests served by the forwarder (forward.go); SNI is read without
// consuming the ClientHello.

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
		ev := sb.decide(host, port).event("intercepted")
		ev.Error = "TLS handshake with the sandbox's client: " + err.Error()
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

// interceptFirstBytesWait is how much longer a connection bound for a host a secret may go to
// is waited on for its first bytes.
const interceptFirstBytesWait = 30 * time.Second

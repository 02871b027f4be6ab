package supervisor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// A "dial" call connects to Request.Port on the sandbox's loopback, from inside its network
// namespace, and then carries that TCP connection's bytes raw both ways over the call's unix
// connection: the answer is one ok frame (or an error frame with code "dial_failed"), and every
// byte after it belongs to the app. EOF from either side half-closes the other, so an app sees
// its client finish a request and the client sees the app's EOF. This is how the host reaches
// a sandbox's apps without a veth or any address outside the sandbox.

// CodeDialFailed: nothing accepted the connection on the requested port.
const CodeDialFailed ErrorCode = "dial_failed"

// dialTimeout bounds connecting to an app on the sandbox's own loopback.
const dialTimeout = 5 * time.Second

func (s *server) serveDial(c net.Conn, br *bufio.Reader, fw frameWriter, req Request) {
	if req.Port < 1 || req.Port > 65535 {
		_ = fw.json(frameError, &Error{Code: CodeBadRequest, Message: fmt.Sprintf("port %d is not a TCP port", req.Port)})
		return
	}
	app, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(req.Port)), dialTimeout)
	if err != nil {
		_ = fw.json(frameError, &Error{Code: CodeDialFailed, Message: fmt.Sprintf("nothing accepts connections on port %d in the sandbox: %v", req.Port, err)})
		return
	}
	defer app.Close()
	if fw.json(frameOK, struct{}{}) != nil || fw.w.Flush() != nil {
		return
	}
	s.mu.Lock()
	s.lastActivity = time.Now()
	s.mu.Unlock()
	relay(app, c, br)
}

// relay copies both ways between a and b (b read through br, which may hold buffered bytes)
// until both directions reached EOF, half-closing each side when the other is done with it.
func relay(a, b net.Conn, br io.Reader) {
	var wg sync.WaitGroup
	wg.Go(func() {
		_, _ = io.Copy(a, br)
		closeWrite(a)
	})
	_, _ = io.Copy(b, a)
	closeWrite(b)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// DialApp connects to port on the sandbox's loopback and returns the connection to it. Closing
// the returned connection's write side (CloseWrite) half-closes the app's.
func (c *Client) DialApp(ctx context.Context, port int) (*AppConn, error) {
	cl, err := c.open(ctx, Request{Op: OpDial, Port: port})
	if err != nil {
		return nil, fail(ctx, OpDial, err)
	}
	kind, payload, err := readFrame(cl.r, nil)
	if err == nil {
		if err = decodeTerminal(kind, payload, frameOK, nil); err == nil {
			cl.stop() // the connection now outlives ctx's cancellation only by the caller's Close
			return &AppConn{Conn: cl.conn, r: cl.r}, nil
		}
	}
	cl.close()
	return nil, fail(ctx, OpDial, err)
}

// AppConn is a connection to an app in the sandbox.
type AppConn struct {
	net.Conn
	r *bufio.Reader
}

func (a *AppConn) Read(p []byte) (int, error) { return a.r.Read(p) }

// CloseWrite tells the app this side has finished sending.
func (a *AppConn) CloseWrite() error { closeWrite(a.Conn); return nil }

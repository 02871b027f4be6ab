package egressproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
)

// The net/http side of the proxy: explicit proxy requests (absolute URLs and CONNECT) and
// captured plain HTTP, each decided, injected and sent on through httputil.ReverseProxy.

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

type stateKey struct{}

// serveHTTP serves the HTTP/1 requests of c: forwarded to fixed, or, without it, to what each
// request names (an explicit proxy, which may also CONNECT). Each request read is audited as
// one event (serveRequest).
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
	// A captured connection is an event of its own only when a request of it was not one (a
	// malformed head), or none was read.
	if fixed != nil {
		sb.auditConnection(cs, fixed)
	}
}

// refuse answers 403 with a message that says which rule refused the request.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Hangar-Egress", "denied")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, "hangar egress proxy: %s\n", msg)
}

// serveRequest decides, prepares and forwards one request, as the forwarder does (decide.go).
func (sb *Sandbox) serveRequest(w http.ResponseWriter, r *http.Request, fixed *target) {
	cs := r.Context().Value(stateKey{}).(*connState)
	cs.requests.Add(1)
	start := time.Now()
	t := fixed
	if t == nil {
		var err error
		if t, err = requestTarget(r); err != nil {
			malformed(w, http.StatusBadRequest, err.Error())
			return
		}
		if r.Method == http.MethodConnect {
			sb.connect(w, r, t.host, t.port)
			return
		}
	} else if t.scheme == "http" {
		// A captured plain HTTP request says where it goes in its Host header (http.ReadRequest
		// put an absolute target's host there); the connection's port stays.
		if r.Host != "" {
			h, _, err := splitAuthority(r.Host, t.port)
			if err != nil {
				malformed(w, http.StatusBadRequest, fmt.Sprintf("bad target %q: %v", r.Host, err))
				return
			}
			t = &target{host: h, port: t.port, scheme: t.scheme, mode: t.mode}
		}
	}
	if code, msg := checkRequest(r, []string{r.Host}); code != 0 {
		malformed(w, code, msg)
		return
	}
	d := sb.decide(t.host, t.port)
	t = &target{host: d.host, port: t.port, scheme: t.scheme, mode: t.mode}
	// Each request is one event, whatever its outcome, sent once its answer is out: a
	// connection's requests may name different hosts (an explicit proxy's URLs, a captured
	// connection's Host headers), so no one event per connection could say which were refused.
	// ev is the request's event as decided so far; ex is its exchange once it is forwarded.
	ev := d.event(t.mode)
	var ex *exchange
	defer func() {
		// The answer is on the wire before its bytes are counted.
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		// net/http's server does not say what it read ahead: a pipelined request's bytes may
		// count with the one before it.
		cs.take(&ev, 0)
		if ex != nil {
			ev.Injected, ev.Scrubbed = ex.sent(), ex.inj.scrub.scrubbed()
			unreached(&ev, ex.dialErr)
		}
		sb.audit(ev, start)
	}()
	if !d.allowed {
		refuse(w, d.refusal())
		return
	}
	inj, ref := sb.prepare(r, t)
	if ref != nil {
		ev = ref.event(t)
		refuse(w, ref.msg)
		return
	}
	ex = &exchange{t: t, inj: inj}
	// The upstream request lives as long as the sandbox, not as the client's read side: clients
	// such as busybox wget shut their write side after the request, which would cancel it.
	sb.p.forward.ServeHTTP(w, r.WithContext(context.WithValue(connContext(r.Context(), sb.ctx()), targetKey{}, ex)))
}

// malformed answers a request the proxy does not read on with code, as the forwarder does, and
// ends the connection.
func malformed(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Connection", "close")
	http.Error(w, "hangar egress proxy: "+msg, code)
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

// connect answers an explicit proxy's CONNECT: 403 naming the rule, or a tunnel.
func (sb *Sandbox) connect(w http.ResponseWriter, r *http.Request, host string, port int) {
	// A literal or metadata name the guarded dialer would refuse gets a 403 too (decide), not a
	// tunnel that resets.
	d := sb.decide(host, port)
	if !d.allowed {
		refuse(w, "CONNECT "+d.refusal())
		sb.audit(d.event("proxy"), time.Now())
		return
	}
	host = d.host
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

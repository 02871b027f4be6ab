package egressproxy

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/platform/egress"
)

// The requests of an intercepted connection are forwarded by a lean HTTP/1.1 forwarder, not by
// net/http's server, ReverseProxy and Transport, whose goroutine hand-offs (a reader per
// request, the Transport's write and read loops) cost more than the second TLS leg itself.
// One goroutine serves a connection, one request at a time: it reads the request's head with
// net/http's parser and makes net/http's server checks, decides and prepares it as every request
// is (decide.go), and writes it, framed again from what was parsed, to one upstream
// TLS connection pinned to this client connection and dialled on its first forwarded request.
// The answer's head is parsed, so that the forwarder knows where it ends, and its body is
// copied through. A request the sandbox pipelines behind another waits in the buffer until the
// answer before it is done, as net/http's server does.

const (
	// maxHeadBytes bounds a request's head, as net/http's server does by default.
	maxHeadBytes = http.DefaultMaxHeaderBytes + 4096
	// headTimeout bounds the wait for the rest of a request's head once it has begun.
	headTimeout = time.Minute
	// dialTimeout and handshakeTimeout bound reaching the upstream, as http.DefaultTransport.
	dialTimeout      = 30 * time.Second
	handshakeTimeout = 10 * time.Second
	// idleProbeAfter is how long the upstream may have been idle before a request checks that
	// it is still open.
	idleProbeAfter = 500 * time.Millisecond
	// bodySentGrace is how long an answered request's body may still take to be reported sent
	// before the connection is ended rather than read on.
	bodySentGrace = 50 * time.Millisecond
	// copyBufferSize is the buffer a body is copied through: four TLS records.
	copyBufferSize = 64 << 10
)

// copyBuffers lends the buffers bodies are copied through.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// headLimit is the client's reader, limited to maxHeadBytes while a head is read, and keeping
// what it reads while rec is set.
type headLimit struct {
	r   io.Reader
	n   int64
	hit bool
	// rec, while set, is what was read since recording began, after what was buffered then.
	rec  []byte
	keep bool
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n <= 0 {
		l.hit = true
		return 0, errors.New("request head too large")
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.keep {
		l.rec = append(l.rec, p[:n]...)
	}
	return n, err
}

// readHead reads the next request's head from br, which reads through lim, and makes the
// checks net/http's server makes of it (checkRequest): the request, or the status to refuse it
// with (and why), or -1 when the client went before a head began. http.ReadRequest drops the
// Host header of an absolute-form request ("GET http://h/ HTTP/1.1") for the URL's host, so
// such a head is kept as it is read and its Host header read from it, for the checks net/http's
// server makes of it (there must be one, and a valid one).
func readHead(br *bufio.Reader, lim *headLimit) (*http.Request, int, string) {
	buffered, _ := br.Peek(br.Buffered())
	sp := bytes.IndexByte(buffered, ' ')
	originForm := sp >= 0 && sp+1 < len(buffered) && (buffered[sp+1] == '/' || buffered[sp+1] == '*')
	if !originForm {
		lim.rec, lim.keep = append(lim.rec[:0], buffered...), true
	}
	lim.n = maxHeadBytes
	req, err := http.ReadRequest(br)
	lim.n, lim.keep = math.MaxInt64, false
	switch {
	case err == nil:
	case lim.hit:
		return nil, http.StatusRequestHeaderFieldsTooLarge, "request head too large"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, -1, ""
	case fmt.Sprintf("%T", err) == "*http.unsupportedTEError":
		// net/http's server's status for it (RFC 9112, section 6.1).
		return nil, http.StatusNotImplemented, "unsupported transfer encoding"
	default:
		return nil, http.StatusBadRequest, err.Error()
	}
	hosts := []string{req.Host}
	if req.Host == "" {
		hosts = nil
	}
	if !originForm {
		hosts = hostHeaders(lim.rec[:len(lim.rec)-br.Buffered()])
	}
	if cap(lim.rec) > 64<<10 {
		lim.rec = nil // a large head's buffer is not kept for the connection's life
	}
	if code, msg := checkRequest(req, hosts); code != 0 {
		return req, code, msg
	}
	return req, 0, ""
}

// hostHeaders are the Host header values of a request head http.ReadRequest has read.
func hostHeaders(head []byte) []string {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	if _, err := tp.ReadLine(); err != nil {
		return nil
	}
	h, _ := tp.ReadMIMEHeader()
	return h["Host"]
}

// forwarder serves the requests of one intercepted connection.
type forwarder struct {
	sb *Sandbox
	t  *target
	cs *connState
	// raw is the sandbox's connection under client, reset when an answer cannot be finished.
	raw    *bufferedConn
	client *tls.Conn
	lim    *headLimit
	br     *bufio.Reader
	bw     *bufio.Writer
	// up is the pinned upstream, nil until the first request is forwarded; upClean says that
	// its last answer ended cleanly, so that another connection may use it.
	up      *upstreamConn
	upClean bool
	// upReused says that up has answered before (this connection or another): a server may
	// have closed it just as a request went out.
	upReused bool
	// idleSince is when the upstream's last answer ended.
	idleSince time.Time
	// scrub scrubs the answer to the request being served (nil: its host has no secret).
	scrub *scrubber
	// ctx is the connection's: when it ends (limits.go), so does an exchange in progress.
	ctx context.Context
}

// upstreamConn is an upstream TLS connection of the forwarder.
type upstreamConn struct {
	conn    *tls.Conn
	raw     net.Conn
	br      *bufio.Reader
	bw      *bufio.Writer
	untrack func()
	// expire ends it once it has been idle too long in its sandbox's pool.
	expire *time.Timer
}

// forward serves the HTTP/1.1 requests of client, the sandbox's intercepted TLS connection over
// raw, bound for t, and audits the connection once they are done.
func (sb *Sandbox) forward(ctx context.Context, raw *bufferedConn, client *tls.Conn, t *target) {
	cs := newConnState(client, client)
	f := &forwarder{sb: sb, ctx: ctx, t: t, cs: cs, raw: raw, client: client, lim: &headLimit{r: cs.cc, n: math.MaxInt64}}
	f.br = bufio.NewReaderSize(f.lim, 16<<10)
	f.bw = bufio.NewWriterSize(cs.cc, 16<<10)
	for f.serveOne() {
		f.idleSince = time.Now()
	}
	if f.up != nil && f.upClean && f.sb.ctx().Err() == nil {
		// Kept for the sandbox's next connection, unless the sandbox is going.
		f.sb.idle.put(f.key(), f.up)
		f.up = nil
	}
	f.dropUp()
	client.Close()
	sb.auditConnection(cs, t)
}

// serveOne serves the connection's next request and reports whether the connection goes on.
func (f *forwarder) serveOne() bool {
	if _, err := f.br.Peek(1); err != nil {
		return false
	}
	// A head that is all here already (a client sends it in one record) needs no deadline.
	buffered, _ := f.br.Peek(f.br.Buffered())
	wait := !bytes.Contains(buffered, []byte("\r\n\r\n"))
	if wait {
		_ = f.client.SetReadDeadline(time.Now().Add(headTimeout))
	}
	req, code, msg := readHead(f.br, f.lim)
	if wait {
		_ = f.client.SetReadDeadline(time.Time{})
	}
	if code != 0 {
		if code > 0 {
			f.cs.requests.Add(1)
			f.answer(req, code, msg, false)
		}
		return false
	}
	f.cs.requests.Add(1)
	start := time.Now()
	t := f.t
	if d := f.sb.decide(t.host, t.port); !d.allowed {
		return f.refuse(req, d.refusal())
	}
	inj, ref := f.sb.prepare(req, t)
	if ref != nil {
		// A refused request is its own event, a denial, with the bytes of its exchange: the
		// connection's event reports the requests that went on, if any did.
		goOn := f.refuse(req, ref.msg)
		ev := ref.event(t)
		f.cs.take(&ev, int64(f.br.Buffered()))
		f.sb.audit(ev, start)
		return goOn
	}
	if f.up != nil && time.Since(f.idleSince) > idleProbeAfter && !f.up.alive() {
		f.dropUp()
	}
	if f.up == nil {
		if err := f.dial(); err != nil {
			// Nothing was injected into a request that never left: the connection's event says
			// why instead.
			f.cs.failed(err)
			msg := fmt.Sprintf("cannot reach %s:%d: %v", t.host, t.port, err)
			if errors.Is(err, egress.ErrRefused) {
				return f.refuse(req, msg)
			}
			f.answer(req, http.StatusBadGateway, msg, true)
			return false
		}
	}
	f.cs.record(inj.injected, nil)
	f.scrub = inj.scrub
	defer func() { f.cs.record(nil, inj.scrub.scrubbed()) }()
	return f.exchange(req)
}

// refuse answers a request with a 403 that says why; a connection whose refused request has a
// body is closed after it rather than read on.
func (f *forwarder) refuse(req *http.Request, msg string) bool {
	closing := req.Close || req.ContentLength != 0
	f.answer(req, http.StatusForbidden, msg, closing)
	return !closing
}

// answer writes the proxy's own plain-text answer to req (nil: one that could not be read):
// a 403 (which carries X-Hangar-Egress: denied) keeps the connection unless closeAfter, any
// other code ends it. An answer to HEAD has no body.
func (f *forwarder) answer(req *http.Request, code int, msg string, closeAfter bool) {
	body := "hangar egress proxy: " + msg + "\n"
	fmt.Fprintf(f.bw, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n", code, http.StatusText(code), len(body))
	if code == http.StatusForbidden {
		io.WriteString(f.bw, "X-Hangar-Egress: denied\r\n")
	}
	if closeAfter || code != http.StatusForbidden {
		io.WriteString(f.bw, "Connection: close\r\n")
	}
	io.WriteString(f.bw, "\r\n")
	if req == nil || req.Method != http.MethodHead {
		io.WriteString(f.bw, body)
	}
	_ = f.bw.Flush()
}

// dial connects the pinned upstream: TLS to the target's name, HTTP/1.1 only.
func (f *forwarder) dial() error {
	if f.up = f.sb.idle.take(f.key()); f.up != nil {
		f.upReused = true
		return nil
	}
	f.upReused = false
	ctx, cancel := context.WithTimeout(f.sb.ctx(), dialTimeout)
	defer cancel()
	up, err := f.sb.p.dialTLS(ctx, f.key(), f.t.host)
	if err != nil {
		return err
	}
	raw := up.NetConn()
	f.up = &upstreamConn{conn: up, raw: raw, untrack: f.sb.track(raw), br: bufio.NewReaderSize(up, 16<<10), bw: bufio.NewWriterSize(up, 16<<10)}
	return nil
}

// alive reports whether an upstream, idle since its last answer, is still open: a server
// closes a connection idle too long, and the next request must then go on a new one rather
// than fail. Bytes waiting from an idle upstream (its close_notify) count as closed.
func (u *upstreamConn) alive() bool {
	if u.br.Buffered() > 0 {
		return false
	}
	sc, ok := u.raw.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	alive := false
	var b [1]byte
	_ = rc.Read(func(fd uintptr) bool {
		_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		alive = errors.Is(err, unix.EAGAIN)
		return true
	})
	return alive
}

// dropUp closes the pinned upstream, if any.
func (f *forwarder) dropUp() {
	if f.up != nil {
		f.up.close()
		f.up = nil
	}
}

func (u *upstreamConn) close() {
	u.conn.Close()
	u.untrack()
}

// key is the pool key of the forwarder's upstream.
func (f *forwarder) key() string { return net.JoinHostPort(f.t.host, strconv.Itoa(f.t.port)) }

// exchange writes req upstream and copies its answer back, and reports whether the connection
// goes on. A body is sent beside the wait for the answer: an upstream may answer before it has
// read all of it (or, to Expect: 100-continue, answer first), and the sandbox may wait for that.
func (f *forwarder) exchange(req *http.Request) bool {
	f.upClean = false
	// An upstream that never answers is closed when the connection expires.
	up := f.up
	defer context.AfterFunc(f.ctx, func() { up.raw.Close() })()
	if err := writeRequestHead(f.up.bw, req, urlHost(f.t)); err != nil {
		return false
	}
	sent := make(chan error, 1)
	switch {
	case req.ContentLength == 0:
		sent <- f.up.bw.Flush()
	case req.ContentLength > 0 && int64(f.br.Buffered()) >= req.ContentLength && req.Header.Get("Expect") == "":
		// The whole body is here: it goes with the head.
		sent <- f.sendBody(req)
	default:
		if err := f.up.bw.Flush(); err != nil {
			return false
		}
		go func() { sent <- f.sendBody(req) }()
	}
	relayed := f.cs.cc.in.Load()
	resp, err := f.readAnswerHead(req)
	if err != nil && f.retriable(req, relayed) {
		// The reused upstream was closed under the request, which it never answered: as
		// net/http's Transport does, a request that may be sent twice goes again on a new one.
		<-sent
		f.dropUp()
		if err := f.dial(); err == nil {
			return f.exchange(req)
		}
	}
	if err != nil {
		f.answer(req, http.StatusBadGateway, fmt.Sprintf("reading %s:%d's answer: %v", f.t.host, f.t.port, err), true)
		f.abandon(sent)
		return false
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		f.relayUpgraded(sent)
		return false
	}
	if f.scrub != nil && encoded(resp) && resp.Body != http.NoBody && req.Method != http.MethodHead {
		f.answer(req, http.StatusBadGateway, fmt.Sprintf("%s:%d's answer is %s-encoded though identity was asked for, and the proxy cannot check it for secrets",
			f.t.host, f.t.port, resp.Header.Get("Content-Encoding")), true)
		f.abandon(sent)
		return false
	}
	if err := f.copyAnswer(req, resp); err != nil {
		// The head is out: the sandbox learns of the failure from a connection cut short, not
		// from a clean close.
		reset(f.raw.Conn)
		f.abandon(sent)
		return false
	}
	done, sendErr := bodySent(sent)
	if !done {
		// Answered before the body was all sent: the connection cannot be read on.
		f.abandon(sent)
		return false
	}
	// The sandbox's Connection: close is its own: the upstream is kept for its next connection.
	f.upClean = sendErr == nil && !resp.Close
	f.upReused = true
	return f.upClean && !req.Close
}

// bodySent reports whether the sending of an answered request's body is done, and how it
// ended. It waits a little for the goroutine that sends the body: an answer can be copied back
// before that goroutine has reported the body it has finished writing, which net/http's
// Transport also allows for before it reuses a connection.
func bodySent(sent <-chan error) (done bool, err error) {
	select {
	case err := <-sent:
		return true, err
	default:
	}
	wait := time.NewTimer(bodySentGrace)
	defer wait.Stop()
	select {
	case err := <-sent:
		return true, err
	case <-wait.C:
		return false, nil
	}
}

// retriable reports whether req, whose answer could not be read, may go again on a new
// upstream: the upstream was a reused one, nothing of an answer reached the sandbox (in is
// what had before), and req has no body and a method that may be sent twice.
func (f *forwarder) retriable(req *http.Request, in int64) bool {
	if !f.upReused || req.ContentLength != 0 || f.cs.cc.in.Load() != in {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// abandon ends both sides and waits for the request's body to stop being sent.
func (f *forwarder) abandon(sent <-chan error) {
	f.up.conn.Close()
	f.client.Close()
	<-sent
}

// writeRequestHead writes req's request line and headers, framed from what was parsed: a
// chunked body is sent chunked, any other with its Content-Length. A request without a Host
// (HTTP/1.0) names host.
func writeRequestHead(w *bufio.Writer, req *http.Request, host string) error {
	proto := "HTTP/1.1"
	if req.ProtoMinor == 0 {
		proto = "HTTP/1.0"
	}
	fmt.Fprintf(w, "%s %s %s\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), proto, cmp.Or(req.Host, host))
	_, hadLength := req.Header["Content-Length"]
	if err := req.Header.WriteSubset(w, framingHeaders); err != nil {
		return err
	}
	// Connection is hop-by-hop: the sandbox's "close" ends its own connection, not the
	// upstream, which is kept for the sandbox's next one. Other tokens (Upgrade) go on.
	var conn []string
	for _, v := range req.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if tok = strings.TrimSpace(tok); tok != "" && !strings.EqualFold(tok, "close") {
				conn = append(conn, tok)
			}
		}
	}
	if len(conn) > 0 {
		fmt.Fprintf(w, "Connection: %s\r\n", strings.Join(conn, ", "))
	}
	switch {
	case chunked(req.TransferEncoding):
		io.WriteString(w, "Transfer-Encoding: chunked\r\n")
		writeTrailerNames(w, req.Trailer)
	case req.ContentLength > 0 || hadLength:
		fmt.Fprintf(w, "Content-Length: %d\r\n", req.ContentLength)
	}
	_, err := io.WriteString(w, "\r\n")
	return err
}

// framingHeaders are the headers a forwarded request's framing and connection are written
// from, not copied.
var framingHeaders = map[string]bool{"Content-Length": true, "Transfer-Encoding": true, "Trailer": true, "Host": true, "Connection": true}

// answerFramingHeaders are the headers of an answer written from its framing, not copied.
var answerFramingHeaders = map[string]bool{"Transfer-Encoding": true, "Trailer": true}

func chunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

func writeTrailerNames(w io.Writer, trailer http.Header) {
	if len(trailer) == 0 {
		return
	}
	names := make([]string, 0, len(trailer))
	for k := range trailer {
		names = append(names, k)
	}
	fmt.Fprintf(w, "Trailer: %s\r\n", strings.Join(names, ", "))
}

// sendBody copies req's body upstream, chunked again if it came chunked, and flushes.
func (f *forwarder) sendBody(req *http.Request) error {
	if err := copyBody(f.up.bw, req.Body, chunked(req.TransferEncoding), req.Trailer, f.br); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// copyBody copies a message body from src (a net/http body reader, de-chunked) to w, chunked
// again when isChunked, then trailer; w is flushed whenever from has nothing more buffered, so
// a stream (server-sent events, a chunked upload) goes on at once.
func copyBody(w *bufio.Writer, src io.Reader, isChunked bool, trailer http.Header, from *bufio.Reader) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var dst io.Writer = w
	var cw io.WriteCloser
	if isChunked {
		cw = httputil.NewChunkedWriter(w)
		dst = cw
	}
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			if from.Buffered() == 0 {
				if werr := w.Flush(); werr != nil {
					return werr
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	if isChunked {
		if err := cw.Close(); err != nil {
			return err
		}
		if err := trailer.Write(w); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\r\n"); err != nil {
			return err
		}
	}
	return w.Flush()
}

// readAnswerHead reads the upstream's answer to req, relaying interim (1xx) answers but for a
// 101, which ends the HTTP part of the connection.
func (f *forwarder) readAnswerHead(req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(f.up.br, req)
		if err != nil {
			return nil, err
		}
		if f.scrub != nil {
			f.scrub.header(resp.Header)
			resp.Status = f.scrub.string(resp.Status)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			if req.Header.Get("Upgrade") == "" {
				return nil, errors.New("101 Switching Protocols to a request that asked no upgrade")
			}
			writeAnswerHead(f.bw, resp, false)
			return resp, f.bw.Flush()
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		writeAnswerHead(f.bw, resp, false)
		if err := f.bw.Flush(); err != nil {
			return nil, err
		}
	}
}

// writeAnswerHead writes an answer's status line and headers, framed from what was parsed.
func writeAnswerHead(w *bufio.Writer, resp *http.Response, closing bool) {
	status := resp.Status
	if !strings.Contains(status, " ") {
		status += " " // the reason may be empty, its separator may not
	}
	fmt.Fprintf(w, "HTTP/%d.%d %s\r\n", resp.ProtoMajor, resp.ProtoMinor, status)
	_ = resp.Header.WriteSubset(w, answerFramingHeaders)
	if chunked(resp.TransferEncoding) {
		io.WriteString(w, "Transfer-Encoding: chunked\r\n")
		writeTrailerNames(w, resp.Trailer)
	}
	if closing && resp.StatusCode != http.StatusSwitchingProtocols {
		io.WriteString(w, "Connection: close\r\n")
	}
	io.WriteString(w, "\r\n")
}

// copyAnswer writes resp's head and body to the sandbox, scrubbed when its host has secrets: a
// scrubbed body goes chunked, or to an HTTP/1.0 client to the connection's close (resp.Close
// then set), since replacing values changes its length.
func (f *forwarder) copyAnswer(req *http.Request, resp *http.Response) error {
	hasBody := resp.Body != http.NoBody && req.Method != http.MethodHead
	if f.scrub != nil && hasBody {
		// The head was scrubbed as it was read; the body is as it is copied.
		resp.Body = &scrubReader{s: f.scrub, src: resp.Body, trailer: resp}
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		if req.ProtoAtLeast(1, 1) {
			resp.TransferEncoding = []string{"chunked"}
		} else {
			resp.TransferEncoding, req.Close = nil, true
		}
	}
	writeAnswerHead(f.bw, resp, resp.Close || req.Close)
	if !hasBody {
		return f.bw.Flush()
	}
	if !chunked(resp.TransferEncoding) && (resp.ContentLength < 0 || resp.ContentLength > copyBufferSize) {
		if err := f.bw.Flush(); err != nil {
			return err
		}
		return f.pump(resp.Body)
	}
	return copyBody(f.bw, resp.Body, chunked(resp.TransferEncoding), resp.Trailer, f.up.br)
}

// relayUpgraded copies both ways after a 101 (a WebSocket), until both sides are done.
func (f *forwarder) relayUpgraded(sent <-chan error) {
	if err := <-sent; err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.up.br.WriteTo(f.cs.cc)
		_ = f.client.CloseWrite()
	}()
	_, _ = f.br.WriteTo(f.up.conn)
	_ = f.up.conn.CloseWrite()
	<-done
}

// pumpDepth is how many records a large answer's reader may decrypt ahead of its writer.
const pumpDepth = 16

// pumpBuffers lend the record buffers a pump reads into (a TLS record's plaintext is at most
// 16 KiB; the upstream's read buffer may hand out as much again).
var pumpBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// segment is a buffer of a pump and how much of it was read.
type segment struct {
	b *[]byte
	n int
}

// pump copies a large answer's body (known length or to the upstream's close) to the sandbox on
// two goroutines, so that decrypting the upstream's records and encrypting the sandbox's run on
// two cores at once: a reader decrypts records into up to pumpDepth buffers, and this goroutine
// writes all that have arrived as one write.
func (f *forwarder) pump(src io.Reader) error {
	full := make(chan segment, pumpDepth)
	free := make(chan *[]byte, pumpDepth)
	for range pumpDepth {
		free <- pumpBuffers.Get().(*[]byte)
	}
	read := make(chan error, 1)
	go func() {
		defer close(full)
		for b := range free {
			n, err := src.Read(*b)
			if n > 0 {
				full <- segment{b, n}
			} else {
				free <- b
			}
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				read <- err
				return
			}
		}
		read <- nil
	}()
	var werr error
	for seg := range full {
		if werr != nil {
			free <- seg.b
			continue
		}
		f.raw.hold()
		_, werr = f.cs.cc.Write((*seg.b)[:seg.n])
		free <- seg.b
	more:
		for werr == nil {
			select {
			case seg, ok := <-full:
				if !ok {
					break more
				}
				_, werr = f.cs.cc.Write((*seg.b)[:seg.n])
				free <- seg.b
			default:
				break more
			}
		}
		if err := f.raw.release(); werr == nil {
			werr = err
		}
		if werr != nil {
			// The reader may be waiting on the upstream: closing it ends the read.
			f.up.conn.Close()
		}
	}
	rerr := <-read
	close(free)
	for b := range free {
		pumpBuffers.Put(b)
	}
	return cmp.Or(werr, rerr)
}

// idleUpstreams are a sandbox's upstreams whose last answer ended cleanly, kept (as net/http's
// Transport keeps its connections) for the sandbox's next intercepted connection to the same
// host, which then costs no upstream handshake. They stay tracked, so Close ends them; they
// are never shared between sandboxes.
type idleUpstreams struct {
	mu    sync.Mutex
	hosts map[string][]*upstreamConn
}

const (
	// maxIdlePerHost and idleUpstreamTimeout are http.DefaultTransport's, which the forwarder
	// replaced.
	maxIdlePerHost      = 16
	idleUpstreamTimeout = 90 * time.Second
)

// put keeps u for key, or closes it when key has enough.
func (p *idleUpstreams) put(key string, u *upstreamConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hosts == nil {
		p.hosts = map[string][]*upstreamConn{}
	}
	if len(p.hosts[key]) >= maxIdlePerHost {
		u.close()
		return
	}
	p.hosts[key] = append(p.hosts[key], u)
	u.expire = time.AfterFunc(idleUpstreamTimeout, func() {
		if p.remove(key, u) {
			u.close()
		}
	})
}

// remove takes u out of the pool and reports whether it was there.
func (p *idleUpstreams) remove(key string, u *upstreamConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, v := range p.hosts[key] {
		if v == u {
			p.hosts[key] = append(p.hosts[key][:i], p.hosts[key][i+1:]...)
			return true
		}
	}
	return false
}

// drain closes every idle upstream.
func (p *idleUpstreams) drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, list := range p.hosts {
		for _, u := range list {
			u.expire.Stop()
			u.close()
		}
		delete(p.hosts, key)
	}
}

// take returns the newest idle upstream for key that is still open, or nil.
func (p *idleUpstreams) take(key string) *upstreamConn {
	for {
		p.mu.Lock()
		list := p.hosts[key]
		if len(list) == 0 {
			p.mu.Unlock()
			return nil
		}
		u := list[len(list)-1]
		p.hosts[key] = list[:len(list)-1]
		p.mu.Unlock()
		u.expire.Stop()
		if u.alive() {
			return u
		}
		u.close()
	}
}

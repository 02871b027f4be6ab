package egressproxy

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// What the proxy reports: one Connection event per connection (for the HTTP requests it serves
// through net/http, explicit proxy and captured plain HTTP, one per request; for an intercepted
// connection, one per refused request beside the connection's), and the counters they add up
// to: each request is counted once, with its verdict.

// Decision words of an audit event.
const (
	Allowed = "allow"
	Denied  = "deny"
)

// Connection is one audited connection (or one request: see above).
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

// Counters are a sandbox's totals through the proxy since it was served. A connection counts
// once it ends (through the explicit proxy: once each request is answered), with the bytes the
// sandbox's side of it carried.
type Counters struct {
	BytesOut, BytesIn, Allowed, Denied atomic.Int64
}

// Usage reads the counters: the totals a net.usage event carries.
func (c *Counters) Usage() httpapi.NetworkTotals {
	return httpapi.NetworkTotals{BytesOut: c.BytesOut.Load(), BytesIn: c.BytesIn.Load(), ConnectionsAllowed: c.Allowed.Load(), ConnectionsDenied: c.Denied.Load()}
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
	// The connection's own context has ended by now; the count belongs to no request.
	telemetry.ProxyConnection(context.Background(), c.Decision != Denied)
	sb.p.opts.Audit(sb.sess.ID, c)
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
	mu                 sync.Mutex
	// requests counts the requests read on the connection, reported those of them that were
	// audited as events of their own (take): the connection's own event reports the rest.
	requests, reported atomic.Int64
}

// take gives ev the bytes the connection carried since the last event that took them, but for
// ahead (bytes read from the sandbox and buffered, unread, for its next request), and counts it
// as a request's own event.
func (cs *connState) take(ev *Connection, ahead int64) {
	out, in := cs.cc.out.Load()-ahead, cs.cc.in.Load()
	ev.BytesOut, ev.BytesIn = out-cs.outMark.Swap(out), in-cs.inMark.Swap(in)
	cs.reported.Add(1)
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

// auditConnection reports a connection bound for fixed once its requests are done, unless each
// request it carried was an event of its own (take): one event with the bytes each way not
// reported by those, and the secrets injected into any of its requests that went out and
// scrubbed from any answer; an upstream the guarded dialer refused makes it a denial. A
// connection with no request read whole is an event too.
func (sb *Sandbox) auditConnection(cs *connState, fixed *target) {
	if n := cs.requests.Load(); n > 0 && cs.reported.Load() >= n {
		return
	}
	cs.mu.Lock()
	injected, scrubbed := slices.Sorted(maps.Keys(cs.injected)), slices.Sorted(maps.Keys(cs.scrubbed))
	dialErr := cs.dialErr
	cs.mu.Unlock()
	ev := sb.decide(fixed.host, fixed.port).event(fixed.mode)
	ev.Injected, ev.Scrubbed = injected, scrubbed
	out, in := cs.cc.out.Load(), cs.cc.in.Load()
	ev.BytesOut, ev.BytesIn = out-cs.outMark.Load(), in-cs.inMark.Load()
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

// event is the audit event of a connection or request decided by d, in mode; its bytes, secrets
// and error are the caller's to add.
func (d decision) event(mode string) Connection {
	ev := Connection{Host: d.host, Port: d.port, Mode: mode, Rule: d.rule, Decision: Allowed}
	if !d.allowed {
		ev.Decision = Denied
	}
	return ev
}

// event is the audit event of a refused request bound for t.
func (ref *refusal) event(t *target) Connection {
	return Connection{Host: t.host, Port: t.port, Mode: t.mode, Decision: Denied, Refused: ref.secret, Rule: ref.rule, Error: ref.err}
}

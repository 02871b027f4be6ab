// Package hostclient reaches the sandbox hosts' internal API: it finds a host through the fleet,
// keeps one Connect client per host address over a shared HTTP/2 transport, and sends the
// deployment's host token with every call. The host side checks the token with Authorize.
package hostclient

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/records/fleet"
)

// TokenHeader carries the host token.
const TokenHeader = "x-host-token"

// Pool hands out clients of the fleet's hosts.
type Pool struct {
	fleet *fleet.Fleet
	token string
	http  *http.Client

	mu      sync.Mutex
	clients map[string]hostv1connect.HostServiceClient
	records map[string]seen
	// fleetView is the fleet as last listed, at fleetAt.
	fleetView []*fleet.Host
	fleetAt   time.Time
}

// seen is a host record read at a time.
type seen struct {
	host *fleet.Host
	at   time.Time
}

// recordTTL is how long a host record read as alive is reused. Every proxied call needs its
// host's address and liveness; a second-old answer is as good as a fresh one when hosts
// heartbeat every few seconds, and it saves a Firestore read per call.
const recordTTL = time.Second

// New returns a pool over the fleet that authenticates with token.
func New(f *fleet.Fleet, token string) *Pool {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// Hosts speak h2c: one connection carries every proxied stream to a host.
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &Pool{fleet: f, token: token, http: &http.Client{Transport: tr}, clients: map[string]hostv1connect.HostServiceClient{}, records: map[string]seen{}}
}

// Fleet is the registry the pool reads.
func (p *Pool) Fleet() *fleet.Fleet { return p.fleet }

// Client returns the client of the host at address.
func (p *Pool) Client(address string) hostv1connect.HostServiceClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, ok := p.clients[address]
	if !ok {
		// No gzip between functions and hosts: file chunks do not compress, and on a private
		// network the CPU costs more than the bytes.
		c = hostv1connect.NewHostServiceClient(p.http, address, telemetry.Interceptor(), connect.WithInterceptors(tokenInterceptor(p.token)),
			connect.WithAcceptCompression("gzip", nil, nil))
		p.clients[address] = c
	}
	return c
}

// ErrHostLost is a host whose record says it stopped heartbeating or shut down.
var ErrHostLost = errors.New("sandbox host lost")

// Host returns the record and client of a live host; a dead one is ErrHostLost. A host seen
// alive within recordTTL is not read again; one seen dead always is.
func (p *Pool) Host(ctx context.Context, id string) (*fleet.Host, hostv1connect.HostServiceClient, error) {
	p.mu.Lock()
	r, ok := p.records[id]
	p.mu.Unlock()
	if ok && time.Since(r.at) < recordTTL {
		return r.host, p.Client(r.host.Address), nil
	}
	h, err := p.fleet.Get(ctx, id)
	if errors.Is(err, fleet.ErrNotFound) {
		return nil, nil, fmt.Errorf("host %s: %w", id, ErrHostLost)
	}
	if err != nil {
		return nil, nil, err
	}
	if !p.fleet.Alive(h) {
		return h, nil, fmt.Errorf("host %s: %w", id, ErrHostLost)
	}
	p.mu.Lock()
	p.records[id] = seen{host: h, at: time.Now()}
	p.mu.Unlock()
	return h, p.Client(h.Address), nil
}

// Candidates ranks the hosts a new sandbox may go to, the most free first (fleet.Candidates),
// from a view of the fleet at most recordTTL old (the sandbox counts in it are a heartbeat old
// anyway). Placement tries them in order: a host that refuses passes the sandbox to the next.
func (p *Pool) Candidates(ctx context.Context) ([]*fleet.Host, error) {
	p.mu.Lock()
	hosts, fresh := p.fleetView, time.Since(p.fleetAt) < recordTTL
	p.mu.Unlock()
	if !fresh {
		var err error
		if hosts, err = p.fleet.List(ctx); err != nil {
			return nil, err
		}
		now := time.Now()
		p.mu.Lock()
		p.fleetView, p.fleetAt = hosts, now
		for _, h := range hosts {
			if p.fleet.Alive(h) {
				p.records[h.ID] = seen{host: h, at: now}
			}
		}
		p.mu.Unlock()
	}
	return p.fleet.Candidates(hosts)
}

// Pick chooses the host for a sandbox that one host is as good as another for: the first
// candidate.
func (p *Pool) Pick(ctx context.Context) (*fleet.Host, hostv1connect.HostServiceClient, error) {
	hosts, err := p.Candidates(ctx)
	if err != nil {
		return nil, nil, err
	}
	return hosts[0], p.Client(hosts[0].Address), nil
}

// Forget drops what the pool knows of the fleet, so that the next placement reads it afresh:
// for a host whose state just changed (cordoned, draining).
func (p *Pool) Forget() {
	p.mu.Lock()
	p.fleetView, p.fleetAt, p.records = nil, time.Time{}, map[string]seen{}
	p.mu.Unlock()
}

// Refused reports whether err is a host's refusal to take a sandbox it never started (full,
// cordoned, draining, or unreachable), after which placement may try another host.
func Refused(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeResourceExhausted, connect.CodeUnavailable:
		return true
	}
	return false
}

func tokenInterceptor(token string) connect.Interceptor {
	return &interceptor{token: token}
}

// Authorize is the host side: an interceptor refusing calls without the token.
func Authorize(token string) connect.Interceptor {
	return &interceptor{token: token, check: true}
}

type interceptor struct {
	token string
	check bool
}

var errBadToken = connect.NewError(connect.CodeUnauthenticated, errors.New("missing or invalid host token"))

func (i *interceptor) valid(h http.Header) bool {
	return subtle.ConstantTimeCompare([]byte(h.Get(TokenHeader)), []byte(i.token)) == 1
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if i.check {
			if !i.valid(req.Header()) {
				return nil, errBadToken
			}
		} else {
			req.Header().Set(TokenHeader, i.token)
		}
		return next(ctx, req)
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if !i.check {
			conn.RequestHeader().Set(TokenHeader, i.token)
		}
		return conn
	}
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if i.check && !i.valid(conn.RequestHeader()) {
			return errBadToken
		}
		return next(ctx, conn)
	}
}

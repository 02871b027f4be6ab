package egressproxy

import (
	"container/list"
	"context"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Every connection a sandbox makes through the proxy holds host file descriptors (its own side
// and its upstream) and goroutines until it ends, so what sandboxes may hold is bounded three
// ways: a connection ends once it has carried nothing either way for IdleTimeout, and at
// MaxLifetime whatever it carries; one sandbox holds at most PerSandbox at once; and all the
// host's sandboxes together hold at most HostConnections, shared fairly: while the host is
// full, a sandbox holding less than its share (HostConnections over the sandboxes holding
// connections, and never less than MinShare) takes a connection from the sandbox most over it,
// so a sandbox that opens connections as fast as it can gets resets, not its neighbours.

// Limits bound the connections of the proxy's sandboxes; a zero field takes DefaultLimits'.
type Limits struct {
	// IdleTimeout ends a connection that has carried no data either way for this long.
	IdleTimeout time.Duration
	// MaxLifetime ends a connection this long after it was accepted, busy or not.
	MaxLifetime time.Duration
	// HostConnections caps the connections of all sandboxes together; zero derives it from the
	// process's descriptor limit (HostConnectionsFor).
	HostConnections int
	// PerSandbox caps one sandbox's connections at once.
	PerSandbox int
	// MinShare is what a sandbox may hold however many others share the host.
	MinShare int
}

// DefaultLimits are the limits of a proxy whose Options name none. The idle timeout is
// generous beside proxies' usual 1-5 minutes, since a model's API may think a while before its
// first byte; an hour's lifetime outlasts any streamed answer.
var DefaultLimits = Limits{IdleTimeout: 5 * time.Minute, MaxLifetime: time.Hour, PerSandbox: 1024, MinShare: 64}

// fdHeadroom is the share of the descriptor limit HostConnectionsFor leaves to the rest of the
// host: its sandboxes' runc, supervisor sockets, disks and files, and its own listeners.
const fdHeadroom = 4

// HostConnectionsFor is the host-wide connection cap a descriptor limit of fds allows: a
// connection holds two descriptors, and a quarter of them (at least 1024) are left to the rest.
func HostConnectionsFor(fds uint64) int {
	reserve := max(fds/fdHeadroom, 1024)
	if reserve >= fds {
		reserve = fds / 2
	}
	return max(int((fds-reserve)/2), 1)
}

// fdLimit is the process's soft descriptor limit. Go's runtime has raised it to the hard limit
// when the process started (see syscall's init), for every command of this binary, and
// restores the original for the processes it starts: raising it again here would lose that.
func fdLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 1024
	}
	return r.Cur
}

// withDefaults is l with DefaultLimits in its zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxLifetime == 0 {
		l.MaxLifetime = d.MaxLifetime
	}
	if l.HostConnections == 0 {
		l.HostConnections = HostConnectionsFor(fdLimit())
	}
	if l.PerSandbox == 0 {
		l.PerSandbox = d.PerSandbox
	}
	if l.MinShare == 0 {
		l.MinShare = d.MinShare
	}
	return l
}

// limiter shares the host's connections between the proxy's sandboxes.
type limiter struct {
	lim Limits
	mu  sync.Mutex
	// total counts the leases held; holding are the shares with at least one.
	total   int
	holding map[*share]struct{}
}

func newLimiter(l Limits) *limiter {
	return &limiter{lim: l.withDefaults(), holding: map[*share]struct{}{}}
}

// Connections is how many connections the proxy's sandboxes hold now, all together: what the
// host-wide cap counts.
func (p *Proxy) Connections() int {
	p.limits.mu.Lock()
	defer p.limits.mu.Unlock()
	return p.limits.total
}

// share is one sandbox's part of the limiter: its leases, oldest first (under limiter.mu).
type share struct {
	l      *limiter
	leases list.List
}

// lease is one admitted connection. Its context ends when the lease expires (idle, too old, or
// taken for another sandbox) and when the connection is done; what the connection holds
// beyond its own socket (its upstream, a forwarded request) ends with that context.
type lease struct {
	sh     *share
	c      *net.TCPConn
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	// elem is the lease's place in sh.leases, nil once it no longer counts (under limiter.mu).
	elem  *list.Element
	timer *time.Timer
}

// leaseKey is the context key of a connection's *lease.
type leaseKey struct{}

// connContext is the context of the connection ctx belongs to (its lease's), or sandbox when
// ctx has none: it ends when the connection does, unlike a request's, which net/http ends on
// the client's read errors.
func connContext(ctx, sandbox context.Context) context.Context {
	if l, ok := ctx.Value(leaseKey{}).(*lease); ok {
		return l.ctx
	}
	return sandbox
}

// admit gives c a lease within the sandbox's context parent, or reports that the sandbox may
// hold no more connections now.
func (sh *share) admit(parent context.Context, c *net.TCPConn) (*lease, bool) {
	l := sh.l
	l.mu.Lock()
	n := sh.leases.Len()
	sharing := len(l.holding)
	if n == 0 {
		sharing++
	}
	fair := max(l.lim.MinShare, l.lim.HostConnections/sharing)
	if n >= l.lim.PerSandbox || n >= fair {
		l.mu.Unlock()
		return nil, false
	}
	var taken *lease
	if l.total >= l.lim.HostConnections {
		if taken = l.takeFromHog(fair); taken == nil {
			l.mu.Unlock()
			return nil, false
		}
	}
	ls := &lease{sh: sh, c: c, start: time.Now()}
	ctx, cancel := context.WithCancel(parent)
	ls.ctx, ls.cancel = context.WithValue(ctx, leaseKey{}, ls), cancel
	ls.elem = sh.leases.PushBack(ls)
	l.holding[sh] = struct{}{}
	l.total++
	ls.timer = time.AfterFunc(min(l.lim.IdleTimeout, l.lim.MaxLifetime), ls.check)
	l.mu.Unlock()
	if taken != nil {
		taken.end(true)
	}
	return ls, true
}

// takeFromHog uncounts the newest lease of the sandbox holding the most connections, when that
// is more than fair, and returns it for the caller to end; under l.mu.
func (l *limiter) takeFromHog(fair int) *lease {
	var hog *share
	for sh := range l.holding {
		if hog == nil || sh.leases.Len() > hog.leases.Len() {
			hog = sh
		}
	}
	if hog == nil || hog.leases.Len() <= fair {
		return nil
	}
	ls := hog.leases.Back().Value.(*lease)
	l.uncount(ls)
	return ls
}

// uncount takes ls out of the counts, once; under l.mu.
func (l *limiter) uncount(ls *lease) {
	if ls.elem == nil {
		return
	}
	ls.sh.leases.Remove(ls.elem)
	ls.elem = nil
	l.total--
	if ls.sh.leases.Len() == 0 {
		delete(l.holding, ls.sh)
	}
}

// release is the end of a connection's serving: its lease no longer counts.
func (ls *lease) release() {
	ls.timer.Stop()
	ls.cancel()
	l := ls.sh.l
	l.mu.Lock()
	l.uncount(ls)
	l.mu.Unlock()
}

// end ends the connection: its socket closes (with a reset when it was taken for another
// sandbox) and its context is done, which ends its upstream.
func (ls *lease) end(reset bool) {
	ls.timer.Stop()
	if reset {
		_ = ls.c.SetLinger(0)
	}
	ls.c.Close()
	ls.cancel()
}

// check ends the connection when it is too old or has been idle for the idle timeout, or looks
// again when it could next be either. Idleness is the kernel's: the time since the sandbox's
// socket last sent or received data, which counts bytes the kernel splices between the two
// sockets of a tunnel as well as those the proxy writes itself.
func (ls *lease) check() {
	lim := ls.sh.l.lim
	left := lim.MaxLifetime - time.Since(ls.start)
	idle, err := idleFor(ls.c)
	if err != nil || left <= 0 || idle >= lim.IdleTimeout {
		ls.end(false)
		return
	}
	// Under the lock admit set the timer under.
	ls.sh.l.mu.Lock()
	t := ls.timer
	ls.sh.l.mu.Unlock()
	t.Reset(min(left, lim.IdleTimeout-idle))
}

// idleFor is how long c has neither sent nor received data, from its TCP_INFO.
func idleFor(c *net.TCPConn) (time.Duration, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return 0, err
	}
	if ierr != nil {
		return 0, ierr
	}
	return time.Duration(min(info.Last_data_recv, info.Last_data_sent)) * time.Millisecond, nil
}

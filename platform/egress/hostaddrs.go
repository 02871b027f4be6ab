package egress

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// hostAddrsMaxAge is how long a read of this host's interface addresses is trusted: an address
// added to an interface is refused at most this long after. A read costs a netlink dump (some
// 20 µs), so the dialer re-reads on the first connection after the age runs out rather than
// keeping a goroutine or a netlink subscription.
const hostAddrsMaxAge = time.Second

// hostAddrs is the set of this host's own interface addresses, re-read when older than maxAge.
// A service listening on 0.0.0.0 answers on each of them, so each is refused whatever range it
// is in (on a host whose address looks public, such as 192.0.2.2, too).
type hostAddrs struct {
	read   func() ([]netip.Addr, error)
	maxAge time.Duration
	mu     sync.Mutex // one re-read at a time
	snap   atomic.Pointer[addrSnapshot]
}

type addrSnapshot struct {
	at  time.Time
	set map[netip.Addr]bool
	err error
}

// thisHost is the set of the machine the process runs on. Loopback addresses are left out:
// they are refused as loopback, which operator entries may open for development and tests.
var thisHost = &hostAddrs{read: interfaceAddrs, maxAge: hostAddrsMaxAge}

func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("read this host's interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok && !plain(ip).IsLoopback() {
			out = append(out, plain(ip))
		}
	}
	return out, nil
}

// has reports whether a is one of the host's addresses. When they cannot be read, the error
// says so and the caller refuses: an unknown set could hold any address.
func (h *hostAddrs) has(a netip.Addr) (bool, error) {
	s := h.snap.Load()
	if s == nil || time.Since(s.at) > h.maxAge {
		s = h.refresh()
	}
	return s.set[a], s.err
}

func (h *hostAddrs) refresh() *addrSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.snap.Load(); s != nil && time.Since(s.at) <= h.maxAge {
		return s // another caller re-read while this one waited
	}
	addrs, err := h.read()
	s := &addrSnapshot{at: time.Now(), set: make(map[netip.Addr]bool, len(addrs)), err: err}
	for _, a := range addrs {
		s.set[plain(a)] = true
	}
	h.snap.Store(s)
	return s
}

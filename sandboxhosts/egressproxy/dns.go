package egressproxy

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"

	"codeberg.org/miekg/dns"
	"codeberg.org/miekg/dns/dnsutil"
	"codeberg.org/miekg/dns/rdata"
)

// names hands out one synthetic address per name and maps it back, so that a captured
// connection to the address is decided by the name.
type names struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   netip.Addr
}

func newNames() *names {
	return &names{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: SyntheticPrefix.Addr().Next()}
}

// addr is name's synthetic address. When the prefix is used up it starts over, and the oldest
// addresses stand for new names.
func (n *names) addr(name string) netip.Addr {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.byName[name]; ok {
		return a
	}
	a := n.next
	if old, ok := n.byAddr[a]; ok {
		delete(n.byName, old)
	}
	n.byName[name], n.byAddr[a] = a, name
	if n.next = a.Next(); !SyntheticPrefix.Contains(n.next) {
		n.next = SyntheticPrefix.Addr().Next()
	}
	return a
}

// name is the name a synthetic address was handed out for.
func (n *names) name(a netip.Addr) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	name, ok := n.byAddr[a]
	return name, ok
}

// serveDNS answers the sandbox's queries: A with a synthetic address for any name (the proxy
// decides the connection, by name), "localhost" with loopback, and every other type with no
// records, so that clients fall back to IPv4.
func (sb *Sandbox) serveDNS(pc net.PacketConn, ln net.Listener) {
	h := dns.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, q *dns.Msg) {
		m := dnsutil.SetReply(new(dns.Msg), q)
		m.Authoritative = true
		for _, question := range q.Question {
			name := strings.TrimSuffix(strings.ToLower(question.Header().Name), ".")
			if dns.RRToType(question) != dns.TypeA || name == "" {
				continue
			}
			ip := netip.AddrFrom4([4]byte{127, 0, 0, 1})
			if name != "localhost" {
				ip = sb.names.addr(name)
			}
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.Header{Name: question.Header().Name, Class: dns.ClassINET, TTL: 60}, A: rdata.A{Addr: ip}})
		}
		if m.Pack() == nil {
			_, _ = io.Copy(w, m)
		}
	})
	servers := []*dns.Server{{Net: "udp", PacketConn: pc, Handler: h}, {Net: "tcp", Listener: ln, Handler: h}}
	for _, s := range servers {
		// Shutdown before the server has started would call its nil cancel func: wait for it.
		started := make(chan struct{})
		s.NotifyStartedFunc = func(context.Context) { close(started) }
		go func() { _ = s.ListenAndServe() }()
		sb.wg.Add(1)
		go func() {
			defer sb.wg.Done()
			<-sb.ctx().Done()
			<-started
			s.Shutdown(context.Background())
		}()
	}
}

// SyntheticPrefix is where the sandbox's DNS hands out addresses: each stands for one name.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

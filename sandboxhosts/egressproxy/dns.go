package egressproxy

import (
	"net"
	"net/netip"
	"strings"
	"sync"

	"github.com/miekg/dns"
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
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		for _, question := range q.Question {
			name := strings.TrimSuffix(strings.ToLower(question.Name), ".")
			if question.Qtype != dns.TypeA || name == "" {
				continue
			}
			ip := net.IPv4(127, 0, 0, 1)
			if name != "localhost" {
				ip = sb.names.addr(name).AsSlice()
			}
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: ip})
		}
		_ = w.WriteMsg(m)
	})
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	for _, s := range servers {
		go func() { _ = s.ActivateAndServe() }()
	}
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		<-sb.ctx().Done()
		for _, s := range servers {
			_ = s.Shutdown()
		}
	}()
}

// SyntheticPrefix is where the sandbox's DNS hands out addresses: each stands for one name.
var SyntheticPrefix = netip.MustParsePrefix("198.18.0.0/15")

// Package sandboxnet owns a sandbox's network namespace: made by the host before the sandbox's
// first process runs, with loopback as its only interface and no path out but the host's egress
// proxy.
//
// Inside the namespace every IPv4 address is local (a "local 0.0.0.0/0 dev lo" route), and an
// nftables NAT rule redirects every TCP connection to a non-loopback address to CapturePort and
// every DNS query to port 53 on 127.0.0.1. Both ports are held by listening sockets this package
// opens inside the namespace on behalf of the host process: the sandbox's connections are
// accepted by the host itself, so nothing runs in the sandbox to relay them and no packet ever
// leaves the namespace as IP. A filter rule rejects whatever else would leave loopback (UDP
// other than DNS, ICMP), and IPv6 has no route but ::1. The rules are written before runc starts
// the sandbox, which then joins the namespace; its processes hold no CAP_NET_ADMIN, so they can
// change neither routes nor rules.
//
// A connection to CapturePort itself is a client that honours HTTP(S)_PROXY; any other reached
// it through the redirect, and OriginalDst tells where it was going.
package sandboxnet

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CapturePort is the loopback port of the proxy listener inside every sandbox: HTTP(S)_PROXY
// points at it, and every outbound TCP connection is redirected to it.
const CapturePort = 3128

// ProxyURL is the value of HTTP_PROXY and HTTPS_PROXY inside a sandbox.
var ProxyURL = fmt.Sprintf("http://127.0.0.1:%d", CapturePort)

// ResolvConf is the /etc/resolv.conf of a sandbox: the namespace's own DNS listener.
const ResolvConf = "nameserver 127.0.0.1\noptions ndots:0\n"

// Namespace is a sandbox's network namespace, kept alive by a bind mount at Path, and the host's
// listeners inside it.
type Namespace struct {
	// Path is the bind-mounted namespace file runc joins.
	Path string
	// Capture accepts every TCP connection the sandbox makes to anything but loopback, and
	// those to the proxy port.
	Capture *net.TCPListener
	// DNS answers the sandbox's queries over UDP; DNSStream over TCP.
	DNS       net.PacketConn
	DNSStream net.Listener
}

// Create makes a network namespace bound at path (a file it creates), writes its route and
// rules, and opens the host's listeners inside it. On error nothing is left.
func Create(path string) (_ *Namespace, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o400)
	if err != nil {
		return nil, fmt.Errorf("network namespace: %w", err)
	}
	f.Close()
	ns := &Namespace{Path: path}
	defer func() {
		if err != nil {
			err = errors.Join(err, ns.Close())
		}
	}()
	// unshare and the sockets happen on a thread of their own that is never given back: a thread
	// locked at goroutine exit is destroyed, so no other goroutine ever runs in the new namespace.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- ns.enter()
	}()
	if err := <-done; err != nil {
		return nil, err
	}
	if err := program(path); err != nil {
		return nil, err
	}
	return ns, nil
}

// enter moves the calling (locked) thread into a new network namespace, binds it at ns.Path and
// opens the listeners there.
func (ns *Namespace) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("network namespace: unshare: %w", err)
	}
	self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
	if err := unix.Mount(self, ns.Path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("network namespace: bind %s: %w", ns.Path, err)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("network namespace: lo up: %w", err)
	}
	// Every IPv4 address is local, so a connect to any of them reaches the NAT rule instead of
	// failing for want of a route. The source is loopback's, so that the redirected connection
	// is loopback at both ends (from the destination's own address it would never be answered).
	all := &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	if err := netlink.RouteAdd(&netlink.Route{
		LinkIndex: lo.Attrs().Index, Dst: all, Src: net.IPv4(127, 0, 0, 1),
		Type: unix.RTN_LOCAL, Table: unix.RT_TABLE_LOCAL, Scope: netlink.SCOPE_HOST,
	}); err != nil {
		return fmt.Errorf("network namespace: local route: %w", err)
	}
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: CapturePort})
	if err != nil {
		return fmt.Errorf("network namespace: capture listener: %w", err)
	}
	ns.Capture = ln
	if ns.DNS, err = net.ListenPacket("udp4", "127.0.0.1:53"); err != nil {
		return fmt.Errorf("network namespace: dns listener: %w", err)
	}
	if ns.DNSStream, err = net.Listen("tcp4", "127.0.0.1:53"); err != nil {
		return fmt.Errorf("network namespace: dns listener: %w", err)
	}
	return nil
}

// program writes the namespace's nftables rules.
func program(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer f.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		return fmt.Errorf("network namespace: nftables: %w", err)
	}
	t := c.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "hangar"})
	nat := c.AddChain(&nftables.Chain{Name: "capture", Table: t, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityNATDest})
	// Loopback stays loopback: the sandbox's own servers, and the proxy port asked for by name.
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: append(loopbackDst(), &expr.Verdict{Kind: expr.VerdictReturn})})
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: redirect(unix.IPPROTO_TCP, 0, CapturePort)})
	c.AddRule(&nftables.Rule{Table: t, Chain: nat, Exprs: redirect(unix.IPPROTO_UDP, 53, 53)})
	accept := nftables.ChainPolicyAccept
	out := c.AddChain(&nftables.Chain{Name: "confine", Table: t, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &accept})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: append(loopbackDst(), &expr.Verdict{Kind: expr.VerdictAccept})})
	c.AddRule(&nftables.Rule{Table: t, Chain: out, Exprs: []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpPortUnreachable}}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("network namespace: write nftables rules: %w", err)
	}
	return nil
}

// loopbackDst matches "ip daddr 127.0.0.0/8".
func loopbackDst() []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{255, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{127, 0, 0, 0}},
	}
}

// redirect is "meta l4proto proto [th dport port] redirect to :to".
func redirect(proto byte, port, to uint16) []expr.Any {
	e := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
	}
	if port != 0 {
		e = append(e,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)})
	}
	return append(e,
		&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(to)},
		&expr.Redir{RegisterProtoMin: 1})
}

// Close closes the listeners and unbinds the namespace; it goes away with the last process in
// it. Closing twice does nothing more.
func (ns *Namespace) Close() error {
	var errs []error
	closeIt := func(c interface{ Close() error }) {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if ns.Capture != nil {
		closeIt(ns.Capture)
	}
	if ns.DNS != nil {
		closeIt(ns.DNS)
	}
	if ns.DNSStream != nil {
		closeIt(ns.DNSStream)
	}
	errs = append(errs, Remove(ns.Path))
	return errors.Join(errs...)
}

// Remove unbinds and deletes a namespace file left at path (by Create, or by a host that
// crashed); a path that is not there is fine.
func Remove(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unbind network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace %s: %w", path, err)
	}
	return nil
}

// OriginalDst is where a captured connection was going before the redirect; ok is false for a
// connection made to the proxy port itself (a client using HTTP(S)_PROXY).
func OriginalDst(c *net.TCPConn) (dst netip.AddrPort, ok bool, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, false, err
	}
	var sa unix.RawSockaddrInet4
	var serr error
	err = raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(sa))
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_IP, unix.SO_ORIGINAL_DST, uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&size)), 0)
		if e != 0 {
			serr = e
		}
	})
	if err == nil {
		err = serr
	}
	if errors.Is(err, syscall.ENOENT) {
		return netip.AddrPort{}, false, nil
	}
	if err != nil {
		return netip.AddrPort{}, false, fmt.Errorf("original destination: %w", err)
	}
	port := uint16(sa.Port>>8) | uint16(sa.Port&0xff)<<8
	dst = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), port)
	if dst.Addr().IsLoopback() && port == CapturePort {
		return dst, false, nil
	}
	return dst, true, nil
}

// icmpPortUnreachable is ICMP's "port unreachable" code: a refused datagram fails at once.
const icmpPortUnreachable = 3

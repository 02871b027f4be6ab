package egressproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// limitsFixture is a proxy with limits serving sandboxes on loopback listeners (their
// connections are explicit proxy ones), with plain.example.com (http) answering and
// held.example.com:7000 (no protocol) accepting connections it never writes to.
type limitsFixture struct {
	p *Proxy
	// heldOpen counts the held.example.com connections the proxy has not closed.
	heldOpen atomic.Int64
}

func newLimitsFixture(t *testing.T, lim Limits) *limitsFixture {
	t.Helper()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(plain.Close)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { held.Close() })
	f := &limitsFixture{}
	go func() {
		for {
			c, err := held.Accept()
			if err != nil {
				return
			}
			f.heldOpen.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(io.Discard, c)
				f.heldOpen.Add(-1)
			}()
		}
	}()
	f.p = mustNew(t, Options{
		Resolve: map[string]string{"plain.example.com:80": plain.Listener.Addr().String(), "held.example.com:7000": held.Addr().String()},
		Limits:  lim,
	})
	return f
}

// sandbox serves one more sandbox and returns it with its proxy's address.
func (f *limitsFixture) sandbox(t *testing.T, id string) (*Sandbox, string) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := f.p.Listen(Session{ID: id, Rules: Rules{AllowHosts: []string{"plain.example.com", "held.example.com:7000"}}}, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return sb, ln.Addr().String()
}

// held is how many connections sb holds now.
func (sb *Sandbox) held() int {
	sb.share.l.mu.Lock()
	defer sb.share.l.mu.Unlock()
	return sb.share.leases.Len()
}

// getThrough asks the proxy at addr for plain.example.com on a new connection, which it leaves open
// when keep, and returns the answer's status.
func getThrough(addr string, keep bool) (int, net.Conn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, nil, err
	}
	fmt.Fprintf(c, "GET http://plain.example.com/ HTTP/1.1\r\nHost: plain.example.com\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		c.Close()
		return 0, nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if !keep {
		c.Close()
		c = nil
	}
	return resp.StatusCode, c, nil
}

// A sandbox that opens connections as fast as it can takes the whole host while it is alone,
// then gets resets past its fair share once another sandbox needs connections: the other one
// still connects and is answered, each time, while the first keeps trying.
func TestSecurityASandboxOverItsConnectionShareGetsResetsAndOthersStillConnect(t *testing.T) {
	const hostCap = 16
	f := newLimitsFixture(t, Limits{HostConnections: hostCap, MinShare: 2})
	hog, hogAddr := f.sandbox(t, "hog")
	other, otherAddr := f.sandbox(t, "other")

	var mu sync.Mutex
	var hogConns []net.Conn
	resets := 0
	stop := make(chan struct{})
	flooding := sync.WaitGroup{}
	flooding.Add(1)
	go func() {
		defer flooding.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.Dial("tcp", hogAddr)
			if err != nil {
				continue
			}
			// An admitted connection waits for a request; a refused one is reset at once.
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			_, err = c.Read(make([]byte, 1))
			mu.Lock()
			if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) {
				resets++
				c.Close()
			} else {
				hogConns = append(hogConns, c)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		close(stop)
		flooding.Wait()
		for _, c := range hogConns {
			c.Close()
		}
	})
	testkit.Eventually(t, time.Minute, "the flooding sandbox holds the whole host and is refused more", func() (bool, string) {
		return hog.held() == hostCap && hog.Counters.Denied.Load() > 0, fmt.Sprintf("it holds %d, was refused %d", hog.held(), hog.Counters.Denied.Load())
	})

	// The other sandbox keeps up to its share open and is answered on every new connection.
	var kept []net.Conn
	defer func() {
		for _, c := range kept {
			c.Close()
		}
	}()
	for i := range hostCap / 2 {
		code, c, err := getThrough(otherAddr, true)
		if err != nil || code != http.StatusOK {
			t.Fatalf("the other sandbox's request %d beside the flood: %d %v", i, code, err)
		}
		kept = append(kept, c)
	}
	if n := other.held(); n != hostCap/2 {
		t.Errorf("the other sandbox holds %d connections, want the %d it kept", n, hostCap/2)
	}
	testkit.Eventually(t, time.Minute, "the flood keeps being reset", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return resets > 0, fmt.Sprint(resets, " resets seen")
	})
	if total := hog.held() + other.held(); total > hostCap {
		t.Errorf("the sandboxes hold %d connections, more than the host's %d", total, hostCap)
	}
}

// A connection that carries nothing for the idle timeout is closed, its upstream too; one that
// keeps carrying data is closed at its lifetime. Whatever the mode: a request never sent, a
// CONNECT tunnel to a server that never speaks.
func TestSecurityIdleAndOldProxiedConnectionsAreClosed(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		// open opens a connection through the proxy at addr.
		open func(t *testing.T, addr string) net.Conn
		// busy keeps the connection carrying data.
		busy bool
	}{
		{"a connection that never sends a request", Limits{IdleTimeout: 200 * time.Millisecond}, dialOnly, false},
		{"a tunnel to a server that never speaks", Limits{IdleTimeout: time.Second}, connectHeld, false},
		{"a busy tunnel past its lifetime", Limits{MaxLifetime: 500 * time.Millisecond}, connectHeld, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newLimitsFixture(t, tc.limits)
			sb, addr := f.sandbox(t, "idle")
			c := tc.open(t, addr)
			defer c.Close()
			stop := make(chan struct{})
			defer close(stop)
			if tc.busy {
				go func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if _, err := c.Write([]byte("x")); err != nil {
							return
						}
					}
				}()
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Minute))
			// A close with bytes unread is a reset.
			if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading until the proxy closes the connection: %v", err)
			}
			testkit.Eventually(t, time.Minute, "the connection and its upstream are gone", func() (bool, string) {
				return sb.held() == 0 && f.heldOpen.Load() == 0, fmt.Sprint(sb.held(), " held, ", f.heldOpen.Load(), " upstreams open")
			})
		})
	}
}

func dialOnly(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// connectHeld tunnels to held.example.com and sends it a byte (the tunnel dials at once).
func connectHeld(t *testing.T, addr string) net.Conn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT held.example.com:7000 HTTP/1.1\r\nHost: held.example.com:7000\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK || br.Buffered() > 0 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	return c
}

// The fair share: what each sandbox may take as others come and go, and whose connection is
// taken when the host is full.
func TestConnectionSharesAreFair(t *testing.T) {
	type step struct {
		sandbox int
		// admit > 0 admits that many, each of which must be let in; -1 asks for one that must
		// be refused; release > 0 ends that many of the sandbox's newest.
		admit, release int
		// holds are what the sandboxes hold after the step.
		holds []int
	}
	tests := []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{"alone, a sandbox takes up to its own cap", Limits{HostConnections: 10, PerSandbox: 4, MinShare: 1}, []step{
			{sandbox: 0, admit: 4, holds: []int{4, 0}},
			{sandbox: 0, admit: -1, holds: []int{4, 0}},
		}},
		{"alone, a sandbox takes the host, then gives way to a newcomer", Limits{HostConnections: 10, PerSandbox: 100, MinShare: 1}, []step{
			{sandbox: 0, admit: 10, holds: []int{10, 0}},
			{sandbox: 0, admit: -1, holds: []int{10, 0}},
			{sandbox: 1, admit: 5, holds: []int{5, 5}},
			{sandbox: 1, admit: -1, holds: []int{5, 5}},
			{sandbox: 0, admit: -1, holds: []int{5, 5}},
		}},
		{"a sandbox within its share is never taken from", Limits{HostConnections: 9, PerSandbox: 100, MinShare: 1}, []step{
			{sandbox: 0, admit: 3, holds: []int{3, 0, 0}},
			{sandbox: 1, admit: 4, holds: []int{3, 4, 0}},
			{sandbox: 1, admit: -1, holds: []int{3, 4, 0}},
			{sandbox: 2, admit: 3, holds: []int{3, 3, 3}},
			{sandbox: 2, admit: -1, holds: []int{3, 3, 3}},
			{sandbox: 0, admit: -1, holds: []int{3, 3, 3}},
		}},
		{"a sandbox that lets go makes room for the rest", Limits{HostConnections: 8, PerSandbox: 100, MinShare: 1}, []step{
			{sandbox: 0, admit: 4, holds: []int{4, 0}},
			{sandbox: 1, admit: 4, holds: []int{4, 4}},
			{sandbox: 1, release: 4, holds: []int{4, 0}},
			{sandbox: 0, admit: 4, holds: []int{8, 0}},
		}},
		{"the minimum share holds while the host has room", Limits{HostConnections: 4, PerSandbox: 100, MinShare: 3}, []step{
			{sandbox: 0, admit: 3, holds: []int{3, 0}},
			{sandbox: 1, admit: 1, holds: []int{3, 1}},
			{sandbox: 1, admit: -1, holds: []int{3, 1}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(tc.limits)
			shares := make([]*share, len(tc.steps[0].holds))
			for i := range shares {
				shares[i] = &share{l: l}
			}
			for i, s := range tc.steps {
				sh := shares[s.sandbox]
				for range s.admit {
					ls, ok := sh.admit(t.Context(), loopbackConn(t))
					if !ok {
						t.Fatalf("step %d: sandbox %d was refused a connection", i, s.sandbox)
					}
					t.Cleanup(ls.release)
				}
				if s.admit < 0 {
					if ls, ok := sh.admit(t.Context(), loopbackConn(t)); ok {
						ls.release()
						t.Fatalf("step %d: sandbox %d was let in past its share", i, s.sandbox)
					}
				}
				for range s.release {
					l.mu.Lock()
					ls := sh.leases.Back().Value.(*lease)
					l.mu.Unlock()
					ls.release()
				}
				l.mu.Lock()
				for j, want := range s.holds {
					if got := shares[j].leases.Len(); got != want {
						t.Errorf("step %d: sandbox %d holds %d, want %d", i, j, got, want)
					}
				}
				l.mu.Unlock()
			}
		})
	}
}

// loopbackConn is the server side of a new loopback connection.
func loopbackConn(t *testing.T) *net.TCPConn {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server
}

func TestHostConnectionsLeaveDescriptorsToTheRest(t *testing.T) {
	tests := []struct {
		fds  uint64
		want int
	}{
		{20000, 7500},
		{4096, 1536},
		{1024, 256},
		{2, 1},
	}
	for _, tc := range tests {
		if got := HostConnectionsFor(tc.fds); got != tc.want {
			t.Errorf("HostConnectionsFor(%d) = %d, want %d", tc.fds, got, tc.want)
		}
	}
}

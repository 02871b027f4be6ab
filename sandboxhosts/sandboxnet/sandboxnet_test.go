package sandboxnet

import (
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// inside runs fn on a thread that joined the namespace at path, as a sandbox's process would be.
func inside(t *testing.T, path string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			t.Error(err)
			return
		}
		fn()
	}()
	<-done
}

func TestCapturedConnectionsReachTheHostListener(t *testing.T) {
	if unix.Geteuid() != 0 {
		t.Skip("needs root")
	}
	ns, err := Create(filepath.Join(t.TempDir(), "netns"))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	for _, tc := range []struct {
		name     string
		addr     string
		captured bool
	}{
		{"a public address is redirected", "93.184.216.34:443", true},
		{"a private address is redirected", "10.1.2.3:22", true},
		{"the proxy port is asked for by name", "127.0.0.1:3128", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accepted := make(chan *net.TCPConn, 1)
			go func() {
				c, err := ns.Capture.AcceptTCP()
				if err == nil {
					accepted <- c
				}
			}()
			inside(t, ns.Path, func() {
				c, err := net.DialTimeout("tcp4", tc.addr, 3*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				c.Close()
			})
			c := <-accepted
			defer c.Close()
			dst, captured, err := OriginalDst(c)
			if err != nil {
				t.Fatal(err)
			}
			if captured != tc.captured {
				t.Fatalf("captured = %v, want %v", captured, tc.captured)
			}
			if captured && dst != netip.MustParseAddrPort(tc.addr) {
				t.Fatalf("original dst %s, want %s", dst, tc.addr)
			}
		})
	}
	t.Run("udp other than dns is refused at once", func(t *testing.T) {
		inside(t, ns.Path, func() {
			c, err := net.Dial("udp4", "8.8.8.8:443")
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte("x"))
			buf := make([]byte, 1)
			if _, err := c.Read(buf); err == nil {
				t.Error("read an answer")
			}
		})
	})
	t.Run("ipv6 has no route out", func(t *testing.T) {
		inside(t, ns.Path, func() {
			if c, err := net.Dial("tcp6", "[2606:4700::1]:443"); err == nil {
				c.Close()
				t.Error("connected over IPv6")
			}
		})
	})
}

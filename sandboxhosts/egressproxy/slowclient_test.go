package egressproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// A client whose ClientHello comes later than a server-first protocol's wait (git's gnutls
// parsing its CA bundle on a loaded machine did) is still intercepted when a secret may go to
// its host: passed through, it met the real server with the placeholder and was cut off.
func TestALateClientHelloToASecretsHostIsStillIntercepted(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(f.sb.p.opts.CA.CertPEM())
	var body string
	f.inSandbox(t, func() {
		c, err := net.Dial("tcp", strings.TrimPrefix(sandboxnet.ProxyURL, "http://"))
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Errorf("CONNECT: %v %v", resp, err)
			return
		}
		time.Sleep(2 * firstBytesWait)
		tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots})
		fmt.Fprintf(tc, "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", placeholder)
		if resp, err = http.ReadResponse(bufio.NewReader(tc), nil); err != nil {
			t.Errorf("the late client's request: %v", err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
	})
	if body != "hello from api.example.com" {
		t.Fatalf("the late client got %q", body)
	}
	if got := f.api.lastAuth(); got != "Bearer "+realKey {
		t.Fatalf("upstream got Authorization %q, want the injected key", got)
	}
}

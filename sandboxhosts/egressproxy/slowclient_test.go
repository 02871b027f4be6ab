package egressproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// slowClientEnv makes the test binary the slow client of TestALateClientHelloToASecretsHostIsStillIntercepted.
const slowClientEnv = "HANGAR_EGRESS_SLOW_CLIENT_CA"

// A client whose ClientHello comes later than a server-first protocol's wait (git's gnutls
// parsing its CA bundle on a loaded machine did) is still intercepted when a secret may go to
// its host: passed through, it met the real server with the placeholder and was cut off.
func TestALateClientHelloToASecretsHostIsStillIntercepted(t *testing.T) {
	f := newFixture(t, Rules{AllowHosts: []string{"api.example.com"}})
	cmd := exec.Command("nsenter", "--net="+f.ns.Path, os.Args[0], "-test.run=^TestSlowClientHelper$")
	cmd.Env = append(os.Environ(), slowClientEnv+"="+f.caFile)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "hello from api.example.com") {
		t.Fatalf("the late client got %q (%v)", out, err)
	}
	if got := f.api.lastAuth(); got != "Bearer "+realKey {
		t.Fatalf("upstream got Authorization %q, want the injected key", got)
	}
}

// TestSlowClientHelper is the late client, run inside the sandbox's namespace: it opens a
// CONNECT tunnel, waits past firstBytesWait, then speaks TLS with the placeholder.
func TestSlowClientHelper(t *testing.T) {
	caFile := os.Getenv(slowClientEnv)
	if caFile == "" {
		t.Skip("run by TestALateClientHelloToASecretsHostIsStillIntercepted")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := net.Dial("tcp", strings.TrimPrefix(sandboxnet.ProxyURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	time.Sleep(2 * firstBytesWait)
	tc := tls.Client(c, &tls.Config{ServerName: "api.example.com", RootCAs: roots})
	fmt.Fprintf(tc, "GET /v1 HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", placeholder)
	resp, err = http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
}

package egressproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
)

// gatewayProxy serves one session, whose rules allow allowHosts, in a network namespace by a
// proxy with the operator's allow entries and CA bundle, and no test resolver but resolve:
// whatever else it reaches, it reaches by the guarded dialer. It returns the namespace and the audit events.
func gatewayProxy(t *testing.T, allow []string, operatorCA []byte, allowHosts []string, resolve map[string]string, secrets ...Secret) (string, *CA, func() []Connection) {
	t.Helper()
	if unix.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root")
		}
		t.Skip("needs root")
	}
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []Connection
	p := mustNew(t, Options{CA: ca, Resolve: resolve, Allow: egress.MustParse(allow...), AllowCA: operatorCA,
		Audit: func(_ string, c Connection) { mu.Lock(); events = append(events, c); mu.Unlock() }})
	ns, err := sandboxnet.Create(filepath.Join(t.TempDir(), "netns"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	sb, err := p.Serve(Session{ID: "sess-gw", Rules: Rules{AllowHosts: allowHosts}, Secrets: secrets}, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	return ns.Path, ca, func() []Connection { mu.Lock(); defer mu.Unlock(); return append([]Connection(nil), events...) }
}

// A team's model gateway at a private address with its own CA (here 127.0.0.1 and a CA of the
// test's) is reached by a sandbox only when the operator lists it in HANGAR_SANDBOX_EGRESS_ALLOW
// and the session's policy allows it, over TLS verified by the operator's CA
// (HANGAR_SANDBOX_EGRESS_CA_FILE) on both the proxy's TLS paths: an explicit proxy's https://
// request, and a CONNECT intercepted for the gateway's key. Without the entry it is refused
// with a 403 naming the setting, without the CA the gateway's certificate is not trusted, and
// metadata and link-local addresses stay refused even when listed.
func TestSecuritySandboxesReachAnOperatorsGatewayOnlyAsListedAndByItsCA(t *testing.T) {
	var keys []string
	var keysMu sync.Mutex
	gw := testkit.TLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keysMu.Lock()
		keys = append(keys, r.Header.Get("Authorization"))
		keysMu.Unlock()
		io.WriteString(w, "hello from the gateway")
	}), "api.example.com")
	t.Cleanup(gw.Close)
	gwAddr := gw.Listener.Addr().String() // 127.0.0.1:port
	gwCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gw.Certificate().Raw})
	gatewayKey := Secret{Name: "gateway-key", Placeholder: placeholder, Value: realKey, AllowHosts: []string{gwAddr}, Slots: APIKeySlots}

	type path func(t *testing.T, nsPath string, ca *CA, target string) (int, string)
	// explicit sends an absolute https:// request to the explicit proxy: the proxy speaks TLS to
	// the target itself.
	explicit := func(t *testing.T, nsPath string, _ *CA, target string) (int, string) {
		c, err := dialIn(nsPath, "127.0.0.1:3128")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		status, _, body := exchangeRaw(t, c, bufio.NewReader(c), "GET https://"+target+"/v1/models HTTP/1.1\r\nHost: "+target+"\r\n"+bearer(placeholder)+"\r\n")
		return status, body
	}
	// connect CONNECTs to the target and speaks TLS through the tunnel, trusting the
	// interception CA: the proxy terminates it for the gateway's key and speaks TLS upstream.
	connect := func(t *testing.T, nsPath string, ca *CA, target string) (int, string) {
		c, err := dialIn(nsPath, "127.0.0.1:3128")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.CertPEM())
		host, _, _ := net.SplitHostPort(target)
		tc := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{ServerName: host, RootCAs: roots})
		if err := tc.Handshake(); err != nil {
			t.Fatalf("TLS through the tunnel: %v", err)
		}
		status, _, body := exchangeRaw(t, tc, bufio.NewReader(tc), "GET /v1/models HTTP/1.1\r\nHost: "+target+"\r\n"+bearer(placeholder)+"\r\n")
		return status, body
	}
	for _, tc := range []struct {
		name       string
		allow      []string
		operatorCA []byte
		// rules is what the session's policy allows; target where the sandbox goes.
		rules  []string
		target string
		status int
		// body is what the answer says; rule what the audit event's rule or error says.
		body, audit string
	}{
		{"listed, allowed by the session, with the operator's CA", []string{gwAddr}, gwCA, []string{gwAddr}, gwAddr, 200, "hello from the gateway", "allow_hosts " + gwAddr},
		{"not listed", nil, gwCA, []string{gwAddr}, gwAddr, 403, "HANGAR_SANDBOX_EGRESS_ALLOW", "HANGAR_SANDBOX_EGRESS_ALLOW"},
		{"listed by a prefix, which names no loopback port", []string{"127.0.0.0/8"}, gwCA, []string{gwAddr}, gwAddr, 403, "opened only by an entry with its port", "HANGAR_SANDBOX_EGRESS_ALLOW"},
		{"listed, but the session's policy does not allow it", []string{gwAddr}, gwCA, nil, gwAddr, 403, "default deny", "default deny"},
		{"listed, without the operator's CA", []string{gwAddr}, nil, []string{gwAddr}, gwAddr, 502, "certificate signed by unknown authority", "allow_hosts " + gwAddr},
		{"the metadata server, though listed", []string{"169.254.169.254", "169.254.0.0/16"}, gwCA, []string{"169.254.169.254"}, "169.254.169.254:443", 403, "no sandbox reaches, whatever HANGAR_SANDBOX_EGRESS_ALLOW lists", "no sandbox reaches"},
		{"a metadata server's name, though listed", []string{"metadata.google.internal"}, gwCA, []string{"metadata.google.internal"}, "metadata.google.internal:443", 403, "no sandbox reaches", "no sandbox reaches"},
	} {
		for _, p := range []struct {
			name string
			try  path
		}{{"explicit https request", explicit}, {"intercepted CONNECT", connect}} {
			t.Run(tc.name+"/"+p.name, func(t *testing.T) {
				nsPath, ca, events := gatewayProxy(t, tc.allow, tc.operatorCA, tc.rules, nil, gatewayKey)
				keysMu.Lock()
				before := len(keys)
				keysMu.Unlock()
				status, body := p.try(t, nsPath, ca, tc.target)
				if status != tc.status || !strings.Contains(body, tc.body) {
					t.Fatalf("answer %d %q, want %d saying %q", status, body, tc.status, tc.body)
				}
				keysMu.Lock()
				got := keys[before:]
				keysMu.Unlock()
				if tc.status == 200 && (len(got) != 1 || got[0] != "Bearer "+realKey) {
					t.Fatalf("the gateway got Authorization %q, want the key injected once", got)
				}
				if tc.status != 200 && len(got) != 0 {
					t.Fatalf("the gateway was reached: %q", got)
				}
				testkit.Eventually(t, 10*time.Second, "the audit event", func() (bool, string) {
					for _, e := range events() {
						if strings.Contains(e.Rule+" "+e.Error, tc.audit) && (e.Decision == Allowed) == (tc.status != 403) {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%+v", events())
				})
			})
		}
	}

	// A public host (stood for by the test resolver) is never verified by the operator's CA,
	// which only signs what the operator lists.
	t.Run("a host the operator does not list is not trusted by the operator's CA", func(t *testing.T) {
		nsPath, ca, _ := gatewayProxy(t, []string{"10.1.2.3:4000"}, gwCA, []string{"api.example.com"},
			map[string]string{"api.example.com:443": gwAddr}, Secret{Name: "k", Placeholder: placeholder, Value: realKey, AllowHosts: []string{"api.example.com"}, Slots: APIKeySlots})
		for name, try := range map[string]path{"explicit https request": explicit, "intercepted CONNECT": connect} {
			if status, body := try(t, nsPath, ca, "api.example.com:443"); status != 502 || !strings.Contains(body, "unknown authority") {
				t.Errorf("%s: %d %q, want a 502 for the untrusted certificate", name, status, body)
			}
		}
	})
}

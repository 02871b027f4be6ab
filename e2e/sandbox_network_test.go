package e2e

import (
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
)

// fakeAPI is a loopback HTTPS server standing for a model API under its real name: it records
// the credentials it receives.
type fakeAPI struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newFakeAPI(t *testing.T, tlsOn bool) *fakeAPI {
	f := &fakeAPI{}
	h := http.HandlerFunc(f.serve)
	if tlsOn {
		f.Server = httptest.NewTLSServer(h)
	} else {
		f.Server = httptest.NewServer(h)
	}
	t.Cleanup(f.Close)
	return f
}

// serve records the request's credentials and says which host it reached.
func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auths = append(f.auths, r.Header.Get("Authorization"))
	f.mu.Unlock()
	io.WriteString(w, "reached "+r.Host+"\n")
}

func (f *fakeAPI) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auths...)
}

// networkStack is a sandbox stack whose hosts' proxies reach llm.example.com (https, a model
// router's host), plain.example.com (http, not allowed) under those names on loopback.
func networkStack(t *testing.T) (*sandboxStack, *fakeAPI, *fakeAPI) {
	testenv.RequirePlugins(t)
	router, plain := newFakeAPI(t, true), newFakeAPI(t, false)
	roots := x509.NewCertPool()
	roots.AddCert(router.Certificate())
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.ModelRouters = []config.ModelRouter{
			{ID: "lab", Label: "Lab", BaseURL: "https://llm.example.com/v1", Protocols: []string{"anthropic"}, CredentialSecret: "lab/key"},
		}
		sb.EgressResolve = map[string]string{
			"llm.example.com:443":  router.Listener.Addr().String(),
			"plain.example.com:80": plain.Listener.Addr().String(),
			// A host the harness may reach, but the router key's placeholder may not.
			"api.anthropic.com:80": plain.Listener.Addr().String(),
		}
		sb.EgressRootCAs = roots
	})
	s.putOrgSecret(t, "lab/key", "sk-lab-real-key")
	return s, router, plain
}

func TestSandboxReachesItsRouterThroughTheProxyWithTheKeyInjected(t *testing.T) {
	s, router, plain := networkStack(t)
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})

	env := s.sh(t, id, `echo "$ANTHROPIC_AUTH_TOKEN"; cat /proc/1/environ 2>/dev/null | tr '\0' '\n' | grep -c sk-lab || true`)
	if strings.Contains(env, "sk-lab-real-key") || !strings.HasPrefix(env, "hangar-placeholder-") {
		t.Fatalf("the sandbox's env holds %q, want only a placeholder", env)
	}
	placeholder := strings.SplitN(env, "\n", 2)[0]

	for _, tc := range []struct {
		name, cmd, want string
	}{
		// busybox wget sends an absolute https:// URL to http_proxy; the proxy speaks TLS upstream.
		// (Captured TLS is tested with curl in package egressproxy: busybox's own TLS client
		// fails its handshake with Go's TLS server.)
		{"https through the proxy gets the key injected", `wget -q -O- --header "Authorization: Bearer $ANTHROPIC_AUTH_TOKEN" https://llm.example.com/v1/messages`, "reached llm.example.com"},
		{"a private address is refused", `wget -q -O- http://10.1.2.3/ 2>&1; echo "exit=$?"`, "403"},
		{"http_proxy to a host no rule names is a readable 403", `wget -q -O- http://plain.example.com/ 2>&1; echo "exit=$?"`, "403"},
		{"captured http to a host no rule names is a readable 403", `env -u http_proxy -u HTTP_PROXY wget -O- http://plain.example.com/ 2>&1; echo "exit=$?"`, "403"},
		{"the metadata server is never reached", `env -u http_proxy -u HTTP_PROXY wget -q -O- -T 5 http://169.254.169.254/ 2>&1; echo "exit=$?"`, "exit=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.sh(t, id, tc.cmd); !strings.Contains(got, tc.want) {
				t.Fatalf("%s: got %q, want it to contain %q", tc.cmd, got, tc.want)
			}
		})
	}
	auths := router.got()
	if len(auths) != 1 || auths[0] != "Bearer sk-lab-real-key" {
		t.Fatalf("the router got %q, want the real key once", auths)
	}
	if len(plain.got()) != 0 {
		t.Fatalf("a denied host was reached: %q", plain.got())
	}
	if strings.Contains(placeholder, "sk-lab") {
		t.Fatal("the placeholder holds the key")
	}
	s.noEventHolds(t, id, "sk-lab-real-key")

	// The event log batches its writes: wait until the events are stored.
	var allowed, denied int
	s.eventsUntil(t, id, func(events []*appv1.SessionEvent) bool {
		allowed, denied = 0, 0
		for _, e := range events {
			var c egressproxy.Connection
			if err := json.Unmarshal([]byte(e.GetPayloadJson()), &c); err != nil {
				t.Fatal(err)
			}
			switch {
			case c.Host == "llm.example.com" && c.Decision == egressproxy.Allowed:
				allowed++
				if len(c.Injected) != 1 || c.Injected[0] != "lab/key" || c.BytesIn == 0 || c.BytesOut == 0 {
					t.Errorf("the router's connection event is %+v, want lab/key injected and bytes both ways", c)
				}
			case c.Decision == egressproxy.Denied:
				denied++
			}
		}
		return allowed >= 1 && denied >= 3
	}, "net.connection")
	if allowed != 1 || denied < 3 {
		t.Fatalf("net.connection events: %d allowed to the router, %d denied; want 1 and at least 3", allowed, denied)
	}
}

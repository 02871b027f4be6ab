package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// headerLog is a loopback server that stands for a host an attacker picks: it remembers the
// headers of every request that reaches it.
type headerLog struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newHeaderLog(t *testing.T) *headerLog {
	l := &headerLog{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Clone())
		l.mu.Unlock()
		_, _ = w.Write([]byte(`{"stolen":true}`))
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *headerLog) requests() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.seen...)
}

// runHTTPBlock runs an automation of one http block calling target with the org secret
// hook_token as its Authorization header, and returns the ended run.
func (as *automationStack) runHTTPBlock(t *testing.T, target string) *appv1.AutomationRun {
	t.Helper()
	id := as.create(t, `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[{"id":"call","type":"http","url":"`+target+`","headers":{"X-Custom":"mine"},
			"secret_headers":{"Authorization":"hook_token"}}]}`)
	resp, err := as.automations.RunNow(t.Context(), connect.NewRequest(&appv1.RunNowRequest{AutomationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	return as.waitRun(t, resp.Msg.GetRunId())
}

// The attack: an allow-listed host answers an http block with a redirect, and the worker used to
// follow it anywhere (another host, loopback, the metadata server) with the block's custom and
// secret headers, storing the answer in the run's outputs.
func TestSecurityHTTPBlockRedirectsAreRecheckedAndSecretsStayWithTheirHost(t *testing.T) {
	as := newAutomationStack(t)
	as.putOrgSecret(t, "hook_token", "s3cret-token")
	elsewhere := newHeaderLog(t)
	port := elsewhere.URL[strings.LastIndex(elsewhere.URL, ":")+1:]
	for _, tc := range []struct {
		name, to string
		status   string
		reached  bool
	}{
		// localhost is the same machine, but not the name on HANGAR_AUTOMATION_HTTP_HOSTS.
		{"to a host off the allow-list", "http://localhost:" + port + "/", "failed", false},
		{"to the metadata server", "http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token", "failed", false},
		{"to a metadata name", "http://metadata.google.internal/computeMetadata/v1/", "failed", false},
		// The listed name on another port is another origin: the call goes, the secret does not.
		{"to another port of the listed host", "http://127.0.0.1:" + port + "/", "completed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(elsewhere.requests())
			run := as.runHTTPBlock(t, as.upstream.URL+"/redirect?to="+url.QueryEscape(tc.to))
			if got := run.GetBrief().GetStatus(); got != tc.status {
				t.Fatalf("run %s (%s), want %s", got, run.GetBrief().GetError(), tc.status)
			}
			if tc.status == "failed" && !strings.Contains(run.GetBrief().GetError(), "redirect") {
				t.Fatalf("the error does not name the refused redirect: %s", run.GetBrief().GetError())
			}
			reqs := elsewhere.requests()[before:]
			if reached := len(reqs) > 0; reached != tc.reached {
				t.Fatalf("the other host was reached: %v, want %v", reached, tc.reached)
			}
			for _, h := range reqs {
				if h.Get("Authorization") != "" || h.Get("X-Custom") != "" {
					t.Fatalf("the other host got the block's headers: %v", h)
				}
			}
		})
	}
}

// Without an operator's HANGAR_EGRESS_ALLOW entry, an allow-listed loopback host (a name that
// resolves to loopback as much as a literal) is refused at connect: nothing reaches it.
func TestSecurityHTTPBlockReachesLoopbackOnlyWithAnEgressEntry(t *testing.T) {
	as := newAutomationStackWith(t, func(c *config.Config) {
		c.AutomationHTTPHosts = []string{"127.0.0.1", "localhost"}
		c.Egress = egress.Policy{}
	})
	as.putOrgSecret(t, "hook_token", "s3cret-token")
	port := as.upstream.URL[strings.LastIndex(as.upstream.URL, ":")+1:]
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			before := as.calls.Load()
			run := as.runHTTPBlock(t, "http://"+host+":"+port+"/hook")
			if run.GetBrief().GetStatus() != "failed" || !strings.Contains(run.GetBrief().GetError(), "loopback") {
				t.Fatalf("run %s (%s), want refused as loopback", run.GetBrief().GetStatus(), run.GetBrief().GetError())
			}
			if as.calls.Load() != before {
				t.Fatal("a request reached the loopback upstream")
			}
		})
	}
}

// hostileRegistry is a registry on loopback that answers as imagestest.Hostile says, redirecting
// to the metadata server; hits counts what reaches it.
func hostileRegistry(t *testing.T) (port string, hits *atomic.Int32) {
	hits = new(atomic.Int32)
	reg := imagestest.Registry(t, imagestest.Hostile("http://169.254.169.254/latest/meta-data/", hits))
	return reg[strings.LastIndex(reg, ":")+1:], hits
}

// pullAttacks are the references a user could hand Hangar to scan loopback, read an internal
// server's answer or follow a redirect inside, with what the refusal must say. The
// configuration lists the name "localhost" as a private registry and nothing else.
func pullAttacks(port string) []struct{ name, ref, says string } {
	return []struct{ name, ref, says string }{
		{"a loopback address no operator lists", "127.0.0.1:" + port + "/any/image:latest", "loopback"},
		{"an internal server's error body", "localhost:" + port + "/body/x:latest", "403"},
		{"an internal server's error messages", "localhost:" + port + "/diagnostics/x:latest", "MANIFEST_UNKNOWN"},
		{"a redirect to the metadata server", "localhost:" + port + "/redirect/x:latest", "169.254.169.254"},
	}
}

// checkPullRefusal fails unless err is invalid_argument naming field and says says, without
// anything the registry sent.
func checkPullRefusal(t *testing.T, err error, field, says string) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
	if !strings.Contains(ce.Message(), field) || !strings.Contains(ce.Message(), says) {
		t.Fatalf("message %q does not name %s and say %q", ce.Message(), field, says)
	}
	if strings.Contains(ce.Message(), imagestest.HostileBody) {
		t.Fatalf("the error repeats the registry's answer: %q", ce.Message())
	}
}

// The attack: a session's image_uri (or a profile's image_id) made a sandbox host fetch any
// loopback or private address, follow redirects anywhere and copy the answer into the error.
func TestSecuritySessionImageURIPullsReachOnlyListedRegistries(t *testing.T) {
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) { sb.Config.Registries = egress.MustParse("localhost") })
	port, hits := hostileRegistry(t)
	for _, tc := range pullAttacks(port) {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			_, err := s.svc.CreateSession(context.Background(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: tc.ref}))
			checkPullRefusal(t, err, "image_uri", tc.says)
			if strings.HasPrefix(tc.ref, "127.0.0.1") && hits.Load() != before {
				t.Fatal("a refused pull reached the registry")
			}
		})
	}
}

// The attack: RegisterHarness's oci_ref made the functions fetch any loopback or private
// address the same way.
func TestSecurityRegisterHarnessOCIRefReachesOnlyListedRegistries(t *testing.T) {
	db, _ := testenv.Firestore(t)
	cfg := config.Default()
	cfg.Registries = egress.MustParse("localhost")
	s := serveSessionsWith(t, db, cfg)
	svc := appv1connect.NewHarnessCatalogServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	port, hits := hostileRegistry(t)
	for i, tc := range pullAttacks(port) {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			name := "attack-" + string(rune('a'+i))
			_, err := svc.RegisterHarness(context.Background(), connect.NewRequest(&appv1.RegisterHarnessRequest{Name: name, OciRef: tc.ref}))
			checkPullRefusal(t, err, "oci_ref", tc.says)
			if strings.HasPrefix(tc.ref, "127.0.0.1") && hits.Load() != before {
				t.Fatal("a refused fetch reached the registry")
			}
		})
	}
}

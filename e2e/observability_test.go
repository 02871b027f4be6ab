package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// spanLog keeps the spans this process makes while a tracing test or benchmark runs. The
// providers it is installed in are the process's globals (the client libraries read those), so
// it is installed once, and samples nothing while no tracing test runs: the other tests and
// benchmarks pay for no spans.
type spanLog struct {
	on  atomic.Int32
	mem *tracetest.InMemoryExporter
	// metrics reads the process's metrics, cumulative since it was installed.
	metrics *sdkmetric.ManualReader
}

// sampler samples every span (100%) while l is on, none otherwise.
type sampler struct{ l *spanLog }

func (s sampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if s.l.on.Load() == 0 {
		return sdktrace.NeverSample().ShouldSample(p)
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (sampler) Description() string { return "on while a tracing test runs" }

var installSpanLog = sync.OnceValues(func() (*spanLog, error) {
	l := &spanLog{mem: tracetest.NewInMemoryExporter(), metrics: sdkmetric.NewManualReader()}
	_, err := telemetry.Setup(context.Background(), telemetry.Options{Service: "hangar-e2e", SpanExporter: l.mem, Sampler: sampler{l}, MetricReader: l.metrics})
	return l, err
})

// recordSpans samples and keeps every span until t ends; trace picks those of one trace.
func recordSpans(t testing.TB) *spanLog {
	t.Helper()
	l, err := installSpanLog()
	if err != nil {
		t.Fatal(err)
	}
	l.on.Add(1)
	t.Cleanup(func() {
		if l.on.Add(-1) == 0 {
			l.mem.Reset()
		}
	})
	return l
}

// trace is the names of the spans of trace id ended so far, each with its kind.
func (l *spanLog) trace(id trace.TraceID) []string {
	var names []string
	for _, s := range l.mem.GetSpans() {
		if s.SpanContext.TraceID() == id {
			names = append(names, s.SpanKind.String()+" "+s.Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitTrace waits for trace id to hold every span of want ("kind name"), and returns it.
func (l *spanLog) waitTrace(t *testing.T, id trace.TraceID, want ...string) []string {
	t.Helper()
	var got []string
	testkit.Eventually(t, 30*time.Second, "the trace holding "+strings.Join(want, ", "), func() (bool, string) {
		got = l.trace(id)
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false, "trace has " + strings.Join(got, ", ")
			}
		}
		return true, ""
	})
	return got
}

func TestCreateSessionAndExecAreOneTraceAcrossTheAPIAndTheHost(t *testing.T) {
	spans := recordSpans(t)
	s := newSandboxStack(t, 1, nil)
	ctx, root := otel.Tracer("e2e").Start(context.Background(), "client")
	// A client that carries its trace, as the CLI's could.
	svc := appv1connect.NewSessionServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin), telemetry.Interceptor())
	resp, err := svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := collectExec(ctx, svc, &appv1.ExecRequest{SessionId: resp.Msg.GetSessionId(), Command: ptr("echo traced")})
	if err != nil || res.stdout != "traced\n" {
		t.Fatalf("exec: %q, %v", res.stdout, err)
	}
	root.End()
	got := spans.waitTrace(t, root.SpanContext().TraceID(),
		"server svc.app.v1.SessionService/CreateSession",
		"client host.v1.HostService/CreateSandbox",
		"server host.v1.HostService/CreateSandbox",
		"server svc.app.v1.SessionService/Exec",
		"client host.v1.HostService/Exec",
		"server host.v1.HostService/Exec",
	)
	t.Logf("the trace of CreateSession then Exec: %s", strings.Join(got, "; "))
	for _, want := range []string{"hangar.session.create.duration code=ok", "hangar.session.exec.duration code=ok", "hangar.sessions state=running"} {
		if m := spans.measured(t); !slices.Contains(m, want) {
			t.Errorf("metrics lack %q: %s", want, strings.Join(m, "; "))
		}
	}
}

// measured lists the process's histograms with observations and its sums above zero, as
// "name k=v".
func (l *spanLog) measured(t *testing.T) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := l.metrics.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(name string, attrs attribute.Set) {
		var kv []string
		for _, a := range attrs.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		out = append(out, strings.TrimSpace(name+" "+strings.Join(kv, ",")))
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if p.Count > 0 {
						add(m.Name, p.Attributes)
					}
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if p.Value > 0 {
						add(m.Name, p.Attributes)
					}
				}
			}
		}
	}
	return out
}

func TestASignedWebhookAndTheRunItStartsAreOneTrace(t *testing.T) {
	spans := recordSpans(t)
	as := newAutomationStack(t)
	as.create(t, `{"version":1,
		"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened"}],
		"blocks":[{"id":"send","type":"http","method":"POST","url":"`+as.upstream.URL+`/pr","body":{"number":"{{ event.number }}"}}]}`)
	reg, err := as.webhooks.CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "acme", Provider: "github"}))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"action":"opened","number":7,"pull_request":{"draft":false},"repository":{"full_name":"acme/widgets"}}`
	req, err := http.NewRequest(http.MethodPost, as.url+reg.Msg.GetRegistration().GetUrlPath(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", "guid-traced")
	req.Header.Set("X-Hub-Signature-256", sign(reg.Msg.GetSecret(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get(telemetry.RequestIDHeader) != traceID {
		t.Fatalf("delivery answered %d with request id %q, want 202 and the trace id", resp.StatusCode, resp.Header.Get(telemetry.RequestIDHeader))
	}
	testkit.Eventually(t, 30*time.Second, "the run calling the upstream", func() (bool, string) {
		return as.calls.Load() == 1, "no call yet"
	})
	id, _ := trace.TraceIDFromHex(traceID)
	got := spans.waitTrace(t, id,
		"server POST /api/v1/webhooks/{id}",
		"producer hangar-automation-events publish",
		"consumer hangar-automation-events-worker process",
		"producer hangar-automation-runs publish",
		"consumer hangar-automation-runs-worker process",
	)
	t.Logf("the trace of a webhook delivery: %s", strings.Join(got, "; "))
	for _, want := range []string{"hangar.webhook.deliveries outcome=accepted", "hangar.automation.runs outcome=completed"} {
		testkit.Eventually(t, 30*time.Second, "the metrics counting "+want, func() (bool, string) {
			m := spans.measured(t)
			return slices.Contains(m, want), strings.Join(m, "; ")
		})
	}
}

func TestReadyzAnswersWhetherWhatEachProcessNeedsIsReachable(t *testing.T) {
	db, project := testenv.Firestore(t)
	sb := newSandboxStack(t, 1, nil)
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
		h2c  bool // hosts speak cleartext HTTP/2 only
		code int
		body string
	}{
		{"the API with Firestore and Pub/Sub", func(t *testing.T) string {
			return serveHTTP(t, composition.New(composition.Deps{DB: db, PubSub: testenv.PubSub(t)}).Handler())
		}, false, http.StatusOK, "ok\n"},
		{"the API without its Firestore", func(t *testing.T) string {
			// A Firestore nothing listens for: 127.0.0.1's port 1.
			t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
			gone, err := firestore.NewClient(t.Context(), project)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = gone.Close() })
			return serveHTTP(t, composition.New(composition.Deps{DB: gone}).Handler())
		}, false, http.StatusServiceUnavailable, "firestore\n"},
		{"a host with Firestore, runc and disk", func(*testing.T) string { return "http://" + sb.hosts[0].Addr }, true, http.StatusOK, "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := httpClient
			if tc.h2c {
				client = h2cClient
			}
			resp, err := client.Get(tc.url(t) + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || string(body) != tc.body || resp.Header.Get(telemetry.RequestIDHeader) == "" {
				t.Fatalf("/readyz answered %d %q (request id %q), want %d %q", resp.StatusCode, body, resp.Header.Get(telemetry.RequestIDHeader), tc.code, tc.body)
			}
		})
	}
}

// h2cClient speaks cleartext HTTP/2 with prior knowledge, as the API does to hosts.
var h2cClient = func() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}()

// serveHTTP serves h on loopback until t ends, and returns its URL.
func serveHTTP(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

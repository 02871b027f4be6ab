package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"go.opentelemetry.io/otel"
	"gocloud.dev/blob/memblob"
	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/composition"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// automationStack is the API with Pub/Sub and the automation worker running in process, as
// `hangar dev` runs them, and a loopback upstream that http blocks may call.
type automationStack struct {
	*stack
	db          *firestore.Client
	automations appv1connect.AutomationServiceClient
	runs        appv1connect.AutomationRunServiceClient
	webhooks    appv1connect.WebhookRegistrationServiceClient
	upstream    *httptest.Server
	calls       atomic.Int32
	lastBody    atomic.Value
	// lastAuth is the Authorization header of the upstream's last call.
	lastAuth atomic.Value
	// failing makes the upstream answer 400 on /fail while set.
	failing atomic.Bool
}

func newAutomationStack(t testing.TB) *automationStack {
	t.Helper()
	return newAutomationStackWith(t, nil)
}

// newAutomationStackWith is newAutomationStack whose configuration tune adjusts last.
func newAutomationStackWith(t testing.TB, tune func(*config.Config)) *automationStack {
	t.Helper()
	testenv.RequirePlugins(t)
	db, _ := testenv.Firestore(t)
	ps := testenv.PubSub(t)
	_, sealer := testenv.Keyset(t)
	b := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = b.Close() })
	as := &automationStack{db: db}
	as.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		_, _ = body.ReadFrom(r.Body)
		as.lastBody.Store(body.String())
		as.lastAuth.Store(r.Header.Get("Authorization"))
		as.calls.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
			return
		}
		if r.URL.Path == "/fail" && as.failing.Load() {
			http.Error(w, "no", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(as.upstream.Close)
	cfg := config.Default()
	u, _ := url.Parse(as.upstream.URL)
	cfg.AutomationHTTPHosts = []string{u.Hostname()}
	// The upstream is on loopback, which http blocks reach only when an operator lists it.
	cfg.Egress = egress.MustParse(u.Hostname())
	if tune != nil {
		tune(&cfg)
	}
	a := composition.New(composition.Deps{DB: db, Config: cfg, Bucket: b, Sealer: sealer, PubSub: ps})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.AutomationWorker().Run(ctx, ps, 200*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("automation worker: %v", err)
		}
	})
	as.stack = serve(t, a)
	key := auth.WithKey(as.admin)
	as.automations = appv1connect.NewAutomationServiceClient(http.DefaultClient, as.rpcURL(), key)
	as.runs = appv1connect.NewAutomationRunServiceClient(http.DefaultClient, as.rpcURL(), key)
	as.webhooks = appv1connect.NewWebhookRegistrationServiceClient(http.DefaultClient, as.rpcURL(), key)
	return as
}

func (as *automationStack) create(t testing.TB, def string) string {
	t.Helper()
	resp, err := as.automations.CreateAutomation(t.Context(), connect.NewRequest(&appv1.CreateAutomationRequest{
		Name: "test", Enabled: true, DefinitionJson: def,
	}))
	if err != nil {
		t.Fatalf("create automation: %v", err)
	}
	return resp.Msg.GetAutomation().GetId()
}

// waitRun polls a run until it is in one of statuses, by default until it ends.
func (as *automationStack) waitRun(t *testing.T, id string, statuses ...string) *appv1.AutomationRun {
	t.Helper()
	if len(statuses) == 0 {
		statuses = []string{"completed", "failed", "filtered", "stopped"}
	}
	var run *appv1.AutomationRun
	testkit.Eventually(t, 30*time.Second, "run "+id+" reaching "+strings.Join(statuses, " or "), func() (bool, string) {
		resp, err := as.runs.GetRun(t.Context(), connect.NewRequest(&appv1.GetRunRequest{RunId: id}))
		if err != nil {
			t.Fatalf("get run: %v", err)
		}
		run = resp.Msg.GetRun()
		return slices.Contains(statuses, run.GetBrief().GetStatus()), "run " + id + " is " + run.GetBrief().GetStatus()
	})
	return run
}

func TestRunNowExecutesCodeAndHTTPBlocksThroughTheWorker(t *testing.T) {
	as := newAutomationStack(t)
	id := as.create(t, `{"version":1,
		"entrypoints":[{"id":"manual","type":"manual"}],
		"inputs":[{"key":"greeting","type":"string","default":"hello"}],
		"blocks":[
			{"id":"shape","type":"code","source":"console.log('shaping'); return {text: inputs.greeting + ' ' + event.name, n: event.n * 2}"},
			{"id":"send","type":"http","method":"POST","url":"`+as.upstream.URL+`/hook","body":{"text":"{{ steps.shape.text }}","n":"{{ steps.shape.n }}"}}]}`)
	resp, err := as.automations.RunNow(t.Context(), connect.NewRequest(&appv1.RunNowRequest{
		AutomationId: id, PayloadJson: ptr(`{"name":"world","n":21}`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	run := as.waitRun(t, resp.Msg.GetRunId())
	if run.GetBrief().GetStatus() != "completed" {
		t.Fatalf("run %s: %s", run.GetBrief().GetStatus(), run.GetBrief().GetError())
	}
	if got := as.lastBody.Load(); got != `{"n":42,"text":"hello world"}` {
		t.Fatalf("upstream got %v", got)
	}
	if len(run.GetSteps()) != 2 || run.GetSteps()[0].GetOutputsJson() != `{"n":42,"text":"hello world"}` {
		t.Fatalf("steps %v", run.GetSteps())
	}
	if run.GetBrief().GetTriggerSource() != "manual" {
		t.Fatalf("trigger source %q", run.GetBrief().GetTriggerSource())
	}
}

func TestDryRunCallsNothingOutside(t *testing.T) {
	as := newAutomationStack(t)
	id := as.create(t, `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[{"id":"send","type":"http","url":"`+as.upstream.URL+`/dry"}]}`)
	resp, err := as.automations.DryRun(t.Context(), connect.NewRequest(&appv1.DryRunRequest{AutomationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	run := as.waitRun(t, resp.Msg.GetRunId())
	if run.GetBrief().GetStatus() != "completed" || !run.GetBrief().GetDryRun() || run.GetSteps()[0].GetStatus() != "simulated" {
		t.Fatalf("dry run %v", run)
	}
	if as.calls.Load() != 0 {
		t.Fatalf("a dry run called the upstream %d times", as.calls.Load())
	}
}

// sign is GitHub's signature of body: sha256=<hex of HMAC-SHA256(secret, body)>.
func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// signedDelivery posts a GitHub-signed delivery to a registration.
func (as *automationStack) signedDelivery(t testing.TB, path, secret, event, guid, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, as.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-Hub-Signature-256", sign(secret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestASignedWebhookRunsOnceHoweverOftenItIsDelivered(t *testing.T) {
	as := newAutomationStack(t)
	id := as.create(t, `{"version":1,
		"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened","filter":"event.pull_request.draft == false"}],
		"instance":{"key":"event.repository.full_name + '#' + string(event.number)"},
		"blocks":[{"id":"send","type":"http","method":"POST","url":"`+as.upstream.URL+`/pr","body":{"number":"{{ event.number }}"}}]}`)
	reg, err := as.webhooks.CreateWebhookRegistration(t.Context(), connect.NewRequest(&appv1.CreateWebhookRegistrationRequest{Name: "acme", Provider: "github"}))
	if err != nil {
		t.Fatal(err)
	}
	path, secret := reg.Msg.GetRegistration().GetUrlPath(), reg.Msg.GetSecret()
	body := `{"action":"opened","number":7,"pull_request":{"draft":false},"repository":{"full_name":"acme/widgets"}}`

	if code := as.signedDelivery(t, path, "wrong", "pull_request", "guid-bad", body); code != http.StatusUnauthorized {
		t.Fatalf("a bad signature answered %d", code)
	}
	for range 3 {
		if code := as.signedDelivery(t, path, secret, "pull_request", "guid-1", body); code != http.StatusAccepted {
			t.Fatalf("delivery answered %d", code)
		}
	}
	// The first delivery runs; the other two are dropped as duplicates.
	var runs []*appv1.AutomationRunBrief
	testkit.Eventually(t, 30*time.Second, "the two deliveries turning into one run and two drops", func() (bool, string) {
		drops, err := as.runs.ListRecentDrops(t.Context(), connect.NewRequest(&appv1.ListRecentDropsRequest{AutomationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		list, err := as.runs.ListRuns(t.Context(), connect.NewRequest(&appv1.ListRunsRequest{AutomationId: id}))
		if err != nil {
			t.Fatal(err)
		}
		runs = list.Msg.GetRuns()
		for _, d := range drops.Msg.GetDrops() {
			if d.GetReason() != "duplicate" {
				t.Fatalf("drop %v", d)
			}
		}
		return len(drops.Msg.GetDrops()) >= 2 && len(runs) >= 1, fmt.Sprintf("%d runs, %d drops", len(runs), len(drops.Msg.GetDrops()))
	})
	if len(runs) != 1 || runs[0].GetDeliveryKey() != "guid-1" || runs[0].GetEventKey() != "github.pull_request.opened" {
		t.Fatalf("runs %v", runs)
	}
	run := as.waitRun(t, runs[0].GetId())
	if run.GetBrief().GetStatus() != "completed" || as.calls.Load() != 1 || as.lastBody.Load() != `{"number":7}` {
		t.Fatalf("run %s (%s); upstream called %d times with %v", run.GetBrief().GetStatus(), run.GetBrief().GetError(), as.calls.Load(), as.lastBody.Load())
	}
	inst, err := as.runs.GetInstance(t.Context(), connect.NewRequest(&appv1.GetInstanceRequest{Id: run.GetBrief().GetInstanceId()}))
	if err != nil || inst.Msg.GetInstance().GetKey() != "acme/widgets#7" {
		t.Fatalf("instance %v (%v)", inst, err)
	}
	samples, err := as.automations.ListEventSamples(t.Context(), connect.NewRequest(&appv1.ListEventSamplesRequest{AutomationId: id}))
	if err != nil || len(samples.Msg.GetSamples()) != 1 {
		t.Fatalf("samples %v (%v)", samples, err)
	}
	catalog, err := as.automations.ListEventCatalog(t.Context(), connect.NewRequest(&appv1.ListEventCatalogRequest{Provider: "github"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range catalog.Msg.GetEvents() {
		if want := e.GetKey() == "github.pull_request.opened"; e.GetObserved() != want {
			t.Fatalf("catalog entry %s observed=%v", e.GetKey(), e.GetObserved())
		}
	}
}

func TestEvalCodeContainsHostileScriptsAndKeepsServing(t *testing.T) {
	as := newAutomationStack(t)
	cases := []struct {
		name, mode, source, input string
		wantValue, wantError      string
		wantLine                  int32
	}{
		{name: "a small script", source: "console.log('hi'); return input.a + 1", input: `{"a":41}`, wantValue: "42"},
		{name: "a thrown error names its line", source: "const x = 1;\nthrow new TypeError('nope')", wantError: "TypeError", wantLine: 2},
		{name: "an infinite loop times out", source: "while (true) {}", wantError: "TimeoutError"},
		{name: "a memory bomb hits the cap", source: "let s = 'x'; while (true) { s += s }", wantError: "MemoryLimitError"},
		{name: "the host is out of reach", source: "return this.constructor.constructor('return process')()", wantError: "ReferenceError"},
		{name: "cel over the input", mode: "cel", source: "input.a * 2", input: `{"a":21}`, wantValue: "42"},
		{name: "cel that does not compile", mode: "cel", source: "input.a +", wantError: "CompileError", wantLine: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := as.automations.EvalCode(t.Context(), connect.NewRequest(&appv1.EvalCodeRequest{Source: tc.source, Mode: tc.mode, InputJson: tc.input}))
			if err != nil {
				t.Fatal(err)
			}
			m := resp.Msg
			if m.GetValueJson() != tc.wantValue || m.GetErrorName() != tc.wantError || (tc.wantLine != 0 && m.GetErrorLine() != tc.wantLine) {
				t.Fatalf("got value %q, error %s %q line %d", m.GetValueJson(), m.GetErrorName(), m.GetErrorMessage(), m.GetErrorLine())
			}
		})
	}
	if _, err := as.automations.EvalCode(t.Context(), connect.NewRequest(&appv1.EvalCodeRequest{Source: "1", Mode: "python"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("an unknown mode: %v", err)
	}
}

func TestTestRenderShowsEveryBlockWithoutSideEffects(t *testing.T) {
	as := newAutomationStack(t)
	id := as.create(t, `{"version":1,
		"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened","filter":"event.number > 0"}],
		"blocks":[
			{"id":"shape","type":"code","source":"return {title: event.title.toUpperCase()}"},
			{"id":"send","type":"http","method":"POST","url":"`+as.upstream.URL+`/x","body":{"t":"{{ steps.shape.title }}"}}]}`)
	resp, err := as.automations.TestRender(t.Context(), connect.NewRequest(&appv1.TestRenderRequest{
		AutomationId: id, Sample: &appv1.TestRenderRequest_PayloadJson{PayloadJson: `{"number":3,"title":"fix it"}`},
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.GetErrors()) != 0 || len(resp.Msg.GetBlocks()) != 3 {
		t.Fatalf("render: %v", resp.Msg)
	}
	var send struct {
		Fields struct{ Body map[string]any }
	}
	if err := json.Unmarshal([]byte(resp.Msg.GetBlocks()[2].GetRenderedJson()), &send); err != nil || send.Fields.Body["t"] != "FIX IT" {
		t.Fatalf("send rendered %s (%v)", resp.Msg.GetBlocks()[2].GetRenderedJson(), err)
	}
	if as.calls.Load() != 0 {
		t.Fatalf("TestRender called the upstream")
	}
}

func TestRunsAreRetriedFromAStepAndStoppedByTheirOwnerOnly(t *testing.T) {
	as := newAutomationStack(t)
	as.failing.Store(true)
	id := as.create(t, `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
		"blocks":[
			{"id":"first","type":"http","url":"`+as.upstream.URL+`/first"},
			{"id":"middle","type":"http","url":"`+as.upstream.URL+`/fail"},
			{"id":"wait","type":"delay","duration":"1h"}]}`)
	start, err := as.automations.RunNow(t.Context(), connect.NewRequest(&appv1.RunNowRequest{AutomationId: id}))
	if err != nil {
		t.Fatal(err)
	}
	failed := as.waitRun(t, start.Msg.GetRunId())
	if failed.GetBrief().GetStatus() != "failed" || !strings.Contains(failed.GetBrief().GetError(), "middle") {
		t.Fatalf("first run %s: %s", failed.GetBrief().GetStatus(), failed.GetBrief().GetError())
	}

	other := auth.WithKey(as.mintKey(t, "other@example.com", false))
	otherRuns := appv1connect.NewAutomationRunServiceClient(http.DefaultClient, as.rpcURL(), other)
	// Another user's runs are not_found to read and to steer (TestSecurityRunOutputsAreTheirAutomationsReaders).
	if _, err := otherRuns.RetryRun(t.Context(), connect.NewRequest(&appv1.RetryRunRequest{RunId: failed.GetBrief().GetId()})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("another user's retry: %v", err)
	}

	as.failing.Store(false)
	callsBefore := as.calls.Load()
	retry, err := as.runs.RetryRun(t.Context(), connect.NewRequest(&appv1.RetryRunRequest{RunId: failed.GetBrief().GetId(), FromStepId: ptr("middle")}))
	if err != nil {
		t.Fatal(err)
	}
	// The retry reuses first's output, calls middle once, and parks on the hour-long delay.
	as.waitRun(t, retry.Msg.GetRunId(), "waiting")
	if n := as.calls.Load() - callsBefore; n != 1 {
		t.Fatalf("the retry made %d upstream calls, want 1 (middle only)", n)
	}
	if _, err := otherRuns.StopRun(t.Context(), connect.NewRequest(&appv1.StopRunRequest{RunId: retry.Msg.GetRunId()})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("another user's stop: %v", err)
	}
	stop, err := as.runs.StopRun(t.Context(), connect.NewRequest(&appv1.StopRunRequest{RunId: retry.Msg.GetRunId(), Reason: ptr("enough")}))
	if err != nil || !stop.Msg.GetSent() {
		t.Fatalf("stop: %v %v", stop, err)
	}
	stopped := as.waitRun(t, retry.Msg.GetRunId())
	if stopped.GetBrief().GetStatus() != "stopped" || stopped.GetSteps()[0].GetStatus() != "succeeded" || stopped.GetSteps()[2].GetStatus() != "stopped" {
		t.Fatalf("stopped run %v", stopped)
	}
	if _, err := as.runs.RetryRun(t.Context(), connect.NewRequest(&appv1.RetryRunRequest{RunId: failed.GetBrief().GetId(), FromStepId: ptr("nope")})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("retry from an unknown step: %v", err)
	}
}

func TestACodeBlockThatDoesNotCompileIsRefusedWithItsLine(t *testing.T) {
	as := newAutomationStack(t)
	_, err := as.automations.CreateAutomation(t.Context(), connect.NewRequest(&appv1.CreateAutomationRequest{
		Name: "broken", DefinitionJson: `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],
			"blocks":[{"id":"shape","type":"code","source":"const a = 1;\nconst b = ;"}]}`,
	}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("create: %v", err)
	}
	var found bool
	for _, d := range err.(*connect.Error).Details() {
		v, derr := d.Value()
		if be, ok := v.(*appv1.BlockError); derr == nil && ok && be.GetBlockId() == "shape" && be.GetField() == "source" && strings.Contains(be.GetMessage(), "2") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no BlockError for shape.source in %v", err)
	}
}

func TestTaskAndPromptBlocksDriveABashAgentThroughAnInstance(t *testing.T) {
	testenv.RequirePlugins(t)
	spans := recordSpans(t)
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	sb.StartHost(t, "host-a")
	ps := testenv.PubSub(t)
	cfg := sb.Config
	cfg.Limits.Automations.TaskPoll = 200 * time.Millisecond
	a := composition.New(composition.Deps{DB: sb.DB, Config: cfg, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image, PubSub: ps})
	runWorkers(t, a, ps, sb.Image)
	s := serve(t, a)
	as := &automationStack{stack: s,
		// A client that carries its trace: the run, its task and the task's session join it.
		automations: appv1connect.NewAutomationServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin), telemetry.Interceptor()),
		runs:        appv1connect.NewAutomationRunServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin)),
	}
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(t.Context(), connect.NewRequest(&appv1.CreateProfileRequest{Name: "shell", ImageId: sb.Image, Harness: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	// The first run starts a task and keeps its session on the instance; the second prompts it.
	id := as.create(t, `{"version":1,
		"entrypoints":[{"id":"manual","type":"manual"}],
		"instance":{"key":"event.ticket"},
		"blocks":[
			{"id":"known","type":"code","source":"return !!(instance.handles && instance.handles.session)"},
			{"id":"start","type":"task","needs":["known"],"profile_id":"`+p.Msg.GetProfile().GetId()+`","prompt":"echo started {{ event.ticket }}","wait":true,"timeout":"2m"},
			{"id":"remember","type":"instance","needs":["start"],"action":"write_handle","handle":"session","value":"{{ steps.start.session_id }}"}]}`)
	ctx, root := otel.Tracer("e2e").Start(t.Context(), "client")
	first, err := as.automations.RunNow(ctx, connect.NewRequest(&appv1.RunNowRequest{AutomationId: id, PayloadJson: ptr(`{"ticket":"T-1"}`)}))
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	run := as.waitRun(t, first.Msg.GetRunId())
	if run.GetBrief().GetStatus() != "completed" || len(run.GetSessionIds()) != 1 {
		t.Fatalf("first run %s (%s), sessions %v", run.GetBrief().GetStatus(), run.GetBrief().GetError(), run.GetSessionIds())
	}
	got := spans.waitTrace(t, root.SpanContext().TraceID(),
		"server svc.app.v1.AutomationService/RunNow",
		"consumer hangar-automation-runs-worker process",
		"server host.v1.HostService/CreateSandbox",
		"server host.v1.HostService/SendPrompt",
	)
	t.Logf("the trace of a run with a task block: %s", strings.Join(got, "; "))
	session := run.GetSessionIds()[0]
	// The run waited for its task's agent to finish, then closed the task: it is completed.
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	closed, err := tasks.ListTasks(t.Context(), connect.NewRequest(&appv1.ListTasksRequest{States: []string{"completed"}}))
	if err != nil || len(closed.Msg.GetTasks()) != 1 || closed.Msg.GetTasks()[0].GetSessions()[0].GetSessionId() != session {
		t.Fatalf("completed tasks after the run: %v, %v", closed, err)
	}

	if _, err := as.automations.SaveVersion(t.Context(), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: `{"version":1,
		"entrypoints":[{"id":"manual","type":"manual"}],
		"instance":{"key":"event.ticket"},
		"blocks":[{"id":"follow_up","type":"prompt","prompt":"echo follow-up for {{ instance.key }}","wait":true}]}`})); err != nil {
		t.Fatal(err)
	}
	second, err := as.automations.RunNow(t.Context(), connect.NewRequest(&appv1.RunNowRequest{AutomationId: id, PayloadJson: ptr(`{"ticket":"T-1"}`), InstanceKey: ptr("T-1")}))
	if err != nil {
		t.Fatal(err)
	}
	run = as.waitRun(t, second.Msg.GetRunId())
	if run.GetBrief().GetStatus() != "completed" || run.GetSteps()[0].GetSessionId() != session {
		t.Fatalf("second run %s (%s), step %v", run.GetBrief().GetStatus(), run.GetBrief().GetError(), run.GetSteps()[0])
	}
	sessions := appv1connect.NewSessionServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	log, err := sessions.GetLog(t.Context(), connect.NewRequest(&appv1.GetLogRequest{SessionId: session}))
	if err != nil {
		t.Fatal(err)
	}
	text, _ := json.Marshal(log.Msg)
	if !strings.Contains(string(text), "started T-1") || !strings.Contains(string(text), "follow-up for T-1") {
		t.Fatalf("the session's log lacks the two turns: %s", text)
	}
}

// runWorkers runs a's automation and image workers on ps until t ends, and enables images:
// with Pub/Sub the API serves ImageService, and sessions start from enabled images only.
func runWorkers(t *testing.T, a *composition.API, ps *pubsub.Client, images ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var g errgroup.Group
	g.Go(func() error { return a.AutomationWorker().Run(ctx, ps, 100*time.Millisecond) })
	g.Go(func() error { return a.ImageWorker().Run(ctx, ps, 100*time.Millisecond) })
	t.Cleanup(func() {
		cancel()
		if err := g.Wait(); err != nil {
			t.Errorf("workers: %v", err)
		}
	})
	for _, image := range images {
		if err := a.Images().EnsureEnabled(t.Context(), image); err != nil {
			t.Fatal(err)
		}
	}
}

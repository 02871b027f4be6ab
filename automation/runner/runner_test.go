package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
)

// queue records what the runner queued, in order.
type queue struct {
	mu  sync.Mutex
	ids []string
}

func (q *queue) Enqueue(_ context.Context, id string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	return nil
}

// effects is the outside world of a run in these tests: secrets from a map, tasks and prompts
// refused (their blocks are tested end to end with real sessions). With flakyTasks, a task
// starts and never finishes, and asking after it fails in a way worth retrying.
type effects struct {
	secrets    map[string]string
	flakyTasks bool
}

func (e effects) StartTask(context.Context, string, string, runner.TaskSpec) (runner.TaskState, error) {
	if e.flakyTasks {
		return runner.TaskState{TaskID: "task_1", Status: "running"}, nil
	}
	return runner.TaskState{}, fmt.Errorf("%w: no tasks here", runner.ErrRefused)
}
func (e effects) TaskState(context.Context, string, string) (runner.TaskState, error) {
	if e.flakyTasks {
		return runner.TaskState{}, errors.New("tasks unreachable")
	}
	return runner.TaskState{}, fmt.Errorf("%w: no tasks here", runner.ErrRefused)
}
func (e effects) CloseTask(context.Context, string, string) (runner.TaskState, error) {
	return runner.TaskState{}, fmt.Errorf("%w: no tasks here", runner.ErrRefused)
}
func (e effects) SendPrompt(context.Context, string, string, string, string) error {
	return fmt.Errorf("%w: no sessions here", runner.ErrRefused)
}
func (e effects) PromptDone(context.Context, string, string, string) (bool, string, error) {
	return false, "", fmt.Errorf("%w: no sessions here", runner.ErrRefused)
}
func (e effects) Secret(_ context.Context, _, name string) (string, error) {
	v, ok := e.secrets[name]
	if !ok {
		return "", fmt.Errorf("%w: no secret %s", runner.ErrRefused, name)
	}
	return v, nil
}

// upstream is a loopback HTTP server whose answers a test scripts; it counts calls per path.
type upstream struct {
	*httptest.Server
	mu     sync.Mutex
	status map[string]int
	calls  map[string]int
	auth   map[string]string
	block  chan struct{}
	// arrived hears of each request to /slow while block holds it.
	arrived chan struct{}
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{status: map[string]int{}, calls: map[string]int{}, auth: map[string]string{}, arrived: make(chan struct{}, 10)}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.calls[r.URL.Path]++
		u.auth[r.URL.Path] = r.Header.Get("Authorization")
		code, block := u.status[r.URL.Path], u.block
		u.mu.Unlock()
		if r.URL.Path == "/slow" && block != nil {
			u.arrived <- struct{}{}
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		if code == 0 {
			code = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/echo") {
			// An echo of the credential it got, in a header and in the body (text or JSON).
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			if r.URL.Path == "/echo" {
				w.Header().Set("Content-Type", "text/plain")
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"you_sent":%q}`, r.Header.Get("Authorization"))
			return
		}
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"path":%q,"n":%d}`, r.URL.Path, 7)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) set(path string, code int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.status[path] = code
}

func (u *upstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[path]
}

type fixture struct {
	runs  *runs.Store
	clock *clock.Fake
	queue *queue
	up    *upstream
	opts  runner.Options
}

func newFixture(t *testing.T) *fixture {
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	up := newUpstream(t)
	host, _ := url.Parse(up.URL)
	return &fixture{
		runs: runs.NewStore(db, c.Now), clock: c, queue: &queue{}, up: up,
		opts: runner.Options{
			Worker: "worker-a", Lease: time.Minute, InlineWait: 50 * time.Millisecond,
			Retry: definition.Retry{MaxAttempts: 3, Backoff: "10ms"},
			Allow: runner.HostPolicy{Hosts: []string{host.Hostname()}},
			// The upstream is on loopback, which only an operator's entry opens.
			Egress: egress.MustParse("127.0.0.0/8"),
		},
	}
}

func (f *fixture) runner(t *testing.T, worker string) *runner.Runner {
	return f.runnerWith(t, worker, effects{secrets: map[string]string{"api_token": "s3cret"}})
}

func (f *fixture) runnerWith(t *testing.T, worker string, e effects) *runner.Runner {
	opts := f.opts
	opts.Worker = worker
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return runner.New(f.runs, env, nil, e, f.queue, f.clock.Now, slog.New(slog.DiscardHandler), opts)
}

// def parses a definition with a manual entrypoint and the given blocks.
func def(t *testing.T, blocks string) definition.Definition {
	t.Helper()
	js := `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],"blocks":` + blocks + `}`
	d, errs := definition.Parse([]byte(js))
	if len(errs) > 0 {
		t.Fatalf("definition: %v", errs)
	}
	return d
}

func (f *fixture) start(t *testing.T, rn *runner.Runner, d definition.Definition, event string, dry bool) *runs.Run {
	t.Helper()
	run, created, err := rn.Start(t.Context(), runner.Start{
		AutomationID: "auto_test", Version: 1, Actor: "user_alice", Definition: d,
		Trigger: runner.Trigger{EntrypointID: "manual", Event: json.RawMessage(event)}, TriggerSource: runs.SourceManual, DryRun: dry,
	})
	if err != nil || !created {
		t.Fatalf("start: created=%v err=%v", created, err)
	}
	return run
}

func (f *fixture) get(t *testing.T, id string) *runs.Run {
	t.Helper()
	r, err := f.runs.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func statuses(r *runs.Run) string {
	var out []string
	for _, s := range r.Steps {
		out = append(out, fmt.Sprintf("%s:%s/%d", s.BlockID, s.Status, s.Attempt))
	}
	return string(r.Status) + " " + strings.Join(out, " ")
}

func TestRunsEndAsTheirBlocksSay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	cases := []struct {
		name, blocks, event, want string
		dry                       bool
		upstreamCalls             int
	}{
		{
			name:   "every block succeeds in order",
			blocks: `[{"id":"check","type":"filter","condition":"event.n > 1"},{"id":"call","type":"http","method":"POST","url":"` + f.up.URL + `/ok","body":{"n":"{{ event.n }}"}}]`,
			event:  `{"n":2}`, want: "completed check:succeeded/1 call:succeeded/1", upstreamCalls: 1,
		},
		{
			name:   "a false filter ends the run filtered and skips the rest",
			blocks: `[{"id":"check","type":"filter","condition":"event.n > 1"},{"id":"call","type":"http","url":"` + f.up.URL + `/never"}]`,
			event:  `{"n":1}`, want: "filtered check:succeeded/1 call:skipped/0",
		},
		{
			name:   "a permanent http failure fails the run without retries",
			blocks: `[{"id":"call","type":"http","url":"` + f.up.URL + `/missing"},{"id":"after","type":"filter","condition":"true"}]`,
			event:  `{}`, want: "failed call:failed/1 after:skipped/0", upstreamCalls: 1,
		},
		{
			name:   "a server error is retried until the attempts run out",
			blocks: `[{"id":"call","type":"http","url":"` + f.up.URL + `/down"}]`,
			event:  `{}`, want: "failed call:failed/3", upstreamCalls: 3,
		},
		{
			name:   "a host off the allow-list is refused",
			blocks: `[{"id":"call","type":"http","url":"http://169.254.169.254/computeMetadata/v1/"}]`,
			event:  `{}`, want: "failed call:failed/1",
		},
		{
			name:   "a dry run records side effects without doing them",
			blocks: `[{"id":"check","type":"filter","condition":"true"},{"id":"call","type":"http","url":"` + f.up.URL + `/dry"}]`,
			event:  `{}`, dry: true, want: "completed check:succeeded/1 call:simulated/1",
		},
		{
			name:   "a template that reads a missing field fails its step",
			blocks: `[{"id":"call","type":"http","url":"` + f.up.URL + `/{{ event.missing }}"}]`,
			event:  `{}`, want: "failed call:failed/1",
		},
	}
	f.up.set("/missing", http.StatusNotFound)
	f.up.set("/down", http.StatusServiceUnavailable)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := f.start(t, rn, def(t, tc.blocks), tc.event, tc.dry)
			if err := rn.Advance(t.Context(), run.ID); err != nil {
				t.Fatal(err)
			}
			got := f.get(t, run.ID)
			if statuses(got) != tc.want {
				t.Fatalf("run = %q, want %q (error %q)", statuses(got), tc.want, got.Error)
			}
			path := ""
			for _, s := range got.Steps {
				if s.BlockType == definition.BlockHTTP && s.Inputs != "" {
					var in struct{ URL string }
					_ = json.Unmarshal([]byte(s.Inputs), &in)
					if u, err := url.Parse(in.URL); err == nil {
						path = u.Path
					}
				}
			}
			if path != "" && f.up.count(path) != tc.upstreamCalls {
				t.Fatalf("upstream %s called %d times, want %d", path, f.up.count(path), tc.upstreamCalls)
			}
		})
	}
}

func TestHTTPBlockSendsSecretHeadersWithoutRecordingThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	run := f.start(t, rn, def(t, `[{"id":"call","type":"http","url":"`+f.up.URL+`/auth","secret_headers":{"Authorization":"api_token"}}]`), `{}`, false)
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	got := f.get(t, run.ID)
	if got.Status != runs.Completed {
		t.Fatalf("run %s: %s", got.Status, got.Error)
	}
	f.up.mu.Lock()
	auth := f.up.auth["/auth"]
	f.up.mu.Unlock()
	if auth != "s3cret" {
		t.Fatalf("upstream saw Authorization %q", auth)
	}
	raw, _ := json.Marshal(got)
	if strings.Contains(string(raw), "s3cret") {
		t.Fatalf("the secret's value is in the run record: %s", raw)
	}
}

// An upstream that echoes the secret header it got (in a header and in its body) must not put
// the value into the run record, where anyone who reads the run sees it.
func TestSecurityAnEchoedSecretHeaderIsNotRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	for _, path := range []string{"/echo", "/echo-json"} {
		run := f.start(t, rn, def(t, `[{"id":"call","type":"http","url":"`+f.up.URL+path+`","secret_headers":{"Authorization":"api_token"}}]`), `{}`, false)
		if err := rn.Advance(t.Context(), run.ID); err != nil {
			t.Fatal(err)
		}
		got := f.get(t, run.ID)
		if got.Status != runs.Completed {
			t.Fatalf("%s: run %s: %s", path, got.Status, got.Error)
		}
		raw, _ := json.Marshal(got)
		if strings.Contains(string(raw), "s3cret") {
			t.Fatalf("%s: the echoed secret's value is in the run record: %s", path, raw)
		}
		if !strings.Contains(string(raw), "[secret api_token]") {
			t.Fatalf("%s: the record does not say where the secret was: %s", path, raw)
		}
	}
}

func TestStepOutputsFeedLaterTemplates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	run := f.start(t, rn, def(t, `[
		{"id":"first","type":"http","url":"`+f.up.URL+`/first"},
		{"id":"second","type":"http","url":"`+f.up.URL+`/second/{{ steps.first.body.n }}","needs":["first"]}]`), `{}`, false)
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, run.ID); got.Status != runs.Completed || f.up.count("/second/7") != 1 {
		t.Fatalf("run %s (%s); /second/7 called %d times", got.Status, got.Error, f.up.count("/second/7"))
	}
}

func TestALongDelayParksTheRunUntilTheSweeperWakesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	run := f.start(t, rn, def(t, `[{"id":"wait","type":"delay","duration":"1h"},{"id":"after","type":"filter","condition":"true"}]`), `{}`, false)
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, run.ID); got.Status != runs.Waiting || !got.WakeAt.Equal(f.clock.Now().Add(time.Hour)) {
		t.Fatalf("after the first pass: %s, wake at %s", statuses(got), got.WakeAt)
	}
	if n, err := rn.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep before the wake time queued %d (%v)", n, err)
	}
	f.clock.Advance(time.Hour)
	if n, err := rn.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep at the wake time queued %d (%v)", n, err)
	}
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, run.ID); statuses(got) != "completed wait:succeeded/1 after:succeeded/1" {
		t.Fatalf("after the wake: %s", statuses(got))
	}
}

func TestAKilledWorkersRunIsFinishedByAnotherFromItsLastStep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.up.block = make(chan struct{})
	a, b := f.runner(t, "worker-a"), f.runner(t, "worker-b")
	run := f.start(t, a, def(t, `[
		{"id":"first","type":"http","url":"`+f.up.URL+`/first"},
		{"id":"slow","type":"http","url":"`+f.up.URL+`/slow"},
		{"id":"last","type":"http","url":"`+f.up.URL+`/last"}]`), `{}`, false)

	// Worker A dies while the second step's request is in flight.
	ctx, kill := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Advance(ctx, run.ID) }()
	<-f.up.arrived
	kill()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("killed worker answered %v", err)
	}
	close(f.up.block)

	// B may not take the run while A's lease holds; once it ran out, B finishes the run
	// without doing the first step again.
	if err := b.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, run.ID); got.Status != runs.Running || got.LeaseOwner != "worker-a" {
		t.Fatalf("B took a leased run: %s owned by %s", got.Status, got.LeaseOwner)
	}
	f.clock.Advance(f.opts.Lease + time.Second)
	if n, _ := b.Sweep(t.Context()); n != 1 {
		t.Fatalf("the sweeper queued %d runs, want the orphaned one", n)
	}
	if err := b.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	got := f.get(t, run.ID)
	if statuses(got) != "completed first:succeeded/1 slow:succeeded/2 last:succeeded/1" {
		t.Fatalf("after takeover: %s (%s)", statuses(got), got.Error)
	}
	if f.up.count("/first") != 1 || f.up.count("/last") != 1 {
		t.Fatalf("first called %d times, last %d times; want once each", f.up.count("/first"), f.up.count("/last"))
	}
}

func TestRetryFromAMiddleStepReusesEarlierOutputs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	f.up.set("/flaky", http.StatusBadRequest)
	run := f.start(t, rn, def(t, `[
		{"id":"first","type":"http","url":"`+f.up.URL+`/first"},
		{"id":"middle","type":"http","url":"`+f.up.URL+`/flaky"},
		{"id":"last","type":"http","url":"`+f.up.URL+`/last/{{ steps.first.body.n }}"}]`), `{}`, false)
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, run.ID); got.Status != runs.Failed {
		t.Fatalf("first run: %s", statuses(got))
	}
	failed := f.get(t, run.ID)
	if _, err := rn.Retry(t.Context(), failed, "last"); !errors.Is(err, runner.ErrNotRetryable) {
		t.Fatalf("retry from a step after one that never succeeded: %v", err)
	}
	f.up.set("/flaky", http.StatusOK)
	retry, err := rn.Retry(t.Context(), failed, "middle")
	if err != nil {
		t.Fatal(err)
	}
	if err := rn.Advance(t.Context(), retry.ID); err != nil {
		t.Fatal(err)
	}
	got := f.get(t, retry.ID)
	if statuses(got) != "completed first:succeeded/1 middle:succeeded/1 last:succeeded/1" || got.RetryOf != run.ID || got.TriggerSource != runs.SourceRetry {
		t.Fatalf("retry: %s, retry of %q, source %q", statuses(got), got.RetryOf, got.TriggerSource)
	}
	if f.up.count("/first") != 1 || f.up.count("/last/7") != 1 {
		t.Fatalf("first called %d times (want 1: reused), last/7 %d times", f.up.count("/first"), f.up.count("/last/7"))
	}
	if _, err := rn.Retry(t.Context(), failed, "nope"); !errors.Is(err, runner.ErrNotRetryable) {
		t.Fatalf("retry from an unknown step: %v", err)
	}
}

func TestAParkedRetryIsANewAttemptAndTheAttemptsRunOut(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runnerWith(t, "worker-a", effects{flakyTasks: true})
	run := f.start(t, rn, def(t, `[{"id":"work","type":"task","profile_id":"prof_x","prompt":"go","wait":true,
		"retry":{"max_attempts":2,"backoff":"1h"}}]`), `{}`, false)
	// Each pass starts the task or asks after it, then parks: on the poll or on the hour-long
	// backoff after the question failed. The second failed question is the last attempt's.
	want := []string{
		"waiting work:waiting/1", // the task started; the step polls it
		"waiting work:waiting/1", // the poll failed; backing off
		"waiting work:waiting/2", // the second attempt found its task; polling again
		"failed work:failed/2",   // that poll failed too, and no attempt is left
	}
	for i, w := range want {
		if err := rn.Advance(t.Context(), run.ID); err != nil {
			t.Fatal(err)
		}
		got := f.get(t, run.ID)
		if statuses(got) != w {
			t.Fatalf("pass %d: %s, want %s", i+1, statuses(got), w)
		}
		if !got.WakeAt.IsZero() {
			f.clock.Advance(got.WakeAt.Sub(f.clock.Now()))
		}
	}
}

func TestStopEndsAParkedRunAtOnceAndAnEndedOneNot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	run := f.start(t, rn, def(t, `[{"id":"wait","type":"delay","duration":"1h"},{"id":"after","type":"filter","condition":"true"}]`), `{}`, false)
	if err := rn.Advance(t.Context(), run.ID); err != nil {
		t.Fatal(err)
	}
	if sent, err := rn.Stop(t.Context(), run.ID, "no longer needed"); err != nil || !sent {
		t.Fatalf("stop: sent=%v err=%v", sent, err)
	}
	got := f.get(t, run.ID)
	if statuses(got) != "stopped wait:stopped/1 after:skipped/0" || !strings.Contains(got.Error, "no longer needed") {
		t.Fatalf("stopped run: %s (%s)", statuses(got), got.Error)
	}
	if sent, err := rn.Stop(t.Context(), run.ID, ""); err != nil || sent {
		t.Fatalf("second stop: sent=%v err=%v", sent, err)
	}
}

func TestStartingTheSameRunIDTwiceMakesOneRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rn := f.runner(t, "worker-a")
	st := runner.Start{ID: runner.RunID("auto_test", "delivery-1"), AutomationID: "auto_test", Version: 1,
		Definition: def(t, `[{"id":"check","type":"filter","condition":"true"}]`), Trigger: runner.Trigger{Event: json.RawMessage(`{}`)}}
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := rn.Start(t.Context(), st); err != nil {
				t.Error(err)
			} else if ok {
				created.Add(1)
			}
		}()
	}
	wg.Wait()
	if created.Load() != 1 {
		t.Fatalf("%d starts created the run, want 1", created.Load())
	}
}

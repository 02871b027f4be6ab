package dispatch_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/dispatch"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/ids"
)

type fixture struct {
	automations *records.Store
	runs        *runs.Store
	clock       *clock.Fake
	runner      *runner.Runner
	env         *expr.Env
}

func newFixture(t testing.TB) *fixture {
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(time.Date(2026, 11, 23, 12, 0, 30, 0, time.UTC))
	rs := runs.NewStore(db, c.Now)
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rn := runner.New(rs, env, nil, nil, nil, c.Now, slog.New(slog.DiscardHandler), runner.Options{Worker: "w"})
	return &fixture{automations: records.NewStore(db, c.Now), runs: rs, clock: c, runner: rn, env: env}
}

func (f *fixture) dispatcher(concurrency int) *dispatch.Dispatcher {
	return f.dispatcherWithAdmins(concurrency, nil)
}

func (f *fixture) dispatcherWithAdmins(concurrency int, admin func(context.Context, string) (bool, error)) *dispatch.Dispatcher {
	return dispatch.New(f.automations, f.runs, f.runner, f.env, definition.Validator{Exprs: f.env}, f.clock.Now, slog.New(slog.DiscardHandler), concurrency, admin)
}

// automation stores an automation of the definition JSON.
func (f *fixture) automation(t testing.TB, enabled bool, defJSON, settingsJSON string) *records.AutomationRecord {
	t.Helper()
	def, errs := definition.Parse([]byte(defJSON))
	if len(errs) > 0 {
		t.Fatalf("definition: %v", errs)
	}
	r := &records.AutomationRecord{
		ID: ids.New(records.IDPrefix), Kind: records.KindCustom, Enabled: enabled, CreatedBy: "user_alice",
		InputsJSON: "{}", BlockOverridesJSON: "{}", SettingsJSON: settingsJSON,
	}
	r.SetName("test")
	r.SetVersion(records.VersionRecord{Number: 1, DefinitionJSON: defJSON, CreatedBy: "user_alice"}, def)
	if err := r.Reschedule(f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.automations.Create(t.Context(), r, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func delivery(key, payload string) triggers.Delivery {
	return triggers.Delivery{
		RegistrationID: "whk_test", RegistrationOwner: "user_alice", Provider: triggers.ProviderGitHub, EventKey: "github.pull_request.opened",
		DeliveryKey: key, Payload: json.RawMessage(payload), ReceivedAt: time.Now().UTC(),
	}
}

const prOpened = `{"version":1,
	"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened","filter":"event.pull_request.draft == false"}],
	"blocks":[{"id":"check","type":"filter","condition":"true"}]}`

func (f *fixture) dropReasons(t *testing.T, automationID string) []string {
	t.Helper()
	drops, err := f.runs.Drops(t.Context(), automationID, 50)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range drops {
		out = append(out, d.Reason)
	}
	sort.Strings(out)
	return out
}

func TestTheSameDeliveryThreeTimesStartsOneRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, prOpened, "{}")
	d := f.dispatcher(10)
	var runIDs []string
	for range 3 {
		out, err := d.Deliver(t.Context(), delivery("guid-1", `{"pull_request":{"draft":false,"number":1}}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 {
			t.Fatalf("outcomes %+v", out)
		}
		if out[0].RunID != "" {
			runIDs = append(runIDs, out[0].RunID)
		}
	}
	if len(runIDs) != 1 {
		t.Fatalf("runs started: %v, want one", runIDs)
	}
	if got := f.dropReasons(t, a.ID); len(got) != 2 || got[0] != runs.DropDuplicate || got[1] != runs.DropDuplicate {
		t.Fatalf("drops %v, want two duplicates", got)
	}
	samples, err := f.runs.Samples(t.Context(), []string{"github.pull_request.opened"}, runs.AnyOwner, 10)
	if err != nil || len(samples) != 1 {
		t.Fatalf("samples %d (%v), want the one payload kept once", len(samples), err)
	}
	observed, err := f.runs.Observed(t.Context(), []string{"github.pull_request.opened", "github.push"})
	if err != nil || !observed["github.pull_request.opened"] || observed["github.push"] {
		t.Fatalf("observed %v (%v)", observed, err)
	}
}

func TestEventsThatMustNotRunAreDroppedWithAReason(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, payload, settings string
		enabled                 bool
		busy                    bool
		want                    string
	}{
		{name: "a disabled automation", payload: `{"pull_request":{"draft":false}}`, settings: "{}", want: runs.DropDisabled},
		{name: "a payload that is not an object", payload: `[1,2]`, settings: "{}", enabled: true, want: runs.DropBadPayload},
		{name: "a filter that cannot evaluate", payload: `{"other":1}`, settings: "{}", enabled: true, want: runs.DropBadPayload},
		{name: "over the concurrency limit", payload: `{"pull_request":{"draft":false}}`, settings: `{"concurrency_limit":1}`, enabled: true, busy: true, want: runs.DropConcurrency},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			a := f.automation(t, tc.enabled, prOpened, tc.settings)
			d := f.dispatcher(10)
			if tc.busy {
				if out, err := d.Deliver(t.Context(), delivery("first", tc.payload)); err != nil || out[0].RunID == "" {
					t.Fatalf("first delivery: %+v %v", out, err)
				}
			}
			out, err := d.Deliver(t.Context(), delivery("guid-x", tc.payload))
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 || out[0].Dropped != tc.want || out[0].RunID != "" {
				t.Fatalf("outcome %+v, want dropped %s", out, tc.want)
			}
			if got := f.dropReasons(t, a.ID); len(got) != 1 || got[0] != tc.want {
				t.Fatalf("recorded drops %v", got)
			}
		})
	}
}

func TestAFilteredEventIsCountedNotRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, prOpened, "{}")
	out, err := f.dispatcher(10).Deliver(t.Context(), delivery("draft-1", `{"pull_request":{"draft":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !out[0].Filtered || out[0].RunID != "" {
		t.Fatalf("outcome %+v", out)
	}
	filtered, err := f.runs.FilteredSince(t.Context(), a.ID, time.Time{}, 10)
	if err != nil || len(filtered) != 1 || filtered[0].EntrypointID != "opened" {
		t.Fatalf("filtered %+v (%v)", filtered, err)
	}
}

func TestEventsWithOneKeyShareAnInstanceUntilItCloses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, `{"version":1,
		"entrypoints":[{"id":"opened","type":"event","event_key":"github.pull_request.opened"}],
		"instance":{"key":"event.repository.full_name + '#' + string(event.number)"},
		"blocks":[{"id":"check","type":"filter","condition":"true"}]}`, "{}")
	d := f.dispatcher(10)
	instanceOf := func(key, payload string) (string, dispatch.Outcome) {
		t.Helper()
		out, err := d.Deliver(t.Context(), delivery(key, payload))
		if err != nil || len(out) != 1 {
			t.Fatalf("deliver %s: %+v %v", key, out, err)
		}
		if out[0].RunID == "" {
			return "", out[0]
		}
		run, err := f.runs.Get(t.Context(), out[0].RunID)
		if err != nil {
			t.Fatal(err)
		}
		return run.InstanceID, out[0]
	}
	first, _ := instanceOf("d1", `{"number":7,"repository":{"full_name":"acme/widgets"}}`)
	second, _ := instanceOf("d2", `{"number":7,"repository":{"full_name":"acme/widgets"}}`)
	other, _ := instanceOf("d3", `{"number":8,"repository":{"full_name":"acme/widgets"}}`)
	if first == "" || first != second || other == first {
		t.Fatalf("instances: %q %q %q; want the first two equal and the third apart", first, second, other)
	}
	inst, err := f.runs.Instance(t.Context(), first)
	if err != nil || inst.Key != "acme/widgets#7" || inst.Status != runs.InstanceOpen {
		t.Fatalf("instance %+v (%v)", inst, err)
	}
	if closed, err := f.runs.CloseInstance(t.Context(), first, "merged"); err != nil || !closed {
		t.Fatalf("close: %v %v", closed, err)
	}
	if id, out := instanceOf("d4", `{"number":7,"repository":{"full_name":"acme/widgets"}}`); id != "" || out.Dropped != runs.DropInstanceClosed {
		t.Fatalf("an event for a closed instance: %+v", out)
	}
	list, err := f.runs.ListInstances(t.Context(), a.ID, false, 10)
	if err != nil || len(list) != 1 || list[0].ID != other {
		t.Fatalf("open instances %+v (%v)", list, err)
	}
}

func TestTwoSchedulersFireEachMinuteOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, `{"version":1,
		"entrypoints":[{"id":"every_minute","type":"schedule","cron":"* * * * *"}],
		"blocks":[{"id":"check","type":"filter","condition":"true"}]}`, "{}")
	if want := time.Date(2026, 11, 23, 12, 1, 0, 0, time.UTC); !a.NextFireAt.Equal(want) {
		t.Fatalf("next fire %s, want %s", a.NextFireAt, want)
	}
	one, two := f.dispatcher(10), f.dispatcher(10)
	fireBoth := func() []string {
		var mu sync.Mutex
		var all []string
		var wg sync.WaitGroup
		for _, d := range []*dispatch.Dispatcher{one, two} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				started, err := d.Fire(context.Background())
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				all = append(all, started...)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return all
	}
	if got := fireBoth(); len(got) != 0 {
		t.Fatalf("fired before the minute: %v", got)
	}
	for minute := 1; minute <= 3; minute++ {
		f.clock.Advance(time.Minute)
		got := fireBoth()
		if len(got) != 1 {
			t.Fatalf("minute %d: runs %v, want exactly one", minute, got)
		}
		rec, err := f.automations.Get(t.Context(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		fired := time.Date(2026, 11, 23, 12, minute, 0, 0, time.UTC)
		if !rec.LastFiredAt.Equal(fired) || !rec.NextFireAt.Equal(fired.Add(time.Minute)) {
			t.Fatalf("minute %d: last fired %s, next %s", minute, rec.LastFiredAt, rec.NextFireAt)
		}
		run, err := f.runs.Get(t.Context(), got[0])
		if err != nil || run.TriggerSource != runs.SourceSchedule || run.EventKey != catalog.ScheduleFired {
			t.Fatalf("run %+v (%v)", run, err)
		}
	}
}

func TestSecurityAReplayedBodyUnderANewDeliveryIDRunsOncePerDedupeWindow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.automation(t, true, prOpened, `{"dedupe_window":"1h"}`)
	d := f.dispatcher(10)
	body := `{"pull_request":{"draft":false}}`
	start := time.Date(2026, 11, 23, 12, 59, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		deliveryKey string
		after       time.Duration
		wantRun     bool
	}{
		{"the first delivery runs", "d-1", 0, true},
		{"GitHub's redelivery of it is a duplicate", "d-1", 5 * time.Minute, false},
		// 13:01 is in another clock hour than 12:59: the window slides, it is not aligned.
		{"the body under a new delivery id within the window is a replay", "d-forged", 2 * time.Minute, false},
		{"another new id later within the window too", "d-forged-2", 59 * time.Minute, false},
		{"the body after the window is a new event", "d-2", 61 * time.Minute, true},
		{"the first delivery id is remembered for good", "d-1", 200 * time.Hour, false},
	} {
		del := delivery(tc.deliveryKey, body)
		del.BodyKey = "sha256:body"
		del.ReceivedAt = start.Add(tc.after)
		out, err := d.Deliver(t.Context(), del)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := out[0].RunID != ""; got != tc.wantRun {
			t.Fatalf("%s: outcome %+v, want a run %v", tc.name, out[0], tc.wantRun)
		}
	}
}

func TestTheSettingsRetryPolicyIsEveryBlocksDefault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, `{"version":1,"entrypoints":[{"id":"m","type":"manual"}],
		"blocks":[{"id":"a","type":"filter","condition":"true"},
		          {"id":"b","type":"filter","condition":"true","retry":{"max_attempts":1}}]}`,
		`{"retry":{"max_attempts":5,"backoff":"3s"}}`)
	def, _, err := dispatch.Effective(definition.Validator{}, a)
	if err != nil {
		t.Fatal(err)
	}
	if r := def.Blocks[0].Retry; r == nil || r.MaxAttempts != 5 || r.Backoff != "3s" {
		t.Fatalf("block a retry %+v, want the settings'", r)
	}
	if r := def.Blocks[1].Retry; r == nil || r.MaxAttempts != 1 {
		t.Fatalf("block b retry %+v, want its own", r)
	}
}

func TestAGenericWebhookEventIsTheRequest(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.automation(t, true, `{"version":1,
		"entrypoints":[{"id":"ci","type":"event","event_key":"webhook.hook_ci","filter":"event.query.source == 'ci' && event.body.build.state == 'failed'"}],
		"blocks":[{"id":"check","type":"filter","condition":"true"}]}`, "{}")
	del := triggers.Delivery{
		RegistrationID: "hook_ci", RegistrationOwner: "user_alice", Provider: triggers.ProviderWebhook, EventKey: "webhook.hook_ci", DeliveryKey: "b-1",
		Payload: json.RawMessage(`{"build":{"state":"failed"}}`), Headers: map[string]string{"content-type": "application/json"},
		Query: map[string]string{"source": "ci"}, ReceivedAt: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC),
	}
	out, err := f.dispatcher(10).Deliver(t.Context(), del)
	if err != nil || len(out) != 1 || out[0].RunID == "" {
		t.Fatalf("outcome %+v (%v)", out, err)
	}
	run, err := f.runs.Get(t.Context(), out[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	var trigger struct{ Event map[string]any }
	if err := json.Unmarshal([]byte(run.Trigger), &trigger); err != nil {
		t.Fatal(err)
	}
	ev := trigger.Event
	if ev["registration_id"] != "hook_ci" || ev["delivery_id"] != "b-1" || ev["method"] != "POST" ||
		ev["content_type"] != "application/json" || ev["received_at"] != "2026-11-23T12:00:00Z" {
		t.Fatalf("event %v", ev)
	}
}

// GitHub event keys are shared by every GitHub registration: a delivery through bob's
// registration reaches alice's automation only while alice is an admin, and leaves no trace
// (run or drop) on it otherwise.
func TestADeliveryReachesOnlyAutomationsWhoseOwnerReadsTheRegistration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.automation(t, true, prOpened, "{}")
	for _, tc := range []struct {
		name      string
		owner     string
		aliceIsAn bool
		want      int
	}{
		{"through the owner's own registration", "user_alice", false, 1},
		{"through another user's registration", "user_bob", false, 0},
		{"through another user's registration, to an admin's automation", "user_bob", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := f.dispatcherWithAdmins(10, func(_ context.Context, user string) (bool, error) {
				return user == "user_alice" && tc.aliceIsAn, nil
			})
			del := delivery("guid-"+tc.name, `{"pull_request":{"draft":false,"number":1}}`)
			del.RegistrationOwner = tc.owner
			out, err := d.Deliver(t.Context(), del)
			if err != nil || len(out) != tc.want {
				t.Fatalf("outcomes %+v (%v), want %d", out, err, tc.want)
			}
		})
	}
	if got := f.dropReasons(t, a.ID); len(got) != 0 {
		t.Fatalf("drops %v, want none", got)
	}
}

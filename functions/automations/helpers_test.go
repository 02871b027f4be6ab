package automations

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
)

// t0 is a Saturday, 09:00 UTC.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	alice = "user_alice"
	bob   = "user_bob"
	admin = "user_root"
)

// Definitions the tests use.
const (
	// eventDef starts on an event and declares a required string input.
	eventDef = `{"version": 1,
		"entrypoints": [{"id": "opened", "type": "event", "event_key": "github.issues.opened"}],
		"inputs": [{"key": "label", "type": "string", "required": true}],
		"blocks": [{"id": "only_bugs", "type": "filter", "condition": "event.issue.title != ''"}]}`
	// scheduleDef fires at 10:00 every day.
	scheduleDef = `{"version": 1,
		"entrypoints": [{"id": "daily", "type": "schedule", "cron": "0 10 * * *"}],
		"blocks": [{"id": "hello", "type": "code", "source": "return 1"}]}`
	// badBlockDef has a block of a type that does not exist.
	badBlockDef = `{"version": 1,
		"entrypoints": [{"id": "go", "type": "manual"}],
		"blocks": [{"id": "ok", "type": "code", "source": "return 1"}, {"id": "weird", "type": "teleport"}]}`
)

type fixture struct {
	svc   *Service
	clock *clock.Fake
}

func newFixture(t *testing.T) fixture {
	return newFixtureWith(t, config.Default().Limits, nil)
}

func newFixtureWith(t *testing.T, lim config.Limits, stats RunStats) fixture {
	t.Helper()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(t0)
	return fixture{svc: New(Deps{DB: db, Clock: c, Limits: lim, Validator: testValidator(t), RunStats: stats}), clock: c}
}

// testValidator checks expressions with the real expression language and crons with the real
// parser.
func testValidator(t *testing.T) definition.Validator {
	t.Helper()
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Validator(env)
}

// as is a request context for a caller; admin is the admin.
func as(t *testing.T, userID string) context.Context {
	return auth.WithPrincipal(t.Context(), auth.Principal{UserID: userID, Admin: userID == admin})
}

func (f fixture) create(t *testing.T, ctx context.Context, req *appv1.CreateAutomationRequest) *appv1.Automation {
	t.Helper()
	resp, err := f.svc.CreateAutomation(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("create %q: %v", req.GetName(), err)
	}
	return resp.Msg.GetAutomation()
}

// createEvent is alice's event automation with its input set.
func (f fixture) createEvent(t *testing.T, name string, enabled bool) *appv1.Automation {
	return f.create(t, as(t, alice), &appv1.CreateAutomationRequest{
		Name: name, Enabled: enabled, DefinitionJson: eventDef, InputsJson: `{"label": "bug"}`,
	})
}

// createSchedule is alice's schedule automation.
func (f fixture) createSchedule(t *testing.T, name string, enabled bool) *appv1.Automation {
	return f.create(t, as(t, alice), &appv1.CreateAutomationRequest{Name: name, Enabled: enabled, DefinitionJson: scheduleDef})
}

func (f fixture) get(t *testing.T, id string) *appv1.Automation {
	t.Helper()
	resp, err := f.svc.GetAutomation(as(t, bob), connect.NewRequest(&appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: id}}))
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return resp.Msg.GetAutomation()
}

// blockErrors returns the BlockError details of err.
func blockErrors(t *testing.T, err error) []*appv1.BlockError {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is not a Connect error", err)
	}
	var out []*appv1.BlockError
	for _, d := range ce.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("decode error detail: %v", err)
		}
		if b, ok := v.(*appv1.BlockError); ok {
			out = append(out, b)
		}
	}
	return out
}

// hasBlockError reports whether errs name block and a field starting with field.
func hasBlockError(errs []*appv1.BlockError, block, field string) bool {
	for _, e := range errs {
		if e.GetBlockId() == block && strings.HasPrefix(e.GetField(), field) {
			return true
		}
	}
	return false
}

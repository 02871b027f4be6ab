package automations

import (
	"context"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/automation/runner"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
)

// drafts records the draft tasks the service asks TaskService for.
type drafts struct {
	mu    sync.Mutex
	specs []runner.TaskSpec
}

func (d *drafts) StartTask(_ context.Context, actor, _ string, spec runner.TaskSpec) (runner.TaskState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.specs = append(d.specs, spec)
	return runner.TaskState{TaskID: "task_1", SessionID: "sess_for_" + actor}, nil
}

func TestDraftAutomationIsIdempotentOnItsKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := &drafts{}
	f.svc.d.Drafts = d
	req := &appv1.DraftAutomationRequest{Prompt: "Label new bug reports\nwith care", ProfileId: "prof_1", IdempotencyKey: "k1", Harness: proto.String("bash")}
	first, err := f.svc.DraftAutomation(as(t, alice), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	again, err := f.svc.DraftAutomation(as(t, alice), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Msg.GetCreated() || again.Msg.GetCreated() || again.Msg.GetAutomationId() != first.Msg.GetAutomationId() ||
		again.Msg.GetSessionId() != "sess_for_"+alice {
		t.Fatalf("first %v, again %v", first.Msg, again.Msg)
	}
	if len(d.specs) != 1 {
		t.Fatalf("%d agents started, want 1", len(d.specs))
	}
	spec := d.specs[0]
	if spec.Type != "draft" || spec.ProfileID != "prof_1" || spec.Harness != "bash" ||
		!strings.Contains(spec.Prompt, first.Msg.GetAutomationId()) || !strings.Contains(spec.Prompt, "github.pull_request.opened") {
		t.Fatalf("draft task %+v", spec)
	}
	a := f.get(t, first.Msg.GetAutomationId())
	if a.GetKind() != "draft" || a.GetEnabled() || a.GetDraftSessionId() != "sess_for_"+alice || a.GetName() != "Draft: Label new bug reports" {
		t.Fatalf("draft automation %v", a)
	}
	// Another caller's same key is another draft.
	other, err := f.svc.DraftAutomation(as(t, bob), connect.NewRequest(req))
	if err != nil || !other.Msg.GetCreated() || other.Msg.GetAutomationId() == first.Msg.GetAutomationId() {
		t.Fatalf("bob's draft %v (%v)", other, err)
	}
}

func TestDraftAutomationNeedsAPromptAndAProfile(t *testing.T) {
	t.Parallel()
	testenv.RequireEmulators(t)
	f := newFixtureWith(t, config.Default().Limits, nil)
	f.svc.d.Drafts = &drafts{}
	_, err := f.svc.DraftAutomation(as(t, alice), connect.NewRequest(&appv1.DraftAutomationRequest{}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
	if got := strings.Join(testenv.ViolatedFields(t, err), ","); got != "prompt,profile_id" {
		t.Fatalf("violations %s", got)
	}
}

func TestDraftAutomationCutsALongPromptToADescriptionByCharacters(t *testing.T) {
	t.Parallel()
	lim := config.Default().Limits
	lim.Automations.DescriptionLen = 10
	f := newFixtureWith(t, lim, nil)
	f.svc.d.Drafts = &drafts{}
	// Three bytes a character: a cut by bytes would split one.
	resp, err := f.svc.DraftAutomation(as(t, alice), connect.NewRequest(&appv1.DraftAutomationRequest{
		Prompt: strings.Repeat("€", 25), ProfileId: "prof_1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, resp.Msg.GetAutomationId()).GetDescription(); got != strings.Repeat("€", 10) {
		t.Fatalf("description %q, want the prompt's first 10 characters", got)
	}
}

package automations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/automation/runner"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// Drafter starts the agent that writes a draft automation: a task of type "draft" from a
// profile; the composition wires TaskService in.
type Drafter interface {
	StartTask(ctx context.Context, actor, requestID string, spec runner.TaskSpec) (runner.TaskState, error)
}

// draftDefinition is a draft's version 1: valid, manual, and doing nothing until the agent
// saves the definition it wrote.
const draftDefinition = `{"version":1,"entrypoints":[{"id":"manual","type":"manual"}],"blocks":[{"id":"start","type":"filter","condition":"true"}]}`

// DraftAutomation creates a disabled draft automation and a session whose agent is asked to
// write it, given the definition reference and the event catalogs. The same idempotency_key
// from the same caller answers the same draft (created false) without starting another agent.
//
// The agent's task starts before the draft is stored, so a task TaskService refuses (a profile
// the caller may not use, a secret or harness refused) is that refusal with nothing written;
// the task's request id is the draft's id, so a retry finds the same task.
func (s *Service) DraftAutomation(ctx context.Context, req *connect.Request[appv1.DraftAutomationRequest]) (*connect.Response[appv1.DraftAutomationResponse], error) {
	m := req.Msg
	var p problems
	if strings.TrimSpace(m.GetPrompt()) == "" {
		p.Add("prompt", "is required: say what the automation should do")
	}
	if m.GetProfileId() == "" {
		p.Add("profile_id", "is required: the draft's agent runs in a session of this profile")
	}
	if len(m.GetIdempotencyKey()) > 200 {
		p.Add("idempotency_key", "is longer than 200 characters")
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	if s.d.Drafts == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("drafting needs sessions, which are not configured here"))
	}
	caller, _ := auth.Caller(ctx)
	id := ids.New(records.IDPrefix)
	if key := m.GetIdempotencyKey(); key != "" {
		id = ids.FromKey(records.IDPrefix, caller.UserID+"\x00"+key)
	}
	rec, err := s.store.Get(ctx, id)
	switch {
	case errors.Is(err, records.ErrNotFound):
		return s.newDraft(ctx, id, m)
	case err != nil:
		return nil, err
	case rec.CreatedBy != caller.UserID:
		return nil, apierr.NotFound("draft", m.GetIdempotencyKey())
	}
	if rec.DraftSessionID == "" {
		// A draft stored before its agent started (as drafts once were) gets its agent now.
		sid, err := s.startDrafter(ctx, id, rec.Name, m)
		if err != nil {
			return nil, err
		}
		if rec, err = s.store.Update(ctx, id, func(r *records.AutomationRecord) error {
			r.DraftSessionID = sid
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&appv1.DraftAutomationResponse{AutomationId: rec.ID, SessionId: rec.DraftSessionID}), nil
}

// startDrafter starts the agent that writes draft id, answering its session; the task's request
// id is id, so every attempt for one draft finds the same task.
func (s *Service) startDrafter(ctx context.Context, id, name string, m *appv1.DraftAutomationRequest) (string, error) {
	caller, _ := auth.Caller(ctx)
	st, err := s.d.Drafts.StartTask(ctx, caller.UserID, id, runner.TaskSpec{
		Type: "draft", ProfileID: m.GetProfileId(), Title: "Draft automation: " + name,
		Prompt: draftPrompt(id, m.GetPrompt()), Harness: m.GetHarness(), Model: m.GetModel(),
		ModelRouter: m.GetModelRouter(), Effort: m.GetEffort(), HarnessMode: m.GetHarnessMode(),
	})
	if err != nil {
		return "", fmt.Errorf("start the agent of draft %s: %w", id, err)
	}
	return st.SessionID, nil
}

// newDraft starts draft id's agent, then stores the draft with its session. The limit is
// checked first so that a full organisation starts no agent (Create counts again, and holds
// it); a concurrent call with the same key that stored the draft first is answered its draft.
func (s *Service) newDraft(ctx context.Context, id string, m *appv1.DraftAutomationRequest) (*connect.Response[appv1.DraftAutomationResponse], error) {
	def, errs := definition.Parse([]byte(draftDefinition))
	if len(errs) > 0 {
		return nil, fmt.Errorf("draft definition: %v", errs)
	}
	if n, err := s.store.CountActive(ctx); err != nil {
		return nil, err
	} else if n >= s.lim().Max {
		return nil, apierr.ResourceExhausted("the organisation has %d automations, the most allowed; archive one first", s.lim().Max)
	}
	caller, _ := auth.Caller(ctx)
	now := s.d.Clock.Now()
	rec := &records.AutomationRecord{
		ID: id, Kind: records.KindDraft, CreatedBy: caller.UserID, CreatedAt: now,
		Description: m.GetPrompt(), InputsJSON: "{}", BlockOverridesJSON: "{}", SettingsJSON: "{}",
	}
	rec.SetName(draftName(m.GetPrompt(), s.lim().NameLen))
	rec.SetVersion(records.VersionRecord{Number: 1, DefinitionJSON: draftDefinition, CreatedBy: caller.UserID, CreatedAt: now}, def)
	// Cut by characters, as descriptions are counted: a cut inside a character is not UTF-8,
	// which Firestore refuses.
	if r := []rune(rec.Description); len(r) > s.lim().DescriptionLen {
		rec.Description = string(r[:s.lim().DescriptionLen])
	}
	sid, err := s.startDrafter(ctx, id, rec.Name, m)
	if err != nil {
		return nil, err
	}
	rec.DraftSessionID = sid
	if err := s.insert(ctx, rec); store.IsAlreadyExists(err) {
		if rec, err = s.store.Get(ctx, id); err != nil {
			return nil, err
		}
		return connect.NewResponse(&appv1.DraftAutomationResponse{AutomationId: rec.ID, SessionId: rec.DraftSessionID}), nil
	} else if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DraftAutomationResponse{AutomationId: rec.ID, SessionId: rec.DraftSessionID, Created: true}), nil
}

// draftName is the prompt's first line, shortened to fit a name.
func draftName(prompt string, limit int) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	limit = min(limit, 60)
	if utf8.RuneCountInString(line) > limit {
		line = string([]rune(line)[:limit-1]) + "…"
	}
	return "Draft: " + line
}

// draftPrompt is what the drafting agent is told: the goal, where to save, and the reference
// it needs to write a valid definition.
func draftPrompt(automationID, goal string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Write a Hangar automation definition (definition_json, version %d) for this goal:\n\n%s\n\n", definition.Version, goal)
	fmt.Fprintf(&b, "Write the definition, one JSON object, to %s in this sandbox (create the directory). "+
		"Its owner reviews it there and saves it as a new version of automation %s "+
		"(`hangar automations draft-save %s`), then enables it.\n\n", httpapi.AutomationDraftFile, automationID, automationID)
	b.WriteString("## Blocks\n\n")
	b.WriteString(definition.BlockReference())
	b.WriteString("\n## Events\n\n")
	for _, p := range catalog.Providers() {
		for _, ev := range p.Events {
			if !ev.Hidden {
				fmt.Fprintf(&b, "- `%s`: %s\n", ev.Key, ev.Label)
			}
		}
	}
	return b.String()
}

// Package automations serves AutomationService: automations, their immutable versions, their
// inputs, block overrides and settings, and their state (enabled, archived). Records live in
// automation/records; runs, samples and catalogs are the run side's.
//
// Access: automations are the organisation's, shared like profiles. Every caller may list and
// read every automation and create new ones; only an automation's creator or an admin may
// change it (others get permission_denied), and only admins change built-in automations, which
// have no creator.
//
// States: enabled ⇄ disabled, and either → archived (ArchiveAutomation, which also disables).
// Archiving is final and idempotent; an archived automation refuses every change with
// failed_precondition but may still be read and duplicated.
package automations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/records"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/ratelimit"
)

// RunStats is what ListAutomations shows of an automation's runs; the run side provides it.
type RunStats interface {
	// LastRun is the automation's newest run, nil when it has none.
	LastRun(ctx context.Context, automationID string) (*appv1.AutomationRunBrief, error)
	// RunsByDay counts the automation's runs per UTC day since since, oldest day first.
	RunsByDay(ctx context.Context, automationID string, since time.Time) ([]*appv1.DayRunCount, error)
}

// Deps are what the service runs on.
type Deps struct {
	DB     *firestore.Client
	Clock  clock.Clock
	Limits config.Limits
	// Validator checks definitions, with the expression, script and cron checkers it holds.
	Validator definition.Validator
	// RunStats, when set, fills the run columns of ListAutomations (empty without it).
	RunStats RunStats
	// Engine runs code, renders and starts runs; without it those methods answer unavailable.
	Engine *Engine
	// Drafts starts the agent of DraftAutomation; without it DraftAutomation answers unavailable.
	Drafts Drafter
	// Access checks, at every save, the owner's right to the secrets and webhooks named.
	Access Access
	// KeyOptions answers ListInputKeyOptions for the nouns other services keep ("profile",
	// "repo"); ok false for a noun it does not know. Nil: those nouns have no options here.
	KeyOptions func(ctx context.Context, noun string) (options []catalog.KeyOption, ok bool, err error)
}

// Service implements AutomationService. Methods not built here answer unimplemented.
type Service struct {
	appv1connect.UnimplementedAutomationServiceHandler
	d     Deps
	store *records.Store
	// evals bounds the evaluations EvalCode and TestRender run at once, per caller and in all.
	evals *ratelimit.Slots
}

var _ appv1connect.AutomationServiceHandler = (*Service)(nil)

// New returns the service over d.
func New(d Deps) *Service {
	lim := d.Limits.Automations
	return &Service{d: d, store: records.NewStore(d.DB, d.Clock.Now), evals: ratelimit.NewSlots(lim.EvalsPerUser, lim.Evals)}
}

// Store is the automation records the service keeps, for the run side.
func (s *Service) Store() *records.Store { return s.store }

func (s *Service) lim() config.AutomationLimits { return s.d.Limits.Automations }

// GetAutomation returns an automation by id or by built-in key, archived or not.
func (s *Service) GetAutomation(ctx context.Context, req *connect.Request[appv1.GetAutomationRequest]) (*connect.Response[appv1.GetAutomationResponse], error) {
	var rec *records.AutomationRecord
	var err error
	switch l := req.Msg.GetLookup().(type) {
	case *appv1.GetAutomationRequest_Id:
		rec, err = s.get(ctx, "id", l.Id)
	case *appv1.GetAutomationRequest_BuiltinKey:
		if l.BuiltinKey == "" {
			return nil, apierr.InvalidArgument("builtin_key", "is required")
		}
		rec, err = s.store.GetBuiltin(ctx, l.BuiltinKey)
		if errors.Is(err, records.ErrNotFound) {
			err = apierr.NotFound("built-in automation", l.BuiltinKey)
		}
	default:
		return nil, apierr.InvalidArgument("id", "is required (or builtin_key)")
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetAutomationResponse{Automation: rec.ToProto()}), nil
}

// CreateAutomation validates and stores a new custom automation, version 1, owned by the caller.
func (s *Service) CreateAutomation(ctx context.Context, req *connect.Request[appv1.CreateAutomationRequest]) (*connect.Response[appv1.CreateAutomationResponse], error) {
	m := req.Msg
	var p problems
	name := p.name("name", m.GetName(), s.lim())
	description := p.description("description", m.GetDescription(), s.lim())
	def, ok := p.definition("definition_json", m.GetDefinitionJson(), s.lim(), s.d.Validator)
	inputs := "{}"
	if ok {
		// Inputs are checked against the declarations of a definition that parsed.
		inputs = p.inputs("inputs_json", m.GetInputsJson(), def, s.lim())
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	if err := s.checkAccess(ctx, caller.UserID, def, ""); err != nil {
		return nil, err
	}
	rec := &records.AutomationRecord{
		Description: description, Enabled: m.GetEnabled(), InputsJSON: inputs,
		BlockOverridesJSON: "{}", SettingsJSON: "{}",
	}
	rec.SetName(name)
	if err := s.create(ctx, rec, m.GetDefinitionJson(), def); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CreateAutomationResponse{Automation: rec.ToProto()}), nil
}

// create stores rec as a new custom automation of the caller with definition def (parsed:
// parsed) as version 1.
func (s *Service) create(ctx context.Context, rec *records.AutomationRecord, def string, parsed definition.Definition) error {
	caller, _ := auth.Caller(ctx)
	now := s.d.Clock.Now()
	rec.ID, rec.Kind, rec.CreatedBy, rec.CreatedAt = ids.New(records.IDPrefix), records.KindCustom, caller.UserID, now
	rec.SetVersion(records.VersionRecord{Number: 1, DefinitionJSON: def, CreatedBy: caller.UserID, CreatedAt: now}, parsed)
	if err := rec.Reschedule(now); err != nil {
		return err
	}
	return s.insert(ctx, rec)
}

// insert stores a new automation within the organisation's limit.
func (s *Service) insert(ctx context.Context, rec *records.AutomationRecord) error {
	err := s.store.Create(ctx, rec, s.lim().Max)
	if errors.Is(err, records.ErrLimit) {
		return apierr.ResourceExhausted("the organisation has %d automations, the most allowed; archive one first", s.lim().Max)
	}
	return err
}

// SaveVersion adds a version to an automation and makes it current. Inputs and block overrides
// stay as they are: a run checks them against the version it runs.
func (s *Service) SaveVersion(ctx context.Context, req *connect.Request[appv1.SaveVersionRequest]) (*connect.Response[appv1.SaveVersionResponse], error) {
	m := req.Msg
	var p problems
	if m.GetAutomationId() == "" {
		p.Add("automation_id", "is required")
	}
	def, _ := p.definition("definition_json", m.GetDefinitionJson(), s.lim(), s.d.Validator)
	if err := p.Err(); err != nil {
		return nil, err
	}
	id := m.GetAutomationId()
	if err := ids.Lookup("automation_id", "automation", records.IDPrefix, id); err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	rec, err := s.store.SaveVersion(ctx, id, m.GetDefinitionJson(), def, caller.UserID, func(r *records.AutomationRecord) error {
		if err := editable(ctx, r); err != nil {
			return err
		}
		return s.checkAccess(ctx, r.CreatedBy, def, r.BlockOverridesJSON)
	})
	if errors.Is(err, records.ErrNotFound) {
		return nil, apierr.NotFound("automation", id)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.SaveVersionResponse{Automation: rec.ToProto()}), nil
}

// ListVersions lists an automation's versions, newest first, up to the limit.
func (s *Service) ListVersions(ctx context.Context, req *connect.Request[appv1.ListVersionsRequest]) (*connect.Response[appv1.ListVersionsResponse], error) {
	rec, err := s.get(ctx, "automation_id", req.Msg.GetAutomationId())
	if err != nil {
		return nil, err
	}
	vs, err := s.store.ListVersions(ctx, rec.ID, s.lim().Versions)
	if err != nil {
		return nil, err
	}
	out := make([]*appv1.AutomationVersion, len(vs))
	for i, v := range vs {
		out[i] = v.ToProto()
	}
	return connect.NewResponse(&appv1.ListVersionsResponse{Versions: out}), nil
}

// SetAutomationEnabled enables or disables an automation. Enabling needs inputs and block
// overrides that fit the current version (failed_precondition otherwise), and schedules the
// next fire of a schedule entrypoint; disabling clears it.
func (s *Service) SetAutomationEnabled(ctx context.Context, req *connect.Request[appv1.SetAutomationEnabledRequest]) (*connect.Response[appv1.SetAutomationEnabledResponse], error) {
	m := req.Msg
	rec, err := s.update(ctx, "id", m.GetId(), func(r *records.AutomationRecord) error {
		if r.Enabled == m.GetEnabled() {
			return nil
		}
		if m.GetEnabled() {
			if err := s.runnable(r); err != nil {
				return err
			}
		}
		r.Enabled = m.GetEnabled()
		return r.Reschedule(s.d.Clock.Now())
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.SetAutomationEnabledResponse{Automation: rec.ToProto()}), nil
}

// runnable checks that an automation's inputs and block overrides fit its current version. Its
// failed_precondition carries the problems' details, as invalid_argument would.
func (s *Service) runnable(r *records.AutomationRecord) error {
	def, err := r.Definition()
	if err != nil {
		return err
	}
	var p problems
	p.inputs("inputs_json", r.InputsJSON, def, s.lim())
	p.overrides("block_overrides_json", r.BlockOverridesJSON, def, s.lim(), s.d.Validator)
	var invalid *connect.Error
	if !errors.As(p.Err(), &invalid) {
		return nil
	}
	out := connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(
		"automation %s cannot be enabled until its inputs and block overrides fit version %d: %s", r.ID, r.CurrentVersion, invalid.Message()))
	for _, d := range invalid.Details() {
		out.AddDetail(d)
	}
	return out
}

// UpdateAutomationMeta changes the name, description and settings that the request sets.
func (s *Service) UpdateAutomationMeta(ctx context.Context, req *connect.Request[appv1.UpdateAutomationMetaRequest]) (*connect.Response[appv1.UpdateAutomationMetaResponse], error) {
	m := req.Msg
	var p problems
	var name, description, settings string
	if m.Name != nil {
		name = p.name("name", m.GetName(), s.lim())
	}
	if m.Description != nil {
		description = p.description("description", m.GetDescription(), s.lim())
	}
	if m.SettingsJson != nil {
		settings = p.settings("settings_json", m.GetSettingsJson(), s.lim())
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	rec, err := s.update(ctx, "id", m.GetId(), func(r *records.AutomationRecord) error {
		if m.Name != nil {
			r.SetName(name)
		}
		if m.Description != nil {
			r.Description = description
		}
		if m.SettingsJson != nil && settings != r.SettingsJSON {
			// Schedules may take their time zone from the settings.
			r.SettingsJSON = settings
			return r.Reschedule(s.d.Clock.Now())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.UpdateAutomationMetaResponse{Automation: rec.ToProto()}), nil
}

// replaceJSON sets one JSON field of an automation, with set, to what check makes of the request
// against the automation's current definition, unless check found problems.
func (s *Service) replaceJSON(ctx context.Context, id string, check func(*problems, definition.Definition) string, set func(*records.AutomationRecord, string) error) (*records.AutomationRecord, error) {
	return s.update(ctx, "automation_id", id, func(r *records.AutomationRecord) error {
		def, err := r.Definition()
		if err != nil {
			return err
		}
		var p problems
		v := check(&p, def)
		if err := p.Err(); err != nil {
			return err
		}
		return set(r, v)
	})
}

// SetInputs replaces an automation's inputs, checked against its current version's declarations.
func (s *Service) SetInputs(ctx context.Context, req *connect.Request[appv1.SetInputsRequest]) (*connect.Response[appv1.SetInputsResponse], error) {
	m := req.Msg
	rec, err := s.replaceJSON(ctx, m.GetAutomationId(), func(p *problems, def definition.Definition) string {
		return p.inputs("inputs_json", m.GetInputsJson(), def, s.lim())
	}, func(r *records.AutomationRecord, v string) error {
		r.InputsJSON = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.SetInputsResponse{Automation: rec.ToProto()}), nil
}

// SetBlockOverrides replaces an automation's block overrides, checked by applying them to its
// current version and validating the result.
func (s *Service) SetBlockOverrides(ctx context.Context, req *connect.Request[appv1.SetBlockOverridesRequest]) (*connect.Response[appv1.SetBlockOverridesResponse], error) {
	m := req.Msg
	rec, err := s.replaceJSON(ctx, m.GetAutomationId(), func(p *problems, def definition.Definition) string {
		return p.overrides("overrides_json", m.GetOverridesJson(), def, s.lim(), s.d.Validator)
	}, func(r *records.AutomationRecord, v string) error {
		def, err := r.Definition()
		if err != nil {
			return err
		}
		if err := s.checkAccess(ctx, r.CreatedBy, def, v); err != nil {
			return err
		}
		r.BlockOverridesJSON = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.SetBlockOverridesResponse{Automation: rec.ToProto()}), nil
}

// DuplicateAutomation copies an automation's current version, inputs, block overrides, settings
// and description into a new disabled custom automation of the caller's, named name or else
// "<name> (copy)". Any automation may be duplicated, archived and built-in ones too.
func (s *Service) DuplicateAutomation(ctx context.Context, req *connect.Request[appv1.DuplicateAutomationRequest]) (*connect.Response[appv1.DuplicateAutomationResponse], error) {
	m := req.Msg
	var p problems
	var name string
	if m.Name != nil {
		name = p.name("name", m.GetName(), s.lim())
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	src, err := s.get(ctx, "automation_id", m.GetAutomationId())
	if err != nil {
		return nil, err
	}
	def, err := src.Definition()
	if err != nil {
		return nil, err
	}
	if m.Name == nil {
		name = copyName(src.Name, s.lim().NameLen)
	}
	caller, _ := auth.Caller(ctx)
	if err := s.checkAccess(ctx, caller.UserID, def, src.BlockOverridesJSON); err != nil {
		return nil, err
	}
	rec := &records.AutomationRecord{
		Description: src.Description, InputsJSON: src.InputsJSON,
		BlockOverridesJSON: src.BlockOverridesJSON, SettingsJSON: src.SettingsJSON,
	}
	rec.SetName(name)
	if err := s.create(ctx, rec, src.Version.DefinitionJSON, def); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DuplicateAutomationResponse{Automation: rec.ToProto()}), nil
}

// copyName is "<name> (copy)", the name shortened to keep it within limit characters.
func copyName(name string, limit int) string {
	const suffix = " (copy)"
	r := []rune(name)
	if keep := limit - len(suffix); len(r) > keep {
		r = r[:max(keep, 0)]
	}
	return string(r) + suffix
}

// ArchiveAutomation archives and disables an automation. Archiving an archived one again
// succeeds and changes nothing.
func (s *Service) ArchiveAutomation(ctx context.Context, req *connect.Request[appv1.ArchiveAutomationRequest]) (*connect.Response[appv1.ArchiveAutomationResponse], error) {
	rec, err := s.change(ctx, "id", req.Msg.GetId(), func(r *records.AutomationRecord) error {
		if err := mayChange(ctx, r); err != nil {
			return err
		}
		r.Archived, r.Enabled = true, false
		return r.Reschedule(s.d.Clock.Now())
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.ArchiveAutomationResponse{Automation: rec.ToProto()}), nil
}

// update changes an editable automation with fn (see editable); field names the request's id
// field.
func (s *Service) update(ctx context.Context, field, id string, fn func(*records.AutomationRecord) error) (*records.AutomationRecord, error) {
	return s.change(ctx, field, id, func(r *records.AutomationRecord) error {
		if err := editable(ctx, r); err != nil {
			return err
		}
		return fn(r)
	})
}

// change is records.Store.Update with the API's errors.
func (s *Service) change(ctx context.Context, field, id string, fn func(*records.AutomationRecord) error) (*records.AutomationRecord, error) {
	if err := ids.Lookup(field, "automation", records.IDPrefix, id); err != nil {
		return nil, err
	}
	rec, err := s.store.Update(ctx, id, fn)
	if errors.Is(err, records.ErrNotFound) {
		return nil, apierr.NotFound("automation", id)
	}
	return rec, err
}

// get is a read method's lookup: field names the request's id field. A malformed id is
// not_found without a database read.
func (s *Service) get(ctx context.Context, field, id string) (*records.AutomationRecord, error) {
	if err := ids.Lookup(field, "automation", records.IDPrefix, id); err != nil {
		return nil, err
	}
	rec, err := s.store.Get(ctx, id)
	if errors.Is(err, records.ErrNotFound) {
		return nil, apierr.NotFound("automation", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get automation: %w", err)
	}
	return rec, nil
}

// mayChange says whether the caller may change r: automations are shared for reading, but only
// their creator or an admin changes them.
func mayChange(ctx context.Context, r *records.AutomationRecord) error {
	if p, _ := auth.Caller(ctx); r.ChangeableBy(p) {
		return nil
	}
	return apierr.PermissionDenied("only the creator of automation %s or an admin may change it", r.ID)
}

// editable says whether the caller may change r now: archived automations refuse changes.
func editable(ctx context.Context, r *records.AutomationRecord) error {
	if err := mayChange(ctx, r); err != nil {
		return err
	}
	if r.Archived {
		return apierr.FailedPrecondition("automation %s is archived; archived automations cannot be changed", r.ID)
	}
	return nil
}

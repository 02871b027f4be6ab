package automations

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/dispatch"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/automation/render"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/automation/triggers"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/paging"
)

// Engine is the run side the service drives: JavaScript, expressions, runs and samples.
type Engine struct {
	Env *expr.Env
	// JS gives the JavaScript sandbox, made the first time one is needed.
	JS     func() (*jsbox.Box, error)
	Runs   *runs.Store
	Runner *runner.Runner
}

// errNoEngine answers the methods that need the engine where it is not configured.
var errNoEngine = connect.NewError(connect.CodeUnavailable, errors.New("the automation engine is not configured here"))

// errNoRunner answers RunNow and DryRun where the engine has no runner: runs are queued on
// Pub/Sub, which is not configured here.
var errNoRunner = connect.NewError(connect.CodeUnavailable, errors.New("automation runs need Pub/Sub, which is not configured here"))

func (s *Service) engine() (*Engine, error) {
	if s.d.Engine == nil {
		return nil, errNoEngine
	}
	return s.d.Engine, nil
}

// EvalCode evaluates JavaScript (mode "js", the default) or a CEL expression (mode "cel") with
// input_json bound as input. Mistakes in the code are answered in error_name, error_message
// and error_line, not as RPC errors.
func (s *Service) EvalCode(ctx context.Context, req *connect.Request[appv1.EvalCodeRequest]) (*connect.Response[appv1.EvalCodeResponse], error) {
	e, err := s.engine()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	input := json.RawMessage("null")
	if m.GetInputJson() != "" {
		if !json.Valid([]byte(m.GetInputJson())) {
			return nil, apierr.InvalidArgument("input_json", "is not valid JSON")
		}
		input = json.RawMessage(m.GetInputJson())
	}
	if len(m.GetSource()) > jsbox.MaxSourceBytes {
		return nil, apierr.InvalidArgument("source", fmt.Sprintf("is over %d bytes", jsbox.MaxSourceBytes))
	}
	release, err := s.evalSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	switch m.GetMode() {
	case "", "js":
		box, err := e.JS()
		if err != nil {
			return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("JavaScript is not available here: %w", err))
		}
		res, err := box.Eval(ctx, m.GetSource(), map[string]json.RawMessage{"input": input})
		if err != nil {
			return nil, err
		}
		out := &appv1.EvalCodeResponse{Logs: res.Logs, DurationMs: res.Duration.Milliseconds()}
		if res.Err != nil {
			out.ErrorName, out.ErrorMessage = &res.Err.Name, &res.Err.Message
			if res.Err.Line > 0 {
				line := int32(res.Err.Line)
				out.ErrorLine = &line
			}
		} else {
			v := string(res.Value)
			out.ValueJson = &v
		}
		return connect.NewResponse(out), nil
	case "cel":
		var in any
		_ = json.Unmarshal(input, &in)
		start := time.Now()
		v, err := e.Env.Eval(m.GetSource(), expr.Vars{Input: in, Now: s.d.Clock.Now()})
		out := &appv1.EvalCodeResponse{DurationMs: time.Since(start).Milliseconds()}
		if err != nil {
			name, msg := "EvalError", err.Error()
			var ce *expr.Error
			if errors.As(err, &ce) {
				name, msg = "CompileError", ce.Message
				line := int32(ce.Line)
				out.ErrorLine = &line
			}
			out.ErrorName, out.ErrorMessage = &name, &msg
			return connect.NewResponse(out), nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode value: %w", err)
		}
		js := string(b)
		out.ValueJson = &js
		return connect.NewResponse(out), nil
	}
	return nil, apierr.InvalidArgument("mode", "must be \"js\" or \"cel\"")
}

// evalSlot takes one of the caller's evaluation slots, or answers resource_exhausted at once:
// a script may spin a CPU until its deadline, and waiting behind another caller's would make
// one caller's endless loops everyone's delay.
func (s *Service) evalSlot(ctx context.Context) (release func(), err error) {
	release, ok := s.evals.Take(callerID(ctx))
	if !ok {
		return nil, apierr.ResourceExhausted("too many evaluations at once: each caller may run %d at a time and this server %d; try again when yours have finished (each stops at its deadline)",
			s.evals.PerName, s.evals.Total)
	}
	return release, nil
}

// event is what a TestRender, DryRun or RunNow runs on.
type event struct {
	vars map[string]any
	raw  json.RawMessage
	// eventKey and deliveryKey name the delivery a sample was kept of ("" for a payload).
	eventKey, deliveryKey string
}

// sample is the event a TestRender, DryRun or RunNow uses: a recorded sample's, built by the
// rule a delivery's run uses (a generic webhook's body, headers and delivery key, not its body
// alone), or a payload as given.
func (s *Service) sample(ctx context.Context, e *Engine, sampleID, payload string) (event, error) {
	switch {
	case sampleID != "":
		smp, err := e.Runs.Sample(ctx, sampleID)
		if errors.Is(err, runs.ErrNotFound) {
			return event{}, apierr.NotFound("event sample", sampleID)
		}
		if err != nil {
			return event{}, err
		}
		// Another registration's payload is not the caller's to run against: the same answer
		// as for no sample.
		if p, _ := auth.Caller(ctx); !smp.ReadableBy(p) {
			return event{}, apierr.NotFound("event sample", sampleID)
		}
		del := smp.Delivery()
		vars, raw, ok := del.Event()
		if !ok {
			return event{}, apierr.FailedPrecondition("event sample %s has no JSON object payload", sampleID)
		}
		return event{vars: vars, raw: raw, eventKey: del.EventKey, deliveryKey: del.DeliveryKey}, nil
	case payload != "":
		if !triggers.IsJSONObject([]byte(payload)) {
			return event{}, apierr.InvalidArgument("payload_json", "must be a JSON object")
		}
		var vars map[string]any
		_ = json.Unmarshal([]byte(payload), &vars)
		return event{vars: vars, raw: json.RawMessage(payload)}, nil
	}
	return event{vars: map[string]any{}, raw: json.RawMessage("{}")}, nil
}

// TestRender renders every block of the automation's current definition, or of a draft,
// against a sample or a payload. It has no side effect: code blocks run in the sandbox, other
// blocks say what they would do.
func (s *Service) TestRender(ctx context.Context, req *connect.Request[appv1.TestRenderRequest]) (*connect.Response[appv1.TestRenderResponse], error) {
	e, err := s.engine()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	rec, err := s.get(ctx, "automation_id", m.GetAutomationId())
	if err != nil {
		return nil, err
	}
	def, _, err := dispatch.Effective(s.d.Validator, rec)
	if err != nil {
		return nil, apierr.FailedPrecondition("automation %s cannot be rendered: %v", rec.ID, err)
	}
	if m.DraftDefinitionJson != nil {
		var p problems
		d, ok := p.definition("draft_definition_json", m.GetDraftDefinitionJson(), s.lim(), s.d.Validator)
		if !ok {
			return nil, p.Err()
		}
		def = d
	}
	inputsJSON := rec.InputsJSON
	if m.InputsJson != nil {
		inputsJSON = m.GetInputsJson()
	}
	inputs, errs := definition.ValidateInputs(def.Inputs, []byte(inputsJSON))
	if len(errs) > 0 {
		return nil, invalidBlocks("inputs_json", errs)
	}
	ev, err := s.sample(ctx, e, m.GetSampleId(), m.GetPayloadJson())
	if err != nil {
		return nil, err
	}
	now := s.d.Clock.Now()
	if m.ScheduledFor != nil {
		if now, err = time.Parse(time.RFC3339, m.GetScheduledFor()); err != nil {
			return nil, apierr.InvalidArgument("scheduled_for", "must be an RFC 3339 time")
		}
	}
	entrypoint := cmp.Or(m.GetEntrypointId(), firstEntrypoint(def))
	blocks, berrs := render.Render(def, render.Scope{Event: ev.vars, EventJSON: ev.raw, Inputs: inputs, Now: now},
		render.Options{Env: e.Env, EntrypointID: entrypoint, RunCode: s.renderCode(ctx, e)})
	out := &appv1.TestRenderResponse{}
	for _, b := range blocks {
		out.Blocks = append(out.Blocks, &appv1.BlockRender{
			BlockId: b.BlockID, BlockType: b.BlockType, RenderedJson: string(b.RenderedJSON),
			FilterPass: b.FilterPass, ScopeJson: string(b.ScopeJSON),
		})
	}
	for _, be := range berrs {
		out.Errors = append(out.Errors, blockErrorProto(be))
	}
	return connect.NewResponse(out), nil
}

// renderCode runs a code block of a TestRender in the sandbox, as a run would.
func (s *Service) renderCode(ctx context.Context, e *Engine) render.CodeRunner {
	box, err := e.JS()
	if err != nil {
		return nil
	}
	return func(source string, scope render.Scope) (any, error) {
		// A slot per block, taken only when code runs: the blocks run one after another.
		release, err := s.evalSlot(ctx)
		if err != nil {
			return nil, err
		}
		defer release()
		sc := runner.Scope{Event: scope.Event, Inputs: scope.Inputs, Instance: scope.Instance, Steps: scope.Steps}
		res, err := box.Eval(ctx, source, sc.JSON(scope.Now))
		if err != nil {
			return nil, err
		}
		if res.Err != nil {
			return nil, res.Err
		}
		var v any
		if err := json.Unmarshal(res.Value, &v); err != nil {
			return nil, fmt.Errorf("decode code result: %w", err)
		}
		return v, nil
	}
}

func firstEntrypoint(def definition.Definition) string {
	if len(def.Entrypoints) == 0 {
		return ""
	}
	return def.Entrypoints[0].ID
}

func blockErrorProto(be definition.BlockError) *appv1.BlockError {
	return &appv1.BlockError{BlockId: be.BlockID, Field: be.Field, Code: be.Code, Message: be.Message}
}

// manualRun is what RunNow and DryRun start.
type manualRun struct {
	automationID, sampleID, payload, entrypointID, inputsJSON string
	instanceKey, instanceInputs                               string
	dry                                                       bool
}

// start creates a manual (or dry) run of the automation's current definition as its owner.
func (s *Service) start(ctx context.Context, mr manualRun) (string, error) {
	e, err := s.engine()
	if err != nil {
		return "", err
	}
	if e.Runner == nil {
		return "", errNoRunner
	}
	rec, err := s.get(ctx, "automation_id", mr.automationID)
	if err != nil {
		return "", err
	}
	if err := editable(ctx, rec); err != nil {
		return "", err
	}
	def, _, err := dispatch.Effective(s.d.Validator, rec)
	if err != nil {
		return "", apierr.FailedPrecondition("automation %s cannot run: %v", rec.ID, err)
	}
	entrypoint := cmp.Or(mr.entrypointID, firstEntrypoint(def))
	if !hasEntrypoint(def, entrypoint) {
		return "", apierr.InvalidArgument("entrypoint_id", "automation "+rec.ID+" has no entrypoint "+entrypoint)
	}
	inputsJSON := cmp.Or(mr.inputsJSON, rec.InputsJSON)
	inputs, errs := definition.ValidateInputs(def.Inputs, []byte(inputsJSON))
	if len(errs) > 0 {
		return "", invalidBlocks("inputs_json", errs)
	}
	ev, err := s.sample(ctx, e, mr.sampleID, mr.payload)
	if err != nil {
		return "", err
	}
	if mr.instanceKey == "" && def.Instance != nil {
		// The definition groups events into instances: a manual run joins the one its event
		// names, as a delivered event would.
		mr.instanceKey, err = dispatch.InstanceKey(e.Env, def, expr.Vars{Event: ev.vars, Inputs: inputs, Now: s.d.Clock.Now()})
		if errors.Is(err, dispatch.ErrNoInstanceKey) {
			return "", apierr.InvalidArgument("payload_json", "instance.key gives no key on it (or give instance_key)")
		}
		if err != nil {
			return "", apierr.InvalidArgument("payload_json", fmt.Sprintf("instance.key cannot be evaluated on it: %v (or give instance_key)", err))
		}
	}
	instanceID := ""
	if mr.instanceKey != "" {
		instInputs := cmp.Or(mr.instanceInputs, "{}")
		if !triggers.IsJSONObject([]byte(instInputs)) {
			return "", apierr.InvalidArgument("instance_inputs_json", "must be a JSON object")
		}
		caller, _ := auth.Caller(ctx)
		inst, _, err := e.Runs.OpenInstance(ctx, rec.ID, mr.instanceKey, instInputs, "run_now:"+caller.UserID)
		if err != nil {
			return "", err
		}
		if inst.Status == runs.InstanceClosed {
			return "", apierr.FailedPrecondition("instance %s (key %q) is closed", inst.ID, mr.instanceKey)
		}
		instanceID = inst.ID
	}
	inputsRaw, _ := json.Marshal(inputs)
	run, _, err := e.Runner.Start(ctx, runner.Start{
		AutomationID: rec.ID, Version: rec.CurrentVersion, Actor: cmp.Or(rec.CreatedBy, callerID(ctx)),
		Definition: def, Trigger: runner.Trigger{EntrypointID: entrypoint, Event: ev.raw, Inputs: inputsRaw},
		TriggerSource: runs.SourceManual, EventKey: ev.eventKey, DeliveryKey: ev.deliveryKey, DryRun: mr.dry, InstanceID: instanceID,
	})
	if err != nil {
		return "", err
	}
	return run.ID, nil
}

func callerID(ctx context.Context) string {
	p, _ := auth.Caller(ctx)
	return p.UserID
}

func hasEntrypoint(def definition.Definition, id string) bool {
	for _, ep := range def.Entrypoints {
		if ep.ID == id {
			return true
		}
	}
	return false
}

// RunNow starts a run of the automation's current version now, whether it is enabled or not:
// running by hand is how an automation is tried before it is switched on.
func (s *Service) RunNow(ctx context.Context, req *connect.Request[appv1.RunNowRequest]) (*connect.Response[appv1.RunNowResponse], error) {
	m := req.Msg
	id, err := s.start(ctx, manualRun{
		automationID: m.GetAutomationId(), payload: m.GetPayloadJson(), entrypointID: m.GetEntrypointId(),
		inputsJSON: m.GetInputsJson(), instanceKey: m.GetInstanceKey(), instanceInputs: m.GetInstanceInputsJson(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RunNowResponse{RunId: id}), nil
}

// DryRun starts a run that executes filters and code and records what every other block would
// have done.
func (s *Service) DryRun(ctx context.Context, req *connect.Request[appv1.DryRunRequest]) (*connect.Response[appv1.DryRunResponse], error) {
	m := req.Msg
	id, err := s.start(ctx, manualRun{
		automationID: m.GetAutomationId(), sampleID: m.GetSampleId(), payload: m.GetPayloadJson(),
		entrypointID: m.GetEntrypointId(), dry: true,
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.DryRunResponse{RunId: id}), nil
}

// ListEventSamples lists the newest received payloads of the automation's event keys (or of
// event_key) that the caller may read: the automation is its owner's and admins' to ask about
// (not_found otherwise, as for its runs), and a sample is listed only to the owner of the
// registration it came through and to admins, who alone receive its deliveries.
func (s *Service) ListEventSamples(ctx context.Context, req *connect.Request[appv1.ListEventSamplesRequest]) (*connect.Response[appv1.ListEventSamplesResponse], error) {
	e, err := s.engine()
	if err != nil {
		return nil, err
	}
	m := req.Msg
	limit, err := paging.Limit("limit", int64(m.GetLimit()), s.lim().Samples)
	if err != nil {
		return nil, err
	}
	rec, err := s.get(ctx, "automation_id", m.GetAutomationId())
	if err != nil {
		return nil, err
	}
	p, _ := auth.Caller(ctx)
	if !rec.ChangeableBy(p) {
		return nil, apierr.NotFound("automation", rec.ID)
	}
	keys := rec.EventKeys
	if m.EventKey != nil {
		keys = []string{m.GetEventKey()}
	}
	samples, err := e.Runs.Samples(ctx, keys, runs.SamplesReadBy(p), limit)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListEventSamplesResponse{}
	for _, smp := range samples {
		out.Samples = append(out.Samples, smp.ToProto())
	}
	return connect.NewResponse(out), nil
}

// ListEventCatalog lists a provider's events, marking those received here as observed.
func (s *Service) ListEventCatalog(ctx context.Context, req *connect.Request[appv1.ListEventCatalogRequest]) (*connect.Response[appv1.ListEventCatalogResponse], error) {
	p, ok := catalog.LookupProvider(req.Msg.GetProvider())
	if !ok {
		return nil, apierr.InvalidArgument("provider", fmt.Sprintf("%q is not a provider; try github, webhook or schedule", req.Msg.GetProvider()))
	}
	keys := make([]string, len(p.Events))
	for i, ev := range p.Events {
		keys[i] = ev.Key
	}
	observed := map[string]bool{}
	if e, err := s.engine(); err == nil {
		if observed, err = e.Runs.Observed(ctx, keys); err != nil {
			return nil, err
		}
	}
	out := &appv1.ListEventCatalogResponse{}
	for _, ev := range p.Events {
		out.Events = append(out.Events, &appv1.EventCatalogEntry{
			Key: ev.Key, Label: ev.Label, Description: ev.Description, SchemaJson: ev.SchemaJSON,
			SampleJson: ev.SampleJSON, Observed: observed[ev.Key], Hidden: ev.Hidden,
		})
	}
	if p.Scope != nil {
		out.Scope = &appv1.EventCatalogScope{Key: p.Scope.Key, Label: p.Scope.Label}
	}
	for _, v := range p.Variables {
		out.Variables = append(out.Variables, &appv1.WebhookVariable{Path: v.Path, Alias: v.Alias})
	}
	return connect.NewResponse(out), nil
}

// ListActionCatalog lists the blocks an automation may use, with their input schemas.
func (s *Service) ListActionCatalog(_ context.Context, req *connect.Request[appv1.ListActionCatalogRequest]) (*connect.Response[appv1.ListActionCatalogResponse], error) {
	actions, ok := catalog.ListActions(req.Msg.GetProvider())
	if !ok {
		return nil, apierr.InvalidArgument("provider", fmt.Sprintf("%q is not a provider; try hangar", req.Msg.GetProvider()))
	}
	out := &appv1.ListActionCatalogResponse{}
	for _, a := range actions {
		out.Actions = append(out.Actions, &appv1.ActionCatalogEntry{Id: a.ID, Label: a.Label, Description: a.Description, InputSchemaJson: a.InputSchemaJSON})
	}
	return connect.NewResponse(out), nil
}

// ListInputKeyOptions answers the choices of an input by its noun: event keys, block types and
// providers from the catalogs, automations from the records, profiles and the repositories
// they check out from the profiles.
func (s *Service) ListInputKeyOptions(ctx context.Context, req *connect.Request[appv1.ListInputKeyOptionsRequest]) (*connect.Response[appv1.ListInputKeyOptionsResponse], error) {
	noun := req.Msg.GetNoun()
	opts, ok := catalog.StaticKeyOptions(noun)
	switch {
	case ok:
	case noun == catalog.NounAutomation:
		ok = true
		recs, err := s.store.List(ctx, false, s.lim().Max)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			opts = append(opts, catalog.KeyOption{Key: r.ID, Label: r.Name})
		}
	case s.d.KeyOptions != nil:
		var err error
		if opts, ok, err = s.d.KeyOptions(ctx, noun); err != nil {
			return nil, err
		}
	}
	if !ok {
		return nil, apierr.InvalidArgument("noun", fmt.Sprintf("%q has no options here; nouns: %s, %s, %s, %s, %s, %s", noun,
			catalog.NounEventKey, catalog.NounBlockType, catalog.NounProvider, catalog.NounAutomation, catalog.NounProfile, catalog.NounRepo))
	}
	out := &appv1.ListInputKeyOptionsResponse{}
	for _, o := range opts {
		out.Options = append(out.Options, &appv1.InputKeyOption{Key: o.Key, Label: o.Label})
	}
	return connect.NewResponse(out), nil
}

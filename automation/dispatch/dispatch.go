// Package dispatch turns what happens into automation runs: webhook deliveries (Deliver) and
// due schedules (Fire). It finds the automations an event starts, drops what must not run with
// a reason, counts what entrypoint filters reject, routes events to instances, and starts runs
// whose ids make every delivery and fire time run at most once.
package dispatch

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/automation/triggers"
)

// Dispatcher turns deliveries and schedules into runs: it finds the automations an event or a
// fire time starts, drops what must not run (with a reason), counts what entrypoint filters
// reject, routes events to instances and starts the runs.
type Dispatcher struct {
	automations *records.Store
	runs        *runs.Store
	runner      *runner.Runner
	env         *expr.Env
	validator   definition.Validator
	now         func() time.Time
	log         *slog.Logger
	// concurrency is the deployment's default cap on an automation's runs in progress.
	concurrency int
	// admin reports whether a user acting without a key is an admin (nil: nobody is).
	admin func(ctx context.Context, userID string) (bool, error)
}

// mayRead reports whether the owner of a may read the registration del came through: a
// delivery's payload becomes the run's event, which the owner reads. GitHub event keys are
// shared by every GitHub registration, so this, not the save-time check, is what keeps one
// user's repository events from another user's automations.
func (d *Dispatcher) mayRead(ctx context.Context, a *records.AutomationRecord, del triggers.Delivery) (bool, error) {
	// Built-in automations have no owner: they are the admins', whose runs only admins read.
	if del.RegistrationID == "" || a.CreatedBy == "" || a.CreatedBy == del.RegistrationOwner {
		return true, nil
	}
	if d.admin == nil {
		return false, nil
	}
	return d.admin(ctx, a.CreatedBy)
}

// New returns a Dispatcher. admin reports whether a user is an admin now, whose automations
// receive every registration's deliveries (nil: nobody is).
func New(automations *records.Store, rs *runs.Store, rn *runner.Runner, env *expr.Env, validator definition.Validator, now func() time.Time, log *slog.Logger, concurrency int, admin func(ctx context.Context, userID string) (bool, error)) *Dispatcher {
	return &Dispatcher{automations: automations, runs: rs, runner: rn, env: env, validator: validator, now: now, log: log, concurrency: concurrency, admin: admin}
}

// Outcome is what a delivery did to one automation.
type Outcome struct {
	AutomationID string
	RunID        string
	// Dropped is the drop reason, Filtered true when an entrypoint filter said no.
	Dropped  string
	Filtered bool
}

// Deliver handles one received event. It is safe to call again with the same delivery (Pub/Sub
// redelivers): a run already made of it is reported as a duplicate, nothing is done twice.
// A delivery key is remembered for good; a delivery that carries a BodyKey is also a duplicate
// when another delivery brought the same body within the automation's dedupe window. An error
// means the delivery should be retried.
func (d *Dispatcher) Deliver(ctx context.Context, del triggers.Delivery) ([]Outcome, error) {
	// The sample and the match are independent round trips: make them at once.
	var matches []*records.AutomationRecord
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return d.runs.RecordSample(gctx, runs.SampleOf(del))
	})
	g.Go(func() (err error) {
		matches, err = d.automations.MatchingEvent(gctx, del.EventKey)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []Outcome
	for _, a := range matches {
		// An automation whose owner may not read the registration does not hear of the
		// delivery at all: not even a drop, which would tell them it happened.
		if ok, err := d.mayRead(ctx, a, del); err != nil || !ok {
			if err != nil {
				return out, fmt.Errorf("deliver %s to automation %s: %w", del.DeliveryKey, a.ID, err)
			}
			continue
		}
		o, err := d.deliverTo(ctx, a, del)
		if err != nil {
			return out, fmt.Errorf("deliver %s to automation %s: %w", del.DeliveryKey, a.ID, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func (d *Dispatcher) deliverTo(ctx context.Context, a *records.AutomationRecord, del triggers.Delivery) (Outcome, error) {
	o := Outcome{AutomationID: a.ID}
	drop := func(entrypoint, reason, detail string) (Outcome, error) {
		o.Dropped = reason
		return o, d.runs.RecordDrop(ctx, runs.Drop{
			AutomationID: a.ID, EntrypointID: entrypoint, EventKey: del.EventKey,
			DeliveryKey: del.DeliveryKey, Reason: reason, Detail: detail,
		})
	}
	def, settings, err := Effective(d.validator, a)
	if err != nil {
		return drop("", runs.DropBadInputs, err.Error())
	}
	var ep *definition.Entrypoint
	for i := range def.Entrypoints {
		if e := &def.Entrypoints[i]; e.Type == definition.EntrypointEvent && e.EventKey == del.EventKey {
			ep = e
			break
		}
	}
	if ep == nil {
		return o, nil
	}
	if !a.Enabled {
		return drop(ep.ID, runs.DropDisabled, "the automation is disabled")
	}
	event, eventRaw, ok := del.Event()
	if !ok {
		return drop(ep.ID, runs.DropBadPayload, "the payload is not a JSON object")
	}
	inputs, errs := definition.ValidateInputs(def.Inputs, []byte(a.InputsJSON))
	if len(errs) > 0 {
		return drop(ep.ID, runs.DropBadInputs, errs[0].Error())
	}
	// Whether the delivery ran already, whether its body came under another delivery key and
	// how many runs are in progress are independent: ask at once.
	runID := runner.RunID(a.ID, del.DeliveryKey)
	var seen bool
	var earlier string
	var inProgress int
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := d.runs.Get(gctx, runID)
		if seen = err == nil; err != nil && !errors.Is(err, runs.ErrNotFound) {
			return err
		}
		return nil
	})
	// A delivery key the sender's signature does not cover (GitHub's) can be changed by whoever
	// captured a delivery: the same body to the same registration (whose secret signed it)
	// under a new key within the window is that replay.
	if del.BodyKey != "" {
		g.Go(func() (err error) {
			body := del.RegistrationID + "\x00" + del.BodyKey
			earlier, err = d.runs.ClaimBody(gctx, a.ID, body, del.DeliveryKey, del.ReceivedAt, dedupeWindow(settings))
			return err
		})
	}
	g.Go(func() (err error) {
		inProgress, err = d.runs.InProgress(gctx, a.ID)
		return err
	})
	if err := g.Wait(); err != nil {
		return o, err
	}
	if seen {
		return drop(ep.ID, runs.DropDuplicate, "delivery "+del.DeliveryKey+" already started run "+runID)
	}
	if earlier != "" {
		return drop(ep.ID, runs.DropDuplicate, "delivery "+del.DeliveryKey+" repeats the body of delivery "+earlier+" within the dedupe window")
	}
	vars := expr.Vars{Event: event, Inputs: inputs, Now: d.now()}
	if ep.Filter != "" {
		pass, err := d.condition(ep.Filter, vars)
		if err != nil {
			return drop(ep.ID, runs.DropBadPayload, "filter: "+err.Error())
		}
		if !pass {
			o.Filtered = true
			return o, d.runs.RecordFiltered(ctx, runs.FilteredEvent{AutomationID: a.ID, EntrypointID: ep.ID, EventKey: del.EventKey, DeliveryKey: del.DeliveryKey})
		}
	}
	if limit := cmp.Or(settings.ConcurrencyLimit, d.concurrency); inProgress >= limit {
		return drop(ep.ID, runs.DropConcurrency, fmt.Sprintf("%d runs in progress, the limit is %d", inProgress, limit))
	}
	instanceID := ""
	if def.Instance != nil {
		inst, reason, detail, err := d.instanceFor(ctx, a, def, vars, "delivery "+del.DeliveryKey)
		if err != nil {
			return o, err
		}
		if reason != "" {
			return drop(ep.ID, reason, detail)
		}
		instanceID = inst.ID
	}
	run, created, err := d.runner.Start(ctx, runner.Start{
		ID: runID, AutomationID: a.ID, Version: a.CurrentVersion, Actor: a.CreatedBy, Definition: def,
		Trigger:       runner.Trigger{EntrypointID: ep.ID, Event: eventRaw, Inputs: mustJSON(inputs)},
		TriggerSource: runs.SourceEvent, EventKey: del.EventKey, DeliveryKey: del.DeliveryKey, InstanceID: instanceID,
	})
	if err != nil {
		return o, err
	}
	if !created {
		return drop(ep.ID, runs.DropDuplicate, "delivery "+del.DeliveryKey+" already started run "+run.ID)
	}
	o.RunID = run.ID
	return o, nil
}

// instanceFor routes an event to its instance, opening it on the key's first event. A closed
// instance answers a drop reason.
func (d *Dispatcher) instanceFor(ctx context.Context, a *records.AutomationRecord, def definition.Definition, vars expr.Vars, openedBy string) (inst *runs.Instance, reason, detail string, err error) {
	key, err := InstanceKey(d.env, def, vars)
	if errors.Is(err, ErrNoInstanceKey) {
		return nil, runs.DropBadPayload, "instance.key gave no key", nil
	}
	if err != nil {
		return nil, runs.DropBadPayload, "instance.key: " + err.Error(), nil
	}
	inst, _, err = d.runs.OpenInstance(ctx, a.ID, key, string(mustJSON(vars.Inputs)), openedBy)
	if err != nil {
		return nil, "", "", err
	}
	if inst.Status == runs.InstanceClosed {
		return nil, runs.DropInstanceClosed, fmt.Sprintf("instance %s (key %q) is closed: %s", inst.ID, key, inst.CloseReason), nil
	}
	return inst, "", "", nil
}

// ErrNoInstanceKey is an instance key that evaluated to null or "".
var ErrNoInstanceKey = errors.New("instance.key gives no key")

// InstanceKey is the key of the instance an event joins: def's instance.key evaluated on vars,
// as text. Delivered events and manual runs name their instance by the same rule.
func InstanceKey(env *expr.Env, def definition.Definition, vars expr.Vars) (string, error) {
	v, err := env.Eval(def.Instance.Key, vars)
	if err != nil {
		return "", err
	}
	if key := fmt.Sprint(v); v != nil && key != "" {
		return key, nil
	}
	return "", ErrNoInstanceKey
}

func (d *Dispatcher) condition(src string, vars expr.Vars) (bool, error) {
	prog, err := d.env.Compile(src)
	if err != nil {
		return false, err
	}
	pass, known, err := prog.EvalBool(vars)
	if err != nil {
		return false, err
	}
	if !known {
		return false, errors.New("its value is not known")
	}
	return pass, nil
}

// Effective is an automation's current definition with its block overrides, and its settings:
// what a run of it executes.
func Effective(v definition.Validator, a *records.AutomationRecord) (definition.Definition, definition.Settings, error) {
	def, err := a.Definition()
	if err != nil {
		return def, definition.Settings{}, err
	}
	if a.BlockOverridesJSON != "" && a.BlockOverridesJSON != "{}" {
		// Scripts were compiled when the version and the overrides were saved; compiling each
		// code block in the sandbox again for every event would cost milliseconds each, and a
		// script that no longer compiles fails its step anyway.
		v.Script = nil
		var errs []definition.BlockError
		if def, errs = v.ApplyOverrides(def, []byte(a.BlockOverridesJSON)); len(errs) > 0 {
			return def, definition.Settings{}, fmt.Errorf("block overrides: %w", errs[0])
		}
	}
	settings, err := a.Settings()
	if err != nil {
		return def, settings, err
	}
	// The settings' retry policy is the default of every block that has none of its own; it is
	// written into the definition the run keeps, so the run does not depend on later settings.
	if settings.Retry != nil {
		for i := range def.Blocks {
			if def.Blocks[i].Retry == nil {
				r := *settings.Retry
				def.Blocks[i].Retry = &r
			}
		}
	}
	return def, settings, nil
}

// defaultDedupeWindow is how long a body counts as delivered (see Deliver's body window) when
// the settings name no dedupe_window.
const defaultDedupeWindow = 24 * time.Hour

// dedupeWindow is settings' dedupe_window, or the default.
func dedupeWindow(settings definition.Settings) time.Duration {
	if d, err := time.ParseDuration(settings.DedupeWindow); err == nil && d > 0 {
		return d
	}
	return defaultDedupeWindow
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

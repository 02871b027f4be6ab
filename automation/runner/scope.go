package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/runs"
)

// Trigger is a run's trigger_json: what started it.
type Trigger struct {
	EntrypointID string          `json:"entrypoint_id,omitempty"`
	Event        json.RawMessage `json:"event,omitempty"`
	Inputs       json.RawMessage `json:"inputs,omitempty"`
	ScheduledFor string          `json:"scheduled_for,omitempty"`
}

// Scope is what a run's expressions read: event, inputs, instance and earlier steps' outputs.
type Scope struct {
	Event    map[string]any
	Inputs   map[string]any
	Instance map[string]any
	Steps    map[string]any
}

func (s *Scope) vars(now time.Time) expr.Vars {
	return expr.Vars{Event: s.Event, Inputs: s.Inputs, Instance: s.Instance, Steps: s.Steps, Now: now}
}

// JSON is the scope as code blocks get it: one global per variable.
func (s *Scope) JSON(now time.Time) map[string]json.RawMessage {
	enc := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			return json.RawMessage("null")
		}
		return b
	}
	return map[string]json.RawMessage{
		expr.VarEvent:    enc(orEmpty(s.Event)),
		expr.VarInputs:   enc(orEmpty(s.Inputs)),
		expr.VarInstance: enc(orEmpty(s.Instance)),
		expr.VarSteps:    enc(orEmpty(s.Steps)),
		expr.VarNow:      enc(now.UTC().Format(time.RFC3339Nano)),
	}
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// scopeOf builds a run's scope from its trigger, its instance and its finished steps.
func (r *Runner) scopeOf(ctx context.Context, run *runs.Run) (*Scope, error) {
	var t Trigger
	if err := json.Unmarshal([]byte(run.Trigger), &t); err != nil {
		return nil, fmt.Errorf("decode trigger of run %s: %w", run.ID, err)
	}
	s := &Scope{Event: asMap(t.Event), Inputs: asMap(t.Inputs), Steps: map[string]any{}}
	for _, st := range run.Steps {
		if st.Status == runs.StepSucceeded || st.Status == runs.StepSimulated {
			s.Steps[st.BlockID] = decodeJSON(st.Outputs)
		}
	}
	if run.InstanceID != "" {
		inst, err := r.instanceScope(ctx, run.InstanceID)
		if err != nil {
			return nil, err
		}
		s.Instance = inst
	}
	return s, nil
}

// instanceScope is what expressions see of an instance: id, key, status, inputs and the newest
// value of each handle.
func (r *Runner) instanceScope(ctx context.Context, id string) (map[string]any, error) {
	inst, err := r.runs.Instance(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read instance %s: %w", id, err)
	}
	handles, err := r.runs.LatestHandles(ctx, id)
	if err != nil {
		return nil, err
	}
	hs := make(map[string]any, len(handles))
	for k, v := range handles {
		hs[k] = v
	}
	return map[string]any{
		"id": inst.ID, "key": inst.Key, "status": inst.Status,
		"inputs": asMap(json.RawMessage(inst.Inputs)), "handles": hs,
	}, nil
}

func asMap(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return map[string]any{}
	}
	m, _ := decodeJSON(string(raw)).(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

// runDefinition is a run's definition with its blocks in execution order.
type runDefinition struct {
	definition.Definition
	order []definition.Block
}

var errBadDefinition = errors.New("the run's definition is not valid")

func parseRunDefinition(run *runs.Run) (*runDefinition, error) {
	def, errs := definition.Parse([]byte(run.Definition))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %v", errBadDefinition, errs[0])
	}
	order, err := ordered(def)
	if err != nil {
		return nil, err
	}
	return &runDefinition{Definition: def, order: order}, nil
}

// ordered is def's blocks in execution order.
func ordered(def definition.Definition) ([]definition.Block, error) {
	idx, errs := definition.Order(def.Blocks)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %v", errBadDefinition, errs[0])
	}
	out := make([]definition.Block, len(idx))
	for i, j := range idx {
		out[i] = def.Blocks[j]
	}
	return out, nil
}

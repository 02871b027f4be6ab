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
	"github.com/hangar-dev/hangar/platform/ids"
)

// sideEffects are the block types a dry run records instead of executing.
var sideEffects = map[string]bool{
	definition.BlockHTTP:     true,
	definition.BlockTask:     true,
	definition.BlockPrompt:   true,
	definition.BlockInstance: true,
	definition.BlockDelay:    true,
}

// execute runs one block with its rendered fields.
func (r *Runner) execute(ctx context.Context, run *runs.Run, b definition.Block, s *runs.Step, f map[string]any, vars expr.Vars) (result, error) {
	if run.DryRun && sideEffects[b.Type] {
		return result{outputs: map[string]any{"would": f}}, nil
	}
	switch b.Type {
	case definition.BlockFilter:
		return r.filter(f, vars)
	case definition.BlockCode:
		return r.runCode(ctx, f, vars)
	case definition.BlockHTTP:
		return r.httpBlock(ctx, run.Actor, f)
	case definition.BlockTask:
		return r.task(ctx, run, b, s, f)
	case definition.BlockPrompt:
		return r.prompt(ctx, run, b, s, f)
	case definition.BlockInstance:
		return r.instance(ctx, run, b, f)
	case definition.BlockDelay:
		return r.delay(s, f)
	}
	return result{}, permanent("unknown block type %q", b.Type)
}

func (r *Runner) filter(f map[string]any, vars expr.Vars) (result, error) {
	cond, _ := f["condition"].(string)
	prog, err := r.env.Compile(cond)
	if err != nil {
		return result{}, permanent("condition: %v", err)
	}
	pass, known, err := prog.EvalBool(vars)
	if err != nil {
		return result{}, permanent("condition: %v", err)
	}
	if !known {
		return result{}, permanent("condition: its value is not known")
	}
	return result{outputs: map[string]any{"pass": pass}, filtered: !pass}, nil
}

func (r *Runner) runCode(ctx context.Context, f map[string]any, vars expr.Vars) (result, error) {
	if r.code == nil {
		return result{}, permanent("code blocks are not available here: no JavaScript runtime is configured")
	}
	src, _ := f["source"].(string)
	scope := Scope{Event: vars.Event, Inputs: vars.Inputs, Instance: vars.Instance, Steps: vars.Steps}
	value, scriptErr, err := r.code(ctx, src, scope.JSON(vars.Now))
	if err != nil {
		return result{}, fmt.Errorf("run code: %w", err)
	}
	if scriptErr != nil {
		return result{}, permanent("%v", scriptErr)
	}
	return result{outputs: decodeJSON(string(value))}, nil
}

// requestID names what one step of one run asks for, the same across its attempts.
func requestID(run *runs.Run, b definition.Block) string {
	return ids.FromKey("req", run.ID+"\x00"+b.ID)
}

// taskProgress is what a waiting task block remembers.
type taskProgress struct {
	TaskID    string `json:"task_id"`
	SessionID string `json:"session_id,omitempty"`
}

func (r *Runner) task(ctx context.Context, run *runs.Run, b definition.Block, s *runs.Step, f map[string]any) (result, error) {
	if r.effects == nil {
		return result{}, permanent("task blocks are not available here: tasks are not configured")
	}
	var p taskProgress
	var st TaskState
	var err error
	if s.Progress != "" && json.Unmarshal([]byte(s.Progress), &p) == nil && p.TaskID != "" {
		st, err = r.effects.TaskState(ctx, run.Actor, p.TaskID)
	} else {
		st, err = r.effects.StartTask(ctx, run.Actor, requestID(run, b), TaskSpec{
			ProfileID: str(f, "profile_id"), Prompt: str(f, "prompt"), Title: str(f, "title"),
			Harness: str(f, "harness"), Model: str(f, "model"), ModelRouter: str(f, "model_router"), Effort: str(f, "effort"),
		})
	}
	if err != nil {
		return result{}, effectError("task", err)
	}
	out := map[string]any{"task_id": st.TaskID, "session_id": st.SessionID, "status": st.Status}
	if wait, _ := f["wait"].(bool); wait && !st.Done {
		if deadline, ok := durationField(f, "timeout"); ok && r.now().Sub(s.StartedAt) > deadline {
			return result{}, permanent("task %s did not finish within %s", st.TaskID, deadline)
		}
		return result{sessionID: st.SessionID, wakeAt: r.now().Add(r.opts.TaskPoll),
			progress: encodeJSON(taskProgress{TaskID: st.TaskID, SessionID: st.SessionID})}, nil
	}
	if st.Failed {
		return result{}, permanent("task %s ended %s", st.TaskID, st.Status)
	}
	if wait, _ := f["wait"].(bool); wait {
		// The run waited for the agent to finish and takes over from here: the task is done.
		if st, err = r.effects.CloseTask(ctx, run.Actor, st.TaskID); err != nil {
			return result{}, effectError("task", err)
		}
		out["status"] = st.Status
	}
	return result{outputs: out, sessionID: st.SessionID}, nil
}

func (r *Runner) prompt(ctx context.Context, run *runs.Run, b definition.Block, s *runs.Step, f map[string]any) (result, error) {
	if r.effects == nil {
		return result{}, permanent("prompt blocks are not available here: sessions are not configured")
	}
	session := str(f, "session_id")
	if session == "" && run.InstanceID != "" {
		hs, err := r.runs.LatestHandles(ctx, run.InstanceID)
		if err != nil {
			return result{}, err
		}
		session = hs["session"]
	}
	if session == "" {
		return result{}, permanent("session_id: no session given and the run's instance has no \"session\" handle")
	}
	promptID := requestID(run, b)
	if s.Progress == "" {
		if err := r.effects.SendPrompt(ctx, run.Actor, session, promptID, str(f, "prompt")); err != nil {
			return result{}, effectError("prompt", err)
		}
	}
	out := map[string]any{"session_id": session, "prompt_id": promptID}
	if wait, _ := f["wait"].(bool); wait {
		done, status, err := r.effects.PromptDone(ctx, run.Actor, session, promptID)
		if err != nil {
			return result{}, effectError("prompt", err)
		}
		if !done {
			return result{sessionID: session, wakeAt: r.now().Add(r.opts.TaskPoll), progress: `{"sent":true}`}, nil
		}
		out["status"] = status
	}
	return result{outputs: out, sessionID: session}, nil
}

func (r *Runner) instance(ctx context.Context, run *runs.Run, b definition.Block, f map[string]any) (result, error) {
	if run.InstanceID == "" {
		return result{}, permanent("this run has no instance: the automation declares no instance key")
	}
	switch action := str(f, "action"); action {
	case "open":
		inst, err := r.runs.Instance(ctx, run.InstanceID)
		if err != nil {
			return result{}, err
		}
		return result{outputs: map[string]any{"instance_id": inst.ID, "key": inst.Key, "status": inst.Status}}, nil
	case "write_handle":
		h := runs.Handle{Name: str(f, "handle"), Value: str(f, "value"), WrittenBy: run.ID + "/" + b.ID}
		if err := r.runs.WriteHandle(ctx, run.InstanceID, h); err != nil {
			if errors.Is(err, runs.ErrInstanceClosed) {
				return result{}, permanent("%v", err)
			}
			return result{}, err
		}
		return result{outputs: map[string]any{"instance_id": run.InstanceID, "handle": h.Name, "value": h.Value}}, nil
	case "close":
		closed, err := r.runs.CloseInstance(ctx, run.InstanceID, str(f, "reason"))
		if err != nil {
			return result{}, err
		}
		return result{outputs: map[string]any{"instance_id": run.InstanceID, "closed": closed}}, nil
	default:
		return result{}, permanent("action: %q is not open, write_handle or close", action)
	}
}

func (r *Runner) delay(s *runs.Step, f map[string]any) (result, error) {
	now := r.now()
	var until time.Time
	if s.Progress != "" {
		var p struct {
			Until time.Time `json:"until"`
		}
		if err := json.Unmarshal([]byte(s.Progress), &p); err != nil {
			return result{}, permanent("delay: bad progress: %v", err)
		}
		until = p.Until
	} else if d, ok := durationField(f, "duration"); ok {
		until = now.Add(d)
	} else if u := str(f, "until"); u != "" {
		t, err := time.Parse(time.RFC3339, u)
		if err != nil {
			return result{}, permanent("until: %v", err)
		}
		until = t
	} else {
		return result{}, permanent("delay needs duration or until")
	}
	if now.Before(until) {
		return result{wakeAt: until, progress: encodeJSON(map[string]any{"until": until})}, nil
	}
	return result{outputs: map[string]any{"waited_until": until.UTC().Format(time.RFC3339)}}, nil
}

// ErrRefused marks an Effects failure that trying again cannot fix (a bad profile, a missing
// session); other failures are retried per the block's retry policy.
var ErrRefused = errors.New("refused")

func effectError(block string, err error) error {
	if errors.Is(err, ErrRefused) {
		return permanent("%s: %v", block, err)
	}
	return transient("%s: %v", block, err)
}

func str(f map[string]any, key string) string {
	s, _ := f[key].(string)
	return s
}

func durationField(f map[string]any, key string) (time.Duration, bool) {
	d, err := time.ParseDuration(str(f, key))
	return d, err == nil && d > 0
}

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// Start is a run to create.
type Start struct {
	// ID, when set, is the run's id; a run with that id existing already makes Start answer it
	// with created false. Deliveries derive it from the automation and the delivery key.
	ID            string
	AutomationID  string
	Version       int
	Actor         string
	Definition    definition.Definition
	Trigger       Trigger
	TriggerSource string
	EventKey      string
	DeliveryKey   string
	DryRun        bool
	InstanceID    string
	// RetryOf and RetryFrom name the run and block a retry starts from.
	RetryOf, RetryFrom string
}

// RunID is the id of the one run an automation makes of a delivery.
func RunID(automationID, deliveryKey string) string {
	return ids.FromKey("run", automationID+"\x00"+deliveryKey)
}

// Start creates a run with a pending step per block and queues it.
func (r *Runner) Start(ctx context.Context, st Start) (run *runs.Run, created bool, err error) {
	order, err := ordered(st.Definition)
	if err != nil {
		return nil, false, fmt.Errorf("start run of %s: %w", st.AutomationID, err)
	}
	return r.create(ctx, st, order, nil)
}

func (r *Runner) create(ctx context.Context, st Start, order []definition.Block, reuse func(definition.Block) *runs.Step) (*runs.Run, bool, error) {
	defJSON, err := json.Marshal(st.Definition)
	if err != nil {
		return nil, false, fmt.Errorf("encode definition: %w", err)
	}
	trigger, err := json.Marshal(st.Trigger)
	if err != nil {
		return nil, false, fmt.Errorf("encode trigger: %w", err)
	}
	if st.ID == "" {
		st.ID = ids.New("run")
	}
	run := &runs.Run{
		ID: st.ID, AutomationID: st.AutomationID, Version: st.Version, Status: runs.Queued, Actor: st.Actor,
		TriggerSource: st.TriggerSource, EntrypointID: st.Trigger.EntrypointID, EventKey: st.EventKey,
		DeliveryKey: st.DeliveryKey, DryRun: st.DryRun, InstanceID: st.InstanceID,
		Trigger: string(trigger), Definition: string(defJSON), RetryOf: st.RetryOf, RetryFrom: st.RetryFrom,
	}
	for _, b := range order {
		s := runs.Step{BlockID: b.ID, BlockType: b.Type, Status: runs.StepPending}
		if reuse != nil {
			if old := reuse(b); old != nil {
				s = *old
			}
		}
		run.Steps = append(run.Steps, s)
	}
	if err := r.runs.Create(ctx, run); err != nil {
		if store.IsAlreadyExists(err) {
			existing, gerr := r.runs.Get(ctx, st.ID)
			return existing, false, gerr
		}
		return nil, false, err
	}
	r.enqueue(ctx, run.ID)
	return run, true, nil
}

// enqueue hands a run to the queue; a failure only delays it until the next Sweep.
func (r *Runner) enqueue(ctx context.Context, runID string) {
	if r.queue == nil {
		return
	}
	if err := r.queue.Enqueue(ctx, runID); err != nil {
		r.log.Warn("queue automation run; the sweeper will pick it up", "run", runID, "err", err)
	}
}

// ErrNotRetryable is a RetryRun of a run that has not ended or of a block it does not have.
var ErrNotRetryable = errors.New("run cannot be retried")

// Retry makes a new run of an ended run's definition and trigger that starts at block from
// ("" = the first block not succeeded), reusing the outputs of the blocks before it. old is the
// run as its caller just read it.
func (r *Runner) Retry(ctx context.Context, old *runs.Run, from string) (*runs.Run, error) {
	runID := old.ID
	if !old.Status.Ended() {
		return nil, fmt.Errorf("%w: run %s is %s", ErrNotRetryable, runID, old.Status)
	}
	def, err := parseRunDefinition(old)
	if err != nil {
		return nil, err
	}
	if from == "" {
		for _, s := range old.Steps {
			if s.Status != runs.StepSucceeded {
				from = s.BlockID
				break
			}
		}
	}
	if from == "" || old.Step(from) == nil {
		return nil, fmt.Errorf("%w: run %s has no step %q to retry from", ErrNotRetryable, runID, from)
	}
	var t Trigger
	if err := json.Unmarshal([]byte(old.Trigger), &t); err != nil {
		return nil, fmt.Errorf("decode trigger of run %s: %w", runID, err)
	}
	// Blocks before from in execution order keep what they did; all of them must have done it,
	// or the retry would skip a block that never ran.
	before := map[string]bool{}
	for _, b := range def.order {
		if b.ID == from {
			break
		}
		if s := old.Step(b.ID); s == nil || (s.Status != runs.StepSucceeded && s.Status != runs.StepSimulated) {
			return nil, fmt.Errorf("%w: block %s, before %s, did not succeed in run %s: retry from it", ErrNotRetryable, b.ID, from, runID)
		}
		before[b.ID] = true
	}
	st := Start{
		AutomationID: old.AutomationID, Version: old.Version, Actor: old.Actor, Definition: def.Definition,
		Trigger: t, TriggerSource: runs.SourceRetry, EventKey: old.EventKey, DryRun: old.DryRun, InstanceID: old.InstanceID,
		RetryOf: runID, RetryFrom: from,
	}
	run, _, err := r.create(ctx, st, def.order, func(b definition.Block) *runs.Step {
		if !before[b.ID] {
			return nil
		}
		reused := *old.Step(b.ID)
		return &reused
	})
	return run, err
}

// Stop asks a run to stop. A run no worker holds (queued or waiting) stops at once; a running
// one stops at its next step boundary. sent is false when the run had ended already.
func (r *Runner) Stop(ctx context.Context, runID, reason string) (sent bool, err error) {
	if reason == "" {
		reason = "stop requested"
	}
	now := r.now()
	run, err := r.runs.Update(ctx, runID, func(w *runs.Run) error {
		sent = !w.Status.Ended()
		if !sent {
			return nil
		}
		w.StopRequested = reason
		if w.Status == runs.Queued || w.Status == runs.Waiting {
			w.End(runs.Stopped, "stopped: "+reason, now)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if sent && run.Status == runs.Running {
		r.enqueue(ctx, runID)
	}
	return sent, nil
}

// Sweep queues the runs that wait for nobody: parked runs whose time came, runs whose worker
// died and queued runs whose message was lost. It answers how many it queued.
func (r *Runner) Sweep(ctx context.Context) (int, error) {
	stalled, err := r.runs.Stalled(ctx, r.now(), r.opts.Lease, 200)
	if err != nil {
		return 0, err
	}
	for _, run := range stalled {
		r.enqueue(ctx, run.ID)
	}
	return len(stalled), nil
}

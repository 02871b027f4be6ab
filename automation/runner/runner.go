// Package runner executes automation runs: it takes a run's lease, walks its blocks in
// dependency order, renders each block's fields against the run's scope, executes it (or, in a
// dry run, records what a block with side effects would have done), and writes the step's
// result before going on, so that a worker that dies mid-run loses at most the step it was in:
// the next worker continues from the last finished step. Retries with exponential backoff,
// delays and waits on tasks park the run (status waiting, WakeAt) instead of holding a worker;
// the sweeper (Sweep) hands parked and orphaned runs back to the queue.
//
// The runner knows nothing of transports or of the services a block touches: tasks, prompts,
// secrets and the run queue come in as interfaces (Effects, Queue).
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// Effects are what blocks with side effects act on. Every call is made on behalf of the run's
// actor (the automation's owner).
type Effects interface {
	// StartTask starts a task and answers its id and first session; requestID is stable across
	// attempts of one step, so a retried step finds the task it started.
	StartTask(ctx context.Context, actor, requestID string, spec TaskSpec) (TaskState, error)
	// TaskState reports a task's progress.
	TaskState(ctx context.Context, actor, taskID string) (TaskState, error)
	// CloseTask closes a task whose agent finished, as the automation that waited on it is done
	// with it (the task is completed), and reports its progress; closing a closed task is no
	// error.
	CloseTask(ctx context.Context, actor, taskID string) (TaskState, error)
	// SendPrompt queues a prompt in a session; promptID makes it idempotent.
	SendPrompt(ctx context.Context, actor, sessionID, promptID, text string) error
	// PromptDone reports whether a prompt's turn has ended, and how.
	PromptDone(ctx context.Context, actor, sessionID, promptID string) (done bool, status string, err error)
	// Secret returns an organisation secret's value for actor, once the secret's access policy
	// lets actor use it (checked at every use, so a narrowed policy stops the next request).
	Secret(ctx context.Context, actor, name string) (string, error)
}

// TaskSpec is what a task block (or an automation draft) asks for.
type TaskSpec struct {
	// Type is the task's type: "automation" when empty.
	Type                                                                       string
	ProfileID, Prompt, Title, Harness, Model, ModelRouter, Effort, HarnessMode string
}

// TaskState is a task's id, session and progress.
type TaskState struct {
	TaskID    string
	SessionID string
	Status    string
	Done      bool
	Failed    bool
}

// CodeRunner runs a code block's JavaScript with vars bound as globals and answers its JSON
// result, or the script's own error (thrown, timed out, over its memory) as scriptErr; err is
// for failures of the runtime itself.
type CodeRunner func(ctx context.Context, source string, vars map[string]json.RawMessage) (value json.RawMessage, scriptErr, err error)

// Queue hands a run to a worker (Pub/Sub in production).
type Queue interface {
	Enqueue(ctx context.Context, runID string) error
}

// Options configure a Runner.
type Options struct {
	// Worker names this worker in leases.
	Worker string
	// Lease is how long a worker holds a run between writes; a run whose lease ran out is taken
	// over by the next worker. Default 2 minutes.
	Lease time.Duration
	// InlineWait is the longest wait (a backoff or a delay) a worker sleeps through instead of
	// parking the run. Default 5 s.
	InlineWait time.Duration
	// TaskPoll is how often a waiting task block checks on its task. Default 10 s.
	TaskPoll time.Duration
	// Retry is the deployment's default retry policy for blocks that name none.
	Retry definition.Retry
	// Allow is the host allow-list of http blocks, checked on the first URL and on every
	// redirect; Egress is what their connections may reach beyond public addresses, checked on
	// every connect.
	Allow  HostPolicy
	Egress egress.Policy
}

// Runner executes runs.
type Runner struct {
	runs    *runs.Store
	env     *expr.Env
	code    CodeRunner
	effects Effects
	queue   Queue
	now     func() time.Time
	log     *slog.Logger
	opts    Options
	http    *http.Client
}

// New returns a Runner.
func New(store *runs.Store, env *expr.Env, code CodeRunner, effects Effects, queue Queue, now func() time.Time, log *slog.Logger, opts Options) *Runner {
	if opts.Lease <= 0 {
		opts.Lease = 2 * time.Minute
	}
	if opts.InlineWait <= 0 {
		opts.InlineWait = 5 * time.Second
	}
	if opts.TaskPoll <= 0 {
		opts.TaskPoll = 10 * time.Second
	}
	if opts.Retry.MaxAttempts <= 0 {
		opts.Retry = definition.Retry{MaxAttempts: 3, Backoff: "2s"}
	}
	client := opts.Egress.Client(egress.MaxRedirects, func(u *url.URL) error { return opts.Allow.Allows(u.Hostname()) })
	return &Runner{runs: store, env: env, code: code, effects: effects, queue: queue, now: now, log: log, opts: opts, http: client}
}

// errParked ends a pass over a run that now waits.
var errParked = errors.New("run parked")

// Advance executes a run as far as it can go now. It returns nil when the run ended, parked or
// is held by another worker; an error means the pass should be retried (the message redelivered).
func (r *Runner) Advance(ctx context.Context, runID string) error {
	run, err := r.claim(ctx, runID)
	if err != nil || run == nil {
		return err
	}
	def, err := parseRunDefinition(run)
	if err != nil {
		return r.finish(ctx, run, runs.Failed, err.Error())
	}
	scope, err := r.scopeOf(ctx, run)
	if err != nil {
		return err
	}
	for _, b := range def.order {
		if run.StopRequested != "" {
			return r.finish(ctx, run, runs.Stopped, "stopped: "+run.StopRequested)
		}
		step := *run.Step(b.ID)
		if step.Status.Done() {
			continue
		}
		outcome, err := r.step(ctx, run, b, &step, scope)
		switch {
		case errors.Is(err, errParked):
			return nil
		case errors.Is(err, runs.ErrLeaseLost):
			return nil
		case err != nil:
			return err
		}
		switch outcome {
		case runs.Failed:
			return r.finish(ctx, run, runs.Failed, fmt.Sprintf("block %s: %s", b.ID, step.Error))
		case runs.Filtered:
			return r.finish(ctx, run, runs.Filtered, "")
		}
		scope.Steps[b.ID] = decodeJSON(step.Outputs)
	}
	return r.finish(ctx, run, runs.Completed, "")
}

// claim takes the run's lease when it may run now; nil means there is nothing to do.
func (r *Runner) claim(ctx context.Context, runID string) (*runs.Run, error) {
	now := r.now()
	run, err := r.runs.Update(ctx, runID, func(run *runs.Run) error {
		switch {
		case run.Status.Ended(),
			run.Status == runs.Waiting && run.WakeAt.After(now) && run.StopRequested == "",
			run.Status == runs.Running && run.LeaseOwner != r.opts.Worker && run.LeaseUntil.After(now):
			return errIdle
		}
		run.Status = runs.Running
		run.LeaseOwner, run.LeaseUntil = r.opts.Worker, now.Add(r.opts.Lease)
		run.WakeAt = time.Time{}
		if run.StartedAt.IsZero() {
			run.StartedAt = now
		}
		return nil
	})
	if errors.Is(err, errIdle) {
		return nil, nil
	}
	if errors.Is(err, runs.ErrNotFound) {
		r.log.Warn("automation run to advance does not exist", "run", runID)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim run %s: %w", runID, err)
	}
	return run, nil
}

var errIdle = errors.New("run has nothing to do now")

// finish ends the run and skips the steps it never reached.
func (r *Runner) finish(ctx context.Context, run *runs.Run, status runs.Status, msg string) error {
	now := r.now()
	_, err := r.runs.UpdateLeased(ctx, run, r.opts.Worker, func(w *runs.Run) error {
		w.End(status, msg, now)
		return nil
	})
	if errors.Is(err, runs.ErrLeaseLost) {
		return nil
	}
	if err == nil {
		telemetry.RunEnded(ctx, string(status))
	}
	return err
}

// save writes the run's step back under the lease, and renews the lease.
func (r *Runner) save(ctx context.Context, run *runs.Run, step *runs.Step, runChange func(*runs.Run)) error {
	now := r.now()
	saved, err := r.runs.UpdateLeased(ctx, run, r.opts.Worker, func(w *runs.Run) error {
		*w.Step(step.BlockID) = *step
		if step.SessionID != "" && !slices.Contains(w.SessionIDs, step.SessionID) {
			w.SessionIDs = append(w.SessionIDs, step.SessionID)
		}
		w.LeaseUntil = now.Add(r.opts.Lease)
		if runChange != nil {
			runChange(w)
		}
		return nil
	})
	if err != nil {
		return err
	}
	*run = *saved
	return nil
}

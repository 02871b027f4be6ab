package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/runs"
)

// result is what executing a block gave.
type result struct {
	outputs   any
	sessionID string
	// filtered ends the run as filtered (a filter block said no).
	filtered bool
	// wakeAt, when set, means the block is not done: run it again at wakeAt with progress.
	wakeAt   time.Time
	progress string
}

// blockError is a block's failure; retryable ones are tried again per the retry policy.
type blockError struct {
	msg       string
	retryable bool
}

func (e *blockError) Error() string { return e.msg }

func permanent(format string, args ...any) error {
	return &blockError{msg: fmt.Sprintf(format, args...)}
}

func transient(format string, args ...any) error {
	return &blockError{msg: fmt.Sprintf(format, args...), retryable: true}
}

// step runs one block to its end, or parks the run, writing each state the step passes through.
// It answers runs.Failed or runs.Filtered when the run must end so, "" to go on.
func (r *Runner) step(ctx context.Context, run *runs.Run, b definition.Block, s *runs.Step, scope *Scope) (runs.Status, error) {
	policy := r.retryOf(b)
	for {
		now := r.now()
		resuming := s.Status == runs.StepWaiting && s.Progress != ""
		if !resuming {
			// A new attempt: the first, one after a backoff, or one after a worker died mid-step.
			s.Attempt++
			s.Progress, s.Error, s.Outputs = "", "", ""
			s.StartedAt, s.EndedAt = now, time.Time{}
		}
		s.Status, s.WakeAt = runs.StepRunning, time.Time{}
		vars := scope.vars(now)
		rendered, err := r.render(b, vars)
		if err == nil {
			s.Inputs = encodeJSON(rendered)
		}
		if err := r.save(ctx, run, s, nil); err != nil {
			return "", err
		}
		var res result
		if err == nil {
			res, err = r.execute(ctx, run, b, s, rendered, vars)
		}
		if ctx.Err() != nil {
			// The worker is going away: leave the step as it is for the next one.
			return "", ctx.Err()
		}
		now = r.now()
		var be *blockError
		switch {
		case err == nil && !res.wakeAt.IsZero():
			s.Progress = res.progress
			if err := r.wait(ctx, run, s, res.wakeAt); err != nil {
				return "", err
			}
			continue
		case err == nil:
			s.Status, s.EndedAt, s.Outputs = runs.StepSucceeded, now, encodeJSON(res.outputs)
			if run.DryRun && sideEffects[b.Type] {
				s.Status = runs.StepSimulated
			}
			if res.sessionID != "" {
				s.SessionID = res.sessionID
			}
			if err := r.save(ctx, run, s, nil); err != nil {
				return "", err
			}
			if res.filtered {
				return runs.Filtered, nil
			}
			return "", nil
		case errors.As(err, &be):
			s.Error = be.msg
			if be.retryable && s.Attempt < policy.attempts {
				// The next attempt starts afresh, whether it follows an inline wait or a parked
				// one: progress kept through a park would resume this attempt instead, forever.
				s.Progress = ""
				if err := r.wait(ctx, run, s, now.Add(policy.backoff(s.Attempt))); err != nil {
					return "", err
				}
				continue
			}
			s.Status, s.EndedAt = runs.StepFailed, now
			if err := r.save(ctx, run, s, nil); err != nil {
				return "", err
			}
			return runs.Failed, nil
		default:
			return "", err
		}
	}
}

// wait holds the step until wakeAt: a short wait is slept through, a long one parks the run.
func (r *Runner) wait(ctx context.Context, run *runs.Run, s *runs.Step, wakeAt time.Time) error {
	s.Status, s.WakeAt = runs.StepWaiting, wakeAt
	d := wakeAt.Sub(r.now())
	if d > r.opts.InlineWait {
		if err := r.save(ctx, run, s, func(w *runs.Run) {
			w.Status, w.WakeAt = runs.Waiting, wakeAt
			w.LeaseOwner, w.LeaseUntil = "", time.Time{}
		}); err != nil {
			return err
		}
		return errParked
	}
	if err := r.save(ctx, run, s, nil); err != nil {
		return err
	}
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// rawFields are fields that hold code or a condition, evaluated by their block, not rendered.
var rawFields = map[string]map[string]bool{
	definition.BlockFilter: {"condition": true},
	definition.BlockCode:   {"source": true},
}

// render renders every templated field of the block.
func (r *Runner) render(b definition.Block, vars expr.Vars) (map[string]any, error) {
	fields := maps.Clone(b.Fields)
	raw := map[string]any{}
	for k := range rawFields[b.Type] {
		if v, ok := fields[k]; ok {
			raw[k] = v
			delete(fields, k)
		}
	}
	out, err := r.env.RenderValue(fields, vars)
	if err != nil {
		return nil, permanent("render: %v", err)
	}
	m, _ := out.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, raw)
	return m, nil
}

// retryPolicy is a block's retry policy, resolved.
type retryPolicy struct {
	attempts int
	first    time.Duration
}

func (p retryPolicy) backoff(attempt int) time.Duration {
	return p.first << min(attempt-1, 10)
}

func (r *Runner) retryOf(b definition.Block) retryPolicy {
	rp := r.opts.Retry
	if b.Retry != nil {
		rp = *b.Retry
	}
	p := retryPolicy{attempts: max(rp.MaxAttempts, 1), first: time.Second}
	if d, err := time.ParseDuration(rp.Backoff); err == nil && d > 0 {
		p.first = d
	}
	return p
}

func encodeJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}

// decodeJSON reads stored JSON; nil when there is none or it does not parse.
func decodeJSON(s string) any {
	var v any
	if s == "" || json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	return v
}

// Package automationruns serves AutomationRunService: reading an automation's runs (with the
// windows of events its filters rejected between them), instances and recent drops, and
// steering runs — StopRun and RetryRun — and instances — CloseInstance.
//
// Access: automations are shared for reading, their runs are not. A run's outputs, steps and
// events hold what the automation fetched with its owner's secrets and webhooks, so only the
// automation's owner and admins read its runs, instances and drops (and a run's actor, the
// user who started a built-in automation's run, that run); others hear not_found, as for any
// record of someone else's. Stopping, retrying and closing belong to the owner and admins.
package automationruns

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/paging"
)

// Service implements AutomationRunService.
type Service struct {
	automations *records.Store
	runs        *runs.Store
	runner      *runner.Runner
	lim         config.AutomationLimits
}

var _ appv1connect.AutomationRunServiceHandler = (*Service)(nil)

// New returns the service; without a runner (no Pub/Sub to carry runs) it reads but answers
// StopRun and RetryRun unavailable.
func New(automations *records.Store, rs *runs.Store, rn *runner.Runner, lim config.AutomationLimits) *Service {
	return &Service{automations: automations, runs: rs, runner: rn, lim: lim}
}

// errNoRunner answers what needs the run queue where there is none.
var errNoRunner = connect.NewError(connect.CodeUnavailable, errors.New("automation runs need Pub/Sub, which is not configured here"))

// automation reads an automation whose runs the caller may read: not_found otherwise.
func (s *Service) automation(ctx context.Context, id string) (*records.AutomationRecord, error) {
	if err := ids.Lookup("automation_id", "automation", records.IDPrefix, id); err != nil {
		return nil, err
	}
	a, err := s.automations.Get(ctx, id)
	if errors.Is(err, records.ErrNotFound) {
		return nil, apierr.NotFound("automation", id)
	}
	if err != nil {
		return nil, err
	}
	if p, _ := auth.Caller(ctx); !a.ChangeableBy(p) {
		return nil, apierr.NotFound("automation", id)
	}
	return a, nil
}

func (s *Service) run(ctx context.Context, id string) (*runs.Run, error) {
	if err := ids.Lookup("run_id", "run", "run", id); err != nil {
		return nil, err
	}
	r, err := s.runs.Get(ctx, id)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, apierr.NotFound("run", id)
	}
	if err != nil {
		return nil, err
	}
	if p, _ := auth.Caller(ctx); p.UserID != "" && p.UserID == r.Actor {
		return r, nil
	}
	if _, err := s.automation(ctx, r.AutomationID); connect.CodeOf(err) == connect.CodeNotFound {
		return nil, apierr.NotFound("run", id)
	} else if err != nil {
		return nil, err
	}
	return r, nil
}

func (s *Service) ListRuns(ctx context.Context, req *connect.Request[appv1.ListRunsRequest]) (*connect.Response[appv1.ListRunsResponse], error) {
	m := req.Msg
	limit, err := paging.Limit("limit", int64(m.GetLimit()), s.lim.Runs)
	if err != nil {
		return nil, err
	}
	if _, err := s.automation(ctx, m.GetAutomationId()); err != nil {
		return nil, err
	}
	list, err := s.runs.List(ctx, runs.ListQuery{AutomationID: m.GetAutomationId(), InstanceID: m.GetInstanceId(), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := &appv1.ListRunsResponse{}
	for _, r := range list {
		out.Runs = append(out.Runs, r.Brief())
	}
	if m.GetIncludeFiltered() {
		since := time.Time{}
		if len(list) == limit {
			since = list[len(list)-1].CreatedAt
		}
		filtered, err := s.runs.FilteredSince(ctx, m.GetAutomationId(), since, s.lim.FilteredEvents)
		if err != nil {
			return nil, err
		}
		out.Filtered = Windows(list, filtered)
	}
	return connect.NewResponse(out), nil
}

// Windows groups filtered events (newest first) into the windows between runs (newest first):
// each window is the filtered events after one run and before the next, named by the run
// that followed them ("" for those after the newest run).
func Windows(list []*runs.Run, filtered []runs.FilteredEvent) []*appv1.FilteredWindow {
	var out []*appv1.FilteredWindow
	var cur *appv1.FilteredWindow
	ri := 0
	for _, f := range filtered {
		next := ""
		// The run after f is the oldest run created after it.
		for ri < len(list) && list[ri].CreatedAt.After(f.At) {
			ri++
		}
		if ri > 0 {
			next = list[ri-1].ID
		}
		if cur == nil || cur.BeforeRunId != next {
			cur = &appv1.FilteredWindow{BeforeRunId: next, LastAt: clock.Format(f.At)}
			out = append(out, cur)
		}
		cur.Count++
		cur.FirstAt = clock.Format(f.At)
	}
	return out
}

func (s *Service) GetRun(ctx context.Context, req *connect.Request[appv1.GetRunRequest]) (*connect.Response[appv1.GetRunResponse], error) {
	r, err := s.run(ctx, req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetRunResponse{Run: r.ToProto()}), nil
}

func (s *Service) StopRun(ctx context.Context, req *connect.Request[appv1.StopRunRequest]) (*connect.Response[appv1.StopRunResponse], error) {
	r, err := s.run(ctx, req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := s.owned(ctx, r.AutomationID); err != nil {
		return nil, err
	}
	if s.runner == nil {
		return nil, errNoRunner
	}
	sent, err := s.runner.Stop(ctx, r.ID, req.Msg.GetReason())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.StopRunResponse{Sent: sent}), nil
}

func (s *Service) RetryRun(ctx context.Context, req *connect.Request[appv1.RetryRunRequest]) (*connect.Response[appv1.RetryRunResponse], error) {
	r, err := s.run(ctx, req.Msg.GetRunId())
	if err != nil {
		return nil, err
	}
	if err := s.owned(ctx, r.AutomationID); err != nil {
		return nil, err
	}
	if from := req.Msg.GetFromStepId(); from != "" && r.Step(from) == nil {
		return nil, apierr.InvalidArgument("from_step_id", "run "+r.ID+" has no step "+from)
	}
	if s.runner == nil {
		return nil, errNoRunner
	}
	retry, err := s.runner.Retry(ctx, r, req.Msg.GetFromStepId())
	if errors.Is(err, runner.ErrNotRetryable) {
		return nil, apierr.FailedPrecondition("%v", err)
	}
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RetryRunResponse{RunId: retry.ID}), nil
}

// owned refuses callers who may not steer the automation's runs: those who may not read
// them (everyone but its owner and admins), as automation does.
func (s *Service) owned(ctx context.Context, automationID string) error {
	_, err := s.automation(ctx, automationID)
	return err
}

func (s *Service) ListInstances(ctx context.Context, req *connect.Request[appv1.ListInstancesRequest]) (*connect.Response[appv1.ListInstancesResponse], error) {
	m := req.Msg
	limit, err := paging.Limit("limit", int64(m.GetLimit()), s.lim.Instances)
	if err != nil {
		return nil, err
	}
	if _, err := s.automation(ctx, m.GetAutomationId()); err != nil {
		return nil, err
	}
	list, err := s.runs.ListInstances(ctx, m.GetAutomationId(), m.GetIncludeClosed(), limit)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListInstancesResponse{}
	for _, in := range list {
		out.Instances = append(out.Instances, in.ToProto())
	}
	return connect.NewResponse(out), nil
}

func (s *Service) instance(ctx context.Context, id string) (*runs.Instance, error) {
	if err := ids.Lookup("id", "instance", "inst", id); err != nil {
		return nil, err
	}
	in, err := s.runs.Instance(ctx, id)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, apierr.NotFound("instance", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.automation(ctx, in.AutomationID); connect.CodeOf(err) == connect.CodeNotFound {
		return nil, apierr.NotFound("instance", id)
	} else if err != nil {
		return nil, err
	}
	return in, nil
}

func (s *Service) GetInstance(ctx context.Context, req *connect.Request[appv1.GetInstanceRequest]) (*connect.Response[appv1.GetInstanceResponse], error) {
	in, err := s.instance(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	hs, err := s.runs.Handles(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	out := &appv1.GetInstanceResponse{Instance: in.ToProto()}
	for _, h := range hs {
		out.Handles = append(out.Handles, h.ToProto())
	}
	return connect.NewResponse(out), nil
}

func (s *Service) CloseInstance(ctx context.Context, req *connect.Request[appv1.CloseInstanceRequest]) (*connect.Response[appv1.CloseInstanceResponse], error) {
	in, err := s.instance(ctx, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	if err := s.owned(ctx, in.AutomationID); err != nil {
		return nil, err
	}
	reason := req.Msg.GetReason()
	if reason == "" {
		reason = "closed by request"
	}
	closed, err := s.runs.CloseInstance(ctx, in.ID, reason)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CloseInstanceResponse{Closed: closed}), nil
}

func (s *Service) ListRecentDrops(ctx context.Context, req *connect.Request[appv1.ListRecentDropsRequest]) (*connect.Response[appv1.ListRecentDropsResponse], error) {
	limit, err := paging.Limit("limit", int64(req.Msg.GetLimit()), s.lim.Drops)
	if err != nil {
		return nil, err
	}
	if _, err := s.automation(ctx, req.Msg.GetAutomationId()); err != nil {
		return nil, err
	}
	drops, err := s.runs.Drops(ctx, req.Msg.GetAutomationId(), limit)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListRecentDropsResponse{}
	for _, d := range drops {
		out.Drops = append(out.Drops, d.ToProto())
	}
	return connect.NewResponse(out), nil
}

package composition

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/profiles"
	"github.com/hangar-dev/hangar/functions/reviews"
	"github.com/hangar-dev/hangar/functions/tasks"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/opt"
	"github.com/hangar-dev/hangar/records/secrets"
)

// reviewAgents runs a review's agents as tasks of type review, in process, acting as the pass's
// actor (as automation runs act as their owner); a finished agent's answer is its session's
// (sessions.Service.AgentAnswer).
type reviewAgents struct{ automationEffects }

var _ reviews.Agents = reviewAgents{}

func (a reviewAgents) Start(ctx context.Context, actor, requestID string, spec reviews.AgentSpec) (reviews.AgentRun, error) {
	if a.tasks == nil {
		return reviews.AgentRun{}, fmt.Errorf("%w: tasks are not configured here", reviews.ErrRefused)
	}
	ctx, err := a.as(ctx, actor)
	if err != nil {
		return reviews.AgentRun{}, err
	}
	var checkouts []tasks.Checkout
	if co := spec.Checkout; co != nil {
		checkouts = []tasks.Checkout{{Path: co.Path, URL: co.URL, Branch: co.Branch, Commit: co.Commit, Credential: co.Token}}
	}
	resp, err := a.tasks.CreateTaskWith(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		Type: "review", ProfileId: spec.ProfileID, Prompt: &spec.Prompt, RequestId: &requestID,
		Title: opt.String(spec.Title), Harness: opt.String(spec.Harness),
	}), checkouts)
	if err != nil {
		return reviews.AgentRun{}, reviewRefused(err)
	}
	st := tasks.ProgressOf(resp.Msg.GetTask())
	return reviews.AgentRun{TaskID: st.TaskID, SessionID: st.SessionID}, nil
}

func (a reviewAgents) Poll(ctx context.Context, actor, taskID string) (reviews.AgentRun, error) {
	if a.tasks == nil || a.sessions == nil {
		return reviews.AgentRun{}, fmt.Errorf("%w: tasks are not configured here", reviews.ErrRefused)
	}
	ctx, err := a.as(ctx, actor)
	if err != nil {
		return reviews.AgentRun{}, err
	}
	st, err := a.tasks.Progress(ctx, taskID)
	if err != nil {
		return reviews.AgentRun{}, reviewRefused(err)
	}
	run := reviews.AgentRun{TaskID: st.TaskID, SessionID: st.SessionID, Done: st.Done, Failed: st.Failed}
	if !run.Done || run.SessionID == "" {
		return run, nil
	}
	// The task is done once its turn ended; what its agent said is its answer.
	if run.Output, err = a.sessions.AgentAnswer(ctx, run.SessionID); err != nil {
		return run, reviewRefused(err)
	}
	return run, nil
}

func (a reviewAgents) Stop(ctx context.Context, actor, taskID string) error {
	if a.tasks == nil {
		return nil
	}
	ctx, err := a.as(ctx, actor)
	if err != nil {
		return err
	}
	return reviewRefused(a.tasks.StopSessions(ctx, taskID))
}

func (a reviewAgents) Close(ctx context.Context, actor, taskID string) error {
	if a.tasks == nil {
		return nil
	}
	ctx, err := a.as(ctx, actor)
	if err != nil {
		return err
	}
	_, err = a.tasks.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: taskID, Status: opt.String(tasks.StateCompleted)}))
	return reviewRefused(err)
}

// reviewRefused marks the API's refusals as reviews.ErrRefused, so the pass fails at once.
func reviewRefused(err error) error {
	if apierr.Refusal(err) {
		return fmt.Errorf("%w: %v", reviews.ErrRefused, err)
	}
	return err
}

// reviewService is ReviewService over d: its GitHub integration reads the org secret store
// (nil: reviews that reach GitHub fail, saying which secrets to set).
func reviewService(d Deps, effects automationEffects, secretStore *secrets.Store, profileSvc *profiles.Service) *reviews.Service {
	var gh *reviews.GitHub
	if secretStore != nil {
		gh = reviews.NewGitHub(secretStore, d.Config.Limits.Reviews.GitHubAPI, &http.Client{Transport: d.Config.Egress.Transport(), Timeout: 30 * time.Second})
	}
	host, _ := os.Hostname()
	return reviews.New(reviews.Deps{
		DB: d.DB, Agents: reviewAgents{effects}, GitHub: gh, Clock: d.Clock, Limits: d.Config.Limits.Reviews, Log: d.Log,
		Profile: func(ctx context.Context, id string) error {
			_, _, _, err := profileSvc.Launch(ctx, id)
			return err
		},
		Admin: effects.isAdmin, Worker: fmt.Sprintf("%s/%d", host, os.Getpid()), Undriven: d.PubSub == nil,
	})
}

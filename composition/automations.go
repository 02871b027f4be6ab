package composition

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/dispatch"
	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/functions/automationruns"
	"github.com/hangar-dev/hangar/functions/automations"
	"github.com/hangar-dev/hangar/functions/automationworker"
	"github.com/hangar-dev/hangar/functions/sessions"
	"github.com/hangar-dev/hangar/functions/tasks"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/opt"
	"github.com/hangar-dev/hangar/records/secrets"
)

// automationEffects lets automation runs act through the services in process, as the
// automation's owner: a task a run starts is the owner's task, a prompt the owner's prompt, a
// secret one the owner may use. The owner is an admin while they hold a live admin key.
type automationEffects struct {
	tasks    *tasks.Service
	sessions *sessions.Service
	secrets  *secrets.Store
	keys     *auth.Keys
}

var _ runner.Effects = automationEffects{}

// actor is the principal an automation acts as for its owner user.
func (e automationEffects) actor(ctx context.Context, user string) (auth.Principal, error) {
	return e.keys.Acting(ctx, user, "automation")
}

// isAdmin reports whether user, acting without a key, is an admin.
func (e automationEffects) isAdmin(ctx context.Context, user string) (bool, error) {
	p, err := e.actor(ctx, user)
	return p.Admin, err
}

// as is ctx acting for user.
func (e automationEffects) as(ctx context.Context, user string) (context.Context, error) {
	p, err := e.actor(ctx, user)
	if err != nil {
		return nil, err
	}
	return auth.WithPrincipal(ctx, p), nil
}

func (e automationEffects) StartTask(ctx context.Context, actor, requestID string, spec runner.TaskSpec) (runner.TaskState, error) {
	if e.tasks == nil {
		return runner.TaskState{}, fmt.Errorf("%w: tasks are not configured here", runner.ErrRefused)
	}
	req := &appv1.CreateTaskRequest{
		Type: cmp.Or(spec.Type, "automation"), ProfileId: spec.ProfileID, Prompt: &spec.Prompt, RequestId: &requestID,
		Title: opt.String(spec.Title), Harness: opt.String(spec.Harness), Model: opt.String(spec.Model),
		ModelRouter: opt.String(spec.ModelRouter), Effort: opt.String(spec.Effort), HarnessMode: opt.String(spec.HarnessMode),
	}
	ctx, err := e.as(ctx, actor)
	if err != nil {
		return runner.TaskState{}, err
	}
	resp, err := e.tasks.CreateTask(ctx, connect.NewRequest(req))
	if err != nil {
		return runner.TaskState{}, refusedOr(err)
	}
	return runner.TaskState(tasks.ProgressOf(resp.Msg.GetTask())), nil
}

func (e automationEffects) TaskState(ctx context.Context, actor, taskID string) (runner.TaskState, error) {
	if e.tasks == nil {
		return runner.TaskState{}, fmt.Errorf("%w: tasks are not configured here", runner.ErrRefused)
	}
	ctx, err := e.as(ctx, actor)
	if err != nil {
		return runner.TaskState{}, err
	}
	p, err := e.tasks.Progress(ctx, taskID)
	return runner.TaskState(p), refusedOr(err)
}

func (e automationEffects) CloseTask(ctx context.Context, actor, taskID string) (runner.TaskState, error) {
	if e.tasks == nil {
		return runner.TaskState{}, fmt.Errorf("%w: tasks are not configured here", runner.ErrRefused)
	}
	ctx, err := e.as(ctx, actor)
	if err != nil {
		return runner.TaskState{}, err
	}
	resp, err := e.tasks.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: taskID, Status: opt.String(tasks.StateCompleted)}))
	if err != nil {
		return runner.TaskState{}, refusedOr(err)
	}
	return runner.TaskState(tasks.ProgressOf(resp.Msg.GetTask())), nil
}

func (e automationEffects) SendPrompt(ctx context.Context, actor, sessionID, promptID, text string) error {
	if e.sessions == nil {
		return fmt.Errorf("%w: sessions are not configured here", runner.ErrRefused)
	}
	ctx, err := e.as(ctx, actor)
	if err != nil {
		return err
	}
	_, err = e.sessions.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: sessionID, Text: text, PromptId: promptID}))
	return refusedOr(err)
}

func (e automationEffects) PromptDone(ctx context.Context, actor, sessionID, promptID string) (bool, string, error) {
	if e.sessions == nil {
		return false, "", fmt.Errorf("%w: sessions are not configured here", runner.ErrRefused)
	}
	ctx, err := e.as(ctx, actor)
	if err != nil {
		return false, "", err
	}
	done, status, err := e.sessions.PromptDone(ctx, sessionID, promptID)
	return done, status, refusedOr(err)
}

func (e automationEffects) Secret(ctx context.Context, actor, name string) (string, error) {
	if e.secrets == nil {
		return "", fmt.Errorf("%w: no org secrets are kept here", runner.ErrRefused)
	}
	p, err := e.actor(ctx, actor)
	if err != nil {
		return "", err
	}
	v, err := e.secrets.Use(ctx, secrets.SubjectOf(p, ""), name)
	return v, refusedOr(err)
}

// refusedOr marks the API's refusals (apierr.Refusal) as runner.ErrRefused so the step fails at
// once; other errors are retried. Both are wrapped: runs see ErrRefused, and a caller answered
// with the error (DraftAutomation) gets the refusal's own code rather than a 500.
func refusedOr(err error) error {
	if apierr.Refusal(err) {
		return fmt.Errorf("%w: %w", runner.ErrRefused, err)
	}
	return err
}

// sharedJS is the process's JavaScript sandbox, made when a script first needs it: compiling
// the guest takes seconds of CPU (a fraction of that from a warm cache directory), so every API
// of a process (tests make many) shares one and a process that runs no script never pays.
var (
	sharedJSOnce sync.Once
	sharedJSBox  *jsbox.Box
	sharedJSErr  error
)

// sharedJS gives the shared sandbox. Its pool holds the evaluations EvalCode and TestRender may
// run at once (evals) and the default pool's instances more, so that a caller given an
// evaluation slot finds an instance rather than waiting behind others' scripts, and runs' code
// blocks find one too. Instances are made on demand and kept warm, so the pool grows only as far
// as evaluations ever ran at once.
func sharedJS(cacheDir string, evals int) func() (*jsbox.Box, error) {
	return func() (*jsbox.Box, error) {
		sharedJSOnce.Do(func() {
			if cacheDir == "" {
				if dir, err := os.UserCacheDir(); err == nil {
					cacheDir = filepath.Join(dir, "hangar", "jsbox")
				}
			}
			sharedJSBox, sharedJSErr = jsbox.New(context.Background(), jsbox.Options{CacheDir: cacheDir, PoolSize: evals + jsbox.DefaultPoolSize})
		})
		return sharedJSBox, sharedJSErr
	}
}

// automations wires AutomationService, AutomationRunService and the worker that runs
// automations. Runs need Pub/Sub to carry their steps; without it the services still define,
// validate, render and evaluate, and answer unavailable for what would start a run.
func (a *API) automations(d Deps, opts connect.HandlerOption, add func(string, http.Handler), effects automationEffects, access automations.Access, keyOptions func(context.Context, string) ([]catalog.KeyOption, bool, error)) {
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		d.Log.Error("automation expression environment", "err", err)
		add(appv1connect.NewAutomationServiceHandler(appv1connect.UnimplementedAutomationServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("automations are not available: their expression environment failed to build"))))
		add(appv1connect.NewAutomationRunServiceHandler(appv1connect.UnimplementedAutomationRunServiceHandler{}, opts))
		return
	}
	js := sharedJS(d.JSCacheDir, d.Config.Limits.Automations.Evals)
	validator := automations.Validator(env)
	validator.Script = automations.ScriptChecker(js)
	lim := d.Config.Limits.Automations
	runStore := runs.NewStore(d.DB, d.Clock.Now)
	engine := &automations.Engine{Env: env, JS: js, Runs: runStore}
	svc := automations.New(automations.Deps{
		DB: d.DB, Clock: d.Clock, Limits: d.Config.Limits, Validator: validator,
		RunStats: runStore, Engine: engine, Drafts: effects, Access: access, KeyOptions: keyOptions,
	})
	if d.PubSub != nil {
		host, _ := os.Hostname()
		rn := runner.New(runStore, env, automations.CodeRunner(js), effects, automationworker.Queue{PubSub: d.PubSub}, d.Clock.Now, d.Log, runner.Options{
			Worker: fmt.Sprintf("%s/%d", host, os.Getpid()), Lease: lim.RunLease, TaskPoll: lim.TaskPoll,
			Allow: runner.HostPolicy{Hosts: d.Config.AutomationHTTPHosts}, Egress: d.Config.Egress,
		})
		engine.Runner = rn
		dispatcher := dispatch.New(svc.Store(), runStore, rn, env, validator, d.Clock.Now, d.Log, lim.Concurrency, effects.isAdmin)
		a.worker = automationworker.New(dispatcher, rn, d.Log)
	}
	add(appv1connect.NewAutomationServiceHandler(svc, opts))
	add(appv1connect.NewAutomationRunServiceHandler(automationruns.New(svc.Store(), runStore, engine.Runner, lim), opts))
}

// AutomationWorker is the worker that starts and executes automation runs: `hangar dev` runs
// it in process; production deploys its push endpoints and tick (Routes). Nil without Pub/Sub.
func (a *API) AutomationWorker() *automationworker.Worker { return a.worker }

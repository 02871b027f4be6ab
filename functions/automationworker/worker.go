// Package automationworker is the asynchronous side of automations: it consumes webhook
// deliveries (starting runs through the dispatcher), executes run steps handed over the runs
// topic, and ticks — firing due schedules and re-queueing parked or orphaned runs. In
// production each is a Pub/Sub push endpoint or the Cloud Scheduler target (Handler); in
// `hangar dev` and tests, Run pulls both subscriptions in-process and ticks on a timer.
package automationworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/hangar-dev/hangar/automation/dispatch"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// Paths of the production endpoints, under the internal prefix that the deployment keeps off
// the public load balancer.
const (
	EventsPushPath = "/internal/automations/events"
	RunsPushPath   = "/internal/automations/runs"
	TickPath       = "/internal/automations/tick"
)

// Worker processes automation work.
type Worker struct {
	dispatcher *dispatch.Dispatcher
	runner     *runner.Runner
	log        *slog.Logger
	sweeps     []func(context.Context) error
	listeners  []Listener
}

// AlsoTick has every tick also run sweep: durable work of other services (OAuth device polls
// and refreshes) that rides the same scheduler rather than a second one.
func (w *Worker) AlsoTick(sweep func(context.Context) error) { w.sweeps = append(w.sweeps, sweep) }

// Listener is another consumer of the deliveries the worker receives and of its ticks (pull
// request reviews), so that one subscription and one tick serve both. Its HandleDelivery must
// be safe to call again with the same delivery, as the dispatcher's is.
type Listener interface {
	HandleDelivery(ctx context.Context, del triggers.Delivery) error
	Tick(ctx context.Context) error
}

// Listen adds l to the deliveries' consumers and its Tick to every tick.
func (w *Worker) Listen(l Listener) {
	w.listeners = append(w.listeners, l)
	w.AlsoTick(l.Tick)
}

// New returns a Worker.
func New(d *dispatch.Dispatcher, rn *runner.Runner, log *slog.Logger) *Worker {
	return &Worker{dispatcher: d, runner: rn, log: log}
}

// runMessage is a message of the runs topic.
type runMessage struct {
	RunID string `json:"run_id"`
}

// Queue publishes runs to the runs topic for workers to execute.
type Queue struct{ PubSub *pubsub.Client }

// Enqueue publishes a run.
func (q Queue) Enqueue(ctx context.Context, runID string) error {
	data, _ := json.Marshal(runMessage{RunID: runID})
	if _, err := q.PubSub.Publish(ctx, pubsub.TopicAutomationRuns, data, map[string]string{"run_id": runID}); err != nil {
		return fmt.Errorf("queue run %s: %w", runID, err)
	}
	return nil
}

// HandleDelivery starts the runs of one webhook delivery. A delivery that cannot be decoded is
// acknowledged and logged: redelivering it would fail the same way.
func (w *Worker) HandleDelivery(ctx context.Context, m pubsub.Message) error {
	del, err := triggers.Decode(m.Data)
	if err != nil {
		w.log.Error("automation delivery undecodable; dropped", "message", m.ID, "err", err)
		return nil
	}
	outcomes, err := w.dispatcher.Deliver(ctx, del)
	if err != nil {
		w.log.Warn("automation delivery failed; it will be redelivered", "delivery", del.DeliveryKey, "err", err)
		return err
	}
	w.log.Debug("automation delivery", "delivery", del.DeliveryKey, "event", del.EventKey, "automations", len(outcomes))
	for _, l := range w.listeners {
		if err := l.HandleDelivery(ctx, del); err != nil {
			w.log.Warn("delivery listener failed; the delivery will be redelivered", "delivery", del.DeliveryKey, "err", err)
			return err
		}
	}
	return nil
}

// HandleRun advances one run.
func (w *Worker) HandleRun(ctx context.Context, m pubsub.Message) error {
	var msg runMessage
	if err := json.Unmarshal(m.Data, &msg); err != nil || msg.RunID == "" {
		w.log.Error("automation run message undecodable; dropped", "message", m.ID, "err", err)
		return nil
	}
	if err := w.runner.Advance(ctx, msg.RunID); err != nil {
		w.log.Warn("automation run step failed; it will be redelivered", "run", msg.RunID, "err", err)
		return err
	}
	return nil
}

// Tick fires due schedules, re-queues runs nobody is executing and runs the AlsoTick sweeps.
func (w *Worker) Tick(ctx context.Context) error {
	started, ferr := w.dispatcher.Fire(ctx)
	if len(started) > 0 {
		w.log.Info("automation schedules fired", "runs", started)
	}
	_, serr := w.runner.Sweep(ctx)
	errs := []error{ferr, serr}
	for _, sweep := range w.sweeps {
		errs = append(errs, sweep(ctx))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("automation tick: %w", err)
	}
	return nil
}

// Run pulls deliveries and runs until ctx ends, ticking every tick.
func (w *Worker) Run(ctx context.Context, ps *pubsub.Client, tick time.Duration) error {
	return ps.Work(ctx, "automation", map[string]pubsub.Handler{pubsub.TopicAutomationEvents: w.HandleDelivery, pubsub.TopicAutomationRuns: w.HandleRun}, tick, w.Tick, w.log)
}

// Routes are the production endpoints: Pub/Sub push for both topics and the scheduler's tick.
func (w *Worker) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST " + EventsPushPath: pubsub.PushHandler(w.HandleDelivery),
		"POST " + RunsPushPath:   pubsub.PushHandler(w.HandleRun),
		"POST " + TickPath: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if err := w.Tick(r.Context()); err != nil {
				w.log.Error("automation tick", "err", err)
				http.Error(rw, "tick failed; the next one retries", http.StatusInternalServerError)
				return
			}
			rw.WriteHeader(http.StatusNoContent)
		}),
	}
}

package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/records"
	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/automation/schedule"
)

// errClaimed ends a claim another scheduler made first.
var errClaimed = errors.New("fire time claimed by another scheduler")

// Fire starts the runs of every automation whose schedule is due. Each fire time is claimed by
// moving the automation's next_fire_at past it with a compare-and-swap, and the run's id is
// derived from the automation, the entrypoint and the fire time: two schedulers ticking at once
// make one run. A scheduler that was down fires a missed time once, then schedules the next
// time after now (missed times in between are not made up). It answers the runs it started.
func (d *Dispatcher) Fire(ctx context.Context) ([]string, error) {
	now := d.now()
	due, err := d.automations.Due(ctx, now)
	if err != nil {
		return nil, err
	}
	var started []string
	var errs []error
	for _, a := range due {
		ids, err := d.fire(ctx, a, now)
		started = append(started, ids...)
		if err != nil {
			errs = append(errs, fmt.Errorf("fire automation %s: %w", a.ID, err))
		}
	}
	return started, errors.Join(errs...)
}

func (d *Dispatcher) fire(ctx context.Context, seen *records.AutomationRecord, now time.Time) ([]string, error) {
	fireAt := seen.NextFireAt
	a, err := d.automations.Update(ctx, seen.ID, func(r *records.AutomationRecord) error {
		if !r.NextFireAt.Equal(fireAt) {
			return errClaimed
		}
		r.LastFiredAt = fireAt
		return r.Reschedule(now)
	})
	if errors.Is(err, errClaimed) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	def, settings, err := Effective(d.validator, a)
	if err != nil {
		return nil, err
	}
	inputs, errs := definition.ValidateInputs(def.Inputs, []byte(a.InputsJSON))
	var started []string
	for _, ep := range def.Entrypoints {
		if ep.Type != definition.EntrypointSchedule {
			continue
		}
		zone := cmp.Or(ep.TimeZone, settings.TimeZone, "UTC")
		if !firesAt(ep.Cron, zone, fireAt) {
			continue
		}
		deliveryKey := "schedule:" + ep.ID + ":" + fireAt.UTC().Format(time.RFC3339)
		if len(errs) > 0 {
			err := d.runs.RecordDrop(ctx, runs.Drop{AutomationID: a.ID, EntrypointID: ep.ID, EventKey: catalog.ScheduleFired,
				DeliveryKey: deliveryKey, Reason: runs.DropBadInputs, Detail: errs[0].Error()})
			if err != nil {
				return started, err
			}
			continue
		}
		event := map[string]any{"scheduled_for": fireAt.UTC().Format(time.RFC3339), "entrypoint_id": ep.ID, "time_zone": zone}
		run, _, err := d.runner.Start(ctx, runner.Start{
			ID: runner.RunID(a.ID, deliveryKey), AutomationID: a.ID, Version: a.CurrentVersion, Actor: a.CreatedBy, Definition: def,
			Trigger: runner.Trigger{EntrypointID: ep.ID, Event: mustJSON(event), Inputs: mustJSON(inputs),
				ScheduledFor: fireAt.UTC().Format(time.RFC3339)},
			TriggerSource: runs.SourceSchedule, EventKey: catalog.ScheduleFired, DeliveryKey: deliveryKey,
		})
		if err != nil {
			return started, err
		}
		started = append(started, run.ID)
	}
	return started, nil
}

// firesAt reports whether a cron schedule in zone fires at t.
func firesAt(cron, zone string, t time.Time) bool {
	s, err := schedule.Parse(cron)
	if err != nil {
		return false
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return false
	}
	return s.Next(t.Add(-time.Second), loc).Equal(t)
}

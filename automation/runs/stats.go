package runs

import (
	"context"
	"time"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// maxStatsItems bounds the runs and filtered events RunsByDay reads for one automation: past
// it the oldest days undercount, which a dashboard sparkline survives.
const maxStatsItems = 5000

// LastRun is the automation's newest run that is not a dry run, nil when it has none: a dry run
// tries the automation, it does not say how its real runs go.
func (s *Store) LastRun(ctx context.Context, automationID string) (*appv1.AutomationRunBrief, error) {
	list, err := s.List(ctx, ListQuery{AutomationID: automationID, Limit: 1, NoDryRuns: true})
	if err != nil || len(list) == 0 {
		return nil, err
	}
	return list[0].Brief(), nil
}

// RunsByDay counts the automation's runs per UTC day from since's day to today, oldest first:
// completed, failed, filtered (runs a filter block ended and events an entrypoint filter
// rejected) and other (in progress, stopped). Dry runs are not counted, as LastRun does not
// show them.
func (s *Store) RunsByDay(ctx context.Context, automationID string, since time.Time) ([]*appv1.DayRunCount, error) {
	first := since.UTC().Truncate(24 * time.Hour)
	days := int(s.now().UTC().Sub(first)/(24*time.Hour)) + 1
	out := make([]*appv1.DayRunCount, max(days, 0))
	for i := range out {
		out[i] = &appv1.DayRunCount{Day: first.AddDate(0, 0, i).Format(time.DateOnly)}
	}
	day := func(t time.Time) *appv1.DayRunCount {
		i := int(t.UTC().Sub(first) / (24 * time.Hour))
		if i < 0 || i >= len(out) {
			return nil
		}
		return out[i]
	}
	list, err := s.Since(ctx, automationID, first, maxStatsItems)
	if err != nil {
		return nil, err
	}
	for _, r := range list {
		d := day(r.CreatedAt)
		if d == nil || r.DryRun {
			continue
		}
		switch r.Status {
		case Completed:
			d.Completed++
		case Failed:
			d.Failed++
		case Filtered:
			d.Filtered++
		default:
			d.Other++
		}
	}
	filtered, err := s.FilteredSince(ctx, automationID, first, maxStatsItems)
	if err != nil {
		return nil, err
	}
	for _, f := range filtered {
		if d := day(f.At); d != nil {
			d.Filtered++
		}
	}
	return out, nil
}

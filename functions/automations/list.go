package automations

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/errgroup"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/records"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

const (
	// runDays is how many days of run counts a summary shows, today included.
	runDays = 7
	// statsParallel bounds the run-side reads in flight for one ListAutomations.
	statsParallel = 8
)

// ListAutomations lists automations sorted by name, case-insensitively, then id, archived ones
// only when asked, each with a one-line description of its triggers and, from the run side,
// its last run and its runs per day over the last seven UTC days.
func (s *Service) ListAutomations(ctx context.Context, req *connect.Request[appv1.ListAutomationsRequest]) (*connect.Response[appv1.ListAutomationsResponse], error) {
	recs, err := s.store.List(ctx, req.Msg.GetIncludeArchived(), s.lim().Max)
	if err != nil {
		return nil, err
	}
	out := make([]*appv1.AutomationSummary, len(recs))
	for i, r := range recs {
		out[i] = &appv1.AutomationSummary{Automation: r.ToProto(), TriggerSummary: triggerSummary(r)}
	}
	if s.d.RunStats != nil {
		if err := s.addRunStats(ctx, recs, out); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&appv1.ListAutomationsResponse{Automations: out}), nil
}

// triggerSummary describes r's triggers; "" when its stored definition or settings do not parse,
// which validation on the way in prevents.
func triggerSummary(r *records.AutomationRecord) string {
	def, err := r.Definition()
	if err != nil {
		return ""
	}
	settings, err := r.Settings()
	if err != nil {
		return ""
	}
	return catalog.TriggerSummary(def, settings)
}

// addRunStats fills the run columns of out, the summaries of recs.
func (s *Service) addRunStats(ctx context.Context, recs []*records.AutomationRecord, out []*appv1.AutomationSummary) error {
	y, m, d := s.d.Clock.Now().UTC().Date()
	since := time.Date(y, m, d-(runDays-1), 0, 0, 0, 0, time.UTC)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(statsParallel)
	for i, r := range recs {
		g.Go(func() error {
			last, err := s.d.RunStats.LastRun(ctx, r.ID)
			if err != nil {
				return err
			}
			days, err := s.d.RunStats.RunsByDay(ctx, r.ID, since)
			if err != nil {
				return err
			}
			out[i].LastRun, out[i].Runs_7D = last, days
			return nil
		})
	}
	return g.Wait()
}

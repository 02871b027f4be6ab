// Package runs owns the records of what automations did: runs and their steps, instances and
// their handles, events dropped before a run, filtered events and received event samples, in
// the collections automation_runs, automation_instances (with handles/), automation_drops,
// automation_filtered, automation_samples and automation_observed (event keys ever received).
// The run and step state machines are in states.go.
//
// A run made from a delivery has an id derived from its automation and delivery key, so
// creating it is also the duplicate check: a redelivered event cannot start a second run.
// Every state move is a compare-and-swap on the run's document (store.Swap): the worker that
// holds a run's lease is its only writer, and a write from a worker whose lease has passed to
// another is refused, so a crashed or slow worker can never overwrite its successor.
package runs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Collection names.
const (
	RunsCollection      = "automation_runs"
	InstancesCollection = "automation_instances"
	DropsCollection     = "automation_drops"
	FilteredCollection  = "automation_filtered"
	SamplesCollection   = "automation_samples"
	ObservedCollection  = "automation_observed"
	BodiesCollection    = "automation_bodies"
)

// A body claim stops counting at expire_at; only a Firestore TTL policy deletes it.
var _ = store.Expires(BodiesCollection, "expire_at")

// Trigger sources of a run.
const (
	SourceEvent    = "event"
	SourceSchedule = "schedule"
	SourceManual   = "manual"
	SourceRetry    = "retry"
)

// ErrNotFound is a run, instance or sample id with no record.
var ErrNotFound = store.ErrNotFound

// ErrLeaseLost is a write refused because another worker now holds the run.
var ErrLeaseLost = errors.New("the run's lease passed to another worker")

// Run is one execution of an automation version.
type Run struct {
	ID           string `firestore:"id"`
	AutomationID string `firestore:"automation_id"`
	Version      int    `firestore:"version"`
	Status       Status `firestore:"status"`
	Error        string `firestore:"error,omitempty"`
	// TriggerSource is one of the Source constants; EntrypointID the entrypoint that fired.
	TriggerSource string `firestore:"trigger_source"`
	EntrypointID  string `firestore:"entrypoint_id,omitempty"`
	EventKey      string `firestore:"event_key,omitempty"`
	DeliveryKey   string `firestore:"delivery_key,omitempty"`
	DryRun        bool   `firestore:"dry_run"`
	// Actor is the user the run acts for: the automation's owner.
	Actor      string `firestore:"actor"`
	InstanceID string `firestore:"instance_id,omitempty"`
	// Trigger is trigger_json: {"event", "inputs", "entrypoint_id", "scheduled_for"}.
	Trigger string `firestore:"trigger"`
	// Definition is the definition the run executes (its version with the block overrides of
	// the time it was created), so that later edits do not change a run under way.
	Definition string   `firestore:"definition"`
	Steps      []Step   `firestore:"steps"`
	SessionIDs []string `firestore:"session_ids,omitempty"`
	// RetryOf is the run this one retries from RetryFrom (a block id).
	RetryOf   string `firestore:"retry_of,omitempty"`
	RetryFrom string `firestore:"retry_from,omitempty"`
	// StopRequested is set by StopRun; the worker ends the run at its next step boundary.
	StopRequested string    `firestore:"stop_requested,omitempty"`
	CreatedAt     time.Time `firestore:"created_at"`
	StartedAt     time.Time `firestore:"started_at,omitempty"`
	EndedAt       time.Time `firestore:"ended_at,omitempty"`
	UpdatedAt     time.Time `firestore:"updated_at"`
	// WakeAt is when a waiting run continues.
	WakeAt time.Time `firestore:"wake_at,omitempty"`
	// WrittenAt is the document's update time as last written through this store, so the
	// writer can write again on that condition without reading first.
	WrittenAt time.Time `firestore:"-"`
	// LeaseOwner holds the run until LeaseUntil; another worker may take it after that.
	LeaseOwner string    `firestore:"lease_owner,omitempty"`
	LeaseUntil time.Time `firestore:"lease_until,omitempty"`
}

// Step is one block's execution in a run.
type Step struct {
	BlockID   string     `firestore:"block_id"`
	BlockType string     `firestore:"block_type"`
	Attempt   int        `firestore:"attempt"`
	Status    StepStatus `firestore:"status"`
	Inputs    string     `firestore:"inputs,omitempty"`
	Outputs   string     `firestore:"outputs,omitempty"`
	Error     string     `firestore:"error,omitempty"`
	SessionID string     `firestore:"session_id,omitempty"`
	// Progress is what a waiting block remembers between wakes (e.g. the task it started).
	Progress  string    `firestore:"progress,omitempty"`
	StartedAt time.Time `firestore:"started_at,omitempty"`
	EndedAt   time.Time `firestore:"ended_at,omitempty"`
	WakeAt    time.Time `firestore:"wake_at,omitempty"`
}

// Step returns the step of a block, nil when the run has none.
func (r *Run) Step(blockID string) *Step {
	for i := range r.Steps {
		if r.Steps[i].BlockID == blockID {
			return &r.Steps[i]
		}
	}
	return nil
}

// Store reads and writes run records.
type Store struct {
	db  *firestore.Client
	now func() time.Time
}

// NewStore returns a store over db.
func NewStore(db *firestore.Client, now func() time.Time) *Store {
	return &Store{db: db, now: now}
}

func (s *Store) runs() *firestore.CollectionRef { return s.db.Collection(RunsCollection) }

// Create writes a new run; its id must be new.
func (s *Store) Create(ctx context.Context, r *Run) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	r.UpdatedAt = r.CreatedAt
	if _, err := s.runs().Doc(r.ID).Create(ctx, r); err != nil {
		return fmt.Errorf("create run %s: %w", r.ID, err)
	}
	return nil
}

// Get reads one run.
func (s *Store) Get(ctx context.Context, id string) (*Run, error) {
	return store.Read[Run](ctx, nil, s.runs().Doc(id))
}

// Update changes a run with change, which may refuse by returning an error. The whole record is
// rewritten on the condition that nobody wrote it since it was read; a lost race is re-read and
// re-applied.
func (s *Store) Update(ctx context.Context, id string, change func(*Run) error) (*Run, error) {
	return s.update(ctx, id, nil, change)
}

// update is Update starting from held, when given, at held.WrittenAt: a writer that holds the
// run as it last wrote it writes without reading it first.
func (s *Store) update(ctx context.Context, id string, held *Run, change func(*Run) error) (*Run, error) {
	var version time.Time
	if held != nil {
		version = held.WrittenAt
	}
	r, version, err := store.Swap(ctx, s.runs().Doc(id), held, version, func(r *Run) ([]firestore.Update, error) {
		// The held run's steps must not change unless the write lands.
		r.Steps = slices.Clone(r.Steps)
		before := r.Status
		if err := change(r); err != nil {
			return nil, err
		}
		if r.Status != before && !CanMove(before, r.Status) {
			return nil, fmt.Errorf("run %s cannot go from %s to %s", id, before, r.Status)
		}
		r.UpdatedAt = s.now()
		return wholeRun(r), nil
	})
	if err != nil {
		return r, fmt.Errorf("update run %s: %w", id, err)
	}
	r.WrittenAt = version
	return r, nil
}

// UpdateLeased is Update for the worker holding the run, starting from held (as Update or
// UpdateLeased returned it): it fails with ErrLeaseLost when the lease is no longer owner's.
func (s *Store) UpdateLeased(ctx context.Context, held *Run, owner string, change func(*Run) error) (*Run, error) {
	return s.update(ctx, held.ID, held, func(r *Run) error {
		if r.LeaseOwner != owner {
			return ErrLeaseLost
		}
		return change(r)
	})
}

// wholeRun names every field of a run for an update, so Update writes what change left.
func wholeRun(r *Run) []firestore.Update {
	return []firestore.Update{
		{Path: "status", Value: r.Status},
		{Path: "error", Value: r.Error},
		{Path: "instance_id", Value: r.InstanceID},
		{Path: "steps", Value: r.Steps},
		{Path: "session_ids", Value: r.SessionIDs},
		{Path: "stop_requested", Value: r.StopRequested},
		{Path: "started_at", Value: r.StartedAt},
		{Path: "ended_at", Value: r.EndedAt},
		{Path: "updated_at", Value: r.UpdatedAt},
		{Path: "wake_at", Value: r.WakeAt},
		{Path: "lease_owner", Value: r.LeaseOwner},
		{Path: "lease_until", Value: r.LeaseUntil},
	}
}

// ListQuery selects runs of one automation, newest first.
type ListQuery struct {
	AutomationID string
	InstanceID   string
	Limit        int
	// Before, when set, lists only runs created before it.
	Before time.Time
	// NoDryRuns leaves dry runs out.
	NoDryRuns bool
}

// List returns runs, newest first.
func (s *Store) List(ctx context.Context, q ListQuery) ([]*Run, error) {
	fq := s.runs().Where("automation_id", "==", q.AutomationID)
	if q.InstanceID != "" {
		fq = fq.Where("instance_id", "==", q.InstanceID)
	}
	if q.NoDryRuns {
		fq = fq.Where("dry_run", "==", false)
	}
	if !q.Before.IsZero() {
		fq = fq.Where("created_at", "<", q.Before)
	}
	out, err := store.All[*Run](fq.OrderBy("created_at", firestore.Desc).Limit(q.Limit).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list runs of %s: %w", q.AutomationID, err)
	}
	return out, nil
}

// Since returns at most limit runs of an automation created at or after t, oldest first.
func (s *Store) Since(ctx context.Context, automationID string, t time.Time, limit int) ([]*Run, error) {
	q := s.runs().Where("automation_id", "==", automationID).Where("created_at", ">=", t).OrderBy("created_at", firestore.Asc).Limit(limit)
	out, err := store.All[*Run](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list runs of %s since %s: %w", automationID, t, err)
	}
	return out, nil
}

// InProgress counts an automation's runs that have not ended, with an aggregation query that
// reads no run.
func (s *Store) InProgress(ctx context.Context, automationID string) (int, error) {
	q := s.runs().Where("automation_id", "==", automationID).Where("status", "in", []Status{Queued, Running, Waiting})
	n, err := store.Count(ctx, q, nil)
	if err != nil {
		return 0, fmt.Errorf("count runs in progress of %s: %w", automationID, err)
	}
	return int(n), nil
}

// Stalled returns runs a worker should pick up now: waiting runs whose wake time came, running
// runs whose lease ran out (their worker died) and queued runs older than grace (their start
// message was lost).
func (s *Store) Stalled(ctx context.Context, now time.Time, grace time.Duration, limit int) ([]*Run, error) {
	queries := []firestore.Query{
		s.runs().Where("status", "==", Waiting).Where("wake_at", "<=", now).Limit(limit),
		s.runs().Where("status", "==", Running).Where("lease_until", "<", now).Limit(limit),
		s.runs().Where("status", "==", Queued).Where("created_at", "<", now.Add(-grace)).Limit(limit),
	}
	var out []*Run
	for _, q := range queries {
		rs, err := store.All[*Run](q.Documents(ctx))
		if err != nil {
			return nil, fmt.Errorf("find stalled runs: %w", err)
		}
		out = append(out, rs...)
	}
	return out, nil
}

// End ends the run in status with msg, and settles its steps: those never reached are skipped,
// those under way stopped.
func (r *Run) End(status Status, msg string, now time.Time) {
	r.Status, r.Error, r.EndedAt = status, msg, now
	r.WakeAt, r.LeaseOwner, r.LeaseUntil = time.Time{}, "", time.Time{}
	for i := range r.Steps {
		switch s := &r.Steps[i]; {
		case s.Status == StepPending:
			s.Status = StepSkipped
		case !s.Status.Done():
			s.Status, s.EndedAt = StepStopped, now
		}
	}
}

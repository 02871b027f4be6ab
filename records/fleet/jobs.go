package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// JobCollection holds drains and evacuations.
const JobCollection = "fleet_jobs"

// Job kinds and states.
const (
	KindDrain    = "drain"
	KindEvacuate = "evacuate"

	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
)

// Job is one drain or evacuation of a host and its counts so far.
type Job struct {
	ID     string `firestore:"id"`
	Kind   string `firestore:"kind"`
	HostID string `firestore:"host_id"`
	State  string `firestore:"state"`
	Force  bool   `firestore:"force"`
	// Total is the sessions found on the host; the rest count what became of them.
	Total             int        `firestore:"total"`
	Moved             int        `firestore:"moved"`
	Evicted           int        `firestore:"evicted"`
	Archived          int        `firestore:"archived"`
	Failed            int        `firestore:"failed"`
	WithoutCheckpoint []string   `firestore:"without_checkpoint"`
	Failures          []string   `firestore:"failures"`
	Message           string     `firestore:"message"`
	CreatedAt         time.Time  `firestore:"created_at"`
	FinishedAt        *time.Time `firestore:"finished_at"`
}

// ErrJobNotFound is a job id with no record.
var ErrJobNotFound = errors.New("fleet job not found")

func (f *Fleet) jobDoc(id string) *firestore.DocumentRef {
	return f.db.Collection(JobCollection).Doc(id)
}

// CreateJob writes a new running job.
func (f *Fleet) CreateJob(ctx context.Context, j *Job) error {
	j.State, j.CreatedAt = JobRunning, f.now()
	if _, err := f.jobDoc(j.ID).Create(ctx, j); err != nil {
		return fmt.Errorf("create fleet job %s: %w", j.ID, err)
	}
	return nil
}

// SaveJob writes the job's progress; a job no longer running is stamped finished.
func (f *Fleet) SaveJob(ctx context.Context, j *Job) error {
	if j.State != JobRunning && j.FinishedAt == nil {
		now := f.now()
		j.FinishedAt = &now
	}
	if _, err := f.jobDoc(j.ID).Set(ctx, j); err != nil {
		return fmt.Errorf("save fleet job %s: %w", j.ID, err)
	}
	return nil
}

// Job reads one job.
func (f *Fleet) Job(ctx context.Context, id string) (*Job, error) {
	j, err := store.Read[Job](ctx, nil, f.jobDoc(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrJobNotFound
	}
	return j, err
}

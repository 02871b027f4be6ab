package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// A stage that hangs (a host that stops answering, while the worker keeps renewing the job's
// lease) used to hold its job forever. Now a stage is bounded by the worker's StageTimeout: the
// job fails naming the stage, and a retry finishes it.
func TestAHangingStageFailsItsJobInsteadOfHoldingIt(t *testing.T) {
	is := newImageStack(t, 1)
	var hang atomic.Bool
	hang.Store(true)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w", StageTimeout: 3 * time.Second, BeforeStage: func(ctx context.Context, j *imagesvc.Job) error {
		if j.State == imagesvc.Pulling && hang.Swap(false) {
			<-ctx.Done() // as a host that never answers
			return ctx.Err()
		}
		return nil
	}})
	uri := is.push(t, "team/hangs", testImage(t, nil))
	job := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
	if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), "pulling: the stage did not finish within 3s") {
		t.Fatalf("job %s: %q", job.GetState(), job.GetError())
	}
	if _, err := is.images.RetryEnableJob(t.Context(), connect.NewRequest(&appv1.RetryEnableJobRequest{JobId: job.GetId()})); err != nil {
		t.Fatal(err)
	}
	if job = is.waitJob(t, job.GetId(), "ready", "failed"); job.GetState() != "ready" {
		t.Fatalf("retried job: %s %q", job.GetState(), job.GetError())
	}
}

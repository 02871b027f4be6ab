package imagesvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// JobsPushPath is the production Pub/Sub push endpoint of the jobs topic, under the internal
// prefix the deployment keeps off the public load balancer.
const JobsPushPath = "/internal/images/jobs"

// PubSubQueue publishes enable jobs to pubsub.TopicImageJobs.
type PubSubQueue struct{ PubSub *pubsub.Client }

type jobMessage struct {
	JobID string `json:"job_id"`
}

// Enqueue publishes a job.
func (q PubSubQueue) Enqueue(ctx context.Context, jobID string) error {
	data, _ := json.Marshal(jobMessage{JobID: jobID})
	if _, err := q.PubSub.Publish(ctx, pubsub.TopicImageJobs, data, map[string]string{"job_id": jobID}); err != nil {
		return fmt.Errorf("queue enable job %s: %w", jobID, err)
	}
	return nil
}

// WorkerOptions configure a Worker.
type WorkerOptions struct {
	// Name names the worker in leases.
	Name string
	// Lease is how long a worker holds a job without renewing it (default 2 minutes); a job
	// whose lease ran out is taken over by the next worker the sweeper hands it to.
	Lease time.Duration
	// StageTimeout bounds a stage (default an hour; the warm stage gets its command's timeout
	// on top): one that takes longer fails, naming the stage, and can be retried.
	StageTimeout time.Duration
	// CollectEvery is how often Run collects images nothing references (default an hour, as
	// hosts collect snapshot chunks); DisableImage also queues a collection at once.
	CollectEvery time.Duration
	// BeforeStage, when set, runs before every stage; an error fails the stage with it (fault
	// injection for tests).
	BeforeStage func(ctx context.Context, j *Job) error
	Log         *slog.Logger
}

// Worker advances enable jobs: it takes a job's lease, runs its stages in order and writes
// each stage's result before the next, so a worker that dies loses at most the stage it was in.
type Worker struct {
	s    *Service
	opts WorkerOptions
	// checked is when Tick last asked whether a collection is due.
	checked atomic.Pointer[time.Time]
}

// Worker returns a worker of the service's jobs.
func (s *Service) Worker(opts WorkerOptions) *Worker {
	if opts.Lease <= 0 {
		opts.Lease = 2 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = s.log
	}
	if opts.StageTimeout <= 0 {
		opts.StageTimeout = time.Hour
	}
	if opts.CollectEvery <= 0 {
		opts.CollectEvery = time.Hour
	}
	if opts.Name == "" {
		opts.Name = "images-worker"
	}
	return &Worker{s: s, opts: opts}
}

var (
	errLeaseLost = errors.New("enable job lease lost")
	errIdle      = errors.New("enable job has nothing to do now")
)

// HandleMessage advances the job of one message of the jobs topic, or runs the collection it
// asks for.
func (w *Worker) HandleMessage(ctx context.Context, m pubsub.Message) error {
	var collect collectMessage
	if json.Unmarshal(m.Data, &collect) == nil && collect.Collect {
		return w.collect(ctx)
	}
	var msg jobMessage
	if err := json.Unmarshal(m.Data, &msg); err != nil || msg.JobID == "" {
		w.opts.Log.Error("enable job message undecodable; dropped", "message", m.ID, "err", err)
		return nil
	}
	return w.Advance(ctx, msg.JobID)
}

// errCollectLater is a collection that could not do all its work now: a job was pulling or
// chunking, or the chunk store was busy with a snapshot.
var errCollectLater = errors.New("image collection must run again later")

// collect runs a CollectImages. One that could not finish answers errCollectLater, so that a
// collection message comes again (Pub/Sub's backoff) rather than wait for the next tick's.
func (w *Worker) collect(ctx context.Context) error {
	c, err := w.s.CollectImages(ctx)
	if err != nil {
		return err
	}
	switch {
	case c.Deferred != "":
		return fmt.Errorf("%w: %s", errCollectLater, c.Deferred)
	case c.SweepBusy:
		return fmt.Errorf("%w: a snapshot or a chunking was in progress", errCollectLater)
	}
	return nil
}

// Run pulls job messages and sweeps every tick until ctx ends, and collects images nothing
// references every CollectEvery.
func (w *Worker) Run(ctx context.Context, ps *pubsub.Client, tick time.Duration) error {
	return ps.Work(ctx, "enable job", map[string]pubsub.Handler{pubsub.TopicImageJobs: w.HandleMessage}, tick, w.Tick, w.opts.Log)
}

// Tick is the worker's periodic work: Sweep, and a collection of images nothing references
// once CollectEvery has passed since the deployment's last one (kept in Firestore, so that
// however many instances tick, one collects). Run calls it every tick; in production the
// automation worker's tick does.
func (w *Worker) Tick(ctx context.Context) error {
	_, err := w.Sweep(ctx)
	now := time.Now()
	if w.checked.Load() != nil && now.Sub(*w.checked.Load()) < min(w.opts.CollectEvery, time.Minute) {
		return err
	}
	w.checked.Store(&now)
	due, derr := w.s.rec.collectDue(ctx, w.s.d.Clock.Now(), w.opts.CollectEvery)
	if derr != nil || !due {
		return errors.Join(err, derr)
	}
	if cerr := w.collect(ctx); errors.Is(cerr, errCollectLater) {
		// The next due collection, or DisableImage's next message, does the rest.
		w.opts.Log.Info("image collection incomplete", "why", cerr)
	} else {
		err = errors.Join(err, cerr)
	}
	return err
}

// Routes is the production push endpoint.
func (w *Worker) Routes() map[string]http.Handler {
	return map[string]http.Handler{"POST " + JobsPushPath: pubsub.PushHandler(w.HandleMessage)}
}

// Sweep queues again the unfinished jobs whose lease ran out (their worker died) or that no
// worker ever took; it returns their ids.
func (w *Worker) Sweep(ctx context.Context) ([]string, error) {
	list, err := w.s.rec.unfinished(ctx, 100)
	if err != nil {
		return nil, err
	}
	now := w.s.d.Clock.Now()
	var queued []string
	for _, j := range list {
		if j.LeaseUntil.After(now) || (j.LeaseOwner == "" && now.Sub(j.UpdatedAt) < w.opts.Lease) {
			continue
		}
		if err := w.s.enqueue(ctx, &j); err != nil {
			return queued, err
		}
		queued = append(queued, j.ID)
	}
	return queued, nil
}

// claim takes the job's lease when it may run now, moving a queued job on to resolving in the
// same write; nil means there is nothing to do.
func (w *Worker) claim(ctx context.Context, id string) (*Job, error) {
	now := w.s.d.Clock.Now()
	j, err := w.s.rec.updateJob(ctx, id, func(j *Job) error {
		if j.State.Ended() || (j.LeaseOwner != "" && j.LeaseOwner != w.opts.Name && j.LeaseUntil.After(now)) {
			return errIdle
		}
		j.LeaseOwner, j.LeaseUntil = w.opts.Name, now.Add(w.opts.Lease)
		if j.State == Queued {
			j.State = Resolving
		}
		return nil
	})
	if errors.Is(err, errIdle) || isNotFound(err) {
		return nil, nil
	}
	return j, err
}

// save changes the job under the lease and renews it.
func (w *Worker) save(ctx context.Context, id string, change func(*Job)) (*Job, error) {
	return w.s.rec.updateJob(ctx, id, func(j *Job) error {
		if j.LeaseOwner != w.opts.Name || j.State.Ended() {
			return errLeaseLost
		}
		j.LeaseUntil = w.s.d.Clock.Now().Add(w.opts.Lease)
		if change != nil {
			change(j)
		}
		return nil
	})
}

// Advance runs a job's stages from where it is. It returns nil when the job ended or is another
// worker's; an error asks for the message again (this worker is stopping).
func (w *Worker) Advance(ctx context.Context, id string) error {
	j, err := w.claim(ctx, id)
	if err != nil || j == nil {
		return err
	}
	// The lease is renewed while a stage runs; losing it stops the stage.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.renew(ctx, id, cancel) })
	defer cancel(nil)

	for !j.State.Ended() {
		stage := j.State
		began := time.Now()
		result, err := w.runStage(ctx, j)
		w.opts.Log.Debug("enable job stage", "job", id, "stage", stage, "took", time.Since(began), "err", err)
		if ctx.Err() != nil || errors.Is(err, errLeaseLost) {
			return w.stopped(ctx, err)
		}
		if err != nil {
			w.opts.Log.Warn("enable job stage failed", "job", id, "stage", stage, "err", err)
			_, serr := w.save(context.WithoutCancel(ctx), id, func(j *Job) {
				j.State, j.FailedStage, j.Error, j.LeaseOwner = Failed, stage, fmt.Sprintf("%s: %s", stage, message(err)), ""
			})
			return w.stopped(ctx, serr)
		}
		// The stage's result and the move to the next stage are one write: a worker killed
		// in between redoes the stage (every stage is idempotent), never skips it.
		if to := next(stage, j.Warm); to == Ready {
			j, err = w.s.rec.finish(ctx, id, w.opts.Name, result)
		} else {
			j, err = w.save(ctx, id, func(j *Job) {
				result(j)
				j.State = to
			})
		}
		if err != nil {
			return w.stopped(ctx, err)
		}
	}
	return nil
}

// stageResult is what a stage found, written to the job together with its move to the next
// stage.
type stageResult func(*Job)

func noResult(*Job) {}

// stopped is what Advance answers when a pass ends on err: nothing when the lease is gone
// (someone else has the job), else err, for the message to come again.
func (w *Worker) stopped(ctx context.Context, err error) error {
	if errors.Is(err, errLeaseLost) || errors.Is(context.Cause(ctx), errLeaseLost) {
		return nil
	}
	if err == nil {
		return nil
	}
	return err
}

// renew keeps the lease while ctx lives, and cancels it with errLeaseLost once the lease is
// someone else's.
func (w *Worker) renew(ctx context.Context, id string, cancel context.CancelCauseFunc) {
	t := time.NewTicker(w.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := w.save(ctx, id, nil); errors.Is(err, errLeaseLost) {
				cancel(errLeaseLost)
				return
			}
		}
	}
}

// message is an error as the job shows it: a host's Connect message without the code prefix.
func message(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Message()
	}
	return err.Error()
}

// runStage runs the stage j is in, bounded by the stage's time: a host that hangs (it answers
// nothing, and the lease renewal keeps the job this worker's) fails the stage instead of
// holding the job forever.
func (w *Worker) runStage(ctx context.Context, j *Job) (stageResult, error) {
	limit := w.opts.StageTimeout
	if j.State == Warming {
		// The warm command has a timeout of its own; booting and capturing come on top.
		limit += maxWarmTimeout(decodeConfig(j.Config).GetWarm().GetTimeoutSecs())
	}
	stageCtx, cancel := context.WithTimeoutCause(ctx, limit, fmt.Errorf("the stage did not finish within %s", limit))
	defer cancel()
	result, err := w.stage(stageCtx, j)
	if err != nil && ctx.Err() == nil && stageCtx.Err() != nil {
		return nil, context.Cause(stageCtx)
	}
	return result, err
}

// maxWarmTimeout is how long a warm command may run: its timeout_secs, or the host's bound.
func maxWarmTimeout(secs uint64) time.Duration {
	if secs == 0 || secs > maxWarmTimeoutSecs {
		secs = maxWarmTimeoutSecs
	}
	return time.Duration(secs) * time.Second
}

func (w *Worker) stage(ctx context.Context, j *Job) (stageResult, error) {
	if w.opts.BeforeStage != nil {
		if err := w.opts.BeforeStage(ctx, j); err != nil {
			return nil, err
		}
	}
	switch j.State {
	case Resolving:
		return w.resolveStage(ctx, j)
	case Pulling:
		return w.pullStage(ctx, j)
	case Chunking:
		return w.chunkStage(ctx, j)
	case Prestaging:
		return w.prestageStage(ctx, j)
	case Warming:
		return w.warmStage(ctx, j)
	}
	return nil, fmt.Errorf("no stage runs in state %s", j.State)
}

func (w *Worker) resolveStage(ctx context.Context, j *Job) (stageResult, error) {
	if j.Digest != "" { // an update's job keeps the image's digest
		return noResult, nil
	}
	_, digest, err := w.s.resolve(ctx, j.URI)
	if err != nil {
		return nil, err
	}
	return func(j *Job) { j.Digest = digest }, nil
}

// ref is what hosts pull: the repository at the resolved digest.
func (j *Job) ref() string { return j.Repo + "@" + j.Digest }

// materializeHost returns the job's host, choosing one when it has none or its host was lost;
// moved reports a new host, which holds nothing of the earlier stages. A new host is set on j,
// and saved with the next write of the job (the stage's progress or result): a worker that dies
// before that only loses the choice.
func (w *Worker) materializeHost(ctx context.Context, j *Job) (hostv1connect.HostServiceClient, bool, error) {
	if j.HostID != "" {
		_, c, err := w.s.d.Hosts.Host(ctx, j.HostID)
		if err == nil {
			return c, false, nil
		}
		if !errors.Is(err, hostclient.ErrHostLost) {
			return nil, false, err
		}
	}
	h, c, err := w.s.d.Hosts.Pick(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("no host to prepare the image on: %w", err)
	}
	j.HostID = h.ID
	return c, true, nil
}

// onHost is a stage result that keeps the job's host (materializeHost may have chosen it).
func onHost(j *Job, more func(*Job)) stageResult {
	host := j.HostID
	return func(j *Job) {
		j.HostID = host
		more(j)
	}
}

// pullStage pulls the image on the job's host, which cuts its layers into the chunk store as
// they unpack.
func (w *Worker) pullStage(ctx context.Context, j *Job) (stageResult, error) {
	c, _, err := w.materializeHost(ctx, j)
	if err != nil {
		return nil, err
	}
	last, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "pull", ImageRef: j.ref()}, j)
	if err != nil {
		return nil, err
	}
	// What the pull cut into the chunk store; the chunk stage adds what it cuts itself.
	return onHost(j, func(j *Job) { j.BytesUploaded = int64(last.GetBytesUploaded()) }), nil
}

func (w *Worker) chunkStage(ctx context.Context, j *Job) (stageResult, error) {
	c, moved, err := w.materializeHost(ctx, j)
	if err != nil {
		return nil, err
	}
	if moved { // the new host pulls first: pull is idempotent and cheap where it was done
		if _, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "pull", ImageRef: j.ref()}, j); err != nil {
			return nil, err
		}
	}
	last, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "chunk", ImageRef: j.ref()}, j)
	if err != nil {
		return nil, err
	}
	return onHost(j, func(j *Job) {
		j.ChunksDone, j.ChunksTotal = int(last.GetChunksDone()), int(last.GetChunksTotal())
		j.BytesTotal, j.BytesUploaded = int64(last.GetBytesTotal()), j.BytesUploaded+int64(last.GetBytesUploaded())
	}), nil
}

// prestageStage stages the image onto the live hosts (up to PrestageHosts). A host that fails
// is left out and logged: sessions placed on it stage the image from its chunks at start. The
// stage fails only when no host took it.
func (w *Worker) prestageStage(ctx context.Context, j *Job) (stageResult, error) {
	hosts, err := w.s.d.Hosts.Fleet().List(ctx)
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, h := range hosts {
		if !w.s.d.Hosts.Fleet().Alive(h) || (w.s.d.PrestageHosts > 0 && len(done) >= w.s.d.PrestageHosts) {
			continue
		}
		c := w.s.d.Hosts.Client(h.Address)
		if _, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "prestage", ImageRef: j.ref(), WarmLayer: j.KeepWarmLayer}, j); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			w.opts.Log.Warn("prestage failed on a host; sessions there stage from chunks", "job", j.ID, "host", h.ID, "err", err)
			errs = append(errs, fmt.Errorf("host %s: %s", h.ID, message(err)))
			continue
		}
		done = append(done, h.ID)
	}
	if len(done) == 0 {
		return nil, fmt.Errorf("no host took the image: %w", errors.Join(errs...))
	}
	return func(j *Job) { j.PrestageHosts = done }, nil
}

// maxOutputTail is how much of the warm command's output the job keeps: its end.
const maxOutputTail = 4 << 10

func (w *Worker) warmStage(ctx context.Context, j *Job) (stageResult, error) {
	cfg := decodeConfig(j.Config).GetWarm()
	env := map[string]string{}
	refs := map[string]string{}
	for _, e := range cfg.GetEnv() {
		if ref := e.GetSecretRef(); ref != "" {
			refs[e.GetName()] = ref
		} else {
			env[e.GetName()] = e.GetLiteral()
		}
	}
	if len(refs) > 0 {
		if w.s.d.Secrets == nil {
			return nil, errors.New("the warm command names secrets, and this deployment keeps no org secrets")
		}
		actor := auth.Principal{UserID: j.Actor}
		if w.s.d.Acting != nil {
			var err error
			if actor, err = w.s.d.Acting(ctx, j.Actor); err != nil {
				return nil, err
			}
		}
		vals, err := w.s.d.Secrets.Resolve(ctx, secrets.SubjectOf(actor, ""), refs)
		if err != nil {
			return nil, err
		}
		for k, v := range vals {
			env[k] = v
		}
	}
	c, moved, err := w.materializeHost(ctx, j)
	if err != nil {
		return nil, err
	}
	if moved {
		if _, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "prestage", ImageRef: j.ref()}, j); err != nil {
			return nil, err
		}
	}
	host := j.HostID
	if _, err := w.save(ctx, j.ID, func(j *Job) {
		j.HostID, j.WarmStage, j.WarmStageAt, j.OutputTail = host, "running", w.s.d.Clock.Now(), ""
	}); err != nil {
		return nil, err
	}
	last, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{
		Stage: "warm", ImageRef: j.ref(), WarmKey: j.ImageID + "-" + j.ID,
		Warm: &hostv1.WarmCommand{
			Command: cfg.GetCommand(), Workdir: cfg.GetWorkdir(), Env: env, TimeoutSecs: cfg.GetTimeoutSecs(),
			Network: warmNetwork(cfg.GetNetwork()),
		},
	}, j)
	if err != nil {
		return nil, err
	}
	layer, captured := last.GetWarmLayer(), w.s.d.Clock.Now()
	// The prestaged hosts get the warm layer too; one that fails stages it at a session's start.
	for _, id := range j.PrestageHosts {
		if h, c, err := w.s.d.Hosts.Host(ctx, id); err == nil {
			if _, err := w.prepare(ctx, c, &hostv1.PrepareImageRequest{Stage: "prestage", ImageRef: j.ref(), WarmLayer: layer}, j); err != nil {
				w.opts.Log.Warn("prestage warm layer", "job", j.ID, "host", h.ID, "err", err)
			}
		}
	}
	return onHost(j, func(j *Job) { j.WarmLayer, j.WarmStage, j.WarmStageAt = layer, "captured", captured }), nil
}

// progressEvery bounds how often streamed progress is written to the job.
const progressEvery = 500 * time.Millisecond

// prepare runs one PrepareImage stage on a host, writing its progress (chunks, output tail) to
// the job as it streams, and returns the final message.
func (w *Worker) prepare(ctx context.Context, c hostv1connect.HostServiceClient, req *hostv1.PrepareImageRequest, job *Job) (*hostv1.PrepareImageProgress, error) {
	jobID, host := job.ID, job.HostID
	stream, err := c.PrepareImage(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, err
	}
	defer stream.Close()
	var tail strings.Builder
	var lastSave time.Time
	dirty := false
	flush := func() error {
		if !dirty {
			return nil
		}
		dirty, lastSave = false, time.Now()
		out := tail.String()
		_, err := w.save(ctx, jobID, func(j *Job) {
			j.HostID = host
			if req.GetStage() == "warm" {
				j.OutputTail = out
			}
		})
		return err
	}
	var chunksDone, chunksTotal uint32
	for stream.Receive() {
		m := stream.Msg()
		if m.GetDone() {
			if err := flush(); err != nil {
				return nil, err
			}
			return m, nil
		}
		if len(m.GetOutput()) > 0 {
			tail.Write(m.GetOutput())
			if s := tail.String(); len(s) > maxOutputTail {
				tail.Reset()
				tail.WriteString(s[len(s)-maxOutputTail:])
			}
			dirty = true
		}
		if m.GetChunksTotal() > 0 && req.GetStage() == "chunk" {
			chunksDone, chunksTotal = m.GetChunksDone(), m.GetChunksTotal()
			d, t := chunksDone, chunksTotal
			if time.Since(lastSave) >= progressEvery {
				lastSave = time.Now()
				if _, err := w.save(ctx, jobID, func(j *Job) { j.HostID, j.ChunksDone, j.ChunksTotal = host, int(d), int(t) }); err != nil {
					return nil, err
				}
			}
		}
		if dirty && time.Since(lastSave) >= progressEvery {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		_ = flush()
		return nil, err
	}
	return nil, fmt.Errorf("host ended the %s stage without a result", req.GetStage())
}

// platform is the one platform enabled images are for, as hosts run them.
var platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// resolve finds the linux/amd64 image manifest digest uri's tag (or digest) names, with the
// service's keychain.
func (s *Service) resolve(ctx context.Context, uri string) (repo, digest string, err error) {
	ref, err := name.ParseReference(uri)
	if err != nil {
		return "", "", err
	}
	opts := append(s.d.Registries.Registry(), remote.WithContext(ctx), remote.WithAuthFromKeychain(s.d.Keychain))
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", uri, egress.RegistryError(err))
	}
	repo = ref.Context().Name()
	if !desc.MediaType.IsIndex() {
		return repo, desc.Digest.String(), nil
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", uri, egress.RegistryError(err))
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", "", fmt.Errorf("resolve %s: %w", uri, egress.RegistryError(err))
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.Satisfies(platform) {
			return repo, m.Digest.String(), nil
		}
	}
	return "", "", fmt.Errorf("resolve %s: its manifest list has no %s image", uri, platform.String())
}

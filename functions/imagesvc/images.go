// Package imagesvc serves ImageService's images and enable jobs: an admin enables an OCI image,
// a durable job (pipeline.go) resolves its tag, has a host pull it, cut its layers into the
// chunk store snapshots use, prestage it onto the live hosts and optionally capture a warm
// layer, and only then points the image record at the result, so sessions, profiles and tasks
// (Resolve) start from an enabled image and never from a half-enabled one.
//
// Registries (AddRegistry and friends) live in their own files of this package; everything
// here pulls with the Keychain the service was built with.
package imagesvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"strings"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"cloud.google.com/go/firestore"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/records/registries"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// Queue hands an enable job, or a collection of images nothing references, to a worker
// (Pub/Sub in production, PubSubQueue).
type Queue interface {
	Enqueue(ctx context.Context, jobID string) error
	EnqueueCollect(ctx context.Context) error
}

// Secrets resolves a warm command's secret_ref entries for the admin who configured them.
type Secrets interface {
	Resolve(ctx context.Context, sub secrets.Subject, refs map[string]string) (map[string]string, error)
}

// Deps are what the service runs on.
type Deps struct {
	DB    *firestore.Client
	Hosts *hostclient.Pool
	Queue Queue
	Clock clock.Clock
	// Keychain answers registry credentials for every resolve (default: anonymous).
	Keychain authn.Keychain
	// Registries is what resolves may reach beyond public addresses (config.Config.Registries).
	Registries egress.Policy
	// RegistryStore keeps the registries AddRegistry adds (registries.go).
	RegistryStore *registries.Store
	// Secrets resolves warm env secret_ref; nil refuses configs that use one.
	Secrets Secrets
	// Acting is the principal a job's actor (the admin who started or retried it) acts as
	// without a key, as an automation acts for its owner (auth.Keys.Acting): a warm command's
	// secret_ref resolves under the org-secret access policy for them. nil: the actor is taken
	// as no admin, so only secrets shared with them resolve.
	Acting func(ctx context.Context, userID string) (auth.Principal, error)
	// PrestageHosts bounds how many live hosts a job prestages onto (0: all).
	PrestageHosts int
	// Log takes the service's own lines (default slog.Default()).
	Log *slog.Logger
}

// Service implements ImageService's images and enable jobs.
type Service struct {
	appv1connect.UnimplementedImageServiceHandler
	d          Deps
	rec        *records
	registries *registries.Store
	log        *slog.Logger
}

// New returns the service over d.
func New(d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clock.Real{}
	}
	if d.Keychain == nil {
		d.Keychain = authn.NewMultiKeychain() // no keychain answers: anonymous
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Service{d: d, rec: &records{db: d.DB, now: d.Clock.Now}, registries: d.RegistryStore, log: d.Log}
}

// maxJobsListed bounds ListEnableJobs: the newest first.
const maxJobsListed = 200

// maxWarmTimeoutSecs bounds a warm command's timeout_secs.
const maxWarmTimeoutSecs = 3600

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// callerID is the user the request in ctx is made by.
func callerID(ctx context.Context) string {
	p, _ := auth.Caller(ctx)
	return p.UserID
}

func requireAdmin(ctx context.Context, what string) error {
	if p, ok := auth.Caller(ctx); !ok || !p.Admin {
		return apierr.PermissionDenied("only an admin may %s", what)
	}
	return nil
}

// parseURI checks an image_uri and returns it trimmed with its repository.
func parseURI(field, uri string) (string, string, error) {
	uri = strings.TrimSpace(uri)
	if uri == "" {
		return "", "", apierr.InvalidArgument(field, "is required")
	}
	ref, err := name.ParseReference(uri)
	if err != nil {
		return "", "", apierr.InvalidArgument(field, fmt.Sprintf("is not an image reference: %v", err))
	}
	return uri, ref.Context().Name(), nil
}

// checkConfig validates an ImageConfig; field prefixes the violations.
func (s *Service) checkConfig(c *appv1.ImageConfig, v *apierr.Violations) {
	for k := range c.GetEnv() {
		if !envName.MatchString(k) {
			v.Addf("config.env", "%q is not an environment variable name", k)
		}
	}
	if wd := c.GetWorkdir(); wd != "" && (!path.IsAbs(wd) || path.Clean(wd) != wd) {
		v.Addf("config.workdir", "%q must be a clean absolute path", wd)
	}
	w := c.GetWarm()
	if w == nil {
		return
	}
	if len(w.GetCommand()) == 0 {
		v.Add("config.warm.command", "is required when warm is set")
	}
	if w.GetTimeoutSecs() > maxWarmTimeoutSecs {
		v.Addf("config.warm.timeout_secs", "must be at most %d", maxWarmTimeoutSecs)
	}
	checkNetwork(w.GetNetwork(), v)
	for _, e := range w.GetEnv() {
		if !envName.MatchString(e.GetName()) {
			v.Addf("config.warm.env", "%q is not an environment variable name", e.GetName())
		}
		if e.GetSecretRef() != "" && s.d.Secrets == nil {
			v.Addf("config.warm.env", "%s names a secret, and this deployment keeps no org secrets", e.GetName())
		}
	}
}

// maxNetworkEntries bounds each allow list of a warm network.
const maxNetworkEntries = 100

// checkNetwork validates a warm command's network policy, the shape of a profile's network
// (default "deny" or "allow", allow_hosts, allow_host_patterns), and puts its entries in the
// canonical form the egress proxy matches.
func checkNetwork(n *appv1.ProfileNetwork, v *apierr.Violations) {
	if n == nil {
		return
	}
	switch n.GetDefault() {
	case "", networkDeny, networkAllow:
	default:
		v.Addf("config.warm.network.default", "must be %q (the default) or %q", networkDeny, networkAllow)
	}
	for _, l := range []struct {
		field     string
		list      *[]string
		normalize func(string) (string, error)
	}{{"allow_hosts", &n.AllowHosts, egress.NormalizeHost}, {"allow_host_patterns", &n.AllowHostPatterns, egress.NormalizeHostPattern}} {
		field, list, normalize := l.field, l.list, l.normalize
		if len(*list) > maxNetworkEntries {
			v.Addf("config.warm.network."+field, "has %d entries; at most %d", len(*list), maxNetworkEntries)
			continue
		}
		for i, e := range *list {
			h, err := normalize(e)
			if err != nil {
				v.Addf(fmt.Sprintf("config.warm.network.%s[%d]", field, i), "%q %v", e, err)
				continue
			}
			(*list)[i] = h
		}
	}
}

// The words of a network's default.
const (
	networkDeny  = "deny"
	networkAllow = "allow"
)

// warmNetwork is what the host's egress proxy lets the warm command reach: nothing without a
// policy, as a session without a network.
func warmNetwork(n *appv1.ProfileNetwork) *hostv1.SandboxNetwork {
	if n == nil {
		return nil
	}
	return &hostv1.SandboxNetwork{
		DefaultAllow: n.GetDefault() == networkAllow, AllowHosts: n.GetAllowHosts(), AllowHostPatterns: n.GetAllowHostPatterns(),
	}
}

func encodeConfig(c *appv1.ImageConfig) string {
	if c == nil {
		c = &appv1.ImageConfig{}
	}
	b, _ := protojson.Marshal(c)
	return string(b)
}

func decodeConfig(s string) *appv1.ImageConfig {
	c := &appv1.ImageConfig{}
	_ = protojson.Unmarshal([]byte(s), c)
	return c
}

// warmPart is the warm config of an encoded ImageConfig, as protojson ("" when none).
func warmPart(config string) string {
	w := decodeConfig(config).GetWarm()
	if w == nil || len(w.GetCommand()) == 0 {
		return ""
	}
	b, _ := protojson.Marshal(w)
	return string(b)
}

// newJob is a job of img with config, started by the caller in ctx.
func newJob(ctx context.Context, img *Image, config *appv1.ImageConfig, warm bool) *Job {
	j := &Job{
		ID: ids.New("ejob"), ImageID: img.ID, URI: img.URI, Repo: img.Repo, State: Queued,
		Config: encodeConfig(config), Attempts: 1, Warm: warm && config.GetWarm() != nil,
		Actor: callerID(ctx),
	}
	if !j.Warm && warmPart(j.Config) != "" && warmPart(j.Config) == img.WarmConfig {
		j.KeepWarmLayer = img.WarmLayer
	}
	return j
}

func (s *Service) enqueue(ctx context.Context, j *Job) error {
	if s.d.Queue == nil {
		return apierr.FailedPrecondition("images cannot be enabled here: enable jobs need sandbox hosts (HANGAR_BLOB_URL, HANGAR_SEAL_KEYSET, HANGAR_HOST_TOKEN) and Pub/Sub")
	}
	return s.d.Queue.Enqueue(ctx, j.ID)
}

// EnableImage starts the job that enables image_uri and returns it at once.
func (s *Service) EnableImage(ctx context.Context, req *connect.Request[appv1.EnableImageRequest]) (*connect.Response[appv1.EnableImageResponse], error) {
	if err := requireAdmin(ctx, "enable images"); err != nil {
		return nil, err
	}
	var v apierr.Violations
	uri, repo, err := parseURI("image_uri", req.Msg.GetImageUri())
	if err != nil {
		return nil, err
	}
	cfg := proto.CloneOf(req.Msg.GetConfig())
	if cfg == nil {
		cfg = &appv1.ImageConfig{}
	}
	if cfg.GetName() == "" {
		cfg.Name = uri
	}
	s.checkConfig(cfg, &v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	job, err := s.rec.startJob(ctx, imageID(uri), func(img *Image, exists bool, prev *Job) (*Job, error) {
		if prev != nil && !prev.State.Ended() {
			return nil, apierr.AlreadyExists("image %s is being enabled by job %s (hangar images job %s)", uri, prev.ID, prev.ID)
		}
		if exists && !img.Disabled {
			return nil, apierr.AlreadyExists("image %s is already enabled: change it with UpdateImage or re-pull it with RefreshImage", uri)
		}
		img.URI, img.Repo = uri, repo
		if !exists {
			img.Disabled = true // until its first job is ready
		}
		return newJob(ctx, img, cfg, true), nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.enqueue(ctx, job); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.EnableImageResponse{Job: s.jobProto(job)}), nil
}

// UpdateImage changes an enabled image's config. A change to its warm command needs
// allow_recapture and starts a job that captures the warm layer again; other changes apply at
// once, without a job.
func (s *Service) UpdateImage(ctx context.Context, req *connect.Request[appv1.UpdateImageRequest]) (*connect.Response[appv1.UpdateImageResponse], error) {
	if err := requireAdmin(ctx, "update images"); err != nil {
		return nil, err
	}
	uri, _, err := parseURI("image_uri", req.Msg.GetImageUri())
	if err != nil {
		return nil, err
	}
	cfg := proto.CloneOf(req.Msg.GetConfig())
	if cfg == nil {
		return nil, apierr.InvalidArgument("config", "is required")
	}
	if cfg.GetName() == "" {
		cfg.Name = uri
	}
	var v apierr.Violations
	s.checkConfig(cfg, &v)
	if err := v.Err(); err != nil {
		return nil, err
	}
	img, err := s.usableImage(ctx, uri)
	if err != nil {
		return nil, err
	}
	newWarm := warmPart(encodeConfig(cfg))
	if newWarm == img.WarmConfig {
		_, err := s.rec.setImage(ctx, img.ID, func(i *Image) error {
			i.Config = encodeConfig(cfg)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&appv1.UpdateImageResponse{}), nil
	}
	if !req.Msg.GetAllowRecapture() {
		return nil, apierr.FailedPrecondition("the change to image %s's warm command needs its warm layer captured again: set allow_recapture", uri)
	}
	job, err := s.rec.startJob(ctx, img.ID, func(i *Image, _ bool, _ *Job) (*Job, error) {
		j := newJob(ctx, i, cfg, true)
		// The digest stays: the job re-uses what the image was enabled from.
		j.Digest = i.Digest
		return j, nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.enqueue(ctx, job); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.UpdateImageResponse{Job: s.jobProto(job)}), nil
}

// DisableImage stops new sessions from starting from the image; running ones continue. A job
// in progress, or failed and awaiting a retry, is superseded. A collection is queued: the
// image's chunks, warm layer and prestaged copies go once nothing references them
// (CollectImages).
func (s *Service) DisableImage(ctx context.Context, req *connect.Request[appv1.DisableImageRequest]) (*connect.Response[emptypb.Empty], error) {
	if err := requireAdmin(ctx, "disable images"); err != nil {
		return nil, err
	}
	uri, _, err := parseURI("image_uri", req.Msg.GetImageUri())
	if err != nil {
		return nil, err
	}
	img, err := s.rec.setImage(ctx, imageID(uri), func(i *Image) error {
		i.Disabled = true
		return nil
	})
	if errors.Is(err, errNoImage) {
		return nil, apierr.NotFound("image", uri)
	}
	if err != nil {
		return nil, err
	}
	if img.JobID != "" {
		_, err := s.rec.updateJob(ctx, img.JobID, func(j *Job) error {
			if j.State == Ready || j.State == Superseded {
				return errNothing
			}
			j.State, j.Error, j.LeaseOwner = Superseded, "image disabled", ""
			return nil
		})
		if err != nil && !errors.Is(err, errNothing) && !isNotFound(err) {
			return nil, err
		}
	}
	// The image is disabled whether or not the collection is queued: a later one (the worker
	// runs one every CollectEvery) collects it then.
	if s.d.Queue != nil {
		if err := s.d.Queue.EnqueueCollect(ctx); err != nil {
			s.log.Warn("queue an image collection after a disable", "image", uri, "err", err)
		}
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

var errNothing = errors.New("nothing to do")

// RefreshImage resolves the image's tag again: a new digest (or force_recapture) starts a job;
// an unchanged digest answers without one.
func (s *Service) RefreshImage(ctx context.Context, req *connect.Request[appv1.RefreshImageRequest]) (*connect.Response[appv1.RefreshImageResponse], error) {
	if err := requireAdmin(ctx, "refresh images"); err != nil {
		return nil, err
	}
	uri, _, err := parseURI("image_uri", req.Msg.GetImageUri())
	if err != nil {
		return nil, err
	}
	img, err := s.usableImage(ctx, uri)
	if err != nil {
		return nil, err
	}
	_, digest, err := s.resolve(ctx, uri)
	if err != nil {
		return nil, apierr.FailedPrecondition("refresh %s: %v", uri, err)
	}
	if digest == img.Digest && !req.Msg.GetForceRecapture() {
		_, err := s.rec.setImage(ctx, img.ID, func(i *Image) error {
			i.RefreshedAt = s.d.Clock.Now()
			return nil
		})
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&appv1.RefreshImageResponse{}), nil
	}
	job, err := s.rec.startJob(ctx, img.ID, func(i *Image, _ bool, _ *Job) (*Job, error) {
		return newJob(ctx, i, decodeConfig(i.Config), true), nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.enqueue(ctx, job); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RefreshImageResponse{Job: s.jobProto(job)}), nil
}

// usableImage is the enabled (ready, not disabled) image of uri, or failed_precondition / not
// found saying what to do.
func (s *Service) usableImage(ctx context.Context, uri string) (*Image, error) {
	img, err := s.rec.imageByURI(ctx, uri)
	if errors.Is(err, errNoImage) {
		return nil, apierr.NotFound("image", uri)
	}
	if err != nil {
		return nil, err
	}
	if !img.Usable() {
		return nil, notUsable(img)
	}
	return img, nil
}

// notUsable says why sessions may not start from img and what to do about it.
func notUsable(img *Image) error {
	if img.Disabled && img.Digest != "" {
		return apierr.FailedPrecondition("image %s is disabled: enable it again with EnableImage (hangar images enable %s)", img.URI, img.URI)
	}
	return apierr.FailedPrecondition("image %s is not enabled yet: its enable job %s has not finished (hangar images job %s)", img.URI, img.JobID, img.JobID)
}

// ListEnabledImages lists the images sessions may start from.
func (s *Service) ListEnabledImages(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListEnabledImagesResponse], error) {
	list, err := s.rec.listImages(ctx)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListEnabledImagesResponse{}
	for i := range list {
		if img := &list[i]; img.Usable() {
			out.Images = append(out.Images, &appv1.EnabledImageSummary{
				Id: img.ID, ImageUri: img.URI, ManifestDigest: img.Digest, Config: decodeConfig(img.Config),
				LastRefreshedAt: clock.Format(img.RefreshedAt), CreatedAt: clock.Format(img.CreatedAt),
			})
		}
	}
	return connect.NewResponse(out), nil
}

// ListEnableJobs lists the newest jobs first.
func (s *Service) ListEnableJobs(ctx context.Context, _ *connect.Request[emptypb.Empty]) (*connect.Response[appv1.ListEnableJobsResponse], error) {
	list, err := s.rec.listJobs(ctx, maxJobsListed)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListEnableJobsResponse{}
	for i := range list {
		out.Jobs = append(out.Jobs, s.jobProto(&list[i]))
	}
	return connect.NewResponse(out), nil
}

// GetEnableJob returns one job.
func (s *Service) GetEnableJob(ctx context.Context, req *connect.Request[appv1.GetEnableJobRequest]) (*connect.Response[appv1.GetEnableJobResponse], error) {
	j, err := s.job(ctx, req.Msg.GetJobId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetEnableJobResponse{Job: s.jobProto(j)}), nil
}

func (s *Service) job(ctx context.Context, id string) (*Job, error) {
	if !ids.Valid("ejob", id) {
		return nil, apierr.NotFound("enable job", id)
	}
	j, err := s.rec.job(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.NotFound("enable job", id)
	}
	return j, err
}

// RetryEnableJob resumes a failed job from the stage that failed, counting the attempt.
func (s *Service) RetryEnableJob(ctx context.Context, req *connect.Request[appv1.RetryEnableJobRequest]) (*connect.Response[appv1.RetryEnableJobResponse], error) {
	if err := requireAdmin(ctx, "retry enable jobs"); err != nil {
		return nil, err
	}
	if _, err := s.job(ctx, req.Msg.GetJobId()); err != nil {
		return nil, err
	}
	j, err := s.rec.updateJob(ctx, req.Msg.GetJobId(), func(j *Job) error {
		if j.State != Failed {
			return apierr.FailedPrecondition("enable job %s is %s: only a failed job can be retried", j.ID, j.State)
		}
		j.State, j.Error, j.LeaseOwner = j.FailedStage, "", ""
		j.Attempts++
		// The retry is the retrying admin's: a warm command's secrets resolve for them now.
		j.Actor = callerID(ctx)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.enqueue(ctx, j); err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.RetryEnableJobResponse{Job: s.jobProto(j)}), nil
}

// stageNames lists stages for the job's materialize_stages and warm_stages fields.
const (
	materializeStages = "resolving,pulling,chunking,prestaging"
	warmStages        = "booting,running,capturing"
)

func (s *Service) jobProto(j *Job) *appv1.EnableJob {
	out := &appv1.EnableJob{
		Id: j.ID, ImageUri: j.URI, State: string(j.State), ChunksDone: uint32(j.ChunksDone),
		Attempts: uint32(j.Attempts), CreatedAt: clock.Format(j.CreatedAt), UpdatedAt: clock.Format(j.UpdatedAt),
		PrestageHosts: strings.Join(j.PrestageHosts, ","), MaterializeStages: materializeStages,
	}
	if j.Digest != "" {
		out.ManifestDigest = &j.Digest
	}
	if j.ChunksTotal > 0 {
		t := uint32(j.ChunksTotal)
		out.ChunksTotal = &t
	}
	if j.Error != "" {
		out.Error = &j.Error
	}
	if j.HostID != "" {
		out.MaterializeHostId = &j.HostID
	}
	if j.Warm {
		out.WarmStages = warmStages
		if j.State == Warming || j.WarmStage != "" {
			phase := string(Warming)
			out.CapturePhase = &phase
		}
		if j.WarmStage != "" {
			out.WarmStage = &j.WarmStage
			out.WarmStageStartedAt = clock.FormatPtr(j.WarmStageAt)
		}
		if j.OutputTail != "" {
			out.OutputTail = &j.OutputTail
		}
	}
	return out
}

// ResolveImage answers the enabled image a session, profile or task names by id (img_...) or
// by uri: its reference by digest (repository@sha256:...), which hosts stage from chunks, its
// warm layer ("" for none) and its config (env, workdir, resources), which the caller must not
// change. An unknown, disabled or not yet ready image is failed_precondition naming the image
// and what to do. A usable image is answered from memory for up to ResolveCacheTTL
// (resolvecache.go).
func (s *Service) ResolveImage(ctx context.Context, image string) (ref, warmLayer string, config *appv1.ImageConfig, err error) {
	image = strings.TrimSpace(image)
	id := image
	if !strings.HasPrefix(image, "img_") {
		id = imageID(image)
	}
	img, config, err := s.rec.resolved.get(ctx, s.rec, id)
	if errors.Is(err, errNoImage) {
		return "", "", nil, apierr.FailedPrecondition("image %s is not enabled: an admin enables it with EnableImage (hangar images enable %s)", image, image)
	}
	if err != nil {
		return "", "", nil, err
	}
	if !img.Usable() {
		return "", "", nil, notUsable(img)
	}
	return img.Ref(), img.WarmLayer, config, nil
}

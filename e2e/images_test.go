package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/pubsub"
	hostimages "github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// imageStack is the API with Pub/Sub, sandbox hosts and a registry of its own that a test can
// switch off, with enable jobs run by workers the test starts.
type imageStack struct {
	*sandboxStack
	a       *composition.API
	ps      *pubsub.Client
	images  appv1connect.ImageServiceClient
	reg     string
	offline atomic.Bool
}

// newImageStack starts the stack; tune, when given, adjusts the sandbox hosts before they start.
func newImageStack(t testing.TB, nHosts int, tune ...func(*testenv.Sandboxes)) *imageStack {
	t.Helper()
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	for _, f := range tune {
		f(sb)
	}
	is := &imageStack{sandboxStack: &sandboxStack{sb: sb}, ps: testenv.PubSub(t)}
	// A registry that answers 503 to everything while offline is set.
	is.reg = imagestest.Registry(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if is.offline.Load() {
				http.Error(w, "registry down", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	for i := range nHosts {
		is.hosts = append(is.hosts, sb.StartHost(t, "host-"+string(rune('a'+i))))
	}
	is.a = composition.New(composition.Deps{DB: sb.DB, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, PubSub: is.ps})
	is.stack = serve(t, is.a)
	is.svc = is.sessions(is.admin)
	is.images = appv1connect.NewImageServiceClient(httpClient, is.rpcURL(), auth.WithKey(is.admin))
	return is
}

// runWorker runs an enable-job worker, sweeping every 100 ms, until the test ends.
func (is *imageStack) runWorker(t testing.TB, opts imagesvc.WorkerOptions) {
	is.runWorkerEvery(t, opts, 100*time.Millisecond)
}

// runWorkerEvery runs an enable-job worker, sweeping every tick, until the test ends.
func (is *imageStack) runWorkerEvery(t testing.TB, opts imagesvc.WorkerOptions, tick time.Duration) {
	t.Helper()
	w := is.a.Images().Worker(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, is.ps, tick) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

// testImage is a multi-layer image: busybox, a layer with a few MiB of incompressible data and
// a layer of files, with extra's files in one more layer.
func testImage(t testing.TB, extra map[string]string) v1.Image {
	t.Helper()
	base, err := hostimages.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20)
	_, _ = rand.Read(big)
	layers := []v1.Layer{
		imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.Dir("opt/data/", 0o755), imagestest.File("opt/data/big.bin", string(big), 0o644)),
		imagestest.Layer(t, imagestest.Dir("etc/", 0o755), imagestest.File("etc/image-release", "layered test image\n", 0o644)),
	}
	if len(extra) > 0 {
		var entries []hostimages.TarEntry
		for name, body := range extra {
			entries = append(entries, imagestest.File(name, body, 0o644))
		}
		layers = append(layers, imagestest.Layer(t, entries...))
	}
	img, err := mutate.AppendLayers(base, layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func (is *imageStack) push(t testing.TB, repo string, img v1.Image) string {
	t.Helper()
	return imagestest.Push(t, is.reg, repo, img)
}

func (is *imageStack) enable(t testing.TB, uri string, cfg *appv1.ImageConfig) *appv1.EnableJob {
	t.Helper()
	resp, err := is.images.EnableImage(t.Context(), connect.NewRequest(&appv1.EnableImageRequest{ImageUri: uri, Config: cfg}))
	if err != nil {
		t.Fatalf("enable %s: %v", uri, err)
	}
	return resp.Msg.GetJob()
}

// waitJob follows a job until it is in one of states.
func (is *imageStack) waitJob(t testing.TB, id string, states ...string) *appv1.EnableJob {
	t.Helper()
	var job *appv1.EnableJob
	testkit.Eventually(t, 3*time.Minute, "enable job "+id+" to be "+strings.Join(states, " or "), func() (bool, string) {
		resp, err := is.images.GetEnableJob(t.Context(), connect.NewRequest(&appv1.GetEnableJobRequest{JobId: id}))
		if err != nil {
			return false, err.Error()
		}
		job = resp.Msg.GetJob()
		for _, s := range states {
			if job.GetState() == s {
				return true, ""
			}
		}
		return false, job.GetState() + " " + job.GetError()
	})
	return job
}

func TestAnEnabledImageStartsSessionsOnTwoHostsWithoutItsRegistry(t *testing.T) {
	is := newImageStack(t, 2)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	uri := is.push(t, "team/layered", testImage(t, nil))

	job := is.enable(t, uri, &appv1.ImageConfig{Name: "layered", Env: map[string]string{"IMAGE_GREETING": "from config"}})
	if job.GetState() != "queued" || job.GetAttempts() != 1 {
		t.Fatalf("new job: %v", job)
	}
	job = is.waitJob(t, job.GetId(), "ready", "failed")
	if job.GetState() != "ready" {
		t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
	}
	if job.GetChunksTotal() == 0 || job.GetChunksDone() != job.GetChunksTotal() {
		t.Fatalf("chunks %d of %d", job.GetChunksDone(), job.GetChunksTotal())
	}
	if hosts := strings.Split(job.GetPrestageHosts(), ","); len(hosts) != 2 {
		t.Fatalf("prestaged on %q, want both hosts", job.GetPrestageHosts())
	}
	list, err := is.images.ListEnabledImages(t.Context(), connect.NewRequest(&emptyMsg{}))
	if err != nil || len(list.Msg.GetImages()) != 1 || list.Msg.GetImages()[0].GetManifestDigest() != job.GetManifestDigest() {
		t.Fatalf("enabled images: %v %v", list, err)
	}

	// Sessions start from the prestaged chunks on either host: the registry is not asked.
	// Placement prefers the host with the larger free share, as of its last heartbeat, so
	// sessions are created (each checked) until both hosts have run one.
	is.offline.Store(true)
	seen := map[string]bool{}
	testkit.Eventually(t, 2*time.Minute, "sessions of the enabled image on both hosts", func() (bool, string) {
		id := is.create(t, &appv1.CreateSessionRequest{ImageUri: uri})
		if got := is.sh(t, id, "cat /etc/image-release && wc -c < /opt/data/big.bin && echo $IMAGE_GREETING"); got != "layered test image\n3145728\nfrom config\n" {
			t.Fatalf("session of the enabled image sees %q", got)
		}
		resp, err := is.svc.GetSession(t.Context(), connect.NewRequest(&appv1.GetSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatal(err)
		}
		seen[resp.Msg.GetSession().GetHostId()] = true
		return len(seen) == 2, fmt.Sprintf("sessions ran on %v", seen)
	})
}

// An enabled image's config sets its sessions' working directory and resources, over the
// image's own (busybox has none) and the host's defaults; a session of the same image
// enabled without them keeps the defaults.
func TestAnImageConfigsWorkdirAndResourcesApplyToSessions(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	configured := is.push(t, "team/configured", testImage(t, map[string]string{"work/here/README": "x"}))
	plain := is.push(t, "team/plain", testImage(t, nil))
	for _, tc := range []struct {
		uri string
		cfg *appv1.ImageConfig
	}{
		{configured, &appv1.ImageConfig{Workdir: proto.String("/work/here"), Resources: &appv1.ImageResources{SuggestedMemoryMib: proto.Uint32(160), SuggestedVcpus: proto.Uint32(1)}}},
		{plain, nil},
	} {
		if job := is.waitJob(t, is.enable(t, tc.uri, tc.cfg).GetId(), "ready", "failed"); job.GetState() != "ready" {
			t.Fatalf("enable %s: %s", tc.uri, job.GetError())
		}
	}
	limits := `cd /sys/fs/cgroup; if [ -f memory.max ]; then cat memory.max; echo $(cat cpu.max);
		else cat memory/memory.limit_in_bytes; echo $(cat cpu/cpu.cfs_quota_us cpu/cpu.cfs_period_us); fi`
	id := is.create(t, &appv1.CreateSessionRequest{ImageUri: configured})
	if got := is.sh(t, id, "pwd; ls"); got != "/work/here\nREADME\n" {
		t.Fatalf("the configured image's session starts in %q, want /work/here", got)
	}
	if got := is.sh(t, id, limits); got != "167772160\n100000 100000\n" {
		t.Fatalf("the configured image's session has the limits:\n%s", got)
	}
	other := is.create(t, &appv1.CreateSessionRequest{ImageUri: plain})
	if got := is.sh(t, other, "pwd"); got == "/work/here\n" {
		t.Fatalf("the plain image's session starts in %q", got)
	}
	if got := is.sh(t, other, limits); strings.HasPrefix(got, "167772160\n") {
		t.Fatalf("the plain image's session took the other image's memory limit:\n%s", got)
	}

	_, err := is.images.UpdateImage(t.Context(), connect.NewRequest(&appv1.UpdateImageRequest{ImageUri: plain, Config: &appv1.ImageConfig{Workdir: proto.String("../up")}}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

func TestSessionsRefuseImagesThatAreNotEnabledSayingWhatToDo(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	uri := is.push(t, "team/plain", testImage(t, nil))

	_, err := is.svc.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: uri}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), uri) || !strings.Contains(err.Error(), "hangar images enable") {
		t.Fatalf("refusal of an unknown image does not name it and what to do: %v", err)
	}

	job := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
	if job.GetState() != "ready" {
		t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
	}
	running := is.create(t, &appv1.CreateSessionRequest{ImageUri: uri})
	if _, err := is.images.DisableImage(t.Context(), connect.NewRequest(&appv1.DisableImageRequest{ImageUri: uri})); err != nil {
		t.Fatal(err)
	}
	_, err = is.svc.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: uri}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("refusal of a disabled image: %v", err)
	}
	// A session already running from it continues.
	if got := is.sh(t, running, "cat /etc/image-release"); got != "layered test image\n" {
		t.Fatalf("running session after disable: %q", got)
	}
	list, err := is.images.ListEnabledImages(t.Context(), connect.NewRequest(&emptyMsg{}))
	if err != nil || len(list.Msg.GetImages()) != 0 {
		t.Fatalf("a disabled image is listed: %v %v", list, err)
	}
}

func TestAWarmLayerIsInEveryNewSessionWithoutRunningTheCommandAgain(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	uri := is.push(t, "team/warm", testImage(t, nil))
	warm := &appv1.ImageWarmConfig{
		Command: []string{"sh", "-c", "echo warming up; mkdir -p /opt/warm && cat /proc/sys/kernel/random/uuid > /opt/warm/stamp && echo $GREETING"},
		Env:     []*appv1.CaptureEnvEntry{{Name: "GREETING", Value: &appv1.CaptureEnvEntry_Literal{Literal: "warm done"}}},
	}
	job := is.waitJob(t, is.enable(t, uri, &appv1.ImageConfig{Name: "warm", Warm: warm}).GetId(), "ready", "failed")
	if job.GetState() != "ready" {
		t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
	}
	if !strings.Contains(job.GetOutputTail(), "warming up") || !strings.Contains(job.GetOutputTail(), "warm done") {
		t.Fatalf("output tail %q", job.GetOutputTail())
	}
	first := is.sh(t, is.create(t, &appv1.CreateSessionRequest{ImageUri: uri}), "cat /opt/warm/stamp")
	second := is.sh(t, is.create(t, &appv1.CreateSessionRequest{ImageUri: uri}), "cat /opt/warm/stamp")
	if first == "" || first != second {
		t.Fatalf("warm file differs between sessions (the command ran again?): %q vs %q", first, second)
	}
}

// A warm command's secret_ref is resolved from the org secrets for the admin who enabled the
// image (an admins_only secret, which admins may always use): the command sees the value, the
// job's output tail and the sessions' environment do not hold it, and a secret that does not
// exist fails the warm stage naming it.
func TestAWarmCommandsSecretRefIsResolvedFromOrgSecrets(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	const value = "WARM-SECRET-4b7c"
	orgSecrets := appv1connect.NewOrgSecretServiceClient(httpClient, is.rpcURL(), auth.WithKey(is.admin))
	if _, err := orgSecrets.PutOrgSecret(t.Context(), connect.NewRequest(&appv1.PutOrgSecretRequest{Name: "WARM_TOKEN", Value: value})); err != nil {
		t.Fatal(err)
	}
	warm := func(secret string) *appv1.ImageConfig {
		return &appv1.ImageConfig{Warm: &appv1.ImageWarmConfig{
			Command: []string{"sh", "-c", `echo warming; test "$TOKEN" = ` + value + ` && mkdir -p /opt/warm && echo ok > /opt/warm/token-ok`},
			Env:     []*appv1.CaptureEnvEntry{{Name: "TOKEN", Value: &appv1.CaptureEnvEntry_SecretRef{SecretRef: secret}}},
		}}
	}
	uri := is.push(t, "team/warm-secret", testImage(t, nil))
	job := is.waitJob(t, is.enable(t, uri, warm("WARM_TOKEN")).GetId(), "ready", "failed")
	if job.GetState() != "ready" {
		t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
	}
	if strings.Contains(job.GetOutputTail(), value) {
		t.Fatalf("the output tail holds the secret: %q", job.GetOutputTail())
	}
	id := is.create(t, &appv1.CreateSessionRequest{ImageUri: uri})
	if got := is.sh(t, id, "cat /opt/warm/token-ok; echo ${TOKEN:-unset}"); got != "ok\nunset\n" {
		t.Fatalf("a session of the warm image sees %q", got)
	}

	missing := is.push(t, "team/warm-missing-secret", testImage(t, map[string]string{"etc/other": "x"}))
	job = is.waitJob(t, is.enable(t, missing, warm("NO_SUCH_SECRET")).GetId(), "ready", "failed")
	if job.GetState() != "failed" || !strings.Contains(job.GetError(), "warming") || !strings.Contains(job.GetError(), "NO_SUCH_SECRET") {
		t.Fatalf("a warm env naming a missing secret ended %s: %q", job.GetState(), job.GetError())
	}
}

func TestAFailingWarmCommandFailsItsStageAndEnablesNothing(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	for _, tc := range []struct {
		name, repo string
		warm       *appv1.ImageWarmConfig
		want       string
	}{
		{"exits non-zero", "team/warmfail", &appv1.ImageWarmConfig{Command: []string{"sh", "-c", "echo about to fail; exit 3"}}, "warming: warm command exited with status 3"},
		{"times out", "team/warmslow", &appv1.ImageWarmConfig{Command: []string{"sleep", "60"}, TimeoutSecs: ptr[uint64](1)}, "warming: warm command timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uri := is.push(t, tc.repo, testImage(t, nil))
			job := is.waitJob(t, is.enable(t, uri, &appv1.ImageConfig{Warm: tc.warm}).GetId(), "ready", "failed")
			if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), tc.want) {
				t.Fatalf("job %s: %q, want an error starting %q", job.GetState(), job.GetError(), tc.want)
			}
			_, err := is.svc.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: uri}))
			testenv.WantCode(t, err, connect.CodeFailedPrecondition)
		})
	}
}

func TestEnableFaultsEndInAnErrorNamingTheStage(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	good := is.push(t, "team/good", testImage(t, nil))
	// An index without a linux/amd64 image.
	armImg, err := mutate.ConfigFile(testImage(t, nil), &v1.ConfigFile{OS: "linux", Architecture: "arm64"})
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(emptyIndex(), mutate.IndexAddendum{Add: armImg, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}})
	armOnly := pushIndex(t, is.reg, "team/armonly", idx)

	for _, tc := range []struct {
		name, uri, want string
	}{
		{"missing tag", strings.TrimSuffix(good, ":latest") + ":nope", "resolving: "},
		{"manifest list without linux/amd64", armOnly, "resolving: resolve " + armOnly + ": its manifest list has no linux/amd64 image"},
		{"unreachable registry", "127.0.0.1:1/team/none:latest", "resolving: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := is.waitJob(t, is.enable(t, tc.uri, nil).GetId(), "ready", "failed")
			if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), tc.want) {
				t.Fatalf("job %s: %q, want an error starting %q", job.GetState(), job.GetError(), tc.want)
			}
		})
	}
}

func TestRetryResumesAFailedJobFromItsStage(t *testing.T) {
	is := newImageStack(t, 1)
	var failChunking atomic.Bool
	failChunking.Store(true)
	var resolves atomic.Int32
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w", BeforeStage: func(_ context.Context, j *imagesvc.Job) error {
		switch j.State {
		case imagesvc.Resolving:
			resolves.Add(1)
		case imagesvc.Chunking:
			if failChunking.Swap(false) {
				return errInjected
			}
		}
		return nil
	}})
	uri := is.push(t, "team/retry", testImage(t, nil))
	job := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
	if job.GetState() != "failed" || job.GetError() != "chunking: injected failure" {
		t.Fatalf("job %s: %q", job.GetState(), job.GetError())
	}
	resp, err := is.images.RetryEnableJob(t.Context(), connect.NewRequest(&appv1.RetryEnableJobRequest{JobId: job.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Msg.GetJob().GetState() != "chunking" || resp.Msg.GetJob().GetAttempts() != 2 {
		t.Fatalf("retried job: %v", resp.Msg.GetJob())
	}
	job = is.waitJob(t, job.GetId(), "ready", "failed")
	if job.GetState() != "ready" || resolves.Load() != 1 {
		t.Fatalf("after retry: %s %q, resolved %d times", job.GetState(), job.GetError(), resolves.Load())
	}
	_, err = is.images.RetryEnableJob(t.Context(), connect.NewRequest(&appv1.RetryEnableJobRequest{JobId: job.GetId()}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
}

func TestAJobWhoseWorkerDiedIsFinishedByAnother(t *testing.T) {
	is := newImageStack(t, 1)
	uri := is.push(t, "team/killed", testImage(t, nil))
	job := is.enable(t, uri, nil)

	// Worker A takes the job and dies as it starts chunking, its lease still held.
	ctxA, kill := context.WithCancel(context.Background())
	a := is.a.Images().Worker(imagesvc.WorkerOptions{Name: "a", Lease: 2 * time.Second, BeforeStage: func(ctx context.Context, j *imagesvc.Job) error {
		if j.State == imagesvc.Chunking {
			kill()
			return ctx.Err()
		}
		return nil
	}})
	if err := a.Advance(ctxA, job.GetId()); err == nil {
		t.Fatal("the killed worker reported success")
	}
	if got := is.waitJob(t, job.GetId(), "chunking"); got.GetManifestDigest() == "" {
		t.Fatalf("the digest resolved before the kill was not kept: %v", got)
	}
	// Worker B sweeps the job once A's lease runs out and finishes it from chunking.
	is.runWorker(t, imagesvc.WorkerOptions{Name: "b", Lease: 2 * time.Second})
	got := is.waitJob(t, job.GetId(), "ready", "failed")
	if got.GetState() != "ready" || got.GetAttempts() != 1 {
		t.Fatalf("resumed job: %s %q attempts %d", got.GetState(), got.GetError(), got.GetAttempts())
	}
}

func TestRefreshStartsAJobOnlyForANewDigest(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	uri := is.push(t, "team/moving", testImage(t, map[string]string{"etc/version": "1\n"}))
	first := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
	if first.GetState() != "ready" {
		t.Fatalf("job ended %s: %s", first.GetState(), first.GetError())
	}
	resp, err := is.images.RefreshImage(t.Context(), connect.NewRequest(&appv1.RefreshImageRequest{ImageUri: uri}))
	if err != nil || resp.Msg.GetJob() != nil {
		t.Fatalf("refresh of an unchanged tag: %v %v", resp, err)
	}
	is.push(t, "team/moving", testImage(t, map[string]string{"etc/version": "2\n"}))
	resp, err = is.images.RefreshImage(t.Context(), connect.NewRequest(&appv1.RefreshImageRequest{ImageUri: uri}))
	if err != nil || resp.Msg.GetJob() == nil {
		t.Fatalf("refresh of a moved tag: %v %v", resp, err)
	}
	second := is.waitJob(t, resp.Msg.GetJob().GetId(), "ready", "failed")
	if second.GetState() != "ready" || second.GetManifestDigest() == first.GetManifestDigest() {
		t.Fatalf("refreshed job %s %q digest %s (was %s)", second.GetState(), second.GetError(), second.GetManifestDigest(), first.GetManifestDigest())
	}
	if got := is.sh(t, is.create(t, &appv1.CreateSessionRequest{ImageUri: uri}), "cat /etc/version"); got != "2\n" {
		t.Fatalf("a session after refresh sees version %q", got)
	}
}

type emptyMsg = emptypb.Empty

var errInjected = errors.New("injected failure")

func emptyIndex() v1.ImageIndex { return empty.Index }

// pushIndex pushes idx as host/repo:latest and returns that reference.
func pushIndex(t testing.TB, host, repo string, idx v1.ImageIndex) string {
	t.Helper()
	ref := host + "/" + repo + ":latest"
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(r, idx, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("push index %s: %v", ref, err)
	}
	return ref
}

// TestASecondImageSharingABaseUploadsFewChunks enables an image, then one built from the same
// files re-layered (the shared bytes sit in a layer of another digest, so only content-defined
// chunking can find them) plus a file of its own, and checks that the second job uploads at most
// 10 % of its bytes to the chunk store.
func TestASecondImageSharingABaseUploadsFewChunks(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	base, err := hostimages.Busybox(nil)
	if err != nil {
		t.Fatal(err)
	}
	shared := make([]byte, 24<<20)
	_, _ = rand.Read(shared)
	own := make([]byte, 512<<10)
	_, _ = rand.Read(own)
	first, err := mutate.AppendLayers(base,
		imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/shared.bin", string(shared), 0o644)),
		imagestest.Layer(t, imagestest.Dir("etc/", 0o755), imagestest.File("etc/first", "first\n", 0o644)))
	if err != nil {
		t.Fatal(err)
	}
	second, err := mutate.AppendLayers(base,
		imagestest.Layer(t, imagestest.Dir("opt/", 0o755), imagestest.File("opt/shared.bin", string(shared), 0o644),
			imagestest.File("opt/own.bin", string(own), 0o644)))
	if err != nil {
		t.Fatal(err)
	}
	uploaded := func(uri string) (int64, int64) {
		t.Helper()
		job := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
		if job.GetState() != "ready" {
			t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
		}
		snap, err := is.sb.DB.Collection("image_enable_jobs").Doc(job.GetId()).Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var rec imagesvc.Job
		if err := snap.DataTo(&rec); err != nil {
			t.Fatal(err)
		}
		return rec.BytesUploaded, rec.BytesTotal
	}
	up1, total1 := uploaded(is.push(t, "team/first", first))
	up2, total2 := uploaded(is.push(t, "team/second", second))
	t.Logf("first image uploaded %d of %d bytes; the second %d of %d (%.1f%%)", up1, total1, up2, total2, 100*float64(up2)/float64(total2))
	if up1 < int64(len(shared)) {
		t.Fatalf("the first image uploaded %d bytes, less than its own %d", up1, len(shared))
	}
	if up2*10 > total2 {
		t.Fatalf("the second image uploaded %d of its %d bytes: more than 10%%", up2, total2)
	}
}

// TestSecurityImageWritesAreAdminsOnlyAndHostileLayersFailThePull: a user who is not an admin
// cannot enable, update, disable, refresh or retry (permission_denied) but may list; a layer
// with a tar trick fails the job at pulling, writes nothing outside the layer, and enables
// nothing sessions could start from.
func TestSecurityImageWritesAreAdminsOnlyAndHostileLayersFailThePull(t *testing.T) {
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	user := appv1connect.NewImageServiceClient(httpClient, is.rpcURL(), auth.WithKey(is.mintKey(t, "user@example.com", false)))
	uri := is.push(t, "team/plain", testImage(t, nil))
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"EnableImage": func() error {
			_, err := user.EnableImage(ctx, connect.NewRequest(&appv1.EnableImageRequest{ImageUri: uri}))
			return err
		},
		"UpdateImage": func() error {
			_, err := user.UpdateImage(ctx, connect.NewRequest(&appv1.UpdateImageRequest{ImageUri: uri, Config: &appv1.ImageConfig{}}))
			return err
		},
		"DisableImage": func() error {
			_, err := user.DisableImage(ctx, connect.NewRequest(&appv1.DisableImageRequest{ImageUri: uri}))
			return err
		},
		"RefreshImage": func() error {
			_, err := user.RefreshImage(ctx, connect.NewRequest(&appv1.RefreshImageRequest{ImageUri: uri}))
			return err
		},
		"RetryEnableJob": func() error {
			_, err := user.RetryEnableJob(ctx, connect.NewRequest(&appv1.RetryEnableJobRequest{JobId: "ejob_01m8afx7t98fxmvsg7rkd0c6x3"}))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) { testenv.WantCode(t, call(), connect.CodePermissionDenied) })
	}
	if _, err := user.ListEnabledImages(ctx, connect.NewRequest(&emptyMsg{})); err != nil {
		t.Fatalf("a user cannot list images: %v", err)
	}

	target := t.TempDir()
	for i, tr := range imagestest.Tricks(target) {
		if !tr.Refused {
			continue
		}
		t.Run(tr.Name, func(t *testing.T) {
			base, err := hostimages.Busybox(nil)
			if err != nil {
				t.Fatal(err)
			}
			img, err := mutate.AppendLayers(base, imagestest.MaliciousLayer(t, tr))
			if err != nil {
				t.Fatal(err)
			}
			hostile := is.push(t, "team/hostile"+string(rune('a'+i)), img)
			job := is.waitJob(t, is.enable(t, hostile, nil).GetId(), "ready", "failed")
			if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), "pulling: ") {
				t.Fatalf("job %s: %q", job.GetState(), job.GetError())
			}
			_, err = is.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: hostile}))
			testenv.WantCode(t, err, connect.CodeFailedPrecondition)
		})
	}
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("a hostile layer wrote outside its layer: %v", entries)
	}
}

// TestAHostThatDiesAtPrestageIsLeftOutAndSessionsStillStart: one of two hosts crashes as the
// job reaches prestaging, either before it is called or while it streams its prestage (it has
// begun staging and dies before its first message leaves); the job is ready with the survivor
// as its prestaged host, and a session starts there without the registry.
func TestAHostThatDiesAtPrestageIsLeftOutAndSessionsStillStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		// midStream kills the victim at its prestage's first write rather than before the stage.
		midStream bool
	}{
		{"before it is called", false},
		{"while it streams", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var victim atomic.Pointer[testenv.TestHost]
			var died atomic.Bool
			kill := func() {
				if !died.Swap(true) {
					victim.Load().Kill(t)
				}
			}
			is := newImageStack(t, 2, func(sb *testenv.Sandboxes) {
				sb.WrapHost = func(id string, next http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if v := victim.Load(); tc.midStream && v != nil && v.ID() == id && strings.HasSuffix(r.URL.Path, "/PrepareImage") {
							w = &dieOnWrite{ResponseWriter: w, die: kill}
						}
						next.ServeHTTP(w, r)
					})
				}
			})
			is.runWorker(t, imagesvc.WorkerOptions{Name: "w", BeforeStage: func(_ context.Context, j *imagesvc.Job) error {
				if j.State == imagesvc.Prestaging && victim.Load() == nil {
					// Only prestage calls the host that did not pull: the job's host survives.
					v := is.hosts[0]
					if j.HostID == v.ID() {
						v = is.hosts[1]
					}
					victim.Store(v)
					if !tc.midStream {
						kill()
					}
				}
				return nil
			}})
			uri := is.push(t, "team/hostdies", testImage(t, nil))
			job := is.waitJob(t, is.enable(t, uri, nil).GetId(), "ready", "failed")
			if !died.Load() {
				t.Fatal("the victim host never died: it was not called to prestage")
			}
			if job.GetState() != "ready" || job.GetPrestageHosts() != job.GetMaterializeHostId() {
				t.Fatalf("job %s %q prestaged on %q (materialized on %s)", job.GetState(), job.GetError(), job.GetPrestageHosts(), job.GetMaterializeHostId())
			}
			is.offline.Store(true)
			// The dead host may still look alive for a few seconds: creating retries elsewhere
			// is the caller's, so wait for the fleet to notice before creating.
			testkit.Eventually(t, time.Minute, "a session to start on the surviving host", func() (bool, string) {
				resp, err := is.svc.CreateSession(t.Context(), connect.NewRequest(&appv1.CreateSessionRequest{ImageUri: uri}))
				if err != nil {
					return false, err.Error()
				}
				return resp.Msg.GetStatus() == "running", resp.Msg.GetStatus()
			})
		})
	}
}

// dieOnWrite is a response whose first body write kills its host instead of leaving.
type dieOnWrite struct {
	http.ResponseWriter
	die func()
}

func (d *dieOnWrite) Write([]byte) (int, error) {
	d.die()
	return 0, errors.New("the host died")
}

func (d *dieOnWrite) Flush() {}

func (d *dieOnWrite) Unwrap() http.ResponseWriter { return d.ResponseWriter }

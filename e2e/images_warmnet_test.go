package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
)

// A warm command reaches the network only through its host's egress proxy, under the image's
// warm.network policy (a profile's network shape): an allowed host (a loopback upstream under a
// real name, through the hosts' test resolver) is fetched and the fetched file is in every
// session; a host no rule names gets the proxy's immediate refusal, which the output tail shows,
// and the job fails at warming; no policy lets nothing out; and a metadata address stays
// unreachable even when a rule names it.
func TestAWarmCommandsNetworkPolicyDecidesWhatItReaches(t *testing.T) {
	var hits atomic.Int32
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "package from deps.example.com\n")
	}))
	t.Cleanup(upstream.Close)
	is := newImageStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.EgressResolve = map[string]string{"deps.example.com:80": upstream.Listener.Addr().String()}
	})
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w"})
	allowDeps := &appv1.ProfileNetwork{Default: "deny", AllowHosts: []string{"DEPS.example.com"}}
	fetch := func(url string) []string {
		return []string{"sh", "-c", "mkdir -p /opt/warm && wget -O /opt/warm/pkg " + url + " 2>&1 && cat /opt/warm/pkg"}
	}
	cases := []struct {
		name    string
		network *appv1.ProfileNetwork
		command []string
		// wantTail is in the output tail; wantError is the job's error ("" for ready).
		wantTail, wantError string
	}{
		{"an allowed host is fetched", allowDeps, fetch("http://deps.example.com/pkg"), "package from deps.example.com", ""},
		{"a host no rule names is refused at once", allowDeps, fetch("http://other.example.com/pkg"), "403", "warming: warm command exited with status 1"},
		{"no policy lets nothing out", nil, fetch("http://deps.example.com/pkg"), "403", "warming: warm command exited with status 1"},
		{"a metadata address is never reached", &appv1.ProfileNetwork{Default: "allow", AllowHosts: []string{"169.254.169.254"}},
			fetch("http://169.254.169.254/latest/meta-data/"), "403", "warming: warm command exited with status 1"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := hits.Load()
			uri := is.push(t, fmt.Sprintf("team/warmnet%d", i), testImage(t, map[string]string{"etc/case": tc.name}))
			cfg := &appv1.ImageConfig{Warm: &appv1.ImageWarmConfig{Command: tc.command, Network: tc.network}}
			job := is.waitJob(t, is.enable(t, uri, cfg).GetId(), "ready", "failed")
			t.Logf("job %s %q, output tail %q", job.GetState(), job.GetError(), job.GetOutputTail())
			if !strings.Contains(job.GetOutputTail(), tc.wantTail) {
				t.Fatalf("output tail %q does not hold %q", job.GetOutputTail(), tc.wantTail)
			}
			if tc.wantError == "" {
				if job.GetState() != "ready" {
					t.Fatalf("job ended %s: %s", job.GetState(), job.GetError())
				}
				id := is.create(t, &appv1.CreateSessionRequest{ImageUri: uri})
				if got := is.sh(t, id, "cat /opt/warm/pkg"); got != "package from deps.example.com\n" {
					t.Fatalf("a session of the image sees %q", got)
				}
				if hits.Load() != before+1 {
					t.Fatalf("the upstream was reached %d times, want once (by the warm command only)", hits.Load()-before)
				}
				return
			}
			if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), tc.wantError) {
				t.Fatalf("job ended %s: %q, want failed with %q", job.GetState(), job.GetError(), tc.wantError)
			}
			if hits.Load() != before {
				t.Fatal("a refused warm command reached the upstream")
			}
		})
	}
}

// A warm command's secret_ref follows the org-secret access policy for the admin who started
// (or last retried) the job, acting without a key as an automation's owner does: an admin whose
// admin key is revoked before the warm stage no longer opens an admins-only secret, so the job
// fails at warming naming it; a retry by an admin resolves it for them and the job is ready.
func TestAWarmCommandsSecretsAreResolvedForTheAdminWhoStartedTheJob(t *testing.T) {
	var revoke func()
	is := newImageStack(t, 1)
	is.runWorker(t, imagesvc.WorkerOptions{Name: "w", BeforeStage: func(_ context.Context, j *imagesvc.Job) error {
		if j.State == imagesvc.Warming && j.Attempts == 1 {
			revoke()
		}
		return nil
	}})
	ctx := context.Background()
	u, err := is.api.Users().EnsureHuman(ctx, "ops@example.com", "", time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	key, whole, err := is.api.Keys().Create(ctx, auth.NewKeyInput{Name: "ops", Kind: auth.KindPersonal, UserID: u.ID, Admin: true}, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	revoke = func() {
		if _, err := is.api.Keys().Revoke(ctx, key.ID, time.Now().UTC()); err != nil {
			t.Error(err)
		}
	}
	orgSecrets := appv1connect.NewOrgSecretServiceClient(httpClient, is.rpcURL(), auth.WithKey(is.admin))
	if _, err := orgSecrets.PutOrgSecret(ctx, connect.NewRequest(&appv1.PutOrgSecretRequest{Name: "OPS_TOKEN", Value: "ops-token-77"})); err != nil {
		t.Fatal(err)
	}
	ops := appv1connect.NewImageServiceClient(httpClient, is.rpcURL(), auth.WithKey(whole))
	uri := is.push(t, "team/warm-ops", testImage(t, nil))
	resp, err := ops.EnableImage(ctx, connect.NewRequest(&appv1.EnableImageRequest{ImageUri: uri, Config: &appv1.ImageConfig{Warm: &appv1.ImageWarmConfig{
		Command: []string{"sh", "-c", `test "$TOKEN" = ops-token-77 && mkdir -p /opt/warm && echo ok > /opt/warm/ok`},
		Env:     []*appv1.CaptureEnvEntry{{Name: "TOKEN", Value: &appv1.CaptureEnvEntry_SecretRef{SecretRef: "OPS_TOKEN"}}},
	}}}))
	if err != nil {
		t.Fatal(err)
	}
	job := is.waitJob(t, resp.Msg.GetJob().GetId(), "ready", "failed")
	if job.GetState() != "failed" || !strings.HasPrefix(job.GetError(), "warming: ") || !strings.Contains(job.GetError(), "OPS_TOKEN") {
		t.Fatalf("the job of a revoked admin ended %s: %q, want failed at warming naming OPS_TOKEN", job.GetState(), job.GetError())
	}
	if _, err := is.images.RetryEnableJob(ctx, connect.NewRequest(&appv1.RetryEnableJobRequest{JobId: job.GetId()})); err != nil {
		t.Fatal(err)
	}
	if job = is.waitJob(t, job.GetId(), "ready", "failed"); job.GetState() != "ready" {
		t.Fatalf("the retried job ended %s: %q", job.GetState(), job.GetError())
	}
}

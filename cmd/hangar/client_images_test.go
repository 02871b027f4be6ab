package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
)

// TestImagesCommandsEnableWarmAndFollowToSessions runs the images commands against the whole
// stack: the API with Pub/Sub and its image worker, a sandbox host on runc, the emulators.
func TestImagesCommandsEnableWarmAndFollowToSessions(t *testing.T) {
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	sb.StartHost(t, "cli-host")
	ps := testenv.PubSub(t)
	a := composition.New(composition.Deps{DB: db, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, PubSub: ps})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ImageWorker().Run(ctx, ps, 100*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := composition.NewServer(a.Handler())
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	u, err := a.Users().EnsureHuman(ctx, "ops@example.com", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := a.Keys().Create(ctx, auth.NewKeyInput{Name: "ops", Kind: auth.KindPersonal, UserID: u.ID, Admin: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HANGAR_URL", "http://"+ln.Addr().String())
	t.Setenv("HANGAR_API_KEY", key)
	run := func(args ...string) result { return runHangar(t, "", args...) }
	must := func(args ...string) string {
		t.Helper()
		r := run(args...)
		if r.err != nil {
			t.Fatalf("hangar %s: exit %d: %v %s", strings.Join(args, " "), r.code, r.err, r.errOut)
		}
		return r.out
	}

	out := must("images", "enable", sb.Image, "--warm-cmd", "echo hello from warm; mkdir -p /opt/w && touch /opt/w/done", "--follow")
	for _, want := range []string{"[✓ resolving]", "[✓ chunking]", "[✓ warming]", "chunks [", "--- warm command output (tail) ---\nhello from warm\n", "ready: " + sb.Image + "@sha256:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("enable --follow printed no %q:\n%s", want, out)
		}
	}
	// The warm command's network flags make a profile-shaped policy, checked by the server.
	if r := run("images", "enable", sb.Image+"-net", "--warm-cmd", "true", "--warm-allow-host", "*.example.com"); r.err == nil || !strings.Contains(r.msg(), "config.warm.network.allow_hosts[0]") {
		t.Fatalf("a wildcard in --warm-allow-host: exit %d %q", r.code, r.msg())
	}
	if r := run("images", "enable", sb.Image+"-net", "--warm-allow-host", "deps.example.com"); r.err == nil || !strings.Contains(r.msg(), "need --warm-cmd") {
		t.Fatalf("--warm-allow-host without --warm-cmd: exit %d %q", r.code, r.msg())
	}
	if out := must("images", "list"); !strings.Contains(out, sb.Image) || !strings.Contains(out, "yes") {
		t.Fatalf("images list: %q", out)
	}
	jobs := must("images", "jobs")
	if !strings.Contains(jobs, "ready") {
		t.Fatalf("images jobs: %q", jobs)
	}
	id := strings.TrimSpace(must("sessions", "create", "--image", sb.Image, "-q"))
	if out := must("sessions", "exec", id, "--", "ls", "/opt/w"); out != "done\n" {
		t.Fatalf("a session of the warm image sees %q", out)
	}
	if out := must("images", "refresh", sb.Image); !strings.Contains(out, "unchanged") {
		t.Fatalf("refresh of an unchanged tag: %q", out)
	}
	must("images", "disable", sb.Image)
	if r := run("sessions", "create", "--image", sb.Image); r.code != 1 || !strings.Contains(r.msg(), "disabled") {
		t.Fatalf("create from a disabled image: exit %d %q", r.code, r.msg())
	}
	if r := run("images", "job", "ejob_01m8afx7t98fxmvsg7rkd0c6x3"); r.code != exitNotFound {
		t.Fatalf("job of an unknown id: exit %d %q", r.code, r.msg())
	}
}

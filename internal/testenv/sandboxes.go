package testenv

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/harnesses/builtin"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/runtimes/wasm"
	"github.com/hangar-dev/hangar/sandboxhosts/host"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// RequireSandboxes fails (under CI) or skips (elsewhere) a test that runs sandboxes on a machine
// that cannot: it needs root, runc and a static busybox for its images.
func RequireSandboxes(t testing.TB) {
	t.Helper()
	missing := ""
	switch {
	case os.Geteuid() != 0:
		missing = "sandbox tests need root (runc, overlay mounts)"
	case func() bool { _, err := exec.LookPath("runc"); return err != nil }():
		missing = "sandbox tests need runc: apt-get install runc (make test installs it when root)"
	case func() bool { _, err := os.Stat(images.BusyboxPath); return err != nil }():
		missing = "sandbox tests need " + images.BusyboxPath + ": apt-get install busybox-static"
	}
	if missing != "" {
		testkit.Missing(t, missing)
	}
}

// wasmCache keeps the plugins compiled by one test for the next: compiling one costs seconds.
var wasmCache = filepath.Join(os.TempDir(), "hangar-test-wasm-cache")

// Keyset is a fresh seal keyset (as HANGAR_SEAL_KEYSET holds it) and its sealer.
func Keyset(t testing.TB) ([]byte, *seal.Sealer) {
	t.Helper()
	ks, err := seal.NewKeysetJSON()
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := seal.FromKeysetJSON(ks)
	if err != nil {
		t.Fatal(err)
	}
	return ks, sealer
}

// RequirePlugins returns the embedded built-in harness plugins, which `make plugins` builds;
// without them a test fails under CI and skips elsewhere.
func RequirePlugins(t testing.TB) map[string]builtin.Module {
	t.Helper()
	mods := builtin.Modules()
	if len(mods) > 0 {
		return mods
	}
	testkit.Missing(t, "no built-in harness plugins are embedded: run the tests with `make test` (or `make plugins` first)")
	return nil
}

// Sandboxes is what sessions run on in a test: a blob bucket, a sealer, a registry holding a
// busybox image, and a way to start hosts over one Firestore project.
type Sandboxes struct {
	DB     *firestore.Client
	Bucket *blob.Bucket
	Sealer *seal.Sealer
	Config config.Config
	// Image is a busybox image with a few files, in a registry on 127.0.0.1.
	Image    string
	Registry string
	// EgressResolve and EgressRootCAs are the hosts' egress proxy test overrides (host.Options):
	// real host names mapped to loopback upstreams, and those upstreams' roots.
	EgressResolve map[string]string
	EgressRootCAs *x509.CertPool
	// CredentialCacheTTL is the hosts' host.Options.CredentialCacheTTL.
	CredentialCacheTTL time.Duration
	// seeds are the images SeedImage put in every new host's image cache.
	seeds []*images.Pulled
	// WrapHost, when set, wraps each host's API handler (fault injection: a host that dies in
	// the middle of a call).
	WrapHost func(id string, next http.Handler) http.Handler
}

// NewSandboxes prepares the parts; hosts come from StartHost.
func NewSandboxes(t testing.TB, db *firestore.Client) *Sandboxes {
	t.Helper()
	RequireSandboxes(t)
	_, sealer := Keyset(t)
	// No MD5 of every upload: production's bucket computes that on its side, not on the host.
	b := memblob.OpenBucket(&memblob.Options{NoMD5: true})
	t.Cleanup(func() { _ = b.Close() })
	img, err := images.Busybox(map[string]images.File{
		"/etc/motd":        {Content: []byte("welcome to the test image\n")},
		"/opt/tool/run.sh": {Content: []byte("#!/bin/sh\necho tool ran\n"), Mode: 0o755},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := imagestest.Registry(t)
	cfg := config.Default()
	cfg.HostToken = "test-host-token"
	// The test registry is on loopback, which pulls reach only when an operator lists it.
	cfg.Registries = egress.MustParse(registryHost(t, reg))
	// Tests drive idleness and host loss themselves; keep the clock's work quick. A host is lost
	// after 30 missed beats: under -race on two busy cores a heartbeat's Firestore write can
	// stall for seconds, and a healthy host must not look dead then.
	cfg.Host.HeartbeatInterval = 200 * time.Millisecond
	cfg.Host.HostTimeout = 6 * time.Second
	cfg.Host.SandboxCPUs, cfg.Host.SandboxMemoryBytes, cfg.Host.SandboxPids = 1, 512<<20, 256
	return &Sandboxes{
		DB: db, Bucket: b, Sealer: sealer, Config: cfg, Registry: reg,
		Image: imagestest.Push(t, reg, "test/busybox", img),
	}
}

// registryHost is the host of a registry address (host:port).
func registryHost(t testing.TB, reg string) string {
	host, _, err := net.SplitHostPort(reg)
	if err != nil {
		t.Fatalf("registry address %q: %v", reg, err)
	}
	return host
}

// TestHost is a host serving its API on 127.0.0.1.
type TestHost struct {
	*host.Host
	Addr string
	// DataDir is the host's data dir: what an attacker who learned the host's layout knows.
	DataDir string
	srv     *http.Server
	stop    context.CancelFunc
	done    chan struct{}
}

// StartHost starts a host with its periodic work running; it is shut down (sandboxes evicted)
// when t ends unless Kill or Stop ended it first.
func (s *Sandboxes) StartHost(t testing.TB, id string) *TestHost {
	t.Helper()
	// A short data dir: the supervisor's socket path lives in it and unix paths are short.
	dir, err := os.MkdirTemp("", "hh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if len(s.seeds) > 0 {
		// DataDir/images is the host's image cache.
		if err := linkSeeds(filepath.Join(dir, "images"), s.seeds); err != nil {
			t.Fatalf("seed host %s: %v", id, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := wasm.NewRuntime(context.Background(), wasm.Options{CacheDir: wasmCache})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	h, err := host.New(context.Background(), host.Options{
		Harnesses: harnesscatalog.New(s.DB, s.Bucket, rt, builtin.Modules(), s.Config.Registries, registryauth.ForDeployment(s.DB, s.Sealer, s.Config.Registries), time.Now),
		ID:        id, Address: "http://" + ln.Addr().String(), DataDir: dir, DB: s.DB, Bucket: s.Bucket,
		Sealer: s.Sealer, Supervisor: supervisortest.Binary(t), Token: s.Config.HostToken,
		Config: s.Config.Host, Limits: s.Config.Limits, Registries: s.Config.Registries, CgroupParent: "hangar-test",
		EgressResolve: s.EgressResolve, EgressRootCAs: s.EgressRootCAs, CredentialCacheTTL: s.CredentialCacheTTL,
	})
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(h.Handler())
	mux.Handle("GET /readyz", h.ReadyHandler())
	// The host's server speaks cleartext HTTP/2, as in production, for many streams on one
	// connection.
	var handler http.Handler = telemetry.Middleware(slog.Default(), mux)
	if s.WrapHost != nil {
		handler = s.WrapHost(id, handler)
	}
	srv := &http.Server{Handler: handler, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go func() { _ = srv.Serve(ln) }()
	ctx, cancel := context.WithCancel(context.Background())
	th := &TestHost{Host: h, Addr: ln.Addr().String(), DataDir: dir, srv: srv, stop: cancel, done: make(chan struct{})}
	go func() { defer close(th.done); h.Run(ctx) }()
	t.Cleanup(func() {
		if th.stopLoop() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := h.Shutdown(ctx); err != nil {
				t.Errorf("host shutdown: %v", err)
			}
		}
		_ = srv.Close()
	})
	return th
}

// stopLoop ends the host's periodic work; false when it had already ended.
func (th *TestHost) stopLoop() bool {
	select {
	case <-th.done:
		return false
	default:
	}
	th.stop()
	<-th.done
	return true
}

// Kill stops the host the way a crash of its process does: it stops heartbeating and
// answering, and nothing is checkpointed. Its sandboxes are discarded when t ends.
func (th *TestHost) Kill(t testing.TB) {
	t.Helper()
	th.stopLoop()
	_ = th.srv.Close()
	t.Cleanup(func() {
		if err := th.Host.Discard(context.Background()); err != nil {
			t.Errorf("discard killed host: %v", err)
		}
	})
}

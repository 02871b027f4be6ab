package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/emulators"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/sandboxhosts/devimage"
)

func newDevCmd() *cobra.Command {
	var addr, dataDir string
	var saveEvery time.Duration
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the whole system locally: emulators, every function, one server",
		Long: `dev starts the Firestore and Pub/Sub emulators (or uses FIRESTORE_EMULATOR_HOST and
PUBSUB_EMULATOR_HOST when set), serves every function on one address, and keeps its data under
--data-dir. On first start it creates an admin API key, prints it and writes it to
<data-dir>/admin.key, which later starts keep. Firestore is saved to the data dir every
--save-every and on exit, so a crash (even kill -9) loses at most that much; the emulators end
with dev however it ends. Ctrl-C stops everything it started.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if saveEvery <= 0 {
				return usageError("--save-every must be positive, e.g. 5s")
			}
			return runDev(ctx, addr, dataDir, saveEvery, cmd.ErrOrStderr())
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "address to serve the API on")
	cmd.Flags().StringVar(&dataDir, "data-dir", ".data", "where local data (emulator state, admin key) is kept")
	cmd.Flags().DurationVar(&saveEvery, "save-every", 5*time.Second, "how often the emulated Firestore is saved to the data dir: the most a crash loses")
	return cmd
}

func runDev(ctx context.Context, addr, dataDir string, saveEvery time.Duration, out interface{ Write([]byte) (int, error) }) error {
	// Text for a terminal, with each request's id and trace on its lines all the same.
	log := slog.New(telemetry.ContextHandler(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo}), ""))
	// Nothing is exported unless OTEL_EXPORTER_OTLP_ENDPOINT names a collector.
	stopTelemetry, err := telemetry.Setup(ctx, telemetry.Options{Service: "hangar-dev"})
	if err != nil {
		return err
	}
	defer flushTelemetry(log, stopTelemetry)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	cfg, err := config.FromEnv()
	if err != nil {
		return err
	}
	emuLog, err := os.OpenFile(filepath.Join(dataDir, "emulators.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open emulator log: %w", err)
	}
	defer emuLog.Close()
	log.Info("starting emulators", "log", emuLog.Name())
	emu, err := emulators.Start(ctx, emulators.Options{DataDir: dataDir, Project: cfg.Project, SaveEvery: saveEvery, Log: emuLog, ReuseFromEnv: true})
	if err != nil {
		return err
	}
	defer func() {
		log.Info("stopping emulators")
		if err := emu.Stop(); err != nil {
			log.Error("stop emulators", "err", err)
		}
	}()
	for _, kv := range emu.Env() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}

	// Dev fills in local defaults for what production configures, then composes the system as
	// the Cloud Run functions do.
	img, err := devDefaults(ctx, dataDir, &cfg)
	if err != nil {
		return err
	}
	defer img.Close()
	log.Info("dev image ready", "ref", img.Ref())
	for name, ref := range img.More() {
		// `make agent-image` writes hangar/agent: a session takes it as image_uri.
		log.Info("image ready", "name", name, "ref", ref)
	}
	// Listen before composing: sign-in needs the address browsers reach.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	defer ln.Close()
	devSignIn(&cfg, "http://"+browserAddr(ln.Addr().(*net.TCPAddr)))
	devApps(&cfg, ln.Addr().(*net.TCPAddr))
	a, res, err := composition.Open(ctx, cfg, composition.Options{Log: log, HarnessCacheDir: filepath.Join(dataDir, "host", "wasm-cache")})
	if err != nil {
		return err
	}
	defer res.Close()
	if res.PubSub == nil {
		return errors.New("dev: the Pub/Sub emulator cannot be reached")
	}
	if err := res.PubSub.Provision(ctx); err != nil {
		return err
	}
	hostRun, err := startHost(ctx, hostParams{
		addr: "127.0.0.1:0", id: "dev", dataDir: filepath.Join(dataDir, "host"), res: res, log: log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := hostRun.stop(); err != nil {
			log.Error("stop host", "err", err)
		}
	}()
	key, created, err := ensureAdminKey(ctx, a, filepath.Join(dataDir, "admin.key"))
	if err != nil {
		return err
	}
	// The automation worker pulls deliveries and run steps in process, and ticks every second
	// where production's scheduler ticks every minute, so schedules and delays feel immediate.
	workerDone := make(chan error, 1)
	go func() { workerDone <- a.AutomationWorker().Run(ctx, res.PubSub, time.Second) }()
	defer func() {
		if err := <-workerDone; err != nil {
			log.Error("automation worker", "err", err)
		}
	}()

	// Image enable jobs run in process too; the dev image is enabled on first start (and after
	// its address changed), before the API serves, so the first session finds it.
	if w := a.ImageWorker(); w != nil {
		imagesDone := make(chan error, 1)
		go func() { imagesDone <- w.Run(ctx, res.PubSub, time.Second) }()
		defer func() {
			if err := <-imagesDone; err != nil {
				log.Error("image worker", "err", err)
			}
		}()
		log.Info("enabling the dev image", "ref", img.Ref())
		if err := a.Images().EnsureEnabled(ctx, img.Ref()); err != nil {
			return fmt.Errorf("dev image: %w", err)
		}
		// Sessions start from the enabled image's reference by digest, not from its tag: the
		// warm pool keeps sandboxes of that, so the first session is warm too.
		ref, _, _, err := a.Images().ResolveImage(ctx, img.Ref())
		if err != nil {
			return fmt.Errorf("dev image: %w", err)
		}
		hostRun.host.KeepWarm(ref)
	} else {
		hostRun.host.KeepWarm(img.Ref())
	}

	srv := composition.NewServer(a.Handler())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	if created {
		fmt.Fprintf(out, "\nCreated the admin API key (also in %s):\n\n  %s\n", filepath.Join(dataDir, "admin.key"), key)
	}
	fmt.Fprintf(out, "\nHangar is serving on %s (Firestore %s, Pub/Sub %s, sandbox host %s)\n\n  export HANGAR_URL=%s\n  export HANGAR_API_KEY=$(cat %s)\n  hangar sessions create   # a sandbox of the dev image %s\n\nA browser signs in as the local admin at %s/api/auth/login; hangar login signs a CLI in by device code.\n\nCtrl-C stops everything.\n\n",
		url, emu.FirestoreHost(), emu.PubSubHost(), hostRun.addr, url, filepath.Join(dataDir, "admin.key"), img.Ref(), url)

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutCtx)
}

// ensureAdminKey returns the admin key kept in path, minting one for a local "admin" user on
// first start. An existing file is never overwritten: if the database lost the key's record (a
// crash before the last save), the record is made again for the same key, so every shell and
// script holding it keeps working. A key revoked on purpose stays revoked: dev stops and says
// to delete the file.
func ensureAdminKey(ctx context.Context, a *composition.API, path string) (key string, created bool, err error) {
	b, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read admin key: %w", err)
	}
	now := time.Now().UTC()
	user, err := a.Users().EnsureHuman(ctx, devAdminEmail, "Local admin", now)
	if err != nil {
		return "", false, err
	}
	in := auth.NewKeyInput{Name: "hangar dev admin", Kind: auth.KindPersonal, UserID: user.ID, Admin: true, CreatedBy: user.ID}
	if exists {
		key = strings.TrimSpace(string(b))
		rec, err := a.Keys().Restore(ctx, key, in, now)
		if err != nil {
			return "", false, fmt.Errorf("admin key in %s: %w (delete the file to mint a new key)", path, err)
		}
		if rec.Revoked() || !rec.Admin {
			return "", false, fmt.Errorf("the admin key in %s is revoked or no longer an admin's: delete the file to mint a new one", path)
		}
		return key, false, nil
	}
	// O_EXCL: another dev start racing this one keeps its key rather than losing it to ours.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("write admin key: %w", err)
	}
	defer f.Close()
	if _, key, err = a.Keys().Create(ctx, in, now); err != nil {
		// An empty file would stop the next start; no file lets it try again.
		return "", false, errors.Join(err, os.Remove(path))
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", false, fmt.Errorf("write admin key: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", false, fmt.Errorf("write admin key: %w", err)
	}
	return key, true, nil
}

// devAdminEmail is `hangar dev`'s local admin.
const devAdminEmail = "admin@hangar.local"

// devSignIn lets a browser on loopback sign in as the local admin without an identity provider
// (POST /api/auth/dev, functions/signin), at dev's own address unless HANGAR_PUBLIC_URL says
// otherwise. With HANGAR_OIDC_ISSUER set, sign-in goes through that provider as in production.
func devSignIn(cfg *config.Config, url string) {
	if cfg.SignIn.PublicURL == "" {
		cfg.SignIn.PublicURL = url
	}
	cfg.SignIn.DevSignIn = true
	cfg.SignIn.DevAdminEmail = devAdminEmail
}

// devApps gives apps origins of their own under apps.localhost on dev's port unless
// HANGAR_APPS_DOMAIN says otherwise: browsers resolve every *.localhost name to loopback, and
// its sites are not the dashboard's (127.0.0.1).
func devApps(cfg *config.Config, a *net.TCPAddr) {
	if cfg.Apps.Domain == "" {
		cfg.Apps.Domain = net.JoinHostPort("apps.localhost", strconv.Itoa(a.Port))
	}
}

// browserAddr is where a browser on this machine reaches a listener: an unspecified address
// (--addr :8080) is reached on loopback.
func browserAddr(a *net.TCPAddr) string {
	if a.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.Port))
	}
	return a.String()
}

// devDefaults fills in what sessions need locally and production configures: a file bucket, a
// seal keyset, a host token and the dev image as the default image, all but the token under the
// data dir so they survive restarts. It serves the dev image until the registry is closed.
func devDefaults(ctx context.Context, dataDir string, cfg *config.Config) (*devimage.Registry, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, err
	}
	if cfg.BlobURL == "" {
		dir := filepath.Join(abs, "blob")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create blob dir: %w", err)
		}
		cfg.BlobURL = "file://" + dir
	}
	if len(cfg.SealKeyset) == 0 {
		if cfg.SealKeyset, err = devKeyset(filepath.Join(abs, "seal.keyset")); err != nil {
			return nil, err
		}
	}
	if cfg.HostToken == "" {
		// The in-process host and functions share it; it only has to be unguessable, so it
		// comes from crypto/rand (a ULID's randomness is math/rand's, and consecutive ones
		// differ by one).
		cfg.HostToken = rand.Text()
	}
	img, err := serveDevImage(ctx, filepath.Join(abs, "image"))
	if err != nil {
		return nil, fmt.Errorf("dev image: %w", err)
	}
	// The dev registry is on loopback, which pulls reach only when an operator lists it: dev
	// lists its own registry's host and port, and nothing else, so that a plugin or image
	// reference cannot reach another loopback port (the emulators') through pulls.
	regHostPort := strings.SplitN(img.Ref(), "/", 2)[0]
	if _, _, err := net.SplitHostPort(regHostPort); err != nil {
		_ = img.Close()
		return nil, fmt.Errorf("dev image reference %s: %w", img.Ref(), err)
	}
	cfg.Registries = cfg.Registries.Union(egress.MustParse(regHostPort))
	if cfg.DefaultImage == "" {
		cfg.DefaultImage = img.Ref()
	}
	return img, nil
}

// devKeyset reads the local seal keyset, making it on first start.
func devKeyset(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil {
		return b, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read seal keyset: %w", err)
	}
	js, err := seal.NewKeysetJSON()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, js, 0o600); err != nil {
		return nil, fmt.Errorf("write seal keyset: %w", err)
	}
	return js, nil
}

// serveDevImage serves the dev image on the address it had last time when that is free:
// sessions record their image by reference, port included, and must still resolve after a
// restart to be resumed.
func serveDevImage(ctx context.Context, dir string) (*devimage.Registry, error) {
	addrFile := filepath.Join(dir, "registry-addr")
	if b, err := os.ReadFile(addrFile); err == nil {
		if img, err := devimage.Serve(ctx, dir, strings.TrimSpace(string(b))); err == nil {
			return img, nil
		}
	}
	img, err := devimage.Serve(ctx, dir, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr, _, _ := strings.Cut(img.Ref(), "/")
	if err := os.WriteFile(addrFile, []byte(addr+"\n"), 0o600); err != nil {
		img.Close()
		return nil, fmt.Errorf("remember the dev registry's address: %w", err)
	}
	return img, nil
}

// flushTelemetry exports what telemetry.Setup still holds, within a bound: a collector that
// is gone must not hold up an exit.
func flushTelemetry(log *slog.Logger, stop func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		log.Warn("flush telemetry", "err", err)
	}
}

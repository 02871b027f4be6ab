package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/sandboxhosts/host"
)

// supervisorEnv names the hangar-supervisor binary when it is not beside hangar.
const supervisorEnv = "HANGAR_SUPERVISOR_BIN"

func newHostCmd() *cobra.Command {
	var p hostParams
	cmd := &cobra.Command{
		Use:   "host",
		Short: "Run a sandbox host: sandboxes on runc, registered in the fleet",
		Long: `host runs one sandbox host. It registers in the fleet (Firestore) under --id with the
URL the functions reach it at (--advertise, default http://<addr>), serves the internal host API
behind HANGAR_HOST_TOKEN, and keeps sandboxes, the image cache and the chunk cache under
--data-dir. It needs root, runc, HANGAR_BLOB_URL and HANGAR_SEAL_KEYSET (the same as the
functions'), and the hangar-supervisor binary beside hangar or at $HANGAR_SUPERVISOR_BIN.
SIGINT or SIGTERM checkpoints and evicts every sandbox before it stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cfg, err := config.FromEnv()
			if err != nil {
				return err
			}
			log := telemetry.NewLogger(cmd.ErrOrStderr(), slog.LevelInfo, cfg.Project)
			stopTelemetry, err := telemetry.Setup(ctx, telemetry.Options{Service: "hangar-host"})
			if err != nil {
				return err
			}
			defer flushTelemetry(log, stopTelemetry)
			// Compiled harness plugins are cached beside the sandboxes, so a restart loads
			// them in milliseconds.
			res, err := composition.OpenResources(ctx, cfg, composition.Options{Log: log, HarnessCacheDir: filepath.Join(p.dataDir, "wasm-cache")})
			if err != nil {
				return err
			}
			defer res.Close()
			p.res, p.log = res, log
			running, err := startHost(ctx, p)
			if err != nil && ctx.Err() != nil {
				// Asked to stop while starting: that is a clean stop, not a failure.
				log.Info("host stopped during start-up", "err", err)
				return nil
			}
			if err != nil {
				return err
			}
			log.Info("host serving", "id", running.host.ID(), "addr", running.addr)
			<-ctx.Done()
			return running.stop()
		},
	}
	cmd.Flags().StringVar(&p.addr, "addr", "127.0.0.1:7070", "address to serve the host API on")
	cmd.Flags().StringVar(&p.advertise, "advertise", "", "URL the functions reach this host at (default http://<addr>)")
	cmd.Flags().StringVar(&p.id, "id", "", "fleet id of this host (default: hostname and a random suffix)")
	cmd.Flags().StringVar(&p.dataDir, "data-dir", "/var/lib/hangar", "where sandboxes and caches are kept")
	return cmd
}

// hostParams are what startHost needs.
type hostParams struct {
	addr, advertise, id, dataDir string
	warm                         []string // images to keep warm sandboxes of from the start
	res                          *composition.Resources
	log                          *slog.Logger
}

// runningHost is a host serving its API.
type runningHost struct {
	host *host.Host
	addr string
	stop func() error
}

// startHost starts a host and its API server; stop checkpoints its sandboxes and ends both.
func startHost(ctx context.Context, p hostParams) (*runningHost, error) {
	cfg := p.res.Config
	switch {
	case cfg.HostToken == "":
		return nil, errors.New("set HANGAR_HOST_TOKEN: the functions authenticate to hosts with it")
	case p.res.Bucket == nil:
		return nil, errors.New("set HANGAR_BLOB_URL: hosts keep snapshots and artifacts in the functions' blob store")
	case p.res.Sealer == nil:
		return nil, errors.New("set HANGAR_SEAL_KEYSET: hosts unseal the secrets the functions seal")
	}
	sup, err := supervisorBinary()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", p.addr, err)
	}
	advertise := p.advertise
	if advertise == "" {
		advertise = "http://" + ln.Addr().String()
	}
	h, err := host.New(ctx, host.Options{
		Harnesses: p.res.Harnesses,
		ID:        p.id, Address: advertise, DataDir: p.dataDir, DB: p.res.DB, Bucket: p.res.Bucket, Sealer: p.res.Sealer,
		Supervisor: sup, Token: cfg.HostToken, Config: cfg.Host, Limits: cfg.Limits, Registries: cfg.Registries, Log: p.log,
		WarmImages: p.warm,
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(h.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /readyz", h.ReadyHandler())
	srv := composition.NewServer(telemetry.Middleware(p.log, mux))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); h.Run(runCtx) }()
	stop := func() error {
		cancel()
		<-done
		shutCtx, cancelShut := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancelShut()
		p.log.Info("host stopping: checkpointing sandboxes")
		herr := h.Shutdown(shutCtx)
		return errors.Join(herr, srv.Shutdown(shutCtx))
	}
	select {
	case err := <-errc:
		cancel()
		return nil, fmt.Errorf("serve host api: %w", err)
	default:
	}
	return &runningHost{host: h, addr: ln.Addr().String(), stop: stop}, nil
}

// supervisorBinary finds hangar-supervisor: $HANGAR_SUPERVISOR_BIN, else beside this binary.
func supervisorBinary() (string, error) {
	if p := os.Getenv(supervisorEnv); p != "" {
		return p, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find hangar-supervisor: %w", err)
	}
	p := filepath.Join(filepath.Dir(exe), "hangar-supervisor")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("hangar-supervisor is not beside %s: build it with `make bin/hangar-supervisor` or set %s", exe, supervisorEnv)
	}
	return p, nil
}

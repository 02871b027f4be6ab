// Package host is a sandbox host: the long-running service that owns the sandboxes placed on
// one machine. It serves the internal HostService the functions call, is the single writer of
// its sessions' event logs, registers and heartbeats in the fleet, puts quiet sessions to idle
// and evicts long-idle ones by itself, and marks the sessions of hosts that died as lost so that
// they can be resumed elsewhere.
package host

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/authn"
	"gocloud.dev/blob"

	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/records/credentials"
	"github.com/hangar-dev/hangar/records/fleet"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
	"github.com/hangar-dev/hangar/sandboxhosts/imagechunks"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// Options configure a Host.
type Options struct {
	// ID names the host in the fleet; default: the machine's hostname and a random suffix. A host
	// restarted with the same ID takes its leftover sessions as lost.
	ID string
	// Address is the URL the functions reach this host's API at.
	Address string
	// DataDir holds the sandboxes, the image cache and the snapshot chunk cache.
	DataDir string
	DB      *firestore.Client
	// Bucket keeps snapshots and artifacts; it must be the one every host and function shares.
	Bucket *blob.Bucket
	// Sealer opens the sessions' sealed environments when a sandbox is resumed.
	Sealer *seal.Sealer
	// Supervisor is the host path of the static hangar-supervisor binary, bind-mounted read-only
	// into every sandbox as its PID 1.
	Supervisor string
	// Token is the host token the functions send.
	Token  string
	Config config.Host
	Limits config.Limits
	// Registries is what image pulls may reach beyond public addresses (config.Config.Registries):
	// an image_uri naming a loopback or private registry is refused unless an operator lists it.
	Registries egress.Policy
	// Keychain signs image pulls in to their registries; default: registryauth.ForDeployment over
	// DB, Sealer and Registries, the store an admin fills with ImageService's AddRegistry. The
	// host resolves credentials itself: no sandbox ever sees them.
	Keychain authn.Keychain
	// CgroupParent groups the sandboxes' cgroups; default "hangar".
	CgroupParent string
	// WarmImages are images to keep warm sandboxes of from the start (Config.WarmSandboxes
	// each); others are warmed once a session uses them.
	WarmImages []string
	// Harnesses gives agent sessions their harness plugins; without it, prompts are refused.
	Harnesses *harnesscatalog.Catalog
	Clock     clock.Clock
	Log       *slog.Logger
	// EgressResolve maps "host:port" to a loopback "ip:port" the egress proxy dials instead,
	// like curl --resolve: how tests reach loopback upstreams under real names. Nothing else
	// reaches loopback or private addresses from a sandbox.
	EgressResolve map[string]string
	// EgressRootCAs are the roots the proxy trusts upstream; nil is the system's.
	EgressRootCAs *x509.CertPool
	// CredentialCacheTTL is how long the proxy keeps an OAuth credential's access token before
	// reading the credential again: 0 is DefaultCredentialCacheTTL, negative reads it for
	// every request that carries its placeholder.
	CredentialCacheTTL time.Duration
}

// Host is one running sandbox host.
type Host struct {
	opts   Options
	id     string
	clock  clock.Clock
	log    *slog.Logger
	driver *container.Driver
	images *images.Cache
	snaps  *snapshots.Store
	// imageChunks keeps enabled images in the snapshot chunk store (PrepareImage).
	imageChunks *imagechunks.Store
	store       *sessiondb.Store
	fleet       *fleet.Fleet
	boxDir      string
	// sockDir holds the supervisors' sockets; no sandbox sees it (see listenSupervisor).
	sockDir string
	// shared holds the copy of the supervisor every sandbox binds, on a tmpfs of its own so that
	// no sandbox's mount table shows a path of the data dir.
	shared *container.SharedFiles

	pool *pool
	// proxy is every sandbox's only way out; ca is its interception authority.
	proxy *egressproxy.Proxy
	ca    *egressproxy.CA
	// tokens are the OAuth access tokens the proxy injects for sandboxes holding placeholders.
	tokens *accessTokens

	// dataDir is where the host keeps its files; its file system's size is the host's disk.
	dataDir string
	// state is the host's fleet state as of its last registration or heartbeat: only a ready
	// host takes new sandboxes (claim).
	state atomic.Value // fleet.State

	mu     sync.Mutex
	boxes  map[string]*box
	memory memoryBook
}

// maxSocketPath is the longest unix socket path Linux accepts (sun_path less its NUL).
const maxSocketPath = 107

// New prepares a host: it removes sandboxes an earlier run of this host left behind, marks
// their sessions lost (their checkpoints resume them), and registers in the fleet.
func New(ctx context.Context, opts Options) (*Host, error) {
	if opts.DB == nil || opts.Bucket == nil || opts.Sealer == nil {
		return nil, errors.New("host: DB, Bucket and Sealer are required")
	}
	if opts.Address == "" || opts.DataDir == "" || opts.Token == "" {
		return nil, errors.New("host: Address, DataDir and Token are required")
	}
	if _, err := os.Stat(opts.Supervisor); err != nil {
		return nil, fmt.Errorf("host: supervisor binary: %w", err)
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("host: data dir: %w", err)
	}
	h := &Host{
		opts:    opts,
		id:      cmp.Or(opts.ID, defaultID()),
		clock:   cmp.Or[clock.Clock](opts.Clock, clock.Real{}),
		log:     cmp.Or(opts.Log, slog.Default()),
		boxDir:  filepath.Join(dataDir, "sandboxes"),
		dataDir: dataDir,
		boxes:   map[string]*box{},
		memory:  memoryBook{capacity: int64(float64(memoryBytes()) * cmp.Or(opts.Config.MemoryOvercommitRatio, 1))},
	}
	h.sockDir = filepath.Join(dataDir, "sock")
	if n := len(socketPath(h.sockDir, newSandboxID())); n > maxSocketPath {
		return nil, fmt.Errorf("host: data dir %s is too long for a unix socket path (%d > %d bytes)", dataDir, n, maxSocketPath)
	}
	h.log = h.log.With("host", h.id)
	for _, dir := range []string{h.boxDir, h.sockDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("host: %w", err)
		}
	}
	h.driver, err = container.NewDriver(container.DriverOptions{
		StateDir:     filepath.Join(dataDir, "runc"),
		CgroupParent: cmp.Or(opts.CgroupParent, "hangar"),
		// Nothing reaps orphans on every machine (PID 1 of a container host may not), so the
		// host reaps its sandboxes' runc leftovers itself.
		Subreaper:  true,
		SpareDisks: spareDisks,
		DefaultResources: container.Resources{
			CPUs: opts.Config.SandboxCPUs, MemoryBytes: opts.Config.SandboxMemoryBytes, Pids: opts.Config.SandboxPids,
			DiskBytes: opts.Config.SandboxDiskBytes,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	keychain := opts.Keychain
	if keychain == nil {
		keychain = registryauth.ForDeployment(opts.DB, opts.Sealer, opts.Registries)
	}
	h.images, err = images.New(filepath.Join(dataDir, "images"), images.WithLogger(h.log), images.WithRegistries(opts.Registries),
		images.WithKeychain(keychain), images.WithMaxImageBytes(opts.Config.MaxImageBytes))
	if err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	if err := h.newProxy(dataDir); err != nil {
		return nil, err
	}
	h.snaps = snapshots.NewStore(opts.Bucket, filepath.Join(dataDir, "chunks"), snapshots.Options{})
	h.imageChunks = imagechunks.New(h.images, h.snaps, opts.Bucket)
	h.store = sessiondb.NewStore(opts.DB, h.clock.Now)
	h.tokens = newAccessTokens(credentials.New(opts.DB, opts.Sealer, h.clock.Now, opts.Limits.MaxSecretBytes), opts.CredentialCacheTTL, h.clock.Now)
	h.fleet = fleet.New(opts.DB, h.clock.Now, opts.Config.HostTimeout)

	if err := h.recover(ctx); err != nil {
		return nil, err
	}
	total, _ := diskBytes(dataDir)
	state, err := h.fleet.Register(ctx, fleet.Host{
		ID: h.id, Address: opts.Address, State: fleet.Ready, Version: buildVersion(), Zone: opts.Config.Zone,
		CPUs: float64(goruntimeCPUs()), MemoryBytes: memoryBytes(), MaxSandboxes: opts.Config.MaxSandboxes,
		MemoryCapacityBytes: h.memory.capacity, DiskBytes: total,
	})
	if err != nil {
		return nil, fmt.Errorf("host: register: %w", err)
	}
	h.state.Store(state)
	if h.shared, err = container.MountSharedFiles(filepath.Join(dataDir, "shared"), map[string]string{sharedSupervisor: opts.Supervisor}); err != nil {
		return nil, fmt.Errorf("host: %w", err)
	}
	h.pool = newPool(h, opts.Config.WarmSandboxes, opts.WarmImages)
	return h, nil
}

// ID is the host's fleet id.
func (h *Host) ID() string { return h.id }

// recover clears what an earlier run of this host left: its sandboxes cannot be trusted to hold
// a consistent upper dir, so they go, and their sessions are lost until resumed.
func (h *Host) recover(ctx context.Context) error {
	if err := h.driver.Cleanup(ctx, nil); err != nil {
		return fmt.Errorf("host: clean up old sandboxes: %w", err)
	}
	entries, _ := os.ReadDir(h.sockDir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(h.sockDir, e.Name()))
	}
	// A sandbox's dir holds its mounted disk, which the driver unmounts first.
	entries, _ = os.ReadDir(h.boxDir)
	for _, e := range entries {
		if err := h.driver.RemoveDir(filepath.Join(h.boxDir, e.Name())); err != nil {
			h.log.Error("remove an old sandbox's dir", "dir", e.Name(), "err", err)
		}
	}
	return h.markLost(ctx, h.id, "host "+h.id+" restarted")
}

// markLost moves every live session of a host to lost.
func (h *Host) markLost(ctx context.Context, hostID, reason string) error {
	recs, err := h.store.ListByHost(ctx, hostID, liveStatuses...)
	if err != nil {
		return fmt.Errorf("list sessions of host %s: %w", hostID, err)
	}
	for _, r := range recs {
		if _, _, err := h.store.Move(ctx, r.ID, sessiondb.Lost, reason, nil); err != nil {
			var me *sessiondb.MoveError
			if !errors.As(err, &me) {
				return fmt.Errorf("mark session %s lost: %w", r.ID, err)
			}
		}
	}
	return nil
}

// orphanGrace is how long a session placed on this host may wait for its sandbox: the functions
// place a session, then call CreateSandbox or Resume; a function that died in between leaves it.
const orphanGrace = time.Minute

// sweepOrphans marks lost the live sessions placed on this host that it holds no sandbox for, so
// that no session waits forever on a call that never came; Resume brings them back.
func (h *Host) sweepOrphans(ctx context.Context) error {
	recs, err := h.store.ListByHost(ctx, h.id, liveStatuses...)
	if err != nil {
		return err
	}
	cutoff := h.clock.Now().Add(-orphanGrace)
	for _, r := range recs {
		h.mu.Lock()
		_, held := h.boxes[r.ID]
		h.mu.Unlock()
		if held || r.UpdatedAt.After(cutoff) {
			continue
		}
		_, _, err := h.store.Move(ctx, r.ID, sessiondb.Lost, "host "+h.id+" holds no sandbox for it", func(cur *sessiondb.Record) error {
			h.mu.Lock()
			_, held := h.boxes[cur.ID]
			h.mu.Unlock()
			if held || cur.HostID != h.id {
				return errSkip
			}
			return nil
		})
		var me *sessiondb.MoveError
		if err != nil && !errors.Is(err, errSkip) && !errors.As(err, &me) {
			return fmt.Errorf("mark orphaned session %s lost: %w", r.ID, err)
		}
	}
	return nil
}

// errSkip aborts a Move whose reason no longer holds.
var errSkip = errors.New("skip")

// liveStatuses are the states of a session that has (or is getting) a sandbox on its host.
var liveStatuses = slices.DeleteFunc(sessiondb.Statuses(), func(s sessiondb.Status) bool { return !s.Live() })

// Handler serves HostService behind the host token.
func (h *Host) Handler() (string, http.Handler) {
	return hostv1connect.NewHostServiceHandler(h, telemetry.Interceptor(), connect.WithInterceptors(
		hostclient.Authorize(h.opts.Token), apierr.Interceptor(h.log),
	), connect.WithCompression("gzip", nil, nil))
}

// Run heartbeats, moves quiet sessions to idle, evicts long-idle ones, marks the sessions of
// dead hosts lost and collects unreferenced snapshot chunks, until ctx ends. The heartbeat has a
// loop of its own so that slow housekeeping can never make a healthy host look dead.
func (h *Host) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		every(ctx, h.opts.Config.HeartbeatInterval, func() {
			state, err := h.fleet.Heartbeat(ctx, h.id, h.load())
			if err != nil {
				if ctx.Err() == nil {
					h.log.Error("heartbeat", "err", err)
				}
				return
			}
			h.state.Store(state)
		})
	})
	wg.Go(func() { every(ctx, h.opts.Config.HeartbeatInterval, func() { h.housekeep(ctx) }) })
	wg.Go(func() {
		every(ctx, time.Hour, func() {
			if n, err := h.snaps.GC(ctx, time.Hour); err != nil && !errors.Is(err, snapshots.ErrBusy) && ctx.Err() == nil {
				h.log.Error("snapshot gc", "err", err)
			} else if n > 0 {
				h.log.Info("snapshot gc", "chunks_deleted", n)
			}
		})
	})
	wg.Wait()
}

// every calls fn every period until ctx ends.
func every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// housekeep is one round of idle handling and of marking lost the sessions of dead hosts and
// the sessions placed here that this host never started.
func (h *Host) housekeep(ctx context.Context) {
	h.sweepIdle(ctx)
	if err := h.sweepOrphans(ctx); err != nil && ctx.Err() == nil {
		h.log.Error("sweep orphaned sessions", "err", err)
	}
	lost, err := h.fleet.Lost(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error("list lost hosts", "err", err)
		}
		return
	}
	for _, dead := range lost {
		// Every live host does this; the move is idempotent and the table refuses it for a host
		// that drained meanwhile.
		if _, err := h.fleet.Move(ctx, dead.ID, fleet.Lost, nil); err != nil && ctx.Err() == nil {
			var me *fleet.MoveError
			if !errors.As(err, &me) {
				h.log.Error("mark host lost", "dead_host", dead.ID, "err", err)
			}
		}
		if err := h.markLost(ctx, dead.ID, "host "+dead.ID+" stopped heartbeating"); err != nil && ctx.Err() == nil {
			h.log.Error("mark sessions lost", "dead_host", dead.ID, "err", err)
		}
	}
}

// Shutdown checkpoints and evicts every sandbox so their sessions resume elsewhere, then leaves
// the fleet drained. Sessions that cannot be checkpointed in time are left to be marked lost.
func (h *Host) Shutdown(ctx context.Context) error {
	// The record first: a claim that finds the local state not ready reads the record.
	if _, err := h.fleet.Move(ctx, h.id, fleet.Draining, nil); err != nil {
		h.log.Error("drain", "err", err)
	}
	h.state.Store(fleet.Draining)
	h.pool.close()
	if err := h.driver.Close(); err != nil {
		h.log.Error("spare disks", "err", err)
	}
	var wg sync.WaitGroup
	for _, b := range h.all() {
		wg.Go(func() {
			if _, err := h.evict(ctx, b, true, "host shutdown"); err != nil {
				h.log.Error("evict on shutdown", "session", b.session, "err", err)
			}
		})
	}
	wg.Wait()
	if err := h.shared.Unmount(); err != nil {
		h.log.Error("shared files", "err", err)
	}
	_, err := h.fleet.Move(ctx, h.id, fleet.Drained, nil)
	return err
}

// Discard removes every sandbox without checkpointing it or touching its session, as a crash
// of the machine would: for a host being thrown away. Its sessions become lost once its
// heartbeat times out, and resume from their last checkpoints.
func (h *Host) Discard(ctx context.Context) error {
	h.pool.close()
	errs := []error{h.driver.Close()}
	for _, b := range h.all() {
		b.mu.Lock()
		errs = append(errs, h.teardown(ctx, b))
		b.mu.Unlock()
	}
	errs = append(errs, h.shared.Unmount())
	return errors.Join(errs...)
}

// Sandboxes counts the sandboxes this host holds for sessions (warm ones not included).
func (h *Host) Sandboxes() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.boxes)
}

// EgressConnections counts the connections this host's sandboxes hold through its egress
// proxy now (egressproxy.Proxy.Connections).
func (h *Host) EgressConnections() int { return h.proxy.Connections() }

func (h *Host) all() []*box {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*box, 0, len(h.boxes))
	for _, b := range h.boxes {
		out = append(out, b)
	}
	return out
}

func defaultID() string {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "host"
	}
	return name + "-" + randomHex(3)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

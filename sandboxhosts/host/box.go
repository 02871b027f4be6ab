package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxnet"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// Where the supervisor lives inside every sandbox, and the run dir: a directory on the
// sandbox's disk bind-mounted read-write, for secret files.
const (
	supervisorPath = "/.hangar/bin/supervisor"
	// sharedSupervisor names the supervisor's copy in the host's shared files.
	sharedSupervisor = "hangar-supervisor"
	runMount         = "/.hangar/run"
)

// readyTimeout bounds how long a new sandbox's supervisor may take to answer.
const readyTimeout = 15 * time.Second

// spareDisks is how many fresh disks of each recently used size the host keeps made ahead, so
// that a cold boot skips mkfs (container/spares.go): a few hundred KiB of the host's disk each,
// never shared — each is handed to one sandbox, unused before.
const spareDisks = 2

// box is one session's sandbox on this host.
type box struct {
	session string
	// mu serialises what changes the sandbox as a whole: start, snapshot, evict, delete.
	mu sync.Mutex

	// Set once by start, before ready; read freely after.
	*sandbox
	events *eventlog.Writer
	// env is the session's environment (secrets and harness_env), given to every exec: a
	// sandbox may have been started warm, before its session existed.
	env []string
	// workdir is where the harness runs when its plan names no directory ("" for the image's):
	// the session's first repo, so that the agent starts in the code it is to work on.
	workdir string
	ready   atomic.Bool
	// agent is the prompt queue's side of an agent session.
	agent agent
	// net serves the sandbox's connections and DNS for the session; nil until start.
	net *egressproxy.Sandbox
	// usage is the session's network totals, as logged in net.usage events.
	usage netUsage
	// logMu guards logClosed: teardown closes the log while late work may still emit.
	logMu     sync.RWMutex
	logClosed bool
	// ctx lives as long as the sandbox, for work that outlasts a request.
	ctx    context.Context
	cancel context.CancelFunc

	// manifest is the latest checkpoint, the base of the next one; guarded by mu.
	manifest *snapshots.Manifest
	// status is the session's state as this host last set it; guarded by mu.
	status sessiondb.Status
	// idle mirrors status == idle for the exec path, which must not wait for mu.
	idle atomic.Bool
	// lastActive is the last exec, attach or file operation (unix nanos); touched is the last
	// value written to the session record.
	lastActive atomic.Int64
	touched    int64
	// checkpointed is when the sandbox last matched a checkpoint (unix nanos): its start (from
	// its image or a checkpoint) or its latest snapshot.
	checkpointed atomic.Int64
	// shells and appConns count the open shells and app connections, against their limits.
	shells   atomic.Int32
	appConns atomic.Int32
}

// emit appends an event to the session's log.
func (b *box) emit(kind string, payload any) {
	js, err := json.Marshal(payload)
	if err != nil {
		js = []byte("{}")
	}
	b.append(eventlog.Event{Kind: kind, PayloadJSON: string(js), Durable: true})
}

// append logs e unless the sandbox is gone: work that outlived it (a turn cut off by an
// eviction) has nothing more to say in this sandbox's name, and the log is closed.
func (b *box) append(e eventlog.Event) {
	b.logMu.RLock()
	defer b.logMu.RUnlock()
	if !b.logClosed {
		b.events.Append(e)
	}
}

// flush waits until every event logged so far is stored and readable, unless the sandbox is
// gone (its log is closed, and was flushed as it closed).
func (b *box) flush() error {
	b.logMu.RLock()
	defer b.logMu.RUnlock()
	if b.logClosed {
		return nil
	}
	return b.events.Flush(b.ctx)
}

// diedGrace is how long a failed supervisor call waits to learn whether the sandbox died: the
// broken connection may be seen before the init's exit.
const diedGrace = time.Second

// diedUnder turns the failure of a supervisor call into failed_precondition when the sandbox died
// under it (watch moves the session to lost), and returns it as it is otherwise.
func (b *box) diedUnder(err error) error {
	select {
	case <-b.sb.Exited():
		return apierr.FailedPrecondition("the sandbox of session %s died (%v): the session is lost; resume it", b.session, err)
	case <-time.After(diedGrace):
		return err
	}
}

// live returns the session's ready sandbox on this host.
func (h *Host) live(id string) (*box, error) {
	h.mu.Lock()
	b := h.boxes[id]
	h.mu.Unlock()
	if b == nil || !b.ready.Load() {
		return nil, apierr.FailedPrecondition("session %s has no sandbox on host %s", id, h.id)
	}
	return b, nil
}

// claim returns the session's box, making an empty one when there is none, with its mu held.
// A full host refuses a new one: placements use heartbeat-old counts, so the host is the one
// that knows.
func (h *Host) claim(ctx context.Context, id string) (*box, error) {
	h.mu.Lock()
	_, held := h.boxes[id]
	h.mu.Unlock()
	if !held {
		if err := h.refuseNew(ctx); err != nil {
			return nil, err
		}
	}
	h.mu.Lock()
	b := h.boxes[id]
	if b == nil {
		if len(h.boxes) >= h.opts.Config.MaxSandboxes {
			h.mu.Unlock()
			return nil, apierr.ResourceExhausted("host %s holds its most sandboxes (%d); retry to be placed elsewhere", h.id, h.opts.Config.MaxSandboxes)
		}
		b = &box{session: id}
		h.boxes[id] = b
	}
	h.mu.Unlock()
	b.mu.Lock()
	return b, nil
}

// drop forgets a box that is no longer the session's.
func (h *Host) drop(b *box) {
	h.mu.Lock()
	if h.boxes[b.session] == b {
		delete(h.boxes, b.session)
	}
	h.mu.Unlock()
}

// touch records activity on the sandbox and wakes an idle session.
func (h *Host) touch(ctx context.Context, b *box) {
	b.lastActive.Store(h.clock.Now().UnixNano())
	if !b.idle.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status == sessiondb.Idle {
		if err := h.move(ctx, b, sessiondb.Running, "active again", nil); err != nil {
			h.log.Warn("wake idle session", "session", b.session, "err", err)
		}
	}
}

// move changes the session's state in its record and logs the change; b.mu must be held.
func (h *Host) move(ctx context.Context, b *box, to sessiondb.Status, reason string, mutate func(*sessiondb.Record) error) error {
	return h.moveAt(ctx, b, &sessiondb.Record{ID: b.session}, time.Time{}, to, reason, mutate)
}

// moveAt is move starting from held, the session's record as it was at version, without
// reading it (sessiondb's MoveAt); a zero version reads it.
func (h *Host) moveAt(ctx context.Context, b *box, held *sessiondb.Record, version time.Time, to sessiondb.Status, reason string, mutate func(*sessiondb.Record) error) error {
	from, _, err := h.store.MoveAt(ctx, held, version, to, reason, mutate)
	var me *sessiondb.MoveError
	if errors.As(err, &me) {
		return apierr.FailedPrecondition("%s", me.Error())
	}
	if err != nil {
		return fmt.Errorf("move session %s to %s: %w", b.session, to, err)
	}
	b.status = to
	b.idle.Store(to == sessiondb.Idle)
	if b.events != nil {
		b.emit(eventlog.KindSessionStatus, map[string]string{"from": string(from), "to": string(to), "reason": reason})
	}
	return nil
}

// sandbox is a running sandbox and the handles the host keeps on it; sessions get one at start,
// freshly booted or from the warm pool.
type sandbox struct {
	sb   *container.Sandbox
	sup  *supervisor.Client
	root *sandboxfs.Root
	// user is who commands run as (the image's User); nil for root.
	user *runAs
	// ns is the sandbox's network namespace, whose listeners the egress proxy serves.
	ns     *sandboxnet.Namespace
	runDir string
	socket string
	digest string
	// warmLayer is the enabled image's warm layer the sandbox runs over ("" for none).
	warmLayer string
	booted    time.Time
	// memoryBytes is the sandbox's memory limit, booked with the host until it is removed.
	memoryBytes int64
	// cpus is the sandbox's CPU limit, as FleetService shows what a host's sandboxes book.
	cpus float64
}

// start gives the session a sandbox — from the warm pool when it starts from its image, else
// booted over its checkpoint's files — and opens its event log. On error nothing is left.
func (h *Host) start(ctx context.Context, b *box, rec *sessiondb.Record, env map[string]string, network *hostv1.SandboxNetwork, manifest *snapshots.Manifest) error {
	var sbx *sandbox
	// The warm pool holds sandboxes of plain images; one with a warm layer or a config of its
	// own (working directory, resources) boots.
	pooled := rec.WarmLayer == "" && rec.ImageWorkdir == "" && rec.ImageResources == nil
	if manifest == nil && pooled {
		sbx = h.pool.take(rec.ImageURI)
	}
	if sbx == nil {
		img, err := h.sessionImage(ctx, rec)
		if err != nil {
			return err
		}
		img = withImageConfig(img, rec)
		if sbx, manifest, err = h.boot(ctx, img, manifest); err != nil {
			return err
		}
		sbx.warmLayer = rec.WarmLayer
	}
	if pooled && rec.Status == sessiondb.Creating {
		// A new session says more of its image may come; a resumed one says nothing of new
		// sessions, and its image may since have been disabled, which no new session may use.
		h.pool.refill(rec.ImageURI, refillAfterTake)
	}
	events, err := eventlog.OpenWriter(ctx, h.opts.DB, rec.ID, eventlog.WriterOptions{Now: h.clock.Now, Empty: rec.Status == sessiondb.Creating})
	if err != nil {
		h.remove(context.WithoutCancel(ctx), sbx)
		return err
	}
	if rec.Status != sessiondb.Creating {
		// A resumed session counts on from what its earlier sandboxes reported.
		b.usage.base, err = lastNetUsage(ctx, eventlog.NewReader(h.opts.DB), rec.ID)
		b.usage.reported = b.usage.base
	}
	if err == nil {
		b.net, err = h.proxy.Serve(proxySession(rec.ID, network, h.tokens), sbx.ns)
	}
	if err != nil {
		_ = events.Close(ctx)
		h.remove(context.WithoutCancel(ctx), sbx)
		return err
	}
	// The session's own variables win over the network's, as an image's ENV loses to both.
	withNet := networkEnv()
	maps.Copy(withNet, sbx.user.env())
	maps.Copy(withNet, env)
	b.sandbox, b.events, b.env, b.workdir = sbx, events, envEntries(withNet), rec.AgentWorkdir
	b.manifest, b.status = manifest, rec.Status
	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.lastActive.Store(h.clock.Now().UnixNano())
	return nil
}

// withImageConfig is img with the enabled image's working directory and resources in place of
// its own, where the session record has them.
func withImageConfig(img *images.Image, rec *sessiondb.Record) *images.Image {
	if rec.ImageWorkdir == "" && rec.ImageResources == nil {
		return img
	}
	out := *img
	if rec.ImageWorkdir != "" {
		out.Config.WorkingDir = rec.ImageWorkdir
	}
	if r := rec.ImageResources; r != nil {
		s := &out.Config.SuggestedResources
		if r.MemoryMiB != 0 {
			s.MemoryMB = int64(r.MemoryMiB)
		}
		if r.VCPUs != 0 {
			s.CPUs = float64(r.VCPUs)
		}
		if r.DiskGiB != 0 {
			s.DiskMB = int64(r.DiskGiB) << 10
		}
	}
	return &out
}

// boot creates a sandbox of img, over the files of manifest when one is given, and waits for
// its supervisor. It returns manifest adopted to the restored files. On error nothing is left.
func (h *Host) boot(ctx context.Context, img *images.Image, manifest *snapshots.Manifest) (_ *sandbox, _ *snapshots.Manifest, err error) {
	res, err := h.sandboxResources(img)
	if err != nil {
		return nil, nil, err
	}
	user, err := imageUser(img.Config.User, img.LowerDirs)
	if err != nil {
		return nil, nil, err
	}
	if err := h.reserveMemory(res.MemoryBytes); err != nil {
		return nil, nil, err
	}
	id := newSandboxID()
	dir := filepath.Join(h.boxDir, id)
	// The run dir is on the sandbox's disk, so what the sandbox writes there counts against its
	// quota too.
	runDir := filepath.Join(container.DiskDir(dir), "run")
	socket := socketPath(h.sockDir, id)
	defer func() {
		if err != nil {
			h.releaseMemory(res.MemoryBytes)
			_ = os.Remove(socket)
			if rerr := h.driver.RemoveDir(dir); rerr != nil {
				h.log.Error("remove failed sandbox's dir", "sandbox", id, "err", rerr)
			}
		}
	}()
	// Each step's time goes to the debug log: a cold boot is what a session without a warm
	// sandbox waits for, and these say where it went.
	began := time.Now()
	if err := h.driver.MountDisk(dir, res.DiskBytes); err != nil {
		return nil, nil, err
	}
	disked := time.Now()
	if err := os.Mkdir(runDir, 0o700); err != nil {
		return nil, nil, err
	}
	listener, err := listenSupervisor(socket)
	if err != nil {
		return nil, nil, err
	}
	defer listener.Close()
	ns, netMounts, err := h.prepareNetwork(dir, img.LowerDirs)
	if err != nil {
		return nil, nil, err
	}
	networked := time.Now()
	defer func() {
		if err != nil {
			_ = ns.Close()
		}
	}()
	if manifest != nil {
		upper := container.UpperDir(dir)
		if err := os.MkdirAll(upper, 0o755); err != nil {
			return nil, nil, err
		}
		if _, err := h.snaps.Restore(ctx, manifest, upper); err != nil {
			return nil, nil, fmt.Errorf("restore checkpoint %s: %w", manifest.ID, err)
		}
		if manifest, err = h.snaps.Adopt(manifest, upper); err != nil {
			return nil, nil, err
		}
	}
	sb, err := h.driver.Create(ctx, container.Spec{
		ID:        id,
		Dir:       dir,
		LowerDirs: img.LowerDirs,
		Init:      []string{supervisorPath, "--listen-fd", "3"},
		Env:       img.Config.Env,
		Cwd:       img.Config.WorkingDir,
		Hostname:  id,
		Mounts: append([]container.Mount{
			{Source: h.shared.Path(sharedSupervisor), Destination: supervisorPath, ReadOnly: true},
			{Source: runDir, Destination: runMount},
		}, netMounts...),
		NetNS:      ns.Path,
		Resources:  res,
		ExtraFiles: []*os.File{listener},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create sandbox: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := sb.Remove(context.WithoutCancel(ctx)); rerr != nil {
				h.log.Error("remove failed sandbox", "sandbox", id, "err", rerr)
			}
		}
	}()
	created := time.Now()
	sup := supervisor.Dial(socket)
	readyCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := sup.WaitReady(readyCtx); err != nil {
		return nil, nil, fmt.Errorf("sandbox %s did not start its supervisor: %w (see %s)", id, err, sb.LogPath())
	}
	h.log.Debug("sandbox booted", "sandbox", id, "disk", disked.Sub(began), "socket_and_network", networked.Sub(disked),
		"restore_and_runc", created.Sub(networked), "supervisor", time.Since(created))
	root, err := sandboxfs.Open(sb.RootFS())
	if err != nil {
		return nil, nil, err
	}
	if user != nil {
		if err := user.prepareHome(root); err != nil {
			root.Close()
			return nil, nil, err
		}
	}
	return &sandbox{sb: sb, sup: sup, root: root, user: user, ns: ns, runDir: runDir, socket: socket, digest: img.Digest, booted: h.clock.Now(), memoryBytes: res.MemoryBytes, cpus: res.CPUs}, manifest, nil
}

// listenSupervisor binds a sandbox's supervisor socket at path, in the host's socket dir, and
// returns the listening socket as a file for the sandbox's init to inherit.
//
// The host binds it, not the supervisor, so that the path the host dials is never in a
// directory the sandbox can write: a sandbox that could swap the socket for a symlink would make
// the host (root) connect wherever the link points — another sandbox's supervisor, a host
// daemon — and send it the session's environment, secrets included. The socket dir is not
// mounted into any sandbox, and the path is not even visible inside; the supervisor only holds
// the listening descriptor. Checking the peer instead (SO_PEERCRED) would not do: a unix
// connection's peer credentials are those of whoever called listen, here the host itself.
func listenSupervisor(path string) (*os.File, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("supervisor socket: %w", err)
	}
	// The socket file must outlive the host's copy of the listener: the supervisor's copy serves it.
	ln.SetUnlinkOnClose(false)
	defer ln.Close()
	f, err := ln.File()
	if err != nil {
		return nil, fmt.Errorf("supervisor socket: %w", err)
	}
	return f, nil
}

// remove stops and deletes a sandbox and its files, and gives its memory back.
func (h *Host) remove(ctx context.Context, sbx *sandbox) error {
	err := errors.Join(sbx.root.Close(), sbx.ns.Close(), sbx.sb.Remove(ctx))
	if rerr := os.Remove(sbx.socket); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	h.releaseMemory(sbx.memoryBytes)
	return err
}

// teardown stops and removes the sandbox and closes its log; the box is no longer served.
func (h *Host) teardown(ctx context.Context, b *box) error {
	b.ready.Store(false)
	h.drop(b)
	if b.cancel != nil {
		b.cancel()
	}
	if b.net != nil {
		b.net.Close()
	}
	b.reportNetUsage() // the sandbox's last word on its traffic
	var errs []error
	if b.events != nil {
		b.logMu.Lock()
		b.logClosed = true
		b.logMu.Unlock()
		errs = append(errs, b.events.Close(ctx))
	}
	if b.sandbox != nil {
		errs = append(errs, h.remove(ctx, b.sandbox))
	}
	return errors.Join(errs...)
}

// envEntries is an environment as KEY=value entries, in a stable order.
func envEntries(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// newSandboxID is a short container id: short because the socket path embeds it.
func newSandboxID() string { return "sbx-" + randomHex(6) }

func socketPath(sockDir, sandboxID string) string {
	return filepath.Join(sockDir, sandboxID+".sock")
}

func goruntimeCPUs() int { return goruntime.NumCPU() }

func memoryBytes() int64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}

// sweepIdle moves sessions quiet for IdleAfter to idle and evicts those idle past
// EvictIdleAfter, writes the last activity of active ones to their records, and checkpoints
// busy ones every CheckpointInterval.
func (h *Host) sweepIdle(ctx context.Context) {
	now := h.clock.Now()
	for _, b := range h.all() {
		if !b.ready.Load() {
			continue
		}
		b.reportNetUsage()
		health, err := b.sup.Ping(ctx)
		if err != nil {
			h.log.Warn("ping supervisor", "session", b.session, "err", err)
			continue
		}
		last := time.Unix(0, b.lastActive.Load())
		if t, err := time.Parse(time.RFC3339Nano, health.LastActivity); err == nil && t.After(last) {
			last = t
			b.lastActive.Store(t.UnixNano())
		}
		if last.UnixNano() > b.touched {
			if err := h.store.Touch(ctx, b.session, last); err == nil {
				b.touched = last.UnixNano()
			}
		}
		quiet := now.Sub(last)
		// An open shell or app connection is someone at work, however quiet.
		running := health.Running > 0 || b.shells.Load() > 0 || b.appConns.Load() > 0
		switch {
		case running:
		case b.idle.Load() && h.opts.Config.EvictIdleAfter > 0 && quiet >= h.opts.Config.EvictIdleAfter:
			if _, err := h.evict(ctx, b, true, "idle"); err != nil {
				h.log.Error("evict idle session", "session", b.session, "err", err)
			}
		case !b.idle.Load() && quiet >= h.opts.Config.IdleAfter:
			b.mu.Lock()
			if b.status == sessiondb.Running {
				if err := h.move(ctx, b, sessiondb.Idle, fmt.Sprintf("quiet for %s", quiet.Round(time.Second)), nil); err != nil {
					h.log.Warn("idle session", "session", b.session, "err", err)
				}
			}
			b.mu.Unlock()
		}
		h.checkpointIfDue(ctx, b, running || last.UnixNano() > b.checkpointed.Load(), now)
	}
}

// checkpointIfDue checkpoints a busy session (something runs in it, or it changed since its
// last checkpoint) whose last checkpoint is CheckpointInterval old, so that a host that dies
// loses a bounded window of it. A quiet one needs none: its last checkpoint holds it.
func (h *Host) checkpointIfDue(ctx context.Context, b *box, busy bool, now time.Time) {
	every := h.opts.Config.CheckpointInterval
	if every <= 0 || !busy || now.Sub(time.Unix(0, b.checkpointed.Load())) < every {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// Evicted, deleted or checkpointed meanwhile: nothing to do.
	if !b.ready.Load() || now.Sub(time.Unix(0, b.checkpointed.Load())) < every {
		return
	}
	if _, _, err := h.checkpoint(ctx, b, "periodic checkpoint"); err != nil && ctx.Err() == nil {
		h.log.Error("periodic checkpoint", "session", b.session, "err", err)
	}
}

package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"connectrpc.com/connect"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/snapshots"
)

// placed reads a session record that the functions placed on this host.
func (h *Host) placed(ctx context.Context, id string) (*sessiondb.Record, error) {
	if id == "" {
		return nil, apierr.InvalidArgument("session_id", "is required")
	}
	rec, err := h.store.Get(ctx, id)
	if errors.Is(err, sessiondb.ErrNotFound) {
		return nil, apierr.NotFound("session", id)
	}
	if err != nil {
		return nil, err
	}
	if rec.HostID != h.id {
		return nil, apierr.FailedPrecondition("session %s is placed on host %q, not %s", id, rec.HostID, h.id)
	}
	return rec, nil
}

// CreateSandbox starts a new session's sandbox. A repeated call for a session already running
// here answers with it. The request names the image, so the sandbox starts without reading the
// record; the move to running then checks that the record is a new session placed here.
func (h *Host) CreateSandbox(ctx context.Context, req *connect.Request[hostv1.CreateSandboxRequest]) (*connect.Response[hostv1.CreateSandboxResponse], error) {
	var v apierr.Violations
	if req.Msg.GetSessionId() == "" {
		v.Add("session_id", "is required")
	}
	if req.Msg.GetImageUri() == "" {
		v.Add("image_uri", "is required")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	// rec is the record as the caller created it, placed here: with its version, the move to
	// running writes without reading it.
	rec := &sessiondb.Record{ID: req.Msg.GetSessionId(), HostID: h.id, ImageURI: req.Msg.GetImageUri(), WarmLayer: req.Msg.GetWarmLayer(), Status: sessiondb.Creating,
		ImageWorkdir: req.Msg.GetWorkdir()}
	var version time.Time
	if v := req.Msg.GetRecordVersion(); v != nil {
		version = v.AsTime()
	}
	if r := req.Msg.GetResources(); r.GetSuggestedMemoryMib() != 0 || r.GetSuggestedVcpus() != 0 || r.GetSuggestedDiskGib() != 0 {
		rec.ImageResources = &sessiondb.ImageResources{MemoryMiB: r.GetSuggestedMemoryMib(), VCPUs: r.GetSuggestedVcpus(), DiskGiB: r.GetSuggestedDiskGib()}
	}
	b, err := h.claim(ctx, rec.ID)
	if err != nil {
		// A refusal (full, cordoned) leaves the session as it is, for the functions to place
		// it on the next host.
		return nil, err
	}
	defer b.mu.Unlock()
	if !b.ready.Load() {
		if err := h.launch(ctx, b, rec, version, req.Msg.GetEnv(), req.Msg.GetNetwork(), req.Msg.GetRepos(), nil); err != nil {
			return nil, err
		}
	}
	return connect.NewResponse(&hostv1.CreateSandboxResponse{
		SessionId: rec.ID, SandboxId: b.sb.ID(), Status: string(b.status), ImageDigest: b.digest,
	}), nil
}

// launch starts the sandbox and moves the session from rec.Status to running; a failure moves
// it to failed with the reason, so nobody waits on a sandbox that never came. Both moves happen
// only while the record is as rec says: placed on this host, in rec.Status, of rec's image.
// With a version, rec holds the fields the move checks as the record held them at that
// version, and the move to running does not read the record first. b.mu must be held.
// repos are cloned (a new session's) before the move to running; a failed clone fails it.
func (h *Host) launch(ctx context.Context, b *box, rec *sessiondb.Record, version time.Time, env map[string]string, network *hostv1.SandboxNetwork, repos []*hostv1.RepoCheckout, manifest *snapshots.Manifest) error {
	if err := h.start(ctx, b, rec, env, network, manifest); err != nil {
		h.drop(b)
		if !errors.As(err, new(refusal)) {
			h.fail(ctx, rec, err)
		}
		return err
	}
	if err := h.checkout(ctx, b, repos, network); err != nil {
		_ = h.teardown(context.WithoutCancel(ctx), b)
		h.fail(ctx, rec, err)
		return err
	}
	if len(repos) > 0 {
		// As the record says (functions/sessions), which the request was not made from.
		b.workdir = path.Clean(repos[0].GetPath())
	}
	sandboxID, digest := b.sb.ID(), b.digest
	err := h.moveAt(ctx, b, rec, version, sessiondb.Running, "sandbox "+sandboxID+" started", func(r *sessiondb.Record) error {
		if err := h.placedHere(r, rec); err != nil {
			return err
		}
		r.SandboxID, r.ImageDigest = sandboxID, digest
		return nil
	})
	if errors.Is(err, sessiondb.ErrNotFound) {
		err = apierr.NotFound("session", rec.ID)
	}
	if err != nil {
		_ = h.teardown(context.WithoutCancel(ctx), b)
		return err
	}
	b.checkpointed.Store(h.clock.Now().UnixNano())
	b.ready.Store(true)
	go h.watch(b)
	return nil
}

// watch moves the session to lost the moment its sandbox dies under it — its supervisor killed
// or crashed, its container stopped behind the host's back — and removes what is left, so that
// nothing waits on a dead sandbox: exec and snapshot answer failed_precondition and Resume
// brings the session back from its last checkpoint. A teardown the host made itself (eviction,
// deletion) cancels b.ctx first, under b.mu, and is left alone.
func (h *Host) watch(b *box) {
	select {
	case <-b.ctx.Done():
		return
	case <-b.sb.Exited():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return
	}
	ctx := context.WithoutCancel(b.ctx)
	reason := "sandbox " + b.sb.ID() + " died: its supervisor (PID 1) exited"
	err := h.move(ctx, b, sessiondb.Lost, reason, func(r *sessiondb.Record) error {
		r.SandboxID = ""
		return nil
	})
	if err != nil {
		h.log.Error("mark the session of a dead sandbox lost", "session", b.session, "err", err)
	}
	if err := h.teardown(ctx, b); err != nil {
		h.log.Error("remove dead sandbox", "session", b.session, "err", err)
	}
}

// placedHere checks that the record r is still as want says: placed on this host, in want's
// state, of want's image.
func (h *Host) placedHere(r, want *sessiondb.Record) error {
	if r.HostID != h.id || r.Status != want.Status || r.ImageURI != want.ImageURI {
		return apierr.FailedPrecondition("session %s is %s on host %q with image %q, not %s here with %q",
			r.ID, r.Status, r.HostID, r.ImageURI, want.Status, want.ImageURI)
	}
	return nil
}

// fail moves a session this host could not start to failed, saying why, so nobody waits on a
// sandbox that never came.
func (h *Host) fail(ctx context.Context, rec *sessiondb.Record, why error) {
	_, _, err := h.store.Move(context.WithoutCancel(ctx), rec.ID, sessiondb.Failed, why.Error(), func(r *sessiondb.Record) error {
		return h.placedHere(r, rec)
	})
	if err != nil {
		h.log.Warn("mark session failed", "session", rec.ID, "err", err)
	}
}

// DeleteSandbox removes the session's sandbox and local files.
func (h *Host) DeleteSandbox(ctx context.Context, req *connect.Request[hostv1.DeleteSandboxRequest]) (*connect.Response[hostv1.DeleteSandboxResponse], error) {
	id := req.Msg.GetSessionId()
	if id == "" {
		return nil, apierr.InvalidArgument("session_id", "is required")
	}
	h.mu.Lock()
	b := h.boxes[id]
	h.mu.Unlock()
	if b == nil {
		return connect.NewResponse(&hostv1.DeleteSandboxResponse{SessionId: id}), nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.events != nil {
		b.emit(eventlog.KindSessionStatus, map[string]string{"from": string(b.status), "to": string(sessiondb.Deleted), "reason": "deleted"})
	}
	if err := h.teardown(ctx, b); err != nil {
		return nil, fmt.Errorf("delete sandbox of %s: %w", id, err)
	}
	return connect.NewResponse(&hostv1.DeleteSandboxResponse{SessionId: id, Found: true}), nil
}

// Snapshot checkpoints the sandbox's files and returns the session to where it was.
func (h *Host) Snapshot(ctx context.Context, req *connect.Request[appv1.SnapshotRequest]) (*connect.Response[appv1.SnapshotResponse], error) {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ready.Load() {
		return nil, apierr.FailedPrecondition("session %s has no sandbox on host %s", b.session, h.id)
	}
	m, stats, err := h.checkpoint(ctx, b, "snapshot requested")
	if err != nil {
		return nil, err
	}
	size := uint64(m.TotalSize)
	return connect.NewResponse(&appv1.SnapshotResponse{
		SessionId: b.session, SnapshotId: &m.ID, SizeBytes: &size,
		Note: fmt.Sprintf("version %d: %d files, %d of %d chunks uploaded (%d bytes)", m.Version, stats.Files, stats.ChunksUploaded, stats.Chunks, stats.BytesUploaded),
	}), nil
}

// checkpoint snapshots the sandbox in state snapshotting, for why, and returns the session to
// the state it was in; b.mu must be held.
func (h *Host) checkpoint(ctx context.Context, b *box, why string) (*snapshots.Manifest, snapshots.Stats, error) {
	was := b.status
	if err := h.move(ctx, b, sessiondb.Snapshotting, why, nil); err != nil {
		return nil, snapshots.Stats{}, err
	}
	m, stats, serr := h.snapshot(ctx, b)
	if err := h.move(context.WithoutCancel(ctx), b, was, "snapshot done", nil); err != nil {
		return nil, stats, errors.Join(serr, err)
	}
	if serr != nil {
		return nil, stats, b.diedUnder(serr)
	}
	return m, stats, nil
}

// snapshot freezes the sandbox, captures its upper dir on top of the last checkpoint and records
// the checkpoint; b.mu must be held.
func (h *Host) snapshot(ctx context.Context, b *box) (*snapshots.Manifest, snapshots.Stats, error) {
	if err := b.sb.Freeze(ctx); err != nil {
		return nil, snapshots.Stats{}, fmt.Errorf("freeze sandbox: %w", err)
	}
	frozen := h.clock.Now()
	cursor := b.events.LastIdx()
	m, stats, err := h.snaps.Snapshot(ctx, b.sb.UpperDir(), b.manifest, snapshots.Meta{
		SessionID: b.session, SandboxID: b.sb.ID(), CreatedAt: h.clock.Now(), EventsCursor: cursor,
	})
	if terr := b.sb.Thaw(context.WithoutCancel(ctx)); terr != nil {
		err = errors.Join(err, fmt.Errorf("thaw sandbox: %w", terr))
	}
	if err != nil {
		return nil, stats, err
	}
	if err := h.store.AddCheckpoint(ctx, b.session, sessiondb.Checkpoint{
		SnapshotID: m.ID, Version: m.Version, SizeBytes: m.TotalSize, CreatedAt: m.CreatedAt,
		EventsCursor: cursor, Chunks: m.ChunkCount, HostID: h.id,
	}); err != nil {
		return nil, stats, err
	}
	b.manifest = m
	b.checkpointed.Store(frozen.UnixNano())
	b.emit(eventlog.KindSnapshotTaken, map[string]any{
		"snapshot_id": m.ID, "version": m.Version, "size_bytes": m.TotalSize, "files": stats.Files,
		"chunks": stats.Chunks, "chunks_uploaded": stats.ChunksUploaded, "bytes_uploaded": stats.BytesUploaded,
		"events_cursor": cursor,
	})
	return m, stats, nil
}

// Evict drops the local sandbox, checkpointing it first when asked.
func (h *Host) Evict(ctx context.Context, req *connect.Request[hostv1.EvictRequest]) (*connect.Response[hostv1.EvictResponse], error) {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	snap, err := h.evict(ctx, b, req.Msg.GetSnapshot(), cmp.Or(req.Msg.GetReason(), "requested"))
	if err != nil {
		return nil, err
	}
	resp := &hostv1.EvictResponse{SessionId: b.session, Status: string(sessiondb.Evicted)}
	if snap != "" {
		resp.SnapshotId = &snap
	}
	return connect.NewResponse(resp), nil
}

// evict checkpoints (when snapshot is set) and removes the sandbox, leaving the session evicted.
// Without a checkpoint there would be nothing to resume, so that is refused.
func (h *Host) evict(ctx context.Context, b *box, snapshot bool, reason string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ready.Load() {
		return "", apierr.FailedPrecondition("session %s has no sandbox on host %s", b.session, h.id)
	}
	if snapshot {
		if err := h.move(ctx, b, sessiondb.Snapshotting, "checkpoint before eviction ("+reason+")", nil); err != nil {
			return "", err
		}
		if _, _, err := h.snapshot(ctx, b); err != nil {
			return "", errors.Join(err, h.move(context.WithoutCancel(ctx), b, sessiondb.Running, "checkpoint failed", nil))
		}
	} else if b.manifest == nil {
		return "", apierr.FailedPrecondition("session %s has no checkpoint to keep: snapshot it first", b.session)
	}
	m := b.manifest
	if err := h.move(ctx, b, sessiondb.Evicted, reason, func(r *sessiondb.Record) error {
		r.SandboxID = ""
		return nil
	}); err != nil {
		return "", err
	}
	b.emit(eventlog.KindSessionEvicted, map[string]any{"reason": reason, "snapshot_id": m.ID, "size_bytes": m.TotalSize})
	if err := h.teardown(context.WithoutCancel(ctx), b); err != nil {
		h.log.Error("remove evicted sandbox", "session", b.session, "err", err)
	}
	return m.ID, nil
}

// Resume recreates the sandbox of a session the functions placed here in state resuming, from
// its latest checkpoint (or from its image when it never had one).
func (h *Host) Resume(ctx context.Context, req *connect.Request[appv1.ResumeRequest]) (*connect.Response[appv1.ResumeResponse], error) {
	rec, err := h.placed(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	b, err := h.claim(ctx, rec.ID)
	if err != nil {
		// A refusal (full, cordoned) leaves the session as it is, for the functions to place
		// it on the next host.
		return nil, err
	}
	defer b.mu.Unlock()
	if b.ready.Load() {
		return connect.NewResponse(&appv1.ResumeResponse{SessionId: rec.ID, Note: "already running on " + h.id}), nil
	}
	if rec.Status != sessiondb.Resuming {
		h.drop(b)
		return nil, apierr.FailedPrecondition("session %s is %s, not resuming", rec.ID, rec.Status)
	}
	env, err := h.opts.Sealer.OpenEnv(rec.SealedEnv, sessiondb.EnvOwner(rec.ID))
	if err != nil {
		h.drop(b)
		return nil, fmt.Errorf("open the environment of %s: %w", rec.ID, err)
	}
	network, err := openNetwork(h.opts.Sealer, rec)
	if err != nil {
		h.drop(b)
		return nil, err
	}
	var m *snapshots.Manifest
	if rec.LatestSnapshotID != "" {
		if m, err = h.snaps.Load(ctx, rec.ID, rec.LatestSnapshotID); err != nil {
			h.drop(b)
			return nil, fmt.Errorf("load checkpoint %s: %w", rec.LatestSnapshotID, err)
		}
	}
	if err := h.launch(ctx, b, rec, time.Time{}, env, network, nil, m); err != nil {
		return nil, err
	}
	resp := &appv1.ResumeResponse{SessionId: rec.ID, Note: "started from the image: the session had no checkpoint"}
	payload := map[string]any{"host_id": h.id, "sandbox_id": b.sb.ID()}
	if m != nil {
		size := uint64(m.TotalSize)
		resp.SnapshotId, resp.SizeBytes = &m.ID, &size
		resp.Note = fmt.Sprintf("restored checkpoint %s (version %d) on %s", m.ID, m.Version, h.id)
		payload["snapshot_id"], payload["size_bytes"] = m.ID, m.TotalSize
	}
	b.emit(eventlog.KindSessionResumed, payload)
	if rec.Harness != "" {
		// The prompt queue carries on in the new sandbox without waiting for the next prompt.
		if _, err := h.agentOf(ctx, b); err != nil {
			h.log.Warn("restart prompt queue", "session", rec.ID, "err", err)
		}
	}
	return connect.NewResponse(resp), nil
}

// GetCowState compares the sandbox's upper dir with its last checkpoint, by metadata only.
func (h *Host) GetCowState(ctx context.Context, req *connect.Request[appv1.GetCowStateRequest]) (*connect.Response[appv1.GetCowStateResponse], error) {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	base := b.manifest
	b.mu.Unlock()
	cs, err := h.snaps.CowState(b.sb.UpperDir(), base)
	if err != nil {
		return nil, err
	}
	view := &appv1.CowStateView{
		SandboxId: b.sb.ID(), SessionId: &b.session,
		DirtyChunks: uint32(cs.DirtyChunks), DirtyBytes: uint64(cs.DirtyBytes),
		BaseChunks: uint32(cs.BaseChunks), BaseChunksLocal: uint32(cs.BaseChunksCached),
	}
	if base != nil {
		view.DiskManifestId, view.DiskManifestVersion = base.ID, uint64(base.Version)
		view.LastFlushAt, view.LastSnapshotAt = clock.FormatPtr(base.CreatedAt), clock.FormatPtr(base.CreatedAt)
	}
	return connect.NewResponse(&appv1.GetCowStateResponse{SessionId: b.session, State: view}), nil
}

package sessions

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/gen/host/v1/hostv1connect"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/filestream"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// Exec runs a command in the session's sandbox and passes its output stream through. The host
// validates the command; this side decides who may run it and wakes an evicted session on wake.
func (s *Service) Exec(ctx context.Context, req *connect.Request[appv1.ExecRequest], out *connect.ServerStream[appv1.ExecOutput]) error {
	return proxyStream(ctx, s, req.Msg.GetSessionId(), req.Msg.GetWake(), out, func(c hostv1connect.HostServiceClient, rec *sessiondb.Record) (*connect.ServerStreamForClient[appv1.ExecOutput], error) {
		return c.Exec(ctx, toHost(req.Msg, rec))
	})
}

// CancelExec kills an exec's process group.
func (s *Service) CancelExec(ctx context.Context, req *connect.Request[appv1.CancelExecRequest]) (*connect.Response[emptypb.Empty], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.CancelExec(ctx, toHost(req.Msg, rec))
}

// ReadFile streams a file out of the sandbox.
func (s *Service) ReadFile(ctx context.Context, req *connect.Request[appv1.ReadFileRequest], out *connect.ServerStream[appv1.ReadFileResponse]) error {
	return proxyStream(ctx, s, req.Msg.GetSessionId(), false, out, func(c hostv1connect.HostServiceClient, rec *sessiondb.Record) (*connect.ServerStreamForClient[appv1.ReadFileResponse], error) {
		return c.ReadFile(ctx, toHost(req.Msg, rec))
	})
}

// WriteFile streams a file into the sandbox: the metadata frame names the session, the chunks
// follow, and the host verifies size and sha256 before the file appears.
func (s *Service) WriteFile(ctx context.Context, in *connect.ClientStream[appv1.WriteFileRequest]) (*connect.Response[appv1.WriteFileResponse], error) {
	meta, err := filestream.Metadata(in)
	if err != nil {
		return nil, err
	}
	rec, client, err := s.liveHost(ctx, meta.GetSessionId())
	if err != nil {
		return nil, err
	}
	setSessionID(meta, rec.ID)
	up := client.WriteFile(ctx)
	if err := up.Send(in.Msg()); err != nil {
		return closeUpload(up, err)
	}
	for in.Receive() {
		if err := up.Send(in.Msg()); err != nil {
			return closeUpload(up, err)
		}
	}
	if err := in.Err(); err != nil {
		_, _ = up.CloseAndReceive()
		return nil, err
	}
	return up.CloseAndReceive()
}

// closeUpload ends an upload that failed to send: the host's answer explains the failure
// better than the broken send does.
func closeUpload(up *connect.ClientStreamForClient[appv1.WriteFileRequest, appv1.WriteFileResponse], sendErr error) (*connect.Response[appv1.WriteFileResponse], error) {
	if _, err := up.CloseAndReceive(); err != nil {
		return nil, err
	}
	return nil, sendErr
}

// CopyFiles copies files from one session's sandbox to another's, on the same host or not,
// streaming each through this function with its sha256 checked on arrival.
func (s *Service) CopyFiles(ctx context.Context, req *connect.Request[appv1.CopyFilesRequest]) (*connect.Response[appv1.CopyFilesResponse], error) {
	m := req.Msg
	var v apierr.Violations
	if len(m.GetPaths()) == 0 {
		v.Add("paths", "name at least one file")
	}
	if len(m.GetPaths()) > s.d.Limits.MaxCopyPaths {
		v.Addf("paths", "at most %d paths per call", s.d.Limits.MaxCopyPaths)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	src, from, err := s.liveHostField(ctx, "source_session_id", m.GetSourceSessionId())
	if err != nil {
		return nil, err
	}
	dst, to, err := s.liveHostField(ctx, "target_session_id", m.GetTargetSessionId())
	if err != nil {
		return nil, err
	}
	out := &appv1.CopyFilesResponse{}
	for _, path := range m.GetPaths() {
		res, err := copyFile(ctx, from, to, src.ID, dst.ID, path)
		if err != nil {
			return nil, fmt.Errorf("copy %s: %w", path, err)
		}
		out.Files = append(out.Files, res)
	}
	return connect.NewResponse(out), nil
}

func copyFile(ctx context.Context, from, to hostv1connect.HostServiceClient, src, dst, path string) (*appv1.CopyFileResult, error) {
	down, err := from.ReadFile(ctx, connect.NewRequest(&appv1.ReadFileRequest{SessionId: src, Path: path}))
	if err != nil {
		return nil, err
	}
	defer down.Close()
	if !down.Receive() {
		if err := down.Err(); err != nil {
			return nil, err
		}
		return nil, errors.New("the source sent no metadata")
	}
	meta := down.Msg().GetMetadata()
	if meta == nil {
		return nil, errors.New("the source sent a chunk before its metadata")
	}
	up := to.WriteFile(ctx)
	first := &appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Metadata{Metadata: &appv1.WriteFileMetadata{
		SessionId: dst, Path: meta.GetPath(), SizeBytes: meta.GetSizeBytes(), Sha256: meta.GetSha256(),
	}}}
	if err := up.Send(first); err != nil {
		_, cerr := closeUpload(up, err)
		return nil, cerr
	}
	for down.Receive() {
		if err := up.Send(&appv1.WriteFileRequest{Frame: &appv1.WriteFileRequest_Chunk{Chunk: down.Msg().GetChunk()}}); err != nil {
			_, cerr := closeUpload(up, err)
			return nil, cerr
		}
	}
	if err := down.Err(); err != nil {
		_, _ = up.CloseAndReceive()
		return nil, err
	}
	resp, err := up.CloseAndReceive()
	if err != nil {
		return nil, err
	}
	return &appv1.CopyFileResult{Path: resp.Msg.GetPath(), SizeBytes: resp.Msg.GetSizeBytes(), Sha256: resp.Msg.GetSha256()}, nil
}

// liveHost loads a session the caller may touch and returns it with its host's client; the
// session must have a sandbox.
func (s *Service) liveHost(ctx context.Context, id string) (*sessiondb.Record, hostv1connect.HostServiceClient, error) {
	return s.liveHostField(ctx, "session_id", id)
}

// liveHostField is liveHost of the id in a request's field.
func (s *Service) liveHostField(ctx context.Context, field, id string) (*sessiondb.Record, hostv1connect.HostServiceClient, error) {
	rec, err := s.loadField(ctx, field, id)
	if err != nil {
		return nil, nil, err
	}
	client, err := s.host(ctx, rec, false)
	return rec, client, err
}

// Snapshot checkpoints the session's files.
func (s *Service) Snapshot(ctx context.Context, req *connect.Request[appv1.SnapshotRequest]) (*connect.Response[appv1.SnapshotResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	resp, err := client.Snapshot(ctx, toHost(req.Msg, rec))
	return fromHost(ctx, rec, resp, err)
}

// Resume brings an evicted, lost or failed session back on a host from its latest checkpoint
// (from its image when it has none). A running session answers at once.
func (s *Service) Resume(ctx context.Context, req *connect.Request[appv1.ResumeRequest]) (*connect.Response[appv1.ResumeResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if rec = s.settle(ctx, rec); rec.Status.Live() {
		return connect.NewResponse(&appv1.ResumeResponse{SessionId: shownID(ctx, rec), Note: "session is " + string(rec.Status) + ": nothing to resume"}), nil
	}
	if !rec.Status.Resumable() {
		return nil, apierr.FailedPrecondition("session %s is %s and cannot be resumed", rec.ID, rec.Status)
	}
	resp, err := s.resumeOn(ctx, rec)
	if err != nil {
		return nil, err
	}
	resp.SessionId = shownID(ctx, rec)
	return connect.NewResponse(resp), nil
}

// resume wakes a session for a call that needs its sandbox and returns its record as resumed.
func (s *Service) resume(ctx context.Context, rec *sessiondb.Record) (*sessiondb.Record, error) {
	if _, err := s.resumeOn(ctx, rec); err != nil {
		return nil, err
	}
	return s.store.Get(ctx, rec.ID)
}

// overLimit is the answer to a user who has as many live sessions as one user may.
func (s *Service) overLimit(user string) error {
	return apierr.ResourceExhausted("user %s has %d live sessions, the most one user may (HANGAR_MAX_SESSIONS_PER_USER); delete or evict one first",
		user, s.d.Limits.MaxSessionsPerUser)
}

// resumeOn places the session on a host, marks it resuming there, and has the host restore it,
// unless its owner already has as many live sessions as one user may. That count is read
// before the move, not in one transaction with it: resumes racing at the limit may each pass
// (creates cannot).
func (s *Service) resumeOn(ctx context.Context, rec *sessiondb.Record) (*appv1.ResumeResponse, error) {
	if max := s.d.Limits.MaxSessionsPerUser; max > 0 {
		n, err := s.store.CountLive(ctx, rec.Owner)
		if err != nil {
			return nil, err
		}
		if n >= int64(max) {
			return nil, s.overLimit(rec.Owner)
		}
	}
	resp, _, err := s.place(ctx, rec)
	return resp, err
}

// Relocate resumes session id, evicted or lost, on the best host that takes it, whoever owns
// it and however many live sessions they have: for FleetService, moving a session that was
// live off a host being drained or lost. It answers with the host it went to.
func (s *Service) Relocate(ctx context.Context, id string) (string, *appv1.ResumeResponse, error) {
	rec, err := s.store.Get(ctx, id)
	if err != nil {
		return "", nil, err
	}
	if !rec.Status.Resumable() {
		return "", nil, apierr.FailedPrecondition("session %s is %s and cannot be resumed", rec.ID, rec.Status)
	}
	resp, host, err := s.place(ctx, rec)
	if err != nil {
		return "", nil, err
	}
	return host, resp, nil
}

// place marks the session resuming on the best candidate host and has the host restore it,
// passing it down the candidates while hosts refuse; it answers with the host that took it.
func (s *Service) place(ctx context.Context, rec *sessiondb.Record) (*appv1.ResumeResponse, string, error) {
	hosts, err := s.hostCandidates(ctx)
	if err != nil {
		return nil, "", err
	}
	s.recent.drop(rec.ID)
	_, _, err = s.store.Move(ctx, rec.ID, sessiondb.Resuming, "resume requested", func(r *sessiondb.Record) error {
		r.HostID, r.SandboxID = hosts[0].ID, ""
		return nil
	})
	var me *sessiondb.MoveError
	if errors.As(err, &me) {
		return nil, "", apierr.FailedPrecondition("%s", me.Error())
	}
	if err != nil {
		return nil, "", err
	}
	resp, host, _, err := startOnCandidates(ctx, s, rec.ID, sessiondb.Resuming, sessiondb.Lost, hosts, func(c hostv1connect.HostServiceClient, _ bool) (*connect.Response[appv1.ResumeResponse], error) {
		return c.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: rec.ID}))
	})
	if err != nil {
		return nil, "", err
	}
	return resp.Msg, host.ID, nil
}

// EvictLocal drops the session's sandbox and keeps its checkpoints: changes since the last
// snapshot are dropped with it, so a session that was never snapshotted cannot be evicted.
func (s *Service) EvictLocal(ctx context.Context, req *connect.Request[appv1.EvictLocalRequest]) (*connect.Response[emptypb.Empty], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if rec.Status == sessiondb.Evicted {
		return connect.NewResponse(&emptypb.Empty{}), nil
	}
	if rec.LatestSnapshotID == "" {
		return nil, apierr.FailedPrecondition("session %s has no checkpoint to keep: Snapshot it first (or use EvictIdle, which does)", rec.ID)
	}
	client, err := s.host(ctx, rec, false)
	if err != nil {
		return nil, err
	}
	if _, err := client.Evict(ctx, connect.NewRequest(&hostv1.EvictRequest{SessionId: rec.ID, Reason: "requested"})); err != nil {
		return nil, err
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// EvictIdle snapshots and evicts the session when it is idle, and leaves a busy one alone; the
// status says which happened.
func (s *Service) EvictIdle(ctx context.Context, req *connect.Request[appv1.EvictIdleRequest]) (*connect.Response[appv1.EvictIdleResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if rec.Status != sessiondb.Idle {
		return connect.NewResponse(&appv1.EvictIdleResponse{SessionId: shownID(ctx, rec), Status: string(rec.Status)}), nil
	}
	client, err := s.host(ctx, rec, false)
	if err != nil {
		return nil, err
	}
	resp, err := client.Evict(ctx, connect.NewRequest(&hostv1.EvictRequest{SessionId: rec.ID, Snapshot: true, Reason: "idle"}))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.EvictIdleResponse{SessionId: shownID(ctx, rec), Status: resp.Msg.GetStatus()}), nil
}

// GetCowState reports the session's copy-on-write disk: from its host while it has a sandbox,
// from its latest checkpoint while it does not.
func (s *Service) GetCowState(ctx context.Context, req *connect.Request[appv1.GetCowStateRequest]) (*connect.Response[appv1.GetCowStateResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	if rec = s.settle(ctx, rec); rec.Status.Live() {
		client, err := s.host(ctx, rec, false)
		if err != nil {
			return nil, err
		}
		resp, err := client.GetCowState(ctx, toHost(req.Msg, rec))
		if err == nil && resp.Msg.GetState().SessionId != nil {
			setSessionID(resp.Msg.GetState(), shownID(ctx, rec))
		}
		return fromHost(ctx, rec, resp, err)
	}
	shown := shownID(ctx, rec)
	state := &appv1.CowStateView{SandboxId: rec.SandboxID, SessionId: &shown}
	if rec.LatestSnapshotID != "" {
		cps, err := s.store.Checkpoints(ctx, rec.ID, 1)
		if err != nil {
			return nil, err
		}
		if len(cps) > 0 {
			c := cps[0]
			state.DiskManifestId, state.DiskManifestVersion = c.SnapshotID, uint64(c.Version)
			state.BaseChunks = uint32(c.Chunks)
			state.LastSnapshotAt, state.LastFlushAt = clock.FormatPtr(c.CreatedAt), clock.FormatPtr(c.CreatedAt)
		}
	}
	return connect.NewResponse(&appv1.GetCowStateResponse{SessionId: shown, State: state}), nil
}

// ListCheckpoints lists the session's snapshots, newest first.
func (s *Service) ListCheckpoints(ctx context.Context, req *connect.Request[appv1.ListCheckpointsRequest]) (*connect.Response[appv1.ListCheckpointsResponse], error) {
	rec, err := s.load(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	cps, err := s.store.Checkpoints(ctx, rec.ID, s.d.Limits.Events.Max)
	if err != nil {
		return nil, err
	}
	out := &appv1.ListCheckpointsResponse{SessionId: shownID(ctx, rec)}
	for _, c := range cps {
		cursor := c.EventsCursor
		out.Checkpoints = append(out.Checkpoints, &appv1.CheckpointSummary{
			SnapshotId: c.SnapshotID, CreatedAt: clock.Format(c.CreatedAt), SizeBytes: uint64(c.SizeBytes),
			EventsCursor: &cursor, Recoverable: true, IsLatest: c.SnapshotID == rec.LatestSnapshotID,
		})
	}
	return connect.NewResponse(out), nil
}

// CreateArtifactFromPath publishes a file of the sandbox as an artifact.
func (s *Service) CreateArtifactFromPath(ctx context.Context, req *connect.Request[appv1.CreateArtifactFromPathRequest]) (*connect.Response[appv1.CreateArtifactFromPathResponse], error) {
	rec, client, err := s.liveHost(ctx, req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	return client.CreateArtifactFromPath(ctx, toHost(req.Msg, rec))
}

package host

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/sandboxhosts/container"
	"github.com/hangar-dev/hangar/sandboxhosts/imagechunks"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// Stages of PrepareImage.
const (
	PrepareStagePull     = "pull"
	PrepareStageChunk    = "chunk"
	PrepareStagePrestage = "prestage"
	PrepareStageWarm     = "warm"
)

// warmSessionPrefix names a warm sandbox to the egress proxy (its audit goes to the host's log,
// since no session's log is open).
const warmSessionPrefix = "warm/"

// maxWarmTimeout bounds a warm command when the image's config names no timeout.
const maxWarmTimeout = time.Hour

// PrepareImage runs one stage of an enable job on this host and streams its progress.
func (h *Host) PrepareImage(ctx context.Context, req *connect.Request[hostv1.PrepareImageRequest], out *connect.ServerStream[hostv1.PrepareImageProgress]) error {
	m := req.Msg
	ref, err := name.NewDigest(m.GetImageRef())
	if err != nil {
		return apierr.InvalidArgument("image_ref", fmt.Sprintf("must name an image by digest (repository@sha256:...): %v", err))
	}
	digest := ref.DigestStr()
	// Progress messages go out from one goroutine at a time; a slow reader only slows the stage.
	var mu sync.Mutex
	send := func(p *hostv1.PrepareImageProgress) error {
		mu.Lock()
		defer mu.Unlock()
		return out.Send(p)
	}
	progress := func(done, total int) {
		_ = send(&hostv1.PrepareImageProgress{ChunksDone: uint32(done), ChunksTotal: uint32(total)})
	}
	switch m.GetStage() {
	case PrepareStagePull:
		// The layers are cut into the chunk store as they unpack; the chunk stage finds them done.
		_, uploaded, err := h.imageChunks.Pull(ctx, ref.String())
		if err != nil {
			return pullError(ref.String(), err)
		}
		return send(&hostv1.PrepareImageProgress{Done: true, BytesUploaded: uint64(uploaded)})
	case PrepareStageChunk:
		res, err := h.imageChunks.Chunk(ctx, digest, progress)
		if errors.Is(err, images.ErrNotPulled) {
			return apierr.FailedPrecondition("image %s is not pulled on host %s: run the pull stage here first", ref, h.id)
		}
		if err != nil {
			return err
		}
		final := &hostv1.PrepareImageProgress{Done: true, BytesTotal: uint64(res.BytesTotal), BytesUploaded: uint64(res.BytesUploaded)}
		for _, l := range res.Layers {
			final.Layers = append(final.Layers, &hostv1.ImageLayer{Digest: l.Digest, Chunks: uint32(l.Chunks)})
			final.ChunksDone += uint32(l.Chunks)
		}
		final.ChunksTotal = final.ChunksDone
		return send(final)
	case PrepareStagePrestage:
		if err := h.stageImage(ctx, digest, m.GetWarmLayer(), progress); err != nil {
			return err
		}
		return send(&hostv1.PrepareImageProgress{Done: true})
	case PrepareStageWarm:
		return h.warmImage(ctx, ref.String(), m, send)
	default:
		return apierr.InvalidArgument("stage", fmt.Sprintf("must be %s, %s, %s or %s", PrepareStagePull, PrepareStageChunk, PrepareStagePrestage, PrepareStageWarm))
	}
}

// CollectImages drops from this host's image cache the images nothing references any more
// (the request's keep set, computed from the records by ImageService, plus what this host's
// own session sandboxes run on), and with sweep makes the chunk store forget the images outside
// the request's keep set and its sessions' images: a running session of a disabled image goes on
// from this host's copy, and one evicted resumes on any host from the chunk store.
func (h *Host) CollectImages(ctx context.Context, req *connect.Request[hostv1.CollectImagesRequest]) (*connect.Response[hostv1.CollectImagesResponse], error) {
	m := req.Msg
	keep := imagechunks.Keep{Images: m.GetKeepImages(), WarmLayers: m.GetKeepWarmLayers()}
	var v apierr.Violations
	for _, field := range []struct {
		name    string
		digests []string
	}{{"keep_images", keep.Images}, {"session_images", m.GetSessionImages()}} {
		for i, d := range field.digests {
			if _, err := v1.NewHash(d); err != nil {
				v.Addf(fmt.Sprintf("%s[%d]", field.name, i), "%q is not an image digest", d)
			}
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	storeKeep := imagechunks.Keep{
		Images:     slices.Concat(keep.Images, m.GetSessionImages()),
		WarmLayers: slices.Concat(keep.WarmLayers, m.GetSessionWarmLayers()),
	}
	kept := map[string]bool{}
	for _, d := range keep.Images {
		kept[d] = true
	}
	// The host keeps more than the chunk store: what its own sandboxes run on.
	hostKeep := imagechunks.Keep{Images: slices.Clone(keep.Images), WarmLayers: slices.Clone(keep.WarmLayers)}
	// A session's sandbox runs on its image's layers whatever the records say; a warm sandbox
	// of an image no longer kept goes, as no session may start from it.
	for _, b := range h.all() {
		if !b.ready.Load() {
			continue
		}
		if !kept[b.digest] {
			kept[b.digest] = true
			hostKeep.Images = append(hostKeep.Images, b.digest)
		}
		if b.warmLayer != "" {
			hostKeep.WarmLayers = append(hostKeep.WarmLayers, b.warmLayer)
		}
	}
	h.pool.retain(kept)
	out := &hostv1.CollectImagesResponse{}
	if m.GetSweep() {
		// No grace: a snapshot in progress holds a lease that makes the GC wait (busy), and a
		// snapshot retried after a GC re-uploads what it deleted (the generation moved).
		res, err := h.imageChunks.Collect(ctx, storeKeep, 0)
		if err != nil {
			return nil, err
		}
		out.RecordsDeleted, out.ManifestsDeleted = uint32(res.Records), uint32(res.Manifests)
		out.ChunksDeleted, out.SweepBusy = uint32(res.Chunks), res.Busy
	}
	n, err := h.imageChunks.PruneCache(hostKeep)
	if err != nil {
		return nil, err
	}
	out.ImagesRemoved = uint32(n)
	h.log.Info("collect images", "kept", len(keep.Images), "removed", n, "records_deleted", out.RecordsDeleted,
		"manifests_deleted", out.ManifestsDeleted, "chunks_deleted", out.ChunksDeleted)
	return connect.NewResponse(out), nil
}

// stageImage puts image digest (and its warm layer, if any) into this host's cache from the
// chunk store.
func (h *Host) stageImage(ctx context.Context, digest, warmLayer string, progress imagechunks.Progress) error {
	err := h.imageChunks.Stage(ctx, digest, progress)
	if errors.Is(err, imagechunks.ErrNotChunked) {
		return apierr.FailedPrecondition("image %s is not in the chunk store: run its chunk stage first", digest)
	}
	if err != nil {
		return err
	}
	if warmLayer != "" {
		if _, err := h.imageChunks.StageWarm(ctx, warmLayer); err != nil {
			return err
		}
	}
	return nil
}

// enabledImage returns the image a session starts from: ref pulled (from this host's cache,
// staged from the chunk store when the image was enabled, else from its registry) with its
// warm layer, when it has one, as its top layer.
func (h *Host) enabledImage(ctx context.Context, ref, warmLayer string) (*images.Image, error) {
	if d, err := name.NewDigest(ref); err == nil {
		err := h.imageChunks.Stage(ctx, d.DigestStr(), func(int, int) {})
		switch {
		case err == nil, errors.Is(err, imagechunks.ErrNotChunked):
		case errors.Is(err, imagechunks.ErrIncomplete):
			// The registry serves the same bytes by digest: the chunks only spared the pull.
			h.log.Warn("image incomplete in the chunk store: pulling it from its registry", "image", ref, "err", err)
		default:
			return nil, fmt.Errorf("stage image %s from its chunks: %w", ref, err)
		}
	}
	img, err := h.images.Pull(ctx, ref)
	if err != nil {
		return nil, pullError(ref, err)
	}
	if warmLayer == "" {
		return img, nil
	}
	dir, err := h.imageChunks.StageWarm(ctx, warmLayer)
	if errors.Is(err, imagechunks.ErrIncomplete) {
		// A warm layer is kept nowhere else.
		return nil, apierr.FailedPrecondition("the warm layer of image %s is incomplete in the chunk store (%v): no session can start from it; RefreshImage with force_recapture captures it again for new sessions", ref, err)
	}
	if err != nil {
		return nil, err
	}
	return img.WithTopLayer(dir), nil
}

// sessionImage is the image the session's sandbox boots from. A new session starts from its
// image reference; a resumed one from what it ran before, the digest its host pinned
// (ImageDigest, which a tag may have moved away from). Either is staged from the chunk store
// when the image's chunks are there — as those of an image enabled, or disabled while the
// session lives, are — so a resume needs no registry, which may be gone, or whose credentials
// may be; only an image without chunks (a session of a plain reference) is pulled from its
// registry, and a resume that finds it in neither fails naming the image.
func (h *Host) sessionImage(ctx context.Context, rec *sessiondb.Record) (*images.Image, error) {
	if rec.Status == sessiondb.Creating {
		return h.enabledImage(ctx, rec.ImageURI, rec.WarmLayer)
	}
	ref := pinnedRef(rec.ImageURI, rec.ImageDigest)
	img, err := h.enabledImage(ctx, ref, rec.WarmLayer)
	var ce *connect.Error
	if errors.As(err, &ce) && ce.Code() == connect.CodeInvalidArgument { // pullError's: the registry did not serve it
		return nil, apierr.FailedPrecondition("session %s cannot resume: its image %s is not in the chunk store and its registry did not serve it (%s)",
			rec.ID, ref, ce.Message())
	}
	return img, err
}

// pinnedRef is uri by digest: uri itself when it names one (an enabled image's), else its
// repository at digest ("" digest: uri as it is).
func pinnedRef(uri, digest string) string {
	if digest == "" {
		return uri
	}
	if _, err := name.NewDigest(uri); err == nil {
		return uri
	}
	ref, err := name.ParseReference(uri)
	if err != nil {
		return uri
	}
	return ref.Context().Digest(digest).String()
}

// warmImage boots a sandbox of the image, runs the warm command in it, streams its output, and
// saves the sandbox's changes as the image's warm layer. A command that fails or times out
// saves nothing: the stage fails with its exit.
func (h *Host) warmImage(ctx context.Context, ref string, m *hostv1.PrepareImageRequest, send func(*hostv1.PrepareImageProgress) error) error {
	w := m.GetWarm()
	var v apierr.Violations
	if len(w.GetCommand()) == 0 {
		v.Add("warm.command", "is required")
	}
	if m.GetWarmKey() == "" || strings.ContainsAny(m.GetWarmKey(), "/") {
		v.Add("warm_key", "is required, without '/'")
	}
	if err := v.Err(); err != nil {
		return err
	}
	img, err := h.enabledImage(ctx, ref, "")
	if err != nil {
		return err
	}
	sbx, _, err := h.boot(ctx, img, nil)
	if err != nil {
		return fmt.Errorf("boot a sandbox of %s: %w", ref, err)
	}
	defer func() {
		if err := h.remove(context.WithoutCancel(ctx), sbx); err != nil {
			h.log.Error("remove warm sandbox", "sandbox", sbx.sb.ID(), "err", err)
		}
	}()
	timeout := maxWarmTimeout
	if t := w.GetTimeoutSecs(); t > 0 {
		timeout = min(timeout, time.Duration(t)*time.Second)
	}
	// The command reaches out only through the egress proxy, under the image's warm network
	// policy, as a session does under its profile's: a denied connection is refused at once.
	net, err := h.proxy.Serve(proxySession(warmSessionPrefix+m.GetWarmKey(), w.GetNetwork(), h.tokens), sbx.ns)
	if err != nil {
		return fmt.Errorf("serve the warm sandbox's network: %w", err)
	}
	defer net.Close()
	env := networkEnv()
	maps.Copy(env, sbx.user.env())
	maps.Copy(env, w.GetEnv())
	exit, err := sbx.sup.Exec(ctx, supervisor.ExecRequest{
		Argv: w.GetCommand(), Env: envEntries(env), Workdir: w.GetWorkdir(), Timeout: timeout,
	}, supervisor.Events{Output: func(o supervisor.Output) error {
		return send(&hostv1.PrepareImageProgress{Output: append([]byte(nil), o.Data...)})
	}})
	var se *supervisor.Error
	if errors.As(err, &se) && se.Code == supervisor.CodeSpawnFailed {
		return apierr.FailedPrecondition("warm command %q could not start: %s", w.GetCommand()[0], se.Message)
	}
	if err != nil {
		return fmt.Errorf("warm command: %w", err)
	}
	switch {
	case exit.TimedOut:
		return apierr.FailedPrecondition("warm command timed out after %s", timeout)
	case exit.ExitStatus != 0:
		return apierr.FailedPrecondition("warm command exited with status %d (signal %d)", exit.ExitStatus, exit.Signal)
	}
	// The upper dir holds exactly what the command changed; the sandbox is frozen (as a
	// checkpoint freezes it) so that nothing a leftover process does changes it while it is
	// chunked. Removing the sandbox afterwards ends it.
	if err := sbx.sb.Freeze(ctx); err != nil {
		return fmt.Errorf("freeze warm sandbox: %w", err)
	}
	layer, err := h.imageChunks.SaveWarm(ctx, m.GetWarmKey(), container.UpperDir(sbx.sb.Dir()))
	if err != nil {
		return err
	}
	return send(&hostv1.PrepareImageProgress{Done: true, WarmLayer: layer, ExitCode: int32(exit.ExitStatus)})
}

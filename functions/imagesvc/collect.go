package imagesvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"connectrpc.com/connect"
	"github.com/google/go-containerregistry/pkg/name"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// Collection is what one CollectImages did.
type Collection struct {
	// Deferred says why nothing was collected this time ("" when it ran).
	Deferred string
	// Kept counts the image digests still referenced (by images, jobs or sessions).
	Kept int
	// Hosts counts the hosts that pruned their caches; ImagesRemoved what they removed.
	Hosts, ImagesRemoved int
	// RecordsDeleted, ManifestsDeleted and ChunksDeleted are the chunk store's; SweepBusy says a
	// snapshot in progress held the chunk GC off (the next collection or host GC takes them).
	RecordsDeleted, ManifestsDeleted, ChunksDeleted int
	SweepBusy                                       bool
}

// CollectImages forgets the data of images nothing references any more. What references an
// image's data is counted where the data is: in the chunk store, its layer and warm manifests
// are kept while an enabled image, an enable job in progress (or failed, awaiting a retry) or a
// session not deleted names its digest, and a chunk while any kept manifest — those, or a
// session's snapshot — references it (the snapshot GC's mark and sweep, the one collector of
// chunks); on a host, a prestaged copy is kept while an enabled image or a job names it or a
// sandbox of the host runs on it. So a disabled image's prestaged copies go at once, its running
// sessions go on from their hosts' copies, a session of it evicted or lost resumes on any host
// from its chunks (its registry may be gone), and its chunks go with its last session. It computes the keep set from the records and
// has every live host prune its cache to it, the first also sweeping the chunk store.
// DisableImage queues one; the worker runs one every WorkerOptions.CollectEvery. A job pulling
// or chunking defers it (its layers are not in any record yet), and so does an image disabled
// less than disableGrace ago (sessions may still be starting from it).
func (s *Service) CollectImages(ctx context.Context) (*Collection, error) {
	if s.d.Hosts == nil {
		return nil, errors.New("collect images: no sandbox hosts here")
	}
	keep, deferred, err := s.keepSet(ctx)
	if err != nil || deferred != "" {
		return &Collection{Deferred: deferred}, err
	}
	out := &Collection{Kept: len(keep.KeepImages) + len(keep.GetSessionImages())}
	hosts, err := s.d.Hosts.Fleet().List(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect images: %w", err)
	}
	var errs []error
	for _, h := range hosts {
		if !s.d.Hosts.Fleet().Alive(h) {
			continue
		}
		req := &hostv1.CollectImagesRequest{KeepImages: keep.KeepImages, KeepWarmLayers: keep.KeepWarmLayers,
			SessionImages: keep.SessionImages, SessionWarmLayers: keep.SessionWarmLayers, Sweep: out.Hosts == 0}
		resp, err := s.d.Hosts.Client(h.Address).CollectImages(ctx, connect.NewRequest(req))
		if err != nil {
			errs = append(errs, fmt.Errorf("host %s: %w", h.ID, err))
			continue
		}
		r := resp.Msg
		out.Hosts++
		out.ImagesRemoved += int(r.GetImagesRemoved())
		out.RecordsDeleted += int(r.GetRecordsDeleted())
		out.ManifestsDeleted += int(r.GetManifestsDeleted())
		out.ChunksDeleted += int(r.GetChunksDeleted())
		out.SweepBusy = out.SweepBusy || r.GetSweepBusy()
	}
	s.log.Info("collect images", "kept", out.Kept, "hosts", out.Hosts, "images_removed", out.ImagesRemoved,
		"records_deleted", out.RecordsDeleted, "manifests_deleted", out.ManifestsDeleted, "chunks_deleted", out.ChunksDeleted, "errors", len(errs))
	if out.Hosts == 0 && len(errs) > 0 {
		return out, fmt.Errorf("collect images: %w", errors.Join(errs...))
	}
	// A host that did not answer keeps its copies until the next collection.
	return out, nil
}

// disableGrace is how long after a disable a collection waits: another API instance may start
// sessions from the image for ResolveCacheTTL, and a session's record, which keeps the image's
// chunks, is written a moment after its image resolved.
const disableGrace = 2 * ResolveCacheTTL

// keepSet is what references images now, or why collecting must wait.
func (s *Service) keepSet(ctx context.Context) (*hostv1.CollectImagesRequest, string, error) {
	unfinished, err := s.rec.unfinished(ctx, 100)
	if err != nil {
		return nil, "", err
	}
	for _, j := range unfinished {
		if j.State == Queued || j.State == Resolving || j.State == Pulling || j.State == Chunking {
			return nil, fmt.Sprintf("enable job %s is %s", j.ID, j.State), nil
		}
	}
	images, err := s.rec.listImages(ctx)
	if err != nil {
		return nil, "", err
	}
	now := s.d.Clock.Now()
	for _, img := range images {
		if img.Disabled && img.Digest != "" && now.Sub(img.UpdatedAt) < disableGrace {
			return nil, fmt.Sprintf("image %s was disabled less than %s ago: sessions may still be starting from it", img.URI, disableGrace), nil
		}
	}
	digests, warm := map[string]bool{}, map[string]bool{}
	add := func(digest string, layers ...string) {
		if digest != "" {
			digests[digest] = true
		}
		for _, l := range layers {
			if l != "" {
				warm[l] = true
			}
		}
	}
	var current []string
	for _, img := range images {
		if !img.Disabled {
			add(img.Digest, img.WarmLayer)
		}
		if img.JobID != "" {
			current = append(current, img.JobID)
		}
	}
	jobs, err := s.rec.jobsByID(ctx, current)
	if err != nil {
		return nil, "", err
	}
	// An image's current job in progress, or failed and awaiting a retry, keeps what it made.
	for _, j := range jobs {
		if j.State != Ready && j.State != Superseded {
			add(j.Digest, j.WarmLayer, j.KeepWarmLayer)
		}
	}
	for _, j := range unfinished {
		add(j.Digest, j.WarmLayer, j.KeepWarmLayer)
	}
	// Sessions not deleted keep their images' chunks (a resume stages them on any host), but
	// not the hosts' copies: a host keeps those its own sandboxes run on by itself.
	uses, err := sessiondb.NewStore(s.d.DB, s.d.Clock.Now).ImagesInUse(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("collect images: %w", err)
	}
	sessionDigests, sessionWarm := map[string]bool{}, map[string]bool{}
	for _, u := range uses {
		for _, d := range []string{u.Digest, refDigest(u.URI)} {
			if d != "" && !digests[d] {
				sessionDigests[d] = true
			}
		}
		if u.WarmLayer != "" && !warm[u.WarmLayer] {
			sessionWarm[u.WarmLayer] = true
		}
	}
	return &hostv1.CollectImagesRequest{
		KeepImages: sortedKeys(digests), KeepWarmLayers: sortedKeys(warm),
		SessionImages: sortedKeys(sessionDigests), SessionWarmLayers: sortedKeys(sessionWarm),
	}, "", nil
}

// refDigest is the digest a reference by digest (repository@sha256:...) names, "" for a tag.
func refDigest(ref string) string {
	d, err := name.NewDigest(ref)
	if err != nil {
		return ""
	}
	return d.DigestStr()
}

func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}

// collectMessage is the jobs topic's message that asks a worker for a collection.
type collectMessage struct {
	Collect bool `json:"collect"`
}

// EnqueueCollect asks a worker for a CollectImages.
func (q PubSubQueue) EnqueueCollect(ctx context.Context) error {
	data, _ := json.Marshal(collectMessage{Collect: true})
	if _, err := q.PubSub.Publish(ctx, pubsub.TopicImageJobs, data, map[string]string{"collect": "true"}); err != nil {
		return fmt.Errorf("queue an image collection: %w", err)
	}
	return nil
}

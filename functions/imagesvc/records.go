package imagesvc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Firestore collections of the service.
const (
	imagesCollection = "enabled_images"
	jobsCollection   = "image_enable_jobs"
)

// Image is an enabled image: what sessions start from. Digest and WarmLayer change only when a
// job reaches ready, so a session never starts from a half-enabled image.
type Image struct {
	ID  string `firestore:"id"`
	URI string `firestore:"uri"`
	// Repo is the repository of URI, which the digest is appended to for hosts.
	Repo string `firestore:"repo"`
	// Digest is the linux/amd64 image manifest digest of the last ready job ("" before one).
	Digest    string `firestore:"digest"`
	WarmLayer string `firestore:"warm_layer"`
	// Config is the ImageConfig in effect, as protojson; WarmConfig the warm part the warm
	// layer was captured with.
	Config     string `firestore:"config"`
	WarmConfig string `firestore:"warm_config"`
	Disabled   bool   `firestore:"disabled"`
	// JobID is the image's latest job.
	JobID       string    `firestore:"job_id"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
	RefreshedAt time.Time `firestore:"refreshed_at"`
}

// Ref is the digest reference hosts pull: repository@digest.
func (i *Image) Ref() string { return i.Repo + "@" + i.Digest }

// Usable reports whether sessions may start from the image.
func (i *Image) Usable() bool { return !i.Disabled && i.Digest != "" }

// Job is an enable job.
type Job struct {
	ID      string `firestore:"id"`
	ImageID string `firestore:"image_id"`
	URI     string `firestore:"uri"`
	Repo    string `firestore:"repo"`
	// Digest is what Resolving found ("" before).
	Digest string `firestore:"digest"`
	State  State  `firestore:"state"`
	// FailedStage is the stage a failed job failed in, where a retry resumes.
	FailedStage State  `firestore:"failed_stage"`
	Error       string `firestore:"error"`
	// Config is the ImageConfig this job enables, as protojson.
	Config string `firestore:"config"`
	// Warm says the job captures a warm layer; KeepWarmLayer is the image's current one, kept
	// when the job does not recapture.
	Warm          bool   `firestore:"warm"`
	KeepWarmLayer string `firestore:"keep_warm_layer"`
	ChunksTotal   int    `firestore:"chunks_total"`
	ChunksDone    int    `firestore:"chunks_done"`
	BytesTotal    int64  `firestore:"bytes_total"`
	BytesUploaded int64  `firestore:"bytes_uploaded"`
	Attempts      int    `firestore:"attempts"`
	// Actor is the user who started the job or last retried it: the warm command's secrets are
	// resolved for them.
	Actor string `firestore:"actor"`
	// HostID is the host that pulls, chunks and warms (materialize_host_id).
	HostID        string   `firestore:"host_id"`
	PrestageHosts []string `firestore:"prestage_hosts"`
	WarmLayer     string   `firestore:"warm_layer"`
	// WarmStage is the warm stage's step (booting, running, capturing), since WarmStageAt.
	WarmStage   string    `firestore:"warm_stage"`
	WarmStageAt time.Time `firestore:"warm_stage_at"`
	OutputTail  string    `firestore:"output_tail"`
	LeaseOwner  string    `firestore:"lease_owner"`
	LeaseUntil  time.Time `firestore:"lease_until"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
}

// records reads and writes images and jobs.
type records struct {
	db  *firestore.Client
	now func() time.Time
	// resolved is ResolveImage's short-lived cache; every write of an image record here
	// forgets the image in it.
	resolved resolveCache
}

func (r *records) images() *firestore.CollectionRef { return r.db.Collection(imagesCollection) }
func (r *records) jobs() *firestore.CollectionRef   { return r.db.Collection(jobsCollection) }

// errNoImage is an image_uri or id no record has.
var errNoImage = errors.New("no such image")

func (r *records) image(ctx context.Context, id string) (*Image, error) {
	img, err := store.Read[Image](ctx, nil, r.images().Doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoImage
	}
	return img, err
}

// imageByURI finds the image enabled under uri: its record id derives from the uri, so two
// enables of one uri meet on one record.
func (r *records) imageByURI(ctx context.Context, uri string) (*Image, error) {
	return r.image(ctx, imageID(uri))
}

// imageID is the record id of the image enabled under uri.
func imageID(uri string) string {
	sum := sha256.Sum256([]byte(uri))
	return "img_" + hex.EncodeToString(sum[:12])
}

func (r *records) listImages(ctx context.Context) ([]Image, error) {
	return store.All[Image](r.images().OrderBy("created_at", firestore.Asc).Documents(ctx))
}

func (r *records) job(ctx context.Context, id string) (*Job, error) {
	return store.Read[Job](ctx, nil, r.jobs().Doc(id))
}

// jobsByID reads the jobs of ids that exist.
func (r *records) jobsByID(ctx context.Context, ids []string) ([]Job, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = r.jobs().Doc(id)
	}
	snaps, err := r.db.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read enable jobs: %w", err)
	}
	var out []Job
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var j Job
		if err := snap.DataTo(&j); err != nil {
			return nil, fmt.Errorf("read enable job %s: %w", snap.Ref.ID, err)
		}
		out = append(out, j)
	}
	return out, nil
}

func (r *records) listJobs(ctx context.Context, limit int) ([]Job, error) {
	return store.All[Job](r.jobs().OrderBy("created_at", firestore.Desc).Limit(limit).Documents(ctx))
}

// unfinished lists jobs not ended, oldest first: the sweeper's candidates.
func (r *records) unfinished(ctx context.Context, limit int) ([]Job, error) {
	return store.All[Job](r.jobs().Where("state", "in", []State{Queued, Resolving, Pulling, Chunking, Prestaging, Warming}).Limit(limit).Documents(ctx))
}

// startJob writes a new job for img (created or updated by change) in one transaction, and
// marks the image's previous job superseded when it had not ended.
func (r *records) startJob(ctx context.Context, imageID string, change func(img *Image, exists bool, prev *Job) (*Job, error)) (*Job, error) {
	var out *Job
	err := r.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := r.images().Doc(imageID)
		img, err := store.Read[Image](ctx, tx, ref)
		exists := err == nil
		if errors.Is(err, store.ErrNotFound) {
			img, err = &Image{ID: imageID}, nil
		}
		if err != nil {
			return err
		}
		var prev *Job
		if img.JobID != "" {
			if prev, err = store.Read[Job](ctx, tx, r.jobs().Doc(img.JobID)); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		job, err := change(img, exists, prev)
		if err != nil || job == nil {
			out = nil
			return err
		}
		now := r.now()
		job.CreatedAt, job.UpdatedAt = now, now
		img.JobID, img.UpdatedAt = job.ID, now
		if !exists {
			img.CreatedAt = now
		}
		if prev != nil && !prev.State.Ended() {
			prev.State, prev.Error, prev.UpdatedAt = Superseded, "superseded by job "+job.ID, now
			if err := tx.Set(r.jobs().Doc(prev.ID), prev); err != nil {
				return err
			}
		}
		if err := tx.Set(ref, img); err != nil {
			return err
		}
		out = job
		return tx.Create(r.jobs().Doc(job.ID), job)
	})
	r.resolved.forget(imageID)
	return out, err
}

// updateJob changes a job in a transaction; change may refuse with an error. A state change
// the table does not allow is refused.
func (r *records) updateJob(ctx context.Context, id string, change func(*Job) error) (*Job, error) {
	var out *Job
	err := r.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ref := r.jobs().Doc(id)
		j, err := store.Read[Job](ctx, tx, ref)
		if err != nil {
			return err
		}
		before := j.State
		if err := change(j); err != nil {
			return err
		}
		if j.State != before && !Table.CanMove(before, j.State) {
			return fmt.Errorf("enable job %s cannot go from %s to %s", id, before, j.State)
		}
		j.UpdatedAt = r.now()
		out = j
		return tx.Set(ref, j)
	})
	return out, err
}

// finish applies the last stage's result to a job, moves it to ready and points its image at
// the job's result, in one transaction, so the image is never half enabled: unless a newer job
// superseded it.
func (r *records) finish(ctx context.Context, jobID, owner string, result func(*Job)) (*Job, error) {
	var out *Job
	err := r.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		j, err := store.Read[Job](ctx, tx, r.jobs().Doc(jobID))
		if err != nil {
			return err
		}
		if j.LeaseOwner != owner {
			return errLeaseLost
		}
		img, err := store.Read[Image](ctx, tx, r.images().Doc(j.ImageID))
		if err != nil {
			return err
		}
		if img.JobID != j.ID {
			return errLeaseLost
		}
		result(j)
		now := r.now()
		j.State, j.Error, j.LeaseOwner, j.UpdatedAt = Ready, "", "", now
		img.Digest, img.Config, img.UpdatedAt, img.RefreshedAt = j.Digest, j.Config, now, now
		img.WarmLayer = j.WarmLayer
		if !j.Warm {
			img.WarmLayer = j.KeepWarmLayer
		}
		img.WarmConfig = warmPart(j.Config)
		img.Disabled = false
		out = j
		if err := tx.Set(r.images().Doc(img.ID), img); err != nil {
			return err
		}
		return tx.Set(r.jobs().Doc(j.ID), j)
	})
	if out != nil {
		r.resolved.forget(out.ImageID)
	}
	return out, err
}

// collectionsDoc keeps when the deployment last collected images.
const collectionsDoc = "image_collections/last"

// collectDue reports whether every has passed since the last collection, and if so records now
// as the last one, in one transaction: of the instances that ask at once, one is told yes.
func (r *records) collectDue(ctx context.Context, now time.Time, every time.Duration) (bool, error) {
	due := false
	ref := r.db.Doc(collectionsDoc)
	err := r.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		due = false
		snap, err := tx.Get(ref)
		if err != nil && !store.IsNotFound(err) {
			return err
		}
		if err == nil {
			if at, ok := snap.Data()["at"].(time.Time); ok && now.Sub(at) < every {
				return nil
			}
		}
		due = true
		return tx.Set(ref, map[string]any{"at": now})
	})
	if err != nil {
		return false, fmt.Errorf("is an image collection due: %w", err)
	}
	return due, nil
}

// setImage changes an image record in a transaction.
func (r *records) setImage(ctx context.Context, id string, change func(*Image) error) (*Image, error) {
	var out *Image
	err := r.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		img, err := store.Read[Image](ctx, tx, r.images().Doc(id))
		if errors.Is(err, store.ErrNotFound) {
			return errNoImage
		}
		if err != nil {
			return err
		}
		if err := change(img); err != nil {
			return err
		}
		img.UpdatedAt = r.now()
		out = img
		return tx.Set(r.images().Doc(id), img)
	})
	r.resolved.forget(id)
	return out, err
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

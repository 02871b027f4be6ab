// Package sessiondb owns the session records in Firestore (`sessions/{id}`): their fields, the
// session state machine and the checked moves between states. The API functions create
// records and read them; the host that runs a session moves it through its states. Both go
// through this package so that no move the table forbids is ever written.
package sessiondb

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/platform/telemetry"
	"github.com/hangar-dev/hangar/records/taskstatus"
)

// Collection is the Firestore collection of session records.
const Collection = "sessions"

// Record is a session as Firestore stores it.
type Record struct {
	// ID is the record's document id, the id the host and every other service know the
	// session by. It is minted, or derived from the owner and a key with the deployment's
	// secret, never chosen by a user: see RequestedID.
	ID    string `firestore:"id"`
	Owner string `firestore:"owner_user_id"`
	// RequestedID is the requested_session_id the owner created the session with ("" for none):
	// the id the owner names and sees it by. It is the owner's alone; another user's session
	// may have the same one.
	RequestedID string `firestore:"requested_id"`
	Status      Status `firestore:"status"`
	// Live is Status.Live(), written with every state: an owner's live sessions are counted on
	// every create, and a query of equalities counts them at the cost of an index lookup where
	// an "in" of the five live states is five (and the emulator scans the collection for each).
	Live bool `firestore:"live"`
	// StatusReason says why the last move happened (e.g. "idle", "host lost", an error).
	StatusReason string `firestore:"status_reason"`
	// HostID is the host the session's sandbox is on, or was on last ("" before placement).
	HostID    string `firestore:"host_id"`
	SandboxID string `firestore:"sandbox_id"`
	ImageURI  string `firestore:"image_uri"`
	// ImageDigest pins the image the session was created from, so a resume on another host
	// gets the same bytes even if the tag moved.
	ImageDigest string `firestore:"image_digest"`
	// WarmLayer is the warm layer of the enabled image the session starts from, stacked over
	// the image's layers ("" for none); a resume on another host stages the same one.
	WarmLayer string `firestore:"warm_layer,omitempty"`
	// ImageWorkdir and ImageResources are the enabled image's config: they replace the image's
	// own working directory and suggested resources wherever a resume boots the session.
	ImageWorkdir   string          `firestore:"image_workdir,omitempty"`
	ImageResources *ImageResources `firestore:"image_resources,omitempty"`
	Mode           string          `firestore:"mode"`
	// SealedEnv is the sandbox's environment (secrets included), encrypted by the deployment's
	// key, so a resume on any host restores it without anyone reading it from the database.
	SealedEnv []byte `firestore:"sealed_env"`
	// SealedCredential is the session's OAuth credential bundle (CreateSession's
	// oauth_credential), sealed the same way, bound to CredentialOwner; only the host opens it,
	// to hand it to the harness plugin's plans. Nil without one.
	SealedCredential []byte `firestore:"sealed_credential"`
	// Broker is how the session reaches its OAuth credential's current bundle through
	// OAuthCredentialService's broker methods (nil without an OAuth credential).
	Broker *Broker `firestore:"broker,omitempty"`
	// SealedNetwork is the session's egress (host.v1.SandboxNetwork, secret values included),
	// sealed to NetworkOwner; empty lets nothing out.
	SealedNetwork []byte `firestore:"sealed_network,omitempty"`
	// LatestSnapshotID is the checkpoint a resume starts from ("" when none was taken).
	LatestSnapshotID string `firestore:"latest_snapshot_id"`
	// Harness runs the prompts of an agent session ("" for a plain sandbox session), in
	// HarnessMode unless a prompt names another; HarnessResume is what its last turn reported
	// for continuing the conversation.
	Harness       string `firestore:"harness"`
	HarnessMode   string `firestore:"harness_mode"`
	HarnessResume string `firestore:"harness_resume"`
	// Usage is what the harness's turns cost so far, the sum of their usage events (AddUsage).
	Usage Usage `firestore:"usage"`
	// AgentWorkdir is where the harness runs when its plan names no directory: the first repo
	// cloned at the session's start ("" for the image's working directory). Set at creation.
	AgentWorkdir string `firestore:"agent_workdir,omitempty"`
	// AgentState is what an agent session's harness is doing: AgentWorking while a prompt runs,
	// AgentWaitingForTool while its turn waits on a client tool call, AgentWaiting once a turn
	// ended and its queue is empty, AgentFailed when a turn could not run ("" before its first
	// prompt).
	AgentState string `firestore:"agent_state"`
	// AgentReason says why the agent is in AgentState: for AgentFailed, the cause and what to
	// do ("" otherwise).
	AgentReason string `firestore:"agent_reason,omitempty"`
	// Model and Effort are what the harness runs with ("" for its defaults); ModelRouter the
	// router it reaches the model through.
	Model          string    `firestore:"model"`
	Effort         string    `firestore:"effort"`
	ModelRouter    string    `firestore:"model_router"`
	SuggestedTitle string    `firestore:"suggested_title"`
	CreatedAt      time.Time `firestore:"created_at"`
	UpdatedAt      time.Time `firestore:"updated_at"`
	LastActiveAt   time.Time `firestore:"last_active_at"`
	LastEventAt    time.Time `firestore:"last_event_at"`

	// Apps are the session's apps (CreateSession's apps, a task's profile's), served by the
	// API's reverse proxy.
	Apps []App `firestore:"apps"`
}

// ErrNotFound is a session id with no record.
var ErrNotFound = store.ErrNotFound

// MoveError is a move the state machine does not allow.
type MoveError struct {
	ID       string
	From, To Status
}

func (e *MoveError) Error() string {
	return fmt.Sprintf("session %s is %s: it cannot become %s", e.ID, e.From, e.To)
}

// Store reads and writes session records. Every move of a session and of its agent also moves
// the session's task (records/taskstatus) as it is written, so a task's stored status is never
// behind its session's.
type Store struct {
	db    *firestore.Client
	now   func() time.Time
	tasks *taskstatus.Store
}

// NewStore returns a store over db that stamps records with now.
func NewStore(db *firestore.Client, now func() time.Time) *Store {
	return &Store{db: db, now: now, tasks: taskstatus.NewStore(db, now)}
}

func (s *Store) doc(id string) *firestore.DocumentRef { return s.db.Collection(Collection).Doc(id) }

// ErrLimit is a create refused because the owner has as many live sessions as allowed.
var ErrLimit = errors.New("too many live sessions")

// Create stores a new record; an existing id is an error that IsAlreadyExists recognises,
// whatever the limit. With maxLive > 0 it is refused with ErrLimit when the owner already has
// maxLive live sessions, counted in the same transaction, so that concurrent creates at the
// limit cannot all pass.
func (s *Store) Create(ctx context.Context, r *Record, maxLive int) (version time.Time, err error) {
	now := s.now()
	r.CreatedAt, r.UpdatedAt, r.LastActiveAt = now, now, now
	r.Live = r.Status.Live()
	// The transaction reads only the count: the create itself fails on an existing id, and the
	// id is read only when the count refuses. Every round trip here is one a new session waits
	// for (a read of the id first was one more on every create).
	var commit firestore.CommitResponse
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if maxLive > 0 {
			n, err := store.Count(ctx, s.live(r.Owner), tx)
			if err != nil {
				return fmt.Errorf("count live sessions: %w", err)
			}
			if n >= int64(maxLive) {
				return ErrLimit
			}
		}
		return tx.Create(s.doc(r.ID), r)
	}, firestore.WithCommitResponseTo(&commit))
	if errors.Is(err, ErrLimit) {
		// A repeated id is the existing session whatever the limit (a retry counts itself).
		if _, gerr := s.doc(r.ID).Get(ctx); gerr == nil {
			err = status.Errorf(codes.AlreadyExists, "session %s exists", r.ID)
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("create session %s: %w", r.ID, err)
	}
	telemetry.SessionCreated(ctx, string(r.Status))
	// A document written by a commit has the commit's time as its update time.
	return commit.CommitTime(), nil
}

// CountLive counts an owner's live sessions: those holding or getting a sandbox.
func (s *Store) CountLive(ctx context.Context, owner string) (int64, error) {
	n, err := store.Count(ctx, s.live(owner), nil)
	if err != nil {
		return 0, fmt.Errorf("count live sessions: %w", err)
	}
	return n, nil
}

func (s *Store) live(owner string) firestore.Query {
	return s.db.Collection(Collection).Where("owner_user_id", "==", owner).Where("live", "==", true)
}

// IsAlreadyExists reports whether err is Create's answer for an id already taken.
func IsAlreadyExists(err error) bool { return store.IsAlreadyExists(err) }

// Get reads one record; a missing one is ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*Record, error) {
	return store.Read[Record](ctx, nil, s.doc(id))
}

// Move changes a session's state after checking the table allows it, and lets mutate change
// the session's placement (HostID, SandboxID, ImageDigest) in the same write; mutate may refuse
// the move by returning an error, and changing any other field is refused. It returns the state
// the session left and the record as written. A move is a swap: when another write lands in
// between, it is re-read and re-checked.
func (s *Store) Move(ctx context.Context, id string, to Status, reason string, mutate func(*Record) error) (Status, *Record, error) {
	return s.MoveAt(ctx, &Record{ID: id}, time.Time{}, to, reason, mutate)
}

// MoveAt is Move starting from held, the record as it was written at version, without reading
// it: the write is conditional on the record still being at version, and one that is not is
// read and checked as Move does. held needs only the fields that mutate checks; the record
// returned is held as changed when it was not read. A zero version reads first.
func (s *Store) MoveAt(ctx context.Context, held *Record, version time.Time, to Status, reason string, mutate func(*Record) error) (Status, *Record, error) {
	id := held.ID
	var from Status
	r, _, err := store.Swap(ctx, s.doc(id), held, version, func(r *Record) ([]firestore.Update, error) {
		from = r.Status
		if from != to && !CanMove(from, to) {
			return nil, &MoveError{ID: id, From: from, To: to}
		}
		if mutate != nil {
			before := *r
			if err := mutate(r); err != nil {
				return nil, err
			}
			if !onlyPlacementChanged(before, *r) {
				return nil, errors.New("a move may change only host_id, sandbox_id and image_digest")
			}
		}
		r.Status, r.Live, r.StatusReason, r.UpdatedAt = to, to.Live(), reason, s.now()
		return []firestore.Update{
			{Path: "status", Value: r.Status},
			{Path: "live", Value: r.Live},
			{Path: "status_reason", Value: r.StatusReason},
			{Path: "updated_at", Value: r.UpdatedAt},
			{Path: "host_id", Value: r.HostID},
			{Path: "sandbox_id", Value: r.SandboxID},
			{Path: "image_digest", Value: r.ImageDigest},
		}, nil
	})
	if err != nil {
		return from, nil, fmt.Errorf("move session %s to %s: %w", id, to, err)
	}
	telemetry.SessionMoved(ctx, string(from), string(to))
	if task, ok := taskOfSession(to); ok {
		// The session moved: an error here is its task lagging, which a retried move (staying
		// put is allowed) catches up.
		if err := s.tasks.FollowSession(ctx, id, task, reason); err != nil {
			return from, r, err
		}
	}
	return from, r, nil
}

// onlyPlacementChanged reports whether b differs from a in the placement fields at most.
func onlyPlacementChanged(a, b Record) bool {
	a.HostID, a.SandboxID, a.ImageDigest = b.HostID, b.SandboxID, b.ImageDigest
	return reflect.DeepEqual(a, b)
}

// Touch records activity without a transaction: it is a hint for idle detection and display,
// and a lost race only moves a timestamp.
func (s *Store) Touch(ctx context.Context, id string, at time.Time) error {
	_, err := s.doc(id).Update(ctx, []firestore.Update{{Path: "last_active_at", Value: at}})
	if err != nil {
		return fmt.Errorf("touch session %s: %w", id, err)
	}
	return nil
}

// ListByOwner returns an owner's sessions (every owner's when owner is ""), newest first,
// without deleted ones, at most limit.
func (s *Store) ListByOwner(ctx context.Context, owner string, limit int) ([]*Record, error) {
	q := s.db.Collection(Collection).Query
	if owner != "" {
		q = q.Where("owner_user_id", "==", owner)
	}
	// An "in" filter rather than "!= deleted" so that created_at can lead the ordering.
	q = q.Where("status", "in", notDeleted()).OrderBy("created_at", firestore.Desc)
	return s.list(ctx, q.Limit(limit))
}

// notDeleted lists every state but Deleted, for an "in" filter.
func notDeleted() []string {
	var out []string
	for _, st := range Statuses() {
		if st != Deleted {
			out = append(out, string(st))
		}
	}
	return out
}

// ImageUse is what one session's sandbox runs on, or a resume of it stages: its image (the
// reference it was created with and the digest its host pinned) and warm layer.
type ImageUse struct {
	URI, Digest, WarmLayer string
}

// ImagesInUse returns the images of every session not deleted: a live session runs on its
// image, and any other may be resumed, on any host, from it. Only those fields are read.
func (s *Store) ImagesInUse(ctx context.Context) ([]ImageUse, error) {
	q := s.db.Collection(Collection).Where("status", "in", notDeleted()).Select("image_uri", "image_digest", "warm_layer")
	recs, err := s.list(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]ImageUse, len(recs))
	for i, r := range recs {
		out[i] = ImageUse{URI: r.ImageURI, Digest: r.ImageDigest, WarmLayer: r.WarmLayer}
	}
	return out, nil
}

// ListByHost returns the sessions placed on a host that are in one of the given states.
func (s *Store) ListByHost(ctx context.Context, hostID string, in ...Status) ([]*Record, error) {
	states := make([]string, len(in))
	for i, st := range in {
		states[i] = string(st)
	}
	return s.list(ctx, s.db.Collection(Collection).Where("host_id", "==", hostID).Where("status", "in", states))
}

func (s *Store) list(ctx context.Context, q firestore.Query) ([]*Record, error) {
	recs, err := store.All[Record](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]*Record, len(recs))
	for i := range recs {
		out[i] = &recs[i]
	}
	return out, nil
}

// Checkpoint is one snapshot of a session, as `sessions/{id}/checkpoints/{snapshot_id}`: the host
// writes it after the snapshot's manifest is stored, so a checkpoint listed is one that restores.
type Checkpoint struct {
	SnapshotID string    `firestore:"snapshot_id"`
	Version    int64     `firestore:"version"`
	SizeBytes  int64     `firestore:"size_bytes"`
	CreatedAt  time.Time `firestore:"created_at"`
	// EventsCursor is the idx of the last event written before the snapshot.
	EventsCursor int64 `firestore:"events_cursor"`
	// Chunks is how many content chunks the snapshot's files are made of.
	Chunks int    `firestore:"chunks"`
	HostID string `firestore:"host_id"`
}

// Artifact is a file a session published, as `sessions/{id}/artifacts/{artifact_id}`; its bytes
// are in the blob store under BlobKey.
type Artifact struct {
	ID        string    `firestore:"id"`
	Path      string    `firestore:"path"`
	FileName  string    `firestore:"file_name"`
	MediaType string    `firestore:"media_type"`
	SizeBytes int64     `firestore:"size_bytes"`
	SHA256    string    `firestore:"sha256"`
	Caption   string    `firestore:"caption"`
	BlobKey   string    `firestore:"blob_key"`
	CreatedAt time.Time `firestore:"created_at"`
}

// AddCheckpoint records a snapshot of session id and makes it the one a resume starts from.
func (s *Store) AddCheckpoint(ctx context.Context, id string, c Checkpoint) error {
	batch := store.Batch(s.db)
	batch.Set(s.doc(id).Collection("checkpoints").Doc(c.SnapshotID), c)
	batch.Update(s.doc(id), []firestore.Update{{Path: "latest_snapshot_id", Value: c.SnapshotID}})
	if _, err := batch.Commit(ctx); err != nil {
		return fmt.Errorf("record checkpoint %s of session %s: %w", c.SnapshotID, id, err)
	}
	return nil
}

// Checkpoints lists a session's checkpoints, newest first, at most limit.
func (s *Store) Checkpoints(ctx context.Context, id string, limit int) ([]Checkpoint, error) {
	q := s.doc(id).Collection("checkpoints").OrderBy("version", firestore.Desc).Limit(limit)
	out, err := store.All[Checkpoint](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list checkpoints of session %s: %w", id, err)
	}
	return out, nil
}

// AddArtifact records a published artifact of session id.
func (s *Store) AddArtifact(ctx context.Context, id string, a Artifact) error {
	if _, err := s.doc(id).Collection("artifacts").Doc(a.ID).Create(ctx, a); err != nil {
		return fmt.Errorf("record artifact %s of session %s: %w", a.ID, id, err)
	}
	return nil
}

// Artifact reads one artifact record; a missing one is ErrNotFound.
func (s *Store) Artifact(ctx context.Context, id, artifactID string) (*Artifact, error) {
	return store.Read[Artifact](ctx, nil, s.doc(id).Collection("artifacts").Doc(artifactID))
}

// EnvOwner is what a session's sealed environment is bound to: sealed for one session, it opens
// for no other.
func EnvOwner(id string) string { return Collection + "/" + id }

// Broker binds a session to the OAuth credential it was created with: the SHA-256 of the
// broker token its sandbox holds (never the token) and the credential's subject and provider.
type Broker struct {
	TokenHash   []byte `firestore:"token_hash"`
	SubjectKind string `firestore:"subject_kind"`
	SubjectID   string `firestore:"subject_id"`
	Provider    string `firestore:"provider"`
	// Proxied says the sandbox holds the credential's access token only as a placeholder the
	// egress proxy swaps: the broker answers the session's own placeholder bundle, and the
	// sandbox cannot save a bundle (Hangar refreshes the credential).
	Proxied bool `firestore:"proxied,omitempty"`
}

// NetworkOwner is what a session's sealed egress is bound to.
func NetworkOwner(id string) string { return Collection + "/" + id + "/network" }

// CredentialOwner is what a session's sealed OAuth credential is bound to.
func CredentialOwner(id string) string { return Collection + "/" + id + "/oauth_credential" }

// ArtifactPrefix is where a session's artifacts live in the blob store; ArtifactKey is one of
// them.
func ArtifactPrefix(session string) string { return "artifacts/" + session + "/" }

// ArtifactKey is where one artifact's bytes live in the blob store.
func ArtifactKey(session, artifact string) string { return ArtifactPrefix(session) + artifact }

// Agent states of an agent session (Record.AgentState). The host moves between them freely:
// working when a turn starts or a client tool result is delivered, waiting_for_tool when the
// turn reports a client tool call, waiting when a turn ended and the queue is empty, failed
// when a turn could not run (its harness did not launch) and the queue was failed with it.
const (
	AgentWorking        = "working"
	AgentWaitingForTool = "waiting_for_tool"
	AgentWaiting        = "waiting"
	AgentFailed         = "failed"
)

// SetAgentState records what the session's harness is doing, and why (reason, "" for nothing
// to say), and moves the session's task after it (taskstatus.OfAgent); only the session's host
// writes it.
func (s *Store) SetAgentState(ctx context.Context, id, state, reason string) error {
	if _, err := s.doc(id).Update(ctx, []firestore.Update{{Path: "agent_state", Value: state}, {Path: "agent_reason", Value: reason}}); err != nil {
		return fmt.Errorf("record agent state of session %s: %w", id, err)
	}
	if task, ok := taskOfAgent(state); ok {
		return s.tasks.FollowSession(ctx, id, task, reason)
	}
	return nil
}

// GetMany reads the sessions with the given ids in one round trip; missing ones are left out.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*Record, error) {
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = s.doc(id)
	}
	snaps, err := s.db.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	out := make(map[string]*Record, len(snaps))
	for _, snap := range snaps {
		if !snap.Exists() {
			continue
		}
		var r Record
		if err := snap.DataTo(&r); err != nil {
			return nil, fmt.Errorf("decode session %s: %w", snap.Ref.ID, err)
		}
		out[r.ID] = &r
	}
	return out, nil
}

// ImageResources are an enabled image's suggested resources; zero leaves the image's label or
// the host's default.
type ImageResources struct {
	MemoryMiB uint32 `firestore:"memory_mib,omitempty"`
	VCPUs     uint32 `firestore:"vcpus,omitempty"`
	DiskGiB   uint32 `firestore:"disk_gib,omitempty"`
}

// App is a server in the sandbox, reachable from outside through the API's reverse proxy.
type App struct {
	Name string `firestore:"name"`
	Port uint32 `firestore:"port"`
}

package credentials

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/states"
	"github.com/hangar-dev/hangar/platform/store"
)

// FlowCollection holds one document per sign-in flow.
const FlowCollection = "oauth_flows"

// flowsExpire is when a flow may go: expire_at, FlowKept past its expires_at.
var flowsExpire = store.Expires(FlowCollection, "expire_at")

// FlowPrefix starts every flow id; a redirect flow's id is also its OAuth state.
const FlowPrefix = "oaf"

// Kinds of flow.
const (
	FlowDevice   = "device"   // RFC 8628 device authorization grant
	FlowRedirect = "redirect" // authorization code grant (RFC 6749 4.1), with PKCE when asked
)

// Flow statuses, and the error_code each terminal one carries.
const (
	// FlowPending: waiting for the user (device: polled; redirect: for the callback).
	FlowPending = "pending"
	// FlowCompleted: the credential is stored. No error_code.
	FlowCompleted = "completed"
	// FlowDenied: the user declined; error_code access_denied.
	FlowDenied = "denied"
	// FlowExpired: the code expired before the user finished; error_code expired_token.
	FlowExpired = "expired"
	// FlowCancelled: CancelFlow; error_code cancelled.
	FlowCancelled = "cancelled"
	// FlowFailed: the provider refused the exchange (error_code is its OAuth error code, e.g.
	// invalid_grant for a replayed code) or answered something that is not a token
	// (error_code invalid_token_response).
	FlowFailed = "failed"
)

// FlowStates is the flow state table: every flow starts pending and ends in one move.
var FlowStates = states.Table[string]{
	{From: FlowPending, To: []string{FlowCompleted, FlowDenied, FlowExpired, FlowCancelled, FlowFailed}},
	{From: FlowCompleted},
	{From: FlowDenied},
	{From: FlowExpired},
	{From: FlowCancelled},
	{From: FlowFailed},
}

// Flow is a sign-in in progress, or how it ended.
type Flow struct {
	ID          string    `firestore:"id"`
	Kind        string    `firestore:"kind"`
	SubjectKind string    `firestore:"subject_kind"`
	SubjectID   string    `firestore:"subject_id"`
	Provider    string    `firestore:"provider"`
	Status      string    `firestore:"status"`
	ErrorCode   string    `firestore:"error_code"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
	ExpiresAt   time.Time `firestore:"expires_at"`
	// Sealed is the flow's secret, bound to the flow: a device flow's device_code, a redirect
	// flow's PKCE code verifier (empty without PKCE).
	Sealed []byte `firestore:"sealed"`
	// PollAt is when a pending device flow is next polled (nil once it ended): the poll sweep's
	// query and its lease, as refresh_at is for credentials.
	PollAt *time.Time `firestore:"poll_at,omitempty"`
	// Interval is the device flow's polling interval in seconds (slow_down adds 5).
	Interval int64 `firestore:"interval"`
	// RedirectURI and Spec (protojson of the RedirectOauthSpec) are what a redirect flow began
	// with; completing it must name the same.
	RedirectURI string `firestore:"redirect_uri"`
	Spec        string `firestore:"spec"`
	// Exchanged marks a redirect flow whose code was sent for exchange: a code is sent once.
	Exchanged bool `firestore:"exchanged"`
	// StartedBy is who began the flow: a device flow's polls use the provider's client secrets
	// as that principal, so the secrets' access policy decides polls as it decided the start.
	StartedBy Starter `firestore:"started_by"`
	// ExpireAt is when a Firestore TTL policy on the collection may delete the flow: FlowKept
	// after it expires, so GetFlow still answers how it ended meanwhile.
	ExpireAt time.Time `firestore:"expire_at"`
}

// FlowKept is how long a flow is kept past its expires_at.
const FlowKept = 7 * 24 * time.Hour

// Starter is the principal that began a flow.
type Starter struct {
	UserID string `firestore:"user_id"`
	KeyID  string `firestore:"key_id"`
	Admin  bool   `firestore:"admin"`
}

// Subject is whom the flow signs in.
func (f *Flow) Subject() Subject { return Subject{Kind: f.SubjectKind, ID: f.SubjectID} }

// Ended reports whether the flow left pending.
func (f *Flow) Ended() bool { return f.Status != FlowPending }

// Flows reads and writes flows.
type Flows struct {
	db  *firestore.Client
	now func() time.Time
}

// NewFlows returns the flow store over db.
func NewFlows(db *firestore.Client, now func() time.Time) *Flows { return &Flows{db: db, now: now} }

// Create stores a new pending flow, giving it its times, unless its subject has maxPending
// pending flows that have not expired already (ErrTooManyFlows): each costs a provider request
// and, for device flows, polls until it ends.
func (fs *Flows) Create(ctx context.Context, f *Flow, maxPending int) error {
	now := fs.now()
	if f.ID == "" {
		f.ID = NewFlowID()
	}
	f.Status, f.CreatedAt, f.UpdatedAt, f.ExpireAt = FlowPending, now, now, f.ExpiresAt.Add(FlowKept)
	err := fs.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		q := fs.db.Collection(FlowCollection).Where("subject_kind", "==", f.SubjectKind).Where("subject_id", "==", f.SubjectID).
			Where("status", "==", FlowPending).Where("expires_at", ">", now)
		n, err := store.Count(ctx, q, tx)
		if err != nil {
			return fmt.Errorf("count pending flows: %w", err)
		}
		if n >= int64(maxPending) {
			return ErrTooManyFlows
		}
		return tx.Create(fs.doc(f.ID), f)
	})
	if err != nil {
		return fmt.Errorf("create flow %s: %w", f.ID, err)
	}
	return nil
}

// ErrTooManyFlows is a subject at its limit of pending flows.
var ErrTooManyFlows = errors.New("too many pending sign-in flows")

// ErrFlowNotFound is an id with no flow.
var ErrFlowNotFound = errors.New("no such flow")

// Get reads a flow; a malformed or unknown id is ErrFlowNotFound.
func (fs *Flows) Get(ctx context.Context, id string) (*Flow, error) {
	if !ids.Valid(FlowPrefix, id) {
		return nil, ErrFlowNotFound
	}
	f, err := store.Read[Flow](ctx, nil, fs.doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrFlowNotFound
	}
	return f, err
}

// Update applies edit to the flow in a transaction and writes it when edit reports a change.
// An edit that moves the status must be one FlowStates allows; an ended flow loses poll_at.
func (fs *Flows) Update(ctx context.Context, id string, edit func(*Flow, time.Time) (bool, error)) (*Flow, error) {
	var out *Flow
	err := fs.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		f, err := store.Read[Flow](ctx, tx, fs.doc(id))
		if errors.Is(err, store.ErrNotFound) {
			return ErrFlowNotFound
		}
		if err != nil {
			return err
		}
		out = f
		from, now := f.Status, fs.now()
		changed, err := edit(f, now)
		if err != nil || !changed {
			return err
		}
		if f.Status != from && !FlowStates.CanMove(from, f.Status) {
			return apierr.FailedPrecondition("flow %s is %s and cannot become %s", id, from, f.Status)
		}
		if f.Ended() {
			f.PollAt = nil
		}
		f.UpdatedAt = now
		return tx.Set(fs.doc(id), f)
	})
	if err != nil {
		return nil, fmt.Errorf("update flow %s: %w", id, err)
	}
	return out, nil
}

// End moves a pending flow to status with errorCode; a flow that already ended is left as it is
// and returned.
func (fs *Flows) End(ctx context.Context, id, status, errorCode string) (*Flow, error) {
	return fs.Update(ctx, id, func(f *Flow, _ time.Time) (bool, error) {
		if f.Ended() {
			return false, nil
		}
		f.Status, f.ErrorCode = status, errorCode
		return true, nil
	})
}

// DuePolls lists up to limit pending device flows whose poll_at has come.
func (fs *Flows) DuePolls(ctx context.Context, limit int) ([]Flow, error) {
	q := fs.db.Collection(FlowCollection).Where("poll_at", "<=", fs.now()).OrderBy("poll_at", firestore.Asc).Limit(limit)
	out, err := store.All[Flow](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list the flows due for a poll: %w", err)
	}
	return out, nil
}

func (fs *Flows) doc(id string) *firestore.DocumentRef {
	return fs.db.Collection(FlowCollection).Doc(id)
}

// NewFlowID mints a flow id.
func NewFlowID() string { return ids.New(FlowPrefix) }

// FlowOwner is what a flow's sealed secret is bound to.
func FlowOwner(id string) string { return FlowCollection + "/" + id }

// DeleteExpired deletes up to limit flows whose expire_at (FlowKept past expires_at) has passed,
// and answers how many: the sweep's step, for deployments without a TTL policy on expire_at.
func (fs *Flows) DeleteExpired(ctx context.Context, limit int) (int, error) {
	return store.DeleteExpired(ctx, fs.db, flowsExpire, fs.now(), limit)
}

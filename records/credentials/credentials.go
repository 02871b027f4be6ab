// Package credentials keeps OAuth credential bundles per subject (a user, a connector, an MCP
// server, a user's connector) and provider, in Firestore. A bundle is opaque to Hangar — the
// harness that uses it knows its shape — and is sealed with the deployment's Tink AEAD keyset,
// bound to its subject and provider, so a database read reveals nothing and a bundle copied onto
// another subject does not open. Bundle, which opens one, is for the services that hand it to a
// session; no read a caller sees returns it.
//
// A credential's version grows by one with every change of its bundle or status (a put, a
// sign-in, a refresh, a session's update, a disconnect, an expiry); writes may name the version
// they expect and a mismatch is aborted. Disconnecting drops the bundle and keeps the record
// (connected false), so a listing still shows what was connected. Statuses follows the states
// table: only a connected credential holds a bundle.
//
// A credential that expires carries refresh_at, when the refresh sweep (Due, Claim) next looks at
// it: a margin before expires_at when its bundle holds a refresh token, at expires_at otherwise
// (to mark it expired). Claiming moves refresh_at forward by a lease, so a refresher that dies
// leaves the credential due again when the lease ends, and two sweeps never refresh it at once.
package credentials

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"cloud.google.com/go/firestore"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/states"
	"github.com/hangar-dev/hangar/platform/store"
)

// Collection holds one document per subject and provider.
const Collection = "oauth_credentials"

// Subject kinds, as stored.
const (
	KindUser          = "user"
	KindConnector     = "connector"
	KindMCP           = "mcp"
	KindUserConnector = "user_connector"
)

// Statuses of a credential.
const (
	StatusConnected = "connected"
	// StatusExpired: the access token passed expires_at with no refresh token to renew it.
	StatusExpired = "expired"
	// StatusRefreshFailed: refreshing kept failing (the provider erred or was unreachable)
	// until the access token expired.
	StatusRefreshFailed = "refresh_failed"
	// StatusRevoked: the provider refused the refresh token (invalid_grant) once the access
	// token expired: the grant was revoked or replaced, and only a new sign-in connects the
	// credential again.
	StatusRevoked      = "revoked"
	StatusDisconnected = "disconnected"
)

// Statuses is the credential state table: a put or a sign-in connects any credential again.
var Statuses = states.Table[string]{
	{From: StatusConnected, To: []string{StatusExpired, StatusRefreshFailed, StatusRevoked, StatusDisconnected}},
	{From: StatusExpired, To: []string{StatusConnected, StatusDisconnected}},
	{From: StatusRefreshFailed, To: []string{StatusConnected, StatusDisconnected}},
	{From: StatusRevoked, To: []string{StatusConnected, StatusDisconnected}},
	{From: StatusDisconnected, To: []string{StatusConnected}},
}

// Subject is whom a credential belongs to.
type Subject struct {
	Kind, ID string
}

func (s Subject) String() string { return s.Kind + " " + s.ID }

// Proto is the subject as the API gives it.
func (s Subject) Proto() *appv1.OAuthSubject {
	for k, v := range kinds {
		if v == s.Kind {
			return &appv1.OAuthSubject{Kind: k, Id: s.ID}
		}
	}
	return &appv1.OAuthSubject{Id: s.ID}
}

// kinds maps the API's subject kinds to the store's.
var kinds = map[appv1.OauthSubjectKind]string{
	appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER:           KindUser,
	appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR:      KindConnector,
	appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_MCP:            KindMCP,
	appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER_CONNECTOR: KindUserConnector,
}

// SubjectOf reads a subject as the API gives it (a USER subject with no id is the caller) and
// checks with Authorize that caller may act on it.
func SubjectOf(caller auth.Principal, p *appv1.OAuthSubject) (Subject, error) {
	kind, ok := kinds[p.GetKind()]
	if !ok {
		return Subject{}, apierr.InvalidArgument("subject.kind", "must be USER, CONNECTOR, MCP or USER_CONNECTOR")
	}
	sub := Subject{Kind: kind, ID: strings.TrimSpace(p.GetId())}
	if sub.Kind == KindUser && sub.ID == "" {
		sub.ID = caller.UserID
	}
	if sub.ID == "" {
		return Subject{}, apierr.InvalidArgument("subject.id", "is required")
	}
	return sub, Authorize(caller, sub)
}

// Authorize says whether caller may use and change subject's credentials. A user's
// credentials are that user's own (an admin may act on anyone's); another user's are
// not_found, so ids reveal nothing. Connectors and MCP servers are the organisation's, set up
// by admins: others are permission_denied.
func Authorize(caller auth.Principal, s Subject) error {
	switch {
	case caller.Admin:
		return nil
	case s.Kind == KindUser && s.ID == caller.UserID:
		return nil
	case s.Kind == KindUser:
		return apierr.NotFound("OAuth subject", s.ID)
	}
	return apierr.PermissionDenied("only admins manage the OAuth credentials of a %s", strings.ReplaceAll(s.Kind, "_", " "))
}

var (
	providerRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	subjectIDRe = regexp.MustCompile(`^[A-Za-z0-9_.:@/+-]{1,256}$`)
)

// ValidProvider reports whether provider is a well-formed provider name.
func ValidProvider(provider string) bool { return providerRe.MatchString(provider) }

// Validate reports a bad subject id or provider into v, with fields named as a request
// carries them.
func Validate(v *apierr.Violations, s Subject, provider string) {
	if !subjectIDRe.MatchString(s.ID) {
		v.Add("subject.id", "must be 1 to 256 letters, digits or _.:@/+-")
	}
	if !providerRe.MatchString(provider) {
		v.Add("provider", "must be 1 to 64 lowercase letters, digits or _.- (e.g. anthropic, openai)")
	}
}

// Meta is what may be shown of a credential: everything but its bundle.
type Meta struct {
	SubjectKind string    `firestore:"subject_kind"`
	SubjectID   string    `firestore:"subject_id"`
	Provider    string    `firestore:"provider"`
	Version     int64     `firestore:"version"`
	Status      string    `firestore:"status"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
	// ExpiresAt is when the access token expires (nil: unknown or never).
	ExpiresAt *time.Time `firestore:"expires_at,omitempty"`
	// Account is what the provider said of the account (display_name, plan_type,
	// workspace_id, workspace_name); never a token.
	Account map[string]string `firestore:"account,omitempty"`
}

// Connected reports whether the credential holds a bundle.
func (m Meta) Connected() bool { return m.Status == StatusConnected }

type record struct {
	Meta
	Sealed []byte `firestore:"sealed"`
	// RefreshAt is when the sweep next looks at the credential (nil: never).
	RefreshAt *time.Time `firestore:"refresh_at,omitempty"`
}

// Grant is a bundle to store and what Hangar knows of it.
type Grant struct {
	Bundle string
	// ExpiresAt is when its access token expires (zero: unknown or never).
	ExpiresAt time.Time
	// Refreshable says the bundle holds a refresh token the sweep can renew it with.
	Refreshable bool
	// Account replaces the account metadata; nil keeps what the credential has.
	Account map[string]string
}

// RefreshMargin is how long before expires_at a refreshable credential is refreshed (half the
// remaining lifetime for tokens that live less than twice as long).
const RefreshMargin = 5 * time.Minute

// Store reads and writes credentials.
type Store struct {
	db       *firestore.Client
	sealer   *seal.Sealer
	now      func() time.Time
	maxBytes int
}

// New returns the store over db; bundles are at most maxBytes.
func New(db *firestore.Client, sealer *seal.Sealer, now func() time.Time, maxBytes int) *Store {
	return &Store{db: db, sealer: sealer, now: now, maxBytes: maxBytes}
}

// Put stores bundle as the subject's credential for provider (connecting it again if it was
// disconnected), with no expiry and no account known, and returns its metadata.
func (s *Store) Put(ctx context.Context, sub Subject, provider, bundle string) (Meta, error) {
	return s.Save(ctx, sub, provider, Grant{Bundle: bundle, Account: map[string]string{}}, 0, "secret")
}

// Save stores g as the subject's credential for provider, connecting it. expected, when not 0,
// is the version the writer saw (a session's refreshed bundle): another is aborted, saying the
// current version. field names the bundle in errors.
func (s *Store) Save(ctx context.Context, sub Subject, provider string, g Grant, expected int64, field string) (Meta, error) {
	var v apierr.Violations
	Validate(&v, sub, provider)
	bundle := g.Bundle
	switch {
	case strings.TrimSpace(bundle) == "":
		v.Add(field, "is required")
	case len(bundle) > s.maxBytes:
		v.Addf(field, "must be at most %d bytes (is %d)", s.maxBytes, len(bundle))
	case strings.ContainsFunc(bundle, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' }):
		v.Add(field, "must be text")
	}
	if expected < 0 {
		v.Add("expected_version", "must not be negative")
	}
	if err := v.Err(); err != nil {
		return Meta{}, err
	}
	sealed, err := s.sealer.Seal([]byte(bundle), owner(sub, provider))
	if err != nil {
		return Meta{}, err
	}
	return s.change(ctx, sub, provider, func(cur *record, now time.Time) (bool, error) {
		if expected != 0 && cur.Version != expected {
			return false, versionAborted(sub, provider, cur.Version, expected)
		}
		if cur.Version == 0 {
			cur.CreatedAt = now
		}
		cur.Sealed, cur.Status = sealed, StatusConnected
		if g.Account != nil {
			cur.Account = g.Account
		}
		cur.ExpiresAt, cur.RefreshAt = nil, nil
		if !g.ExpiresAt.IsZero() {
			exp := g.ExpiresAt.UTC()
			at := exp
			if g.Refreshable {
				at = exp.Add(-min(RefreshMargin, exp.Sub(now)/2))
			}
			cur.ExpiresAt, cur.RefreshAt = &exp, &at
		}
		return true, nil
	})
}

// versionAborted is a write that expected another version; the message says the current one.
func versionAborted(sub Subject, provider string, current, expected int64) error {
	return apierr.Aborted("the %s credential of %s is at version %d, not %d", provider, sub, current, expected)
}

// Disconnect drops the subject's bundle for provider, keeping the record. expected, when not
// 0, is the version the caller saw; another is aborted. Disconnecting a disconnected credential
// changes nothing and answers it as it is.
func (s *Store) Disconnect(ctx context.Context, sub Subject, provider string, expected int64) (Meta, error) {
	var v apierr.Violations
	Validate(&v, sub, provider)
	if expected < 0 {
		v.Add("expected_version", "must not be negative")
	}
	if err := v.Err(); err != nil {
		return Meta{}, err
	}
	return s.change(ctx, sub, provider, func(cur *record, _ time.Time) (bool, error) {
		if cur.Version == 0 {
			return false, apierr.NotFound("OAuth credential", sub.String()+" "+provider)
		}
		if expected != 0 && cur.Version != expected {
			return false, versionAborted(sub, provider, cur.Version, expected)
		}
		if cur.Status == StatusDisconnected {
			return false, nil
		}
		cur.Sealed, cur.Status, cur.RefreshAt = nil, StatusDisconnected, nil
		return true, nil
	})
}

// Mark moves a connected credential at version expected to status (expired, refresh_failed,
// revoked), dropping its bundle, which can no longer be used. A credential that changed since
// (a session saved a newer bundle, the user disconnected it) is left as it is: ok is false.
func (s *Store) Mark(ctx context.Context, sub Subject, provider string, expected int64, status string) (Meta, bool, error) {
	marked := false
	m, err := s.change(ctx, sub, provider, func(cur *record, _ time.Time) (bool, error) {
		if cur.Version != expected || !Statuses.CanMove(cur.Status, status) {
			return false, nil
		}
		cur.Sealed, cur.Status, cur.RefreshAt = nil, status, nil
		marked = true
		return true, nil
	})
	return m, marked, err
}

// Due lists up to limit credentials whose refresh_at has come, for the refresh sweep.
func (s *Store) Due(ctx context.Context, limit int) ([]Meta, error) {
	q := s.db.Collection(Collection).Where("refresh_at", "<=", s.now()).OrderBy("refresh_at", firestore.Asc).Limit(limit)
	recs, err := store.All[record](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list the credentials due for refresh: %w", err)
	}
	out := make([]Meta, len(recs))
	for i, r := range recs {
		out[i] = r.Meta
	}
	return out, nil
}

// Claim takes a due credential for refreshing: it moves refresh_at a lease ahead (changing
// nothing else, so not the version) and opens the bundle. ok is false when the credential is not
// due any more (another sweep claimed it, or it changed).
func (s *Store) Claim(ctx context.Context, sub Subject, provider string, lease time.Duration) (string, Meta, bool, error) {
	var rec *record
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		rec = nil
		cur, err := s.read(ctx, tx, sub, provider)
		if err != nil || cur == nil || cur.RefreshAt == nil || !cur.Connected() {
			return err
		}
		now := s.now()
		if cur.RefreshAt.After(now) {
			return nil
		}
		next := now.Add(lease)
		cur.RefreshAt = &next
		rec = cur
		return tx.Update(s.doc(sub, provider), []firestore.Update{{Path: "refresh_at", Value: next}})
	})
	if err != nil || rec == nil {
		return "", Meta{}, false, err
	}
	pt, err := s.sealer.Open(rec.Sealed, owner(sub, provider))
	if err != nil {
		return "", Meta{}, false, fmt.Errorf("open the %s credential of %s: %w", provider, sub, err)
	}
	return string(pt), rec.Meta, true, nil
}

// change applies edit to the credential in a transaction (a missing one is a zero record at
// version 0); when edit reports a change the version grows and the record is written.
func (s *Store) change(ctx context.Context, sub Subject, provider string, edit func(*record, time.Time) (bool, error)) (Meta, error) {
	var out record
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, sub, provider)
		if err != nil {
			return err
		}
		if cur == nil {
			cur = &record{Meta: Meta{SubjectKind: sub.Kind, SubjectID: sub.ID, Provider: provider}}
		}
		now := s.now()
		changed, err := edit(cur, now)
		if err != nil || !changed {
			out = *cur
			return err
		}
		cur.Version++
		cur.UpdatedAt = now
		out = *cur
		return tx.Set(s.doc(sub, provider), out)
	})
	if err != nil {
		return Meta{}, fmt.Errorf("change the %s credential of %s: %w", provider, sub, err)
	}
	return out.Meta, nil
}

// List returns the subject's credentials, connected or not, by provider.
func (s *Store) List(ctx context.Context, sub Subject) ([]Meta, error) {
	var v apierr.Violations
	if !subjectIDRe.MatchString(sub.ID) {
		v.Add("subject.id", "must be 1 to 256 letters, digits or _.:@/+-")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	q := s.db.Collection(Collection).Where("subject_kind", "==", sub.Kind).Where("subject_id", "==", sub.ID)
	recs, err := store.All[record](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list the credentials of %s: %w", sub, err)
	}
	out := make([]Meta, len(recs))
	for i, r := range recs {
		out[i] = r.Meta
	}
	slices.SortFunc(out, func(a, b Meta) int { return cmp.Compare(a.Provider, b.Provider) })
	return out, nil
}

// Bundle opens the subject's connected credential for provider, for a session to use. None, or
// a disconnected one, is failed_precondition: the session cannot start with it.
func (s *Store) Bundle(ctx context.Context, sub Subject, provider string) (string, Meta, error) {
	rec, err := s.read(ctx, nil, sub, provider)
	if err != nil {
		return "", Meta{}, err
	}
	if rec == nil || !rec.Connected() {
		return "", Meta{}, apierr.FailedPrecondition("%s has no connected %s credential: put one (PutCredential) first", sub, provider)
	}
	pt, err := s.sealer.Open(rec.Sealed, owner(sub, provider))
	if err != nil {
		return "", Meta{}, err
	}
	return string(pt), rec.Meta, nil
}

func (s *Store) read(ctx context.Context, tx *firestore.Transaction, sub Subject, provider string) (*record, error) {
	rec, err := store.Read[record](ctx, tx, s.doc(sub, provider))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the %s credential of %s: %w", provider, sub, err)
	}
	return rec, nil
}

// doc is the credential's document: subject ids may hold '/', which Firestore ids may not, so
// the id is kind, id and provider in unpadded base64url.
func (s *Store) doc(sub Subject, provider string) *firestore.DocumentRef {
	return s.db.Collection(Collection).Doc(base64.RawURLEncoding.EncodeToString([]byte(owner(sub, provider))))
}

// owner binds a sealed bundle to its subject and provider. Kinds and providers hold no '/', so
// the three parts cannot be shifted into one another.
func owner(sub Subject, provider string) string {
	return sub.Kind + "/" + provider + "/" + sub.ID
}

// Subject is whom the credential belongs to.
func (m Meta) Subject() Subject { return Subject{Kind: m.SubjectKind, ID: m.SubjectID} }

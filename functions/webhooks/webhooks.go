// Package webhooks serves WebhookRegistrationService and the inbound route that registrations'
// senders post to: it owns registrations and their sealed signing secrets, verifies each
// delivery's HMAC signature against the raw body, and publishes verified deliveries to the
// automation events topic for the worker that starts runs.
package webhooks

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/triggers"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
)

const (
	collection = "webhookRegistrations"
	idPrefix   = "hook"
	// kind names a registration in errors.
	kind = "webhook registration"

	maxNameLen = 100
	// Secrets: at least 16 characters so a guessable one is refused; a generated one is 32
	// random bytes in hex.
	minSecretLen       = 16
	maxSecretLen       = 256
	generatedSecretLen = 32
)

// Deps are what the service runs on.
type Deps struct {
	DB     *firestore.Client
	Sealer *seal.Sealer
	PubSub *pubsub.Client
	Clock  clock.Clock
	Limits config.WebhookLimits
	Log    *slog.Logger
}

// Service implements WebhookRegistrationService and serves the inbound route (Inbound).
type Service struct {
	db     *firestore.Client
	sealer *seal.Sealer
	pubsub *pubsub.Client
	clock  clock.Clock
	lim    config.WebhookLimits
	log    *slog.Logger
	cache  *registry
}

var _ appv1connect.WebhookRegistrationServiceHandler = (*Service)(nil)

// New returns the service over d.
func New(d Deps) *Service {
	s := &Service{db: d.DB, sealer: d.Sealer, pubsub: d.PubSub, clock: d.Clock, lim: d.Limits, log: d.Log}
	s.cache = newRegistry(s.load, d.Clock, d.Limits.CacheTTL)
	return s
}

// CreateWebhookRegistration stores a registration owned by the caller, with the given secret
// or a generated one, and returns the secret this once.
func (s *Service) CreateWebhookRegistration(ctx context.Context, req *connect.Request[appv1.CreateWebhookRegistrationRequest]) (*connect.Response[appv1.CreateWebhookRegistrationResponse], error) {
	var v apierr.Violations
	name := strings.TrimSpace(req.Msg.GetName())
	switch {
	case name == "":
		v.Add("name", "is required")
	case utf8.RuneCountInString(name) > maxNameLen:
		v.Addf("name", "must be at most %d characters", maxNameLen)
	case strings.ContainsFunc(name, isControl):
		v.Add("name", "must not contain control characters")
	}
	provider := req.Msg.GetProvider()
	if provider != triggers.ProviderGitHub && provider != triggers.ProviderWebhook {
		v.Addf("provider", "must be %q or %q", triggers.ProviderGitHub, triggers.ProviderWebhook)
	}
	secret := checkSecret(&v, req.Msg.GetSecret())
	if err := v.Err(); err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	now := s.clock.Now()
	rec := record{
		ID: ids.New(idPrefix), Name: name, Provider: provider, CreatedBy: caller.UserID,
		CreatedAt: now, UpdatedAt: now, SecretRotatedAt: now,
	}
	secret, err := s.seal(&rec, secret)
	if err != nil {
		return nil, err
	}
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := s.checkRoom(ctx, tx); err != nil {
			return err
		}
		return tx.Create(s.doc(rec.ID), rec)
	})
	if err != nil {
		return nil, fmt.Errorf("create webhook registration %s: %w", name, err)
	}
	s.cache.forget(rec.ID)
	return connect.NewResponse(&appv1.CreateWebhookRegistrationResponse{Registration: rec.proto(), Secret: secret}), nil
}

// ListWebhookRegistrations lists the registrations the caller may see (an admin: all; others:
// their own), newest first. CreateWebhookRegistration keeps them within the cap, so this is
// all of them.
func (s *Service) ListWebhookRegistrations(ctx context.Context, _ *connect.Request[appv1.ListWebhookRegistrationsRequest]) (*connect.Response[appv1.ListWebhookRegistrationsResponse], error) {
	caller, _ := auth.Caller(ctx)
	q := s.db.Collection(collection).Query
	if !caller.Admin {
		q = q.Where("created_by", "==", caller.UserID)
	}
	// Sorted here: an equality filter with an order on another field would need a composite
	// index, and Firestore builds single-field ones only.
	recs, err := store.All[record](q.Limit(s.lim.Max).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list webhook registrations: %w", err)
	}
	slices.SortFunc(recs, func(a, b record) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(b.ID, a.ID))
	})
	out := make([]*appv1.WebhookRegistration, len(recs))
	for i, r := range recs {
		out[i] = r.proto()
	}
	return connect.NewResponse(&appv1.ListWebhookRegistrationsResponse{Registrations: out}), nil
}

// RotateWebhookSecret replaces a registration's secret with the given or a generated one. The
// old one stops verifying at once on this instance and within Limits.CacheTTL on others.
func (s *Service) RotateWebhookSecret(ctx context.Context, req *connect.Request[appv1.RotateWebhookSecretRequest]) (*connect.Response[appv1.RotateWebhookSecretResponse], error) {
	id := req.Msg.GetId()
	var v apierr.Violations
	if id == "" {
		v.Add("id", "is required")
	}
	secret := checkSecret(&v, req.Msg.GetSecret())
	if err := v.Err(); err != nil {
		return nil, err
	}
	var rec record
	err := s.change(ctx, id, func(tx *firestore.Transaction, cur record) error {
		rec = cur
		now := s.clock.Now()
		rec.UpdatedAt, rec.SecretRotatedAt = now, now
		var err error
		if secret, err = s.seal(&rec, secret); err != nil {
			return err
		}
		return tx.Set(s.doc(id), rec)
	})
	if err != nil {
		return nil, fmt.Errorf("rotate secret of webhook registration %s: %w", id, err)
	}
	return connect.NewResponse(&appv1.RotateWebhookSecretResponse{Registration: rec.proto(), Secret: secret}), nil
}

// DeleteWebhookRegistration removes a registration; deliveries to it answer 404 from then on
// (within Limits.CacheTTL on other instances).
func (s *Service) DeleteWebhookRegistration(ctx context.Context, req *connect.Request[appv1.DeleteWebhookRegistrationRequest]) (*connect.Response[appv1.DeleteWebhookRegistrationResponse], error) {
	id := req.Msg.GetId()
	if id == "" {
		return nil, apierr.InvalidArgument("id", "is required")
	}
	err := s.change(ctx, id, func(tx *firestore.Transaction, _ record) error {
		return tx.Delete(s.doc(id))
	})
	if err != nil {
		return nil, fmt.Errorf("delete webhook registration %s: %w", id, err)
	}
	return connect.NewResponse(&appv1.DeleteWebhookRegistrationResponse{}), nil
}

// change runs fn in a transaction on the registration as it is now, once the caller may change
// it, and makes this instance forget what it cached of it. id is the request's id field.
func (s *Service) change(ctx context.Context, id string, fn func(*firestore.Transaction, record) error) error {
	if err := ids.Lookup("id", kind, idPrefix, id); err != nil {
		return err
	}
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, id)
		if err != nil {
			return err
		}
		// Someone else's registration is not_found, not permission_denied: its existence is
		// not the caller's to learn.
		if p, _ := auth.Caller(ctx); !readableBy(p, cur) {
			return apierr.NotFound(kind, id)
		}
		return fn(tx, cur)
	})
	s.cache.forget(id)
	return err
}

// readableBy is who may see a registration and what it receives: its creator and admins.
func readableBy(p auth.Principal, rec record) bool {
	return p.Admin || (p.UserID != "" && p.UserID == rec.CreatedBy)
}

// Readable answers not_found unless registration id exists and p may read it: an automation
// whose owner is p may subscribe to its deliveries only then.
func (s *Service) Readable(ctx context.Context, p auth.Principal, id string) error {
	rec, err := s.read(ctx, nil, id)
	if err != nil {
		return err
	}
	if !readableBy(p, rec) {
		return apierr.NotFound(kind, id)
	}
	return nil
}

// checkSecret validates a client-chosen secret; "" means generate one.
func checkSecret(v *apierr.Violations, secret string) string {
	if secret == "" {
		return ""
	}
	switch {
	case len(secret) < minSecretLen || len(secret) > maxSecretLen:
		v.Addf("secret", "must be %d to %d characters long (or empty to generate one)", minSecretLen, maxSecretLen)
	// Spaces inside are fine: GitHub takes any text as a secret (its documented test vector
	// is "It's a Secret to Everybody"). Leading or trailing ones are a paste's, not a
	// sender's, and would make every delivery fail its signature.
	case strings.ContainsFunc(secret, func(r rune) bool { return r < ' ' || r > '~' }):
		v.Add("secret", "must be printable ASCII (spaces inside are fine)")
	case strings.TrimSpace(secret) != secret:
		v.Add("secret", "must not start or end with a space")
	}
	return secret
}

// seal sets rec's sealed secret to secret, generating one when it is "", and returns it.
func (s *Service) seal(rec *record, secret string) (string, error) {
	if secret == "" {
		b := make([]byte, generatedSecretLen)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("generate webhook secret: %w", err)
		}
		secret = hex.EncodeToString(b)
	}
	sealed, err := s.sealer.Seal([]byte(secret), sealOwner(rec.ID))
	if err != nil {
		return "", err
	}
	rec.SealedSecret = sealed
	return secret, nil
}

// checkRoom keeps the registrations within Limits.Max, the most ListWebhookRegistrations
// returns. Counting inside the transaction keeps concurrent creates at the limit from all
// passing.
func (s *Service) checkRoom(ctx context.Context, tx *firestore.Transaction) error {
	n, err := store.Count(ctx, s.db.Collection(collection).Query, tx)
	if err != nil {
		return fmt.Errorf("count webhook registrations: %w", err)
	}
	if n >= int64(s.lim.Max) {
		return apierr.ResourceExhausted("there are %d webhook registrations, the most allowed; delete one first", n)
	}
	return nil
}

func (s *Service) doc(id string) *firestore.DocumentRef {
	return s.db.Collection(collection).Doc(id)
}

// read loads one registration, inside tx when it is not nil. A malformed id is not_found
// without a database read.
func (s *Service) read(ctx context.Context, tx *firestore.Transaction, id string) (record, error) {
	if !ids.Valid(idPrefix, id) {
		return record{}, apierr.NotFound(kind, id)
	}
	rec, err := store.Read[record](ctx, tx, s.doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, apierr.NotFound(kind, id)
	}
	if err != nil {
		return record{}, fmt.Errorf("get webhook registration %s: %w", id, err)
	}
	return *rec, nil
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }

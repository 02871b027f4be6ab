package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ratelimit"
	"github.com/hangar-dev/hangar/platform/store"
)

// Records of sign-in end: Sweep deletes them once expired, and httpapi.RevokeSessionsPath ends
// every dashboard session of a person at once.
const (
	// expiredKept is how long an expired record stays: a late poll of a device code still
	// hears expired_token rather than invalid_grant.
	expiredKept = time.Hour
	// sweepBatch bounds the records one sweep deletes of each collection.
	sweepBatch = 100
)

// expiring are sign-in's own collections whose records end at expires_at.
var expiring = []store.Expiring{
	store.Expires(flowsCollection, "expires_at"),
	store.Expires(grantsCollection, "expires_at"),
	store.Expires(userCodesCollection, "expires_at"),
}

// Sweep deletes, a bounded batch per collection per call, the sign-in flows, device grants, user
// code indexes and web sessions that expired more than expiredKept ago. The automation worker's
// tick calls it; a Firestore TTL policy on expires_at (docs/api.md, "Signing in") does the same job
// without it.
func (s *Service) Sweep(ctx context.Context) error {
	before := s.d.Clock.Now().Add(-expiredKept)
	var errs []error
	for _, e := range expiring {
		if _, err := store.DeleteExpired(ctx, s.d.DB, e, before, sweepBatch); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := s.d.Sessions.DeleteExpired(ctx, before, sweepBatch); err != nil {
		errs = append(errs, err)
	}
	// Every shared rate limit's documents (sign-in's and the API key failures'), once full again.
	if _, err := ratelimit.Sweep(ctx, s.d.DB, s.d.Clock.Now(), sweepBatch); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sign-in sweep: %w", err)
	}
	return nil
}

// revokeSessions signs a person out everywhere: it revokes every live dashboard session of the
// caller, or, for an admin, of user_id. API keys are not touched (ApiKeyService revokes them).
func (s *Service) revokeSessions(w http.ResponseWriter, r *http.Request) {
	p, err := s.caller(r, auth.Act)
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	userID := strings.TrimSpace(r.URL.Query().Get("user_id"))
	switch {
	case userID == "" || userID == p.UserID:
		userID = p.UserID
	case !p.Admin:
		s.writeAPIError(w, r, apierr.PermissionDenied("only an admin may sign another person out"))
		return
	}
	n, err := s.d.Sessions.RevokeAll(r.Context(), userID, s.d.Clock.Now())
	if err != nil {
		s.writeAPIError(w, r, err)
		return
	}
	if p.Kind == auth.KindWebSession && userID == p.UserID {
		s.clearSessionCookie(w)
	}
	s.d.Log.Info("signed out everywhere", "user", userID, "by", p.UserID, "sessions", n)
	writeJSON(w, http.StatusOK, httpapi.RevokedSessions{UserID: userID, Revoked: n})
}

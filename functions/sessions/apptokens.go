package sessions

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/store"
)

// An app token travels in a URL, where it can leak (history, a Referer, a log, a screenshot),
// so it is used once: its first use records its id in usedAppTokens with a Create, which
// Firestore refuses for an id already there, so two uses on any two instances cannot both
// succeed. A record stays until usedTokenKept past the token's expiry (the sweep, or a
// Firestore TTL policy on expire_at, deletes it), after which the token is refused as expired.
const (
	usedAppTokens = "appTokensUsed"
	// usedTokenKept outlasts the token so that an instance whose clock lags the sweeper's
	// still finds the record of a token it takes as unexpired.
	usedTokenKept = 10 * time.Minute
	// sweepAppTokensBatch bounds the records one sweep deletes.
	sweepAppTokensBatch = 100
)

// usedAppTokensExpire is when a used token's record may go: usedTokenKept past its expiry.
var usedAppTokensExpire = store.Expires(usedAppTokens, "expire_at")

// usedAppToken records an app token's use.
type usedAppToken struct {
	Session  string    `firestore:"session"`
	App      string    `firestore:"app"`
	User     string    `firestore:"user"`
	UsedAt   time.Time `firestore:"used_at"`
	ExpireAt time.Time `firestore:"expire_at"`
}

// spendAppToken uses up token grant g, or refuses it as used already, naming what to do.
func (s *Service) spendAppToken(ctx context.Context, g appGrant) error {
	if g.ID == "" {
		return connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("this app link has no token id: open the app again from the dashboard, %s", s.dashboardAppURL(g.Session, g.App)))
	}
	rec := usedAppToken{Session: g.Session, App: g.App, User: g.User, UsedAt: s.d.Clock.Now(), ExpireAt: time.Unix(g.Expires, 0).Add(usedTokenKept)}
	_, err := s.d.DB.Collection(usedAppTokens).Doc(g.ID).Create(ctx, rec)
	if store.IsAlreadyExists(err) {
		return connect.NewError(connect.CodeUnauthenticated, fmt.Errorf(
			"this app link was already used (an app token opens the app once): open the app again from the dashboard, %s", s.dashboardAppURL(g.Session, g.App)))
	}
	if err != nil {
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("record the use of an app token: %w", err))
	}
	return nil
}

// SweepAppTokens deletes a bounded batch of the records of used app tokens that are past
// expire_at: the automation worker's tick calls it; a Firestore TTL policy on
// appTokensUsed.expire_at (docs/sessions.md) does the same without it.
func (s *Service) SweepAppTokens(ctx context.Context) error {
	if _, err := store.DeleteExpired(ctx, s.d.DB, usedAppTokensExpire, s.d.Clock.Now(), sweepAppTokensBatch); err != nil {
		return fmt.Errorf("sweep used app tokens: %w", err)
	}
	return nil
}

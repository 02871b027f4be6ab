package auth

import (
	"context"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// maxBatchWrites is below Firestore's 500 writes per commit.
const maxBatchWrites = 400

// RevokeAll ends every live session of userID ("sign out everywhere") and answers how many it
// ended. The instance that revokes forgets them at once; others within their cache TTL, as for
// one session.
func (s *WebSessions) RevokeAll(ctx context.Context, userID string, now time.Time) (int, error) {
	// One equality filter, so no composite index: a person's sessions are few, and the sweep
	// deletes expired ones.
	snaps, err := s.db.Collection(webSessionsCollect).Where("user_id", "==", userID).Documents(ctx).GetAll()
	if err != nil {
		return 0, fmt.Errorf("list the web sessions of %s: %w", userID, err)
	}
	var live []*firestore.DocumentRef
	for _, snap := range snaps {
		var rec WebSession
		if err := snap.DataTo(&rec); err != nil {
			return 0, fmt.Errorf("decode web session: %w", err)
		}
		if rec.RevokedAt.IsZero() && now.Before(rec.ExpiresAt) {
			live = append(live, snap.Ref)
		}
	}
	for chunk := range slices.Chunk(live, maxBatchWrites) {
		b := store.Batch(s.db)
		for _, ref := range chunk {
			b.Update(ref, []firestore.Update{{Path: "revoked_at", Value: now}})
		}
		if _, err := b.Commit(ctx); err != nil {
			return 0, fmt.Errorf("revoke the web sessions of %s: %w", userID, err)
		}
	}
	if s.authn != nil {
		for _, snap := range snaps {
			s.authn.forget(snap.Ref.ID)
		}
	}
	return len(live), nil
}

// DeleteExpired deletes up to limit session records that expired before before (revoked or
// not: either way they sign nobody in), and answers how many.
func (s *WebSessions) DeleteExpired(ctx context.Context, before time.Time, limit int) (int, error) {
	return store.DeleteExpired(ctx, s.db, webSessionsExpire, before, limit)
}

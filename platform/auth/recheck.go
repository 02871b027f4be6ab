package auth

import (
	"context"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/store"
)

// Recheck answers the current principal of the credential p was signed in by, its dashboard
// session (p.WebSession) or its API key (p.KeyID), or unauthenticated once that credential is
// revoked or expired (or p names neither). It is for grants derived from a credential that
// outlive the request that presented it (an app's cookie, functions/sessions): they must end
// when it ends. A live answer is remembered like Authenticate's, for the authenticator's TTL; a
// revocation on this instance is forgotten at once, on another within that TTL.
func (a *Authenticator) Recheck(ctx context.Context, p Principal) (Principal, error) {
	var cacheKey string
	switch {
	case p.WebSession != "":
		// The session's record id is its cookie's hash, AuthenticateSession's cache key: a
		// sign-out here (Revoke's forget) ends both at once.
		cacheKey = p.WebSession
	case p.KeyID != "":
		cacheKey = keyIDCacheKey(p.KeyID)
	default:
		return Principal{}, apierr.Unauthenticated()
	}
	now := a.clock.Now()
	if live, ok := a.recalled(cacheKey, now); ok {
		if live.UserID != p.UserID {
			return Principal{}, apierr.Unauthenticated()
		}
		return live, nil
	}
	a.lookups.Add(1)
	var live Principal
	var ok bool
	until := now.Add(a.ttl)
	if p.WebSession != "" {
		if a.sessions == nil {
			return Principal{}, apierr.Unauthenticated()
		}
		var expires time.Time
		var err error
		if live, expires, ok, err = a.sessions.lookupByID(ctx, p.WebSession, now); err != nil {
			return Principal{}, err
		}
		if expires.Before(until) {
			until = expires
		}
	} else {
		snap, err := a.db.Collection(keysCollection).Doc(p.KeyID).Get(ctx)
		if err != nil && !store.IsNotFound(err) {
			return Principal{}, fmt.Errorf("recheck api key %s: %w", p.KeyID, err)
		}
		if err == nil {
			var k Key
			if err := snap.DataTo(&k); err != nil {
				return Principal{}, fmt.Errorf("decode api key %s: %w", p.KeyID, err)
			}
			live, ok = Principal{UserID: k.UserID, KeyID: k.ID, Kind: k.Kind, Admin: k.Admin}, !k.Revoked()
		}
	}
	if !ok || live.UserID != p.UserID {
		return Principal{}, apierr.Unauthenticated()
	}
	a.remember(cacheKey, live, until)
	return live, nil
}

// keyIDCacheKey is where Recheck remembers a key it read by id (Authenticate's entries are
// under the key's hash, which a grant does not hold); Keys.Revoke forgets both.
func keyIDCacheKey(id string) string { return "key id " + id }

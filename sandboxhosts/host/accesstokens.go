package host

import (
	"context"
	"fmt"
	"sync"
	"time"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/records/credentials"
)

// DefaultCredentialCacheTTL is how long the egress proxy keeps an OAuth credential's access
// token before reading it again. Hangar refreshes a token 5 minutes (or half its life) before
// it expires, and the old one keeps working until then, so a token a little stale still works.
const DefaultCredentialCacheTTL = 10 * time.Second

// accessTokens are the current access tokens of the OAuth credentials sandboxes hold only as
// placeholders, read from the credential store for the egress proxy to inject. The host reads
// the credential itself rather than keeping the session's copy, so a token Hangar refreshes
// mid-session reaches the proxy and never the sandbox.
type accessTokens struct {
	store *credentials.Store
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	cache map[credentialKey]cachedToken
}

type credentialKey struct{ kind, id, provider string }

type cachedToken struct {
	value string
	at    time.Time
}

func newAccessTokens(store *credentials.Store, ttl time.Duration, now func() time.Time) *accessTokens {
	if ttl == 0 {
		ttl = DefaultCredentialCacheTTL
	}
	return &accessTokens{store: store, ttl: ttl, now: now, cache: map[credentialKey]cachedToken{}}
}

// current is the function the proxy asks for c's access token.
func (a *accessTokens) current(c *hostv1.ProxyCredential) func(context.Context) (string, error) {
	key := credentialKey{c.GetSubjectKind(), c.GetSubjectId(), c.GetProvider()}
	return func(ctx context.Context) (string, error) {
		a.mu.Lock()
		got, ok := a.cache[key]
		a.mu.Unlock()
		if ok && a.ttl > 0 && a.now().Sub(got.at) < a.ttl {
			return got.value, nil
		}
		bundle, _, err := a.store.Bundle(ctx, credentials.Subject{Kind: key.kind, ID: key.id}, key.provider)
		if err != nil {
			return "", fmt.Errorf("the %s credential: %w", key.provider, err)
		}
		token := credentials.AccessToken(c.GetBundleFormat(), bundle)
		if token == "" {
			return "", fmt.Errorf("the %s credential holds no access token", key.provider)
		}
		a.mu.Lock()
		a.cache[key] = cachedToken{value: token, at: a.now()}
		a.mu.Unlock()
		return token, nil
	}
}

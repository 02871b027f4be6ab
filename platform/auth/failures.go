package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hangar-dev/hangar/platform/ratelimit"
)

// Unknown keys cost a Firestore read each unless something stops them: a client presenting the
// same bad key again and again hits the negative cache, and one presenting ever new keys (or
// many clients hammering one key id) runs out of failures. The failure limit is shared by every
// instance (platform/ratelimit): each failure is spent in one small transaction, and a check
// reads nothing, so a client spreading its guesses over Cloud Run's instances gets at most one
// more per instance than the limit before each knows. The negative cache is per instance and
// bounded: past maxTracked entries it starts over, which only lets a few more reads through.
const (
	// badKeyTTL is how long a key that failed verification is refused without a read. A key
	// cannot become valid (keys are minted with fresh random secrets), so this only bounds
	// memory.
	badKeyTTL = 5 * time.Minute
	// failureInterval and failureBurst are the verification failures a client address, and a
	// key id, may have: a burst, then one a second.
	failureInterval = time.Second
	failureBurst    = 30
	// maxTracked bounds the negative cache.
	maxTracked = 10000
)

// failures remembers bad keys and rate-limits verification failures.
type failures struct {
	limit *ratelimit.Limit
	log   *slog.Logger

	mu  sync.Mutex
	bad map[string]time.Time // key hash → until when it is refused unread
}

func newFailures(db *firestore.Client, now func() time.Time, log *slog.Logger) *failures {
	if log == nil {
		log = slog.Default()
	}
	return &failures{limit: ratelimit.New(db, "auth.failure", failureBurst, failureInterval, now), log: log}
}

// known reports whether the key with hash h failed verification within badKeyTTL.
func (f *failures) known(h string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.bad[h]
	return ok && now.Before(until)
}

// exhausted returns a resource_exhausted error when the client or the key id has no failures
// left, nil otherwise. It spends and reads nothing: only a failure does.
func (f *failures) exhausted(client, keyID string) error {
	for _, who := range scopes(client, keyID) {
		ok, wait := f.limit.Allowed(who)
		if ok {
			continue
		}
		wait = time.Duration(ratelimit.RetryAfter(wait)) * time.Second
		err := connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("too many failed API key checks from this %s; retry in %s", strings.SplitN(who, ":", 2)[0], wait))
		if d, derr := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); derr == nil {
			err.AddDetail(d)
		}
		return err
	}
	return nil
}

// failed records that the key with hash h, presented by client for keyID, did not verify. A
// store error counts the failure on this instance only (logged); the request is refused anyway.
func (f *failures) failed(ctx context.Context, h, client, keyID string, now time.Time) {
	f.remember(h, now)
	if _, err := f.limit.Spend(context.WithoutCancel(ctx), scopes(client, keyID)...); err != nil {
		f.log.Warn("auth failure limit", "err", err)
	}
}

// remember refuses the key with hash h unread for badKeyTTL.
func (f *failures) remember(h string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bad == nil || len(f.bad) >= maxTracked {
		f.bad = make(map[string]time.Time)
	}
	f.bad[h] = now.Add(badKeyTTL)
}

// scopes are the limiter names of a failure: its client address (when known) and its key id.
func scopes(client, keyID string) []string {
	out := []string{"key id:" + keyID}
	if client != "" {
		out = append(out, "address:"+client)
	}
	return out
}

// clientAddress is the address a request came from, for rate limits: the last hop of
// X-Forwarded-For when the server sits behind a proxy that appends it (trustProxy; Cloud Run's
// front end does, and a client cannot forge the hop it appends), else the peer's address
// without its port.
func clientAddress(peer string, h http.Header, trustProxy bool) string {
	if trustProxy {
		if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
			hops := strings.Split(xff[len(xff)-1], ",")
			if last := strings.TrimSpace(hops[len(hops)-1]); last != "" {
				return last
			}
		}
	}
	if host, _, err := net.SplitHostPort(peer); err == nil {
		return host
	}
	return peer
}

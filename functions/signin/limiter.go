package signin

import (
	"context"
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/ratelimit"
)

// Rates of what an unauthenticated or guessing client may do, shared by every instance
// (platform/ratelimit): a client spreading its attempts over Cloud Run's instances gets no more.
const (
	// userCodeFailureInterval and userCodeFailureBurst are the wrong user codes a person, and an
	// address, may enter: 10, then one a minute. Guessing one live code of 20^8 takes billions.
	userCodeFailureInterval = time.Minute
	userCodeFailureBurst    = 10
	// startInterval and startBurst bound the sign-ins, and apart the device codes, one address
	// starts: each writes a Firestore record before anyone is authenticated.
	startInterval = 6 * time.Second
	startBurst    = 20
)

// limiter is one of the service's shared limits, each name a token bucket.
type limiter struct {
	limit *ratelimit.Limit
	log   *slog.Logger
}

func newLimiter(db *firestore.Client, kind string, burst int, interval time.Duration, now func() time.Time, log *slog.Logger) limiter {
	return limiter{limit: ratelimit.New(db, kind, burst, interval, now), log: log}
}

// allowed reports whether every one of names has an attempt left, as far as this instance
// knows; it spends and reads nothing (a failure, which fail records, is what costs).
func (l limiter) allowed(names ...string) bool {
	ok, _ := l.limit.Allowed(names...)
	return ok
}

// fail spends an attempt of every one of names, in one transaction. A store error is logged
// (the failure is then counted on this instance only); the request is answered anyway.
func (l limiter) fail(ctx context.Context, names ...string) {
	if _, err := l.limit.Spend(ctx, names...); err != nil {
		l.log.Warn("sign-in rate limit", "err", err)
	}
}

// take spends an attempt of name, reporting whether there was one; a store error refuses (the
// record the attempt would write could not be written either).
func (l limiter) take(ctx context.Context, name string) bool {
	ok, err := l.limit.Take(ctx, name)
	if err != nil {
		l.log.Warn("sign-in rate limit", "err", err)
	}
	return ok && err == nil
}

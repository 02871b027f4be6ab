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
// same bad key again and again hits the negative cache, and one presenting ever new keys runs
// out of failures. Failures are limited per key id and address together, tightly (guessing one
// key's secret, or a stale key retried), and per address loosely (ever new key ids): one
// client's bad keys thus do not refuse the valid keys of others behind the same address (a NAT,
// an office), until that client has failed more often than any honest one does. The limits are
// shared by every instance (platform/ratelimit): each failure is spent in small transactions,
// and a check reads nothing, so a client spreading its guesses over Cloud Run's instances gets
// at most one more per instance than a limit before each knows. The negative cache is per
// instance and bounded: past maxTracked entries it starts over, which only lets a few more
// reads through.
const (
	// badKeyTTL is how long a key that failed verification is refused without a read. A key
	// cannot become valid (keys are minted with fresh random secrets), so this only bounds
	// memory.
	badKeyTTL = 5 * time.Minute
	// keyFailureBurst and keyFailureInterval are the failures one key id may have from one
	// address: a burst, then one a second.
	keyFailureBurst    = 30
	keyFailureInterval = time.Second
	// addressFailureBurst and addressFailureInterval are the failures one address may have
	// over all key ids: a burst ten times the key id's, then ten a second.
	addressFailureBurst    = 300
	addressFailureInterval = 100 * time.Millisecond
	// maxTracked bounds the negative cache.
	maxTracked = 10000
)

// failures remembers bad keys and rate-limits verification failures.
type failures struct {
	perKey     *ratelimit.Limit // names: key id and address
	perAddress *ratelimit.Limit // names: address
	log        *slog.Logger

	mu  sync.Mutex
	bad map[string]time.Time // key hash → until when it is refused unread
}

func newFailures(db *firestore.Client, now func() time.Time, log *slog.Logger) *failures {
	if log == nil {
		log = slog.Default()
	}
	return &failures{
		perKey:     ratelimit.New(db, "auth.failure.key", keyFailureBurst, keyFailureInterval, now),
		perAddress: ratelimit.New(db, "auth.failure.address", addressFailureBurst, addressFailureInterval, now),
		log:        log,
	}
}

// known reports whether the key with hash h failed verification within badKeyTTL.
func (f *failures) known(h string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	until, ok := f.bad[h]
	return ok && now.Before(until)
}

// exhausted returns a resource_exhausted error when the key id from client, or client, has no
// failures left, nil otherwise. It spends and reads nothing: only a failure does.
func (f *failures) exhausted(client, keyID string) error {
	for _, l := range f.limits(client, keyID) {
		ok, wait := l.limit.Allowed(l.name)
		if ok {
			continue
		}
		wait = time.Duration(ratelimit.RetryAfter(wait)) * time.Second
		err := connect.NewError(connect.CodeResourceExhausted,
			fmt.Errorf("too many failed API key checks %s; retry in %s", l.what, wait))
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
	for _, l := range f.limits(client, keyID) {
		if _, err := l.limit.Spend(context.WithoutCancel(ctx), l.name); err != nil {
			f.log.Warn("auth failure limit", "err", err)
		}
	}
}

// scoped is one limit a failure counts against, the name it counts under, and what the name
// is, for the refusal's message.
type scoped struct {
	limit      *ratelimit.Limit
	name, what string
}

// limits are the limits of a failure of keyID from client: the key id with the address, and
// the address alone when it is known (without one, the key id is the only name there is).
func (f *failures) limits(client, keyID string) []scoped {
	out := []scoped{{f.perKey, "key id:" + keyID + "\x00address:" + client, "for this key from this address"}}
	if client != "" {
		out = append(out, scoped{f.perAddress, "address:" + client, "from this address"})
	}
	return out
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

// Package ratelimit is a rate limit every instance of Hangar shares: Cloud Run runs many, and a
// limit each keeps in memory lets a client that spreads its requests over them multiply it.
//
// A limit is a token bucket per name (an address, a user, a key id): Burst events at once, then
// one every Interval. It is kept as GCRA (the generic cell rate algorithm), which is a token
// bucket stored as one time per name: the theoretical arrival time (TAT) of the next event,
// which every event pushes Interval further; an event is allowed while the TAT is at most
// (Burst-1)·Interval ahead of now. Each name is one small Firestore document holding its TAT,
// so spending an event on every name a request counts against is one transaction of one read
// and one write per name, and the document expires (expire_at) once the bucket is full again.
//
// Every instance keeps the TATs it has seen. A TAT only grows, so one seen here is a lower bound
// of the shared one: when even it says a name is exhausted, the request is refused without a
// read (the fast local pre-check). Allowed decides from that alone and costs nothing; Spend and
// Take go to Firestore, and learn the shared TAT. A check that only looks (Allowed) before a
// spend (Spend, on a failure) therefore lets each instance through at most once more than the
// shared limit before it learns, whatever the number of instances.
package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Collection holds one document per limit and name.
const Collection = "rateLimits"

// ExpireField is when a name's document may go: its bucket is full again by then. A Firestore
// TTL policy on it, or Sweep, deletes it.
const ExpireField = "expire_at"

var expires = store.Expires(Collection, ExpireField)

// maxKnown bounds the TATs an instance keeps; past it they start over, which only costs reads.
const maxKnown = 10000

// Limit is one shared limit: a kind (the documents' prefix, e.g. "signin.start") and its rate.
type Limit struct {
	Kind     string
	Burst    int
	Interval time.Duration

	db  *firestore.Client
	now func() time.Time

	mu    sync.Mutex
	known map[string]time.Time // name → the latest TAT this instance saw
}

// New returns the limit kind over db: burst events, then one every interval, per name.
func New(db *firestore.Client, kind string, burst int, interval time.Duration, now func() time.Time) *Limit {
	return &Limit{Kind: kind, Burst: burst, Interval: interval, db: db, now: now, known: map[string]time.Time{}}
}

type record struct {
	TAT      time.Time `firestore:"tat"`
	ExpireAt time.Time `firestore:"expire_at"`
}

// tolerance is how far ahead of now the TAT may be with an event still allowed.
func (l *Limit) tolerance() time.Duration { return time.Duration(l.Burst-1) * l.Interval }

// Allowed reports whether every one of names has an event left, as far as this instance knows;
// it spends nothing and reads nothing. When not, wait is how long until one is left here.
func (l *Limit) Allowed(names ...string) (ok bool, wait time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	limit := now.Add(l.tolerance())
	for _, n := range names {
		if tat := l.known[n]; tat.After(limit) && tat.Sub(limit) > wait {
			wait = tat.Sub(limit)
		}
	}
	return wait <= 0, wait
}

// Spend counts one event against every one of names that has one left (a failure happened
// whatever the limit says; an exhausted name stays exhausted as long as it was), in one
// transaction, and reports whether all of them had one.
func (l *Limit) Spend(ctx context.Context, names ...string) (bool, error) {
	return l.update(ctx, names, false)
}

// Take spends one event of every one of names only if each has one left, in one transaction,
// and reports whether it did. The local pre-check refuses without a read when this instance
// already knows one is exhausted.
func (l *Limit) Take(ctx context.Context, names ...string) (bool, error) {
	if ok, _ := l.Allowed(names...); !ok {
		return false, nil
	}
	return l.update(ctx, names, true)
}

// update moves the TAT of every name one interval on (all or, with onlyIfAllowed, none when
// one is exhausted) and remembers the TATs it read or wrote.
func (l *Limit) update(ctx context.Context, names []string, onlyIfAllowed bool) (bool, error) {
	if l.Burst < 1 || l.Interval <= 0 {
		return false, errors.New("ratelimit: a limit needs a burst and an interval")
	}
	refs := make([]*firestore.DocumentRef, len(names))
	for i, n := range names {
		refs[i] = l.db.Collection(Collection).Doc(l.docID(n))
	}
	var seen []time.Time
	var allowed bool
	err := l.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		now := l.now()
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return err
		}
		tats := make([]time.Time, len(names))
		within := make([]bool, len(names))
		allowed = true
		for i, s := range snaps {
			tats[i] = now
			if s.Exists() {
				var r record
				if err := s.DataTo(&r); err != nil {
					return err
				}
				if r.TAT.After(now) {
					tats[i] = r.TAT
				}
			}
			within[i] = tats[i].Sub(now) <= l.tolerance()
			allowed = allowed && within[i]
		}
		seen = tats
		if onlyIfAllowed && !allowed {
			return nil
		}
		for i, ref := range refs {
			if !within[i] {
				continue // an exhausted name stays as it is: more refusals do not lengthen the wait
			}
			tats[i] = tats[i].Add(l.Interval)
			if err := tx.Set(ref, record{TAT: tats[i], ExpireAt: tats[i]}); err != nil {
				return err
			}
		}
		seen = tats
		return nil
	}, firestore.MaxAttempts(3))
	if err != nil {
		if !onlyIfAllowed {
			// The failure still happened: count it here at least, so that contention or an
			// outage does not open the limit on this instance.
			l.spendLocally(names)
		}
		return false, fmt.Errorf("rate limit %s: %w", l.Kind, err)
	}
	l.remember(names, seen)
	return allowed, nil
}

// spendLocally moves the TATs this instance knows of names one interval on, as a spend would.
func (l *Limit) spendLocally(names []string) {
	now := l.now()
	tats := make([]time.Time, len(names))
	l.mu.Lock()
	for i, n := range names {
		tats[i] = l.known[n]
		if tats[i].Before(now) {
			tats[i] = now
		}
		if tats[i].Sub(now) <= l.tolerance() {
			tats[i] = tats[i].Add(l.Interval)
		}
	}
	l.mu.Unlock()
	l.remember(names, tats)
}

// remember keeps the TATs seen, never going back.
func (l *Limit) remember(names []string, tats []time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.known)+len(names) > maxKnown {
		l.known = map[string]time.Time{}
	}
	for i, n := range names {
		if tats[i].After(l.known[n]) {
			l.known[n] = tats[i]
		}
	}
}

// docID names a name's document: the kind and a hash, so that any name (an address, a user id,
// a key id) is a valid document id and the database holds no address in the clear.
func (l *Limit) docID(name string) string {
	h := sha256.Sum256([]byte(l.Kind + "\x00" + name))
	return l.Kind + "-" + hex.EncodeToString(h[:16])
}

// RetryAfter rounds a wait up to whole seconds for a Retry-After answer (at least one).
func RetryAfter(wait time.Duration) int {
	return max(1, int(math.Ceil(wait.Seconds())))
}

// Sweep deletes up to limit documents whose buckets are full again: one bounded step of the
// sweeps every tick runs, for deployments without a TTL policy on expire_at.
func Sweep(ctx context.Context, db *firestore.Client, now time.Time, limit int) (int, error) {
	return store.DeleteExpired(ctx, db, expires, now, limit)
}

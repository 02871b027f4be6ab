package signin

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rates of what an unauthenticated or guessing client may do.
const (
	// userCodeFailureRate and userCodeFailureBurst are the wrong user codes a person, and an
	// address, may enter: 10, then one a minute. Guessing one live code of 20^8 takes billions.
	userCodeFailureRate  = rate.Limit(1.0 / 60)
	userCodeFailureBurst = 10
	// startRate and startBurst bound the sign-ins, and apart the device codes, one address
	// starts: each writes a Firestore record before anyone is authenticated.
	startRate  = rate.Limit(1.0 / 6)
	startBurst = 20
	// maxLimited bounds the limiters kept; past it they start over, which only lets a few more
	// attempts through.
	maxLimited = 10000
)

// limiter is a token bucket per name.
type limiter struct {
	rate  rate.Limit
	burst int

	mu   sync.Mutex
	byID map[string]*rate.Limiter
}

func newLimiter(r rate.Limit, burst int) limiter {
	return limiter{rate: r, burst: burst, byID: make(map[string]*rate.Limiter)}
}

func (l *limiter) get(name string) *rate.Limiter {
	lim, ok := l.byID[name]
	if !ok {
		if len(l.byID) >= maxLimited {
			l.byID = make(map[string]*rate.Limiter)
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.byID[name] = lim
	}
	return lim
}

// allowed reports whether every one of names has a token left, spending none.
func (l *limiter) allowed(now time.Time, names ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		if l.get(n).TokensAt(now) < 1 {
			return false
		}
	}
	return true
}

// fail spends a token of every one of names.
func (l *limiter) fail(now time.Time, names ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range names {
		l.get(n).AllowN(now, 1)
	}
}

// take spends a token of name, reporting whether there was one.
func (l *limiter) take(name string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.get(name).AllowN(now, 1)
}

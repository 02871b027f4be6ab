package webhooks

import (
	"context"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/clock"
)

// registration is what the inbound route needs of a registration: its secret opened.
type registration struct {
	id, provider   string
	owner          string // the user who created it
	secret         []byte
	lastDeliveryAt time.Time
}

// registry caches registrations for the inbound route, so that a burst of deliveries costs no
// Firestore read and no unsealing per request. Unknown ids are cached too, so that probing
// random ids costs no more. Entries live for ttl: how long a change made through another
// instance takes to apply here; changes made here apply at once (forget).
type registry struct {
	load  func(ctx context.Context, id string) (*registration, error)
	clock clock.Clock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]cachedRegistration
}

type cachedRegistration struct {
	reg     *registration // nil: no such registration
	expires time.Time
}

// maxCachedRegistrations bounds the cache; past it the cache starts over, which only costs reads.
const maxCachedRegistrations = 10000

func newRegistry(load func(context.Context, string) (*registration, error), c clock.Clock, ttl time.Duration) *registry {
	return &registry{load: load, clock: c, ttl: ttl, entries: make(map[string]cachedRegistration)}
}

// get returns the registration id, or nil when there is none.
func (r *registry) get(ctx context.Context, id string) (*registration, error) {
	now := r.clock.Now()
	r.mu.Lock()
	e, hit := r.entries[id]
	r.mu.Unlock()
	if hit && now.Before(e.expires) {
		return e.reg, nil
	}
	reg, err := r.load(ctx, id)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.entries) >= maxCachedRegistrations {
		r.entries = make(map[string]cachedRegistration)
	}
	r.entries[id] = cachedRegistration{reg: reg, expires: now.Add(r.ttl)}
	return reg, nil
}

// delivered records that a delivery to id verified at t, for the cached copy.
func (r *registry) delivered(id string, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.entries[id]; ok && e.reg != nil {
		reg := *e.reg
		reg.lastDeliveryAt = t
		e.reg = &reg
		r.entries[id] = e
	}
}

func (r *registry) forget(id string) {
	r.mu.Lock()
	delete(r.entries, id)
	r.mu.Unlock()
}

// load reads and unseals a registration for the registry; nil when there is none.
func (s *Service) load(ctx context.Context, id string) (*registration, error) {
	rec, err := s.read(ctx, nil, id)
	if connect.CodeOf(err) == connect.CodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	secret, err := s.sealer.Open(rec.SealedSecret, sealOwner(id))
	if err != nil {
		return nil, err
	}
	return &registration{id: id, provider: rec.Provider, owner: rec.CreatedBy, secret: secret, lastDeliveryAt: rec.LastDeliveryAt}, nil
}

// Package fleet keeps the registry of sandbox hosts in Firestore (`hosts/{id}`): where each host
// answers, what it can hold, how full it is and when it last said it was alive. Hosts register
// and heartbeat; the API functions read it to place a new session and to reach the host of an
// existing one.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Collection is the Firestore collection of host records.
const Collection = "hosts"

// Host states.
const (
	// Ready hosts take new sessions.
	Ready = "ready"
	// Draining hosts keep their sessions but take no new ones.
	Draining = "draining"
	// Stopped hosts shut down cleanly; their sessions were evicted first.
	Stopped = "stopped"
)

// Host is one sandbox host's record.
type Host struct {
	ID string `firestore:"id"`
	// Address is the base URL of the host's internal API, e.g. http://10.0.0.7:7070.
	Address string `firestore:"address"`
	State   string `firestore:"state"`
	// CPUs, MemoryBytes and MaxSandboxes are the host's capacity.
	CPUs         float64 `firestore:"cpus"`
	MemoryBytes  int64   `firestore:"memory_bytes"`
	MaxSandboxes int     `firestore:"max_sandboxes"`
	// MemoryCapacityBytes is how much its sandboxes' memory limits may add up to (its RAM times
	// its overcommit ratio); 0 when the host does not say.
	MemoryCapacityBytes int64 `firestore:"memory_capacity_bytes"`
	// Sandboxes is how many sandboxes the host ran at its last heartbeat, and
	// MemoryReservedBytes what their memory limits (warm sandboxes' included) added up to.
	Sandboxes           int       `firestore:"sandboxes"`
	MemoryReservedBytes int64     `firestore:"memory_reserved_bytes"`
	StartedAt           time.Time `firestore:"started_at"`
	HeartbeatAt         time.Time `firestore:"heartbeat_at"`
}

// ErrNoHost means no live host has room for another sandbox.
var ErrNoHost = errors.New("no sandbox host has room")

// ErrNotFound is a host id with no record.
var ErrNotFound = errors.New("host not found")

// Fleet reads and writes host records.
type Fleet struct {
	db  *firestore.Client
	now func() time.Time
	// timeout is how long a host may go without a heartbeat before it counts as lost.
	timeout time.Duration
}

// New returns the fleet over db; a host silent for longer than timeout is lost.
func New(db *firestore.Client, now func() time.Time, timeout time.Duration) *Fleet {
	return &Fleet{db: db, now: now, timeout: timeout}
}

func (f *Fleet) doc(id string) *firestore.DocumentRef { return f.db.Collection(Collection).Doc(id) }

// Register writes h as ready, replacing any earlier record of the same id.
func (f *Fleet) Register(ctx context.Context, h Host) error {
	now := f.now()
	h.State, h.StartedAt, h.HeartbeatAt = Ready, now, now
	if _, err := f.doc(h.ID).Set(ctx, h); err != nil {
		return fmt.Errorf("register host %s: %w", h.ID, err)
	}
	return nil
}

// Load is how full a host is.
type Load struct {
	Sandboxes           int
	MemoryReservedBytes int64
}

// Heartbeat says the host is alive and how full it is.
func (f *Fleet) Heartbeat(ctx context.Context, id string, load Load) error {
	_, err := f.doc(id).Update(ctx, []firestore.Update{
		{Path: "heartbeat_at", Value: f.now()},
		{Path: "sandboxes", Value: load.Sandboxes},
		{Path: "memory_reserved_bytes", Value: load.MemoryReservedBytes},
	})
	if err != nil {
		return fmt.Errorf("heartbeat host %s: %w", id, err)
	}
	return nil
}

// SetState records a host's state (Draining, Stopped).
func (f *Fleet) SetState(ctx context.Context, id, state string) error {
	if _, err := f.doc(id).Update(ctx, []firestore.Update{{Path: "state", Value: state}}); err != nil {
		return fmt.Errorf("set host %s %s: %w", id, state, err)
	}
	return nil
}

// Get reads one host record.
func (f *Fleet) Get(ctx context.Context, id string) (*Host, error) {
	h, err := store.Read[Host](ctx, nil, f.doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	return h, err
}

// Alive reports whether h has heartbeaten within the timeout and has not stopped.
func (f *Fleet) Alive(h *Host) bool {
	return h.State != Stopped && f.now().Sub(h.HeartbeatAt) <= f.timeout
}

// List returns every host record.
func (f *Fleet) List(ctx context.Context) ([]*Host, error) {
	hosts, err := store.All[Host](f.db.Collection(Collection).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list hosts: %w", err)
	}
	out := make([]*Host, len(hosts))
	for i := range hosts {
		out[i] = &hosts[i]
	}
	return out, nil
}

// Choose picks, of hosts, the live, ready one with the largest share of its sandbox slots free,
// or ErrNoHost; a host whose sandboxes' memory limits fill its memory capacity is full too. The
// counts are as of each host's last heartbeat, so two placements in one heartbeat may land on
// one host; each host still refuses past its own capacity.
func (f *Fleet) Choose(hosts []*Host) (*Host, error) {
	var best *Host
	for _, h := range hosts {
		if h.State != Ready || !f.Alive(h) || h.Sandboxes >= h.MaxSandboxes || memoryFull(h) {
			continue
		}
		if best == nil || free(h) > free(best) {
			best = h
		}
	}
	if best == nil {
		return nil, ErrNoHost
	}
	return best, nil
}

func memoryFull(h *Host) bool {
	return h.MemoryCapacityBytes > 0 && h.MemoryReservedBytes >= h.MemoryCapacityBytes
}

func free(h *Host) float64 {
	return float64(h.MaxSandboxes-h.Sandboxes) / float64(h.MaxSandboxes)
}

// Lost returns the hosts that stopped heartbeating without stopping cleanly.
func (f *Fleet) Lost(ctx context.Context) ([]*Host, error) {
	hosts, err := f.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Host
	for _, h := range hosts {
		if h.State != Stopped && !f.Alive(h) {
			out = append(out, h)
		}
	}
	return out, nil
}

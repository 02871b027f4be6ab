// Package fleet keeps the registry of sandbox hosts in Firestore (`hosts/{id}`): where each host
// answers, what it can hold, how full it is, when it last said it was alive and which state it
// is in (States, the one table of the moves between them). Hosts register and heartbeat; the API
// functions read it to place a new session and to reach the host of an existing one, and
// FleetService cordons, drains and evacuates hosts, keeping those jobs' progress here too
// (`fleet_jobs/{id}`).
package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/states"
	"github.com/hangar-dev/hangar/platform/store"
)

// Collection is the Firestore collection of host records.
const Collection = "hosts"

// State is where a host is in its life; States lists the moves. docs/fleet.md explains them.
type State string

// Host states.
const (
	// Ready hosts take new sessions.
	Ready State = "ready"
	// Cordoned hosts keep their sessions but take no new ones, until uncordoned.
	Cordoned State = "cordoned"
	// Draining hosts take no new sessions and are having theirs moved off (DrainHost, or the
	// host's own clean shutdown).
	Draining State = "draining"
	// Drained hosts hold no sessions and take none: drained by an admin, or shut down cleanly.
	Drained State = "drained"
	// Lost hosts stopped heartbeating without draining; their sessions resume from their last
	// checkpoints (EvacuateHost).
	Lost State = "lost"
)

// States is the host state machine. Register moves any state to ready (a host that restarts
// starts afresh) but cordoned, which an admin set and which outlives restarts.
var States = states.Table[State]{
	{From: Ready, To: []State{Cordoned, Draining, Lost}},
	{From: Cordoned, To: []State{Ready, Draining, Lost}},
	// A drain that could not move every session leaves the host draining; uncordon or cordon
	// ends it.
	{From: Draining, To: []State{Drained, Cordoned, Ready, Lost}},
	{From: Drained, To: []State{Ready, Cordoned, Draining}},
	{From: Lost, To: []State{Ready, Drained}},
}

// MoveError is a move the table does not allow.
type MoveError struct {
	ID       string
	From, To State
}

func (e *MoveError) Error() string {
	return fmt.Sprintf("host %s is %s and cannot become %s", e.ID, e.From, e.To)
}

// Host is one sandbox host's record.
type Host struct {
	ID string `firestore:"id"`
	// Address is the base URL of the host's internal API, e.g. http://10.0.0.7:7070.
	Address string `firestore:"address"`
	State   State  `firestore:"state"`
	// Version is the build the host runs; Zone where it runs (HANGAR_HOST_ZONE).
	Version string `firestore:"version"`
	Zone    string `firestore:"zone"`
	// DiskBytes is the size of the file system of the host's data dir.
	DiskBytes int64 `firestore:"disk_bytes"`
	// CPUs, MemoryBytes and MaxSandboxes are the host's capacity.
	CPUs         float64 `firestore:"cpus"`
	MemoryBytes  int64   `firestore:"memory_bytes"`
	MaxSandboxes int     `firestore:"max_sandboxes"`
	// MemoryCapacityBytes is how much its sandboxes' memory limits may add up to (its RAM times
	// its overcommit ratio); 0 when the host does not say.
	MemoryCapacityBytes int64 `firestore:"memory_capacity_bytes"`
	// Sandboxes is how many sandboxes the host ran at its last heartbeat, and
	// MemoryReservedBytes what their memory limits (warm sandboxes' included) added up to.
	Sandboxes           int   `firestore:"sandboxes"`
	MemoryReservedBytes int64 `firestore:"memory_reserved_bytes"`
	// Usage is the rest of the last heartbeat's report, for FleetService to show.
	Usage       Usage     `firestore:"usage"`
	StartedAt   time.Time `firestore:"started_at"`
	HeartbeatAt time.Time `firestore:"heartbeat_at"`
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

// Register writes h as ready, replacing any earlier record of the same id, and returns the
// state it registered in: a host an admin cordoned stays cordoned across restarts.
func (f *Fleet) Register(ctx context.Context, h Host) (State, error) {
	err := f.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		now := f.now()
		h.State, h.StartedAt, h.HeartbeatAt = Ready, now, now
		if old, err := store.Read[Host](ctx, tx, f.doc(h.ID)); err == nil && old.State == Cordoned {
			h.State = Cordoned
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.Set(f.doc(h.ID), h)
	})
	if err != nil {
		return "", fmt.Errorf("register host %s: %w", h.ID, err)
	}
	return h.State, nil
}

// Load is how full a host is.
type Load struct {
	Sandboxes           int
	MemoryReservedBytes int64
	Usage               Usage
}

// Usage is what a host reports of itself beyond what placement reads.
type Usage struct {
	CPUsBooked      float64 `firestore:"cpus_booked"`
	MemoryUsedBytes int64   `firestore:"memory_used_bytes"`
	DiskUsedBytes   int64   `firestore:"disk_used_bytes"`
	// WarmTarget is how many ready sandboxes the warm pool keeps per image; WarmReady how many
	// it holds now, by image reference.
	WarmTarget   int            `firestore:"warm_target"`
	WarmReady    map[string]int `firestore:"warm_ready"`
	CachedImages []string       `firestore:"cached_images"`
}

// Heartbeat says the host is alive and how full it is, and returns the state its record is
// in, so that the host refuses placements once cordoned or draining.
func (f *Fleet) Heartbeat(ctx context.Context, id string, load Load) (State, error) {
	_, err := f.doc(id).Update(ctx, []firestore.Update{
		{Path: "heartbeat_at", Value: f.now()},
		{Path: "sandboxes", Value: load.Sandboxes},
		{Path: "memory_reserved_bytes", Value: load.MemoryReservedBytes},
		{Path: "usage", Value: load.Usage},
	})
	if err != nil {
		return "", fmt.Errorf("heartbeat host %s: %w", id, err)
	}
	h, err := f.Get(ctx, id)
	if err != nil {
		return "", fmt.Errorf("heartbeat host %s: %w", id, err)
	}
	return h.State, nil
}

// Move changes a host's state when States allows it (staying put is a no-op) and when allow,
// if given, accepts the host as it is; it returns the record as written.
func (f *Fleet) Move(ctx context.Context, id string, to State, allow func(*Host) error) (*Host, error) {
	var out *Host
	err := f.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		h, err := store.Read[Host](ctx, tx, f.doc(id))
		if errors.Is(err, store.ErrNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if allow != nil {
			if err := allow(h); err != nil {
				return err
			}
		}
		out = h
		if h.State == to {
			return nil
		}
		if !States.CanMove(h.State, to) {
			return &MoveError{ID: id, From: h.State, To: to}
		}
		h.State = to
		return tx.Update(f.doc(id), []firestore.Update{{Path: "state", Value: to}})
	})
	if err != nil {
		return nil, fmt.Errorf("move host %s to %s: %w", id, to, err)
	}
	return out, nil
}

// Get reads one host record.
func (f *Fleet) Get(ctx context.Context, id string) (*Host, error) {
	h, err := store.Read[Host](ctx, nil, f.doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrNotFound
	}
	return h, err
}

// Alive reports whether h has heartbeaten within the timeout and is neither drained nor lost.
func (f *Fleet) Alive(h *Host) bool {
	return h.State != Drained && h.State != Lost && f.now().Sub(h.HeartbeatAt) <= f.timeout
}

// HeartbeatAge is how long ago h last heartbeat.
func (f *Fleet) HeartbeatAge(h *Host) time.Duration { return f.now().Sub(h.HeartbeatAt) }

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

// Candidates ranks, of hosts, the live, ready ones with room, the largest share of free sandbox
// slots first (then the largest share of bookable memory free), or answers ErrNoHost; a host
// whose sandboxes' memory limits fill its memory capacity is full too. The counts are as of
// each host's last heartbeat, so two placements in one heartbeat may land on one host; each
// host still refuses past its own capacity, and placement then tries the next candidate.
func (f *Fleet) Candidates(hosts []*Host) ([]*Host, error) {
	var out []*Host
	for _, h := range hosts {
		if h.State != Ready || !f.Alive(h) || h.Sandboxes >= h.MaxSandboxes || memoryFull(h) {
			continue
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, ErrNoHost
	}
	slices.SortStableFunc(out, func(a, b *Host) int {
		return cmp.Or(cmp.Compare(free(b), free(a)), cmp.Compare(freeMemory(b), freeMemory(a)))
	})
	return out, nil
}

func memoryFull(h *Host) bool {
	return h.MemoryCapacityBytes > 0 && h.MemoryReservedBytes >= h.MemoryCapacityBytes
}

func free(h *Host) float64 {
	return float64(h.MaxSandboxes-h.Sandboxes) / float64(h.MaxSandboxes)
}

// freeMemory is the share of h's bookable memory not booked; 1 when h does not say.
func freeMemory(h *Host) float64 {
	if h.MemoryCapacityBytes <= 0 {
		return 1
	}
	return float64(h.MemoryCapacityBytes-h.MemoryReservedBytes) / float64(h.MemoryCapacityBytes)
}

// Lost returns the hosts that stopped heartbeating without draining (or were marked lost).
func (f *Fleet) Lost(ctx context.Context) ([]*Host, error) {
	hosts, err := f.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []*Host
	for _, h := range hosts {
		if h.State != Drained && !f.Alive(h) {
			out = append(out, h)
		}
	}
	return out, nil
}

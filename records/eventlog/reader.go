package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Reader limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
	// MaxFilterValues is Firestore's limit of values in one `in` filter, and of disjunctions in
	// one query: kinds × tool_names may not exceed it either.
	MaxFilterValues = 30
	// followPage is the page size of Follow's queries.
	followPage = 1000
	// A doorbell announcing an event the queries do not return yet is retried this many times,
	// from this delay doubling (10+20+40+80+160 ms).
	catchUpRetries    = 5
	catchUpFirstRetry = 10 * time.Millisecond
)

// ErrInvalidQuery is matched (errors.Is) by every *QueryError.
var ErrInvalidQuery = errors.New("invalid event query")

// QueryError says which input of a read was refused and why; callers answer invalid_argument
// naming Field.
type QueryError struct {
	Field  string // session_id, after_idx, before_idx, limit, kinds, tool_names or since
	Reason string
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("%v: %s: %s", ErrInvalidQuery, e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidQuery) true.
func (e *QueryError) Is(target error) bool { return target == ErrInvalidQuery }

// Query selects events for List.
type Query struct {
	// AfterIdx returns events with idx > AfterIdx, from the oldest; 0 starts at the beginning.
	AfterIdx int64
	// BeforeIdx returns events with idx < BeforeIdx; 0 means no bound. Without AfterIdx it
	// selects the LAST Limit events before it, which is how a UI pages backwards.
	BeforeIdx int64
	// Limit is the page size: 0 means DefaultListLimit, more than MaxListLimit is cut to it.
	Limit int
	// Kinds and ToolNames keep events whose kind / tool_name is one of theirs; empty keeps all.
	Kinds     []string
	ToolNames []string
	// DurableOnly skips events not marked Durable.
	DurableOnly bool
}

func (q Query) validate() error {
	switch {
	case q.AfterIdx < 0:
		return &QueryError{Field: "after_idx", Reason: "must not be negative"}
	case q.BeforeIdx < 0:
		return &QueryError{Field: "before_idx", Reason: "must not be negative"}
	case q.Limit < 0:
		return &QueryError{Field: "limit", Reason: "must not be negative"}
	case len(q.Kinds) > MaxFilterValues:
		return &QueryError{Field: "kinds", Reason: fmt.Sprintf("%d values, at most %d", len(q.Kinds), MaxFilterValues)}
	case len(q.ToolNames) > MaxFilterValues:
		return &QueryError{Field: "tool_names", Reason: fmt.Sprintf("%d values, at most %d", len(q.ToolNames), MaxFilterValues)}
	case len(q.Kinds)*len(q.ToolNames) > MaxFilterValues:
		return &QueryError{Field: "tool_names", Reason: fmt.Sprintf("%d kinds × %d tool names exceeds %d combinations", len(q.Kinds), len(q.ToolNames), MaxFilterValues)}
	}
	return nil
}

// Reader reads session event logs; it holds no state and is safe for concurrent use.
type Reader struct {
	db *firestore.Client
}

// NewReader returns a Reader on db.
func NewReader(db *firestore.Client) *Reader {
	return &Reader{db: db}
}

// List returns one page of sessionID's events in ascending idx order, and the idx to pass as
// AfterIdx for the next page forward: the last returned idx, or q.AfterIdx when none matched.
// Invalid input yields a *QueryError.
func (r *Reader) List(ctx context.Context, sessionID string, q Query) (events []Event, nextAfterIdx int64, err error) {
	if err := q.validate(); err != nil {
		return nil, 0, err
	}
	fromEnd := q.BeforeIdx > 0 && q.AfterIdx == 0
	events, err = r.page(ctx, sessionID, q, fromEnd)
	if err != nil {
		return nil, 0, err
	}
	nextAfterIdx = q.AfterIdx
	if len(events) > 0 {
		nextAfterIdx = events[len(events)-1].Idx
	}
	return events, nextAfterIdx, nil
}

// Tail returns the last n events of sessionID (at most MaxListLimit), in ascending idx order.
func (r *Reader) Tail(ctx context.Context, sessionID string, n int) ([]Event, error) {
	q := Query{Limit: n}
	if err := q.validate(); err != nil {
		return nil, err
	}
	return r.page(ctx, sessionID, q, true)
}

// Last returns the newest event of sessionID of the given kind, and false when it has none.
func (r *Reader) Last(ctx context.Context, sessionID, kind string) (Event, bool, error) {
	events, err := r.page(ctx, sessionID, Query{Kinds: []string{kind}, Limit: 1}, true)
	if err != nil || len(events) == 0 {
		return Event{}, false, err
	}
	return events[0], true, nil
}

// page runs q; fromEnd takes the newest matching events instead of the oldest.
func (r *Reader) page(ctx context.Context, sessionID string, q Query, fromEnd bool) ([]Event, error) {
	col, err := eventsOf(r.db, sessionID)
	if err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)

	fq := col.Query
	if q.AfterIdx > 0 {
		fq = fq.Where("idx", ">", q.AfterIdx)
	}
	if q.BeforeIdx > 0 {
		fq = fq.Where("idx", "<", q.BeforeIdx)
	}
	if len(q.Kinds) > 0 {
		fq = fq.Where("kind", "in", distinct(q.Kinds))
	}
	if len(q.ToolNames) > 0 {
		fq = fq.Where("tool_name", "in", distinct(q.ToolNames))
	}
	if q.DurableOnly {
		fq = fq.Where("durable", "==", true)
	}
	dir := firestore.Asc
	if fromEnd {
		dir = firestore.Desc
	}
	events, err := store.All[Event](fq.OrderBy("idx", dir).Limit(limit).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list events of session %s: %w", sessionID, err)
	}
	if fromEnd {
		slices.Reverse(events)
	}
	return events, nil
}

// Follow calls fn with every event of sessionID whose idx is greater than since, in idx order,
// each exactly once: first the stored backlog, page by page, then new events as they are
// stored. To resume after a disconnect, pass the last idx delivered as since.
//
// Events are always read with queries from the last delivered idx, which Firestore answers
// consistently. A snapshot listener on the newest event serves only as a doorbell saying how
// far the log reaches: listener snapshots of the emulator are not consistent under concurrent
// commits (a new listener's first snapshot can lack events older than ones it holds), so
// trusting their contents could skip events. The doorbell opens before the backlog is read,
// so nothing appended during the switch goes unnoticed.
//
// Follow returns ctx's error when ctx ends, fn's error as is when fn fails, or a read error.
func (r *Reader) Follow(ctx context.Context, sessionID string, since int64, fn func(Event) error) error {
	if since < 0 {
		return &QueryError{Field: "since", Reason: "must not be negative"}
	}
	col, err := eventsOf(r.db, sessionID)
	if err != nil {
		return err
	}
	listen := func() *firestore.QuerySnapshotIterator {
		return col.OrderBy("idx", firestore.Desc).Limit(1).Snapshots(ctx)
	}
	doorbell := listen()
	defer func() { doorbell.Stop() }()
	f := follower{col: col, cursor: since, fn: fn}
	if err := f.catchUp(ctx, 0); err != nil {
		return err
	}
	for broken := 0; ; {
		snap, err := doorbell.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			// A listen stream can be cut (the emulator resets streams under load): the queries
			// are the truth, so ring a new doorbell, catch up, and only give up when it keeps
			// breaking.
			if broken++; broken > maxDoorbellBreaks {
				return fmt.Errorf("follow events of session %s: %w", sessionID, err)
			}
			doorbell.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(broken) * 100 * time.Millisecond):
			}
			doorbell = listen()
			if err := f.catchUp(ctx, 0); err != nil {
				return err
			}
			continue
		}
		broken = 0
		newest, err := store.All[Event](snap.Documents)
		if err != nil {
			return fmt.Errorf("follow events of session %s: %w", sessionID, err)
		}
		var top int64
		if len(newest) > 0 {
			top = newest[0].Idx
		}
		if err := f.catchUp(ctx, top); err != nil {
			return err
		}
	}
}

// maxDoorbellBreaks is how many times in a row Follow re-opens a broken listener.
const maxDoorbellBreaks = 5

// follower is the state of one Follow call: the last delivered idx and where to deliver.
type follower struct {
	col    *firestore.CollectionRef
	cursor int64
	fn     func(Event) error
}

// catchUp delivers every stored event past the cursor. The writer numbers a session's events
// without gaps, so a query that returns a later event but not the next one has raced a commit
// the emulator has not made visible to it yet (it happens under load): catchUp stops at such a
// hole, and also at an idx the doorbell announced (top) that queries do not return yet, and
// retries a few times with backoff. A hole still there after the retries is passed over, so a
// lost event can never stall a follower; what is only late arrives by the next doorbell.
func (f *follower) catchUp(ctx context.Context, top int64) error {
	delay := catchUpFirstRetry
	for attempt := 0; ; attempt++ {
		lastTry := attempt == catchUpRetries
		hole := false
		for {
			n, stopped, err := f.page(ctx, lastTry)
			if err != nil {
				return err
			}
			if stopped {
				hole = true
				break
			}
			if n < followPage {
				break
			}
		}
		if (!hole && f.cursor >= top) || lastTry {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay *= 2
	}
}

// page delivers the next page of events past the cursor and says how many it held, stopping
// at a hole in the numbering (stopped) unless pastHoles.
func (f *follower) page(ctx context.Context, pastHoles bool) (n int, stopped bool, err error) {
	q := f.col.Where("idx", ">", f.cursor).OrderBy("idx", firestore.Asc).Limit(followPage)
	events, err := store.All[Event](q.Documents(ctx))
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		return 0, false, fmt.Errorf("follow events after %d: %w", f.cursor, err)
	}
	for _, ev := range events {
		if ev.Idx != f.cursor+1 && !pastHoles {
			return n, true, nil
		}
		if err := f.fn(ev); err != nil {
			return n, false, err
		}
		f.cursor = ev.Idx
		n++
	}
	return len(events), false, nil
}

// distinct drops repeated filter values, which Firestore refuses in an `in` filter.
func distinct(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

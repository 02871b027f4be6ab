package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Writer limits and defaults.
const (
	DefaultMaxBatch = 200
	MaxBatch        = 500 // Firestore's limit of writes per commit
	// DefaultLinger is short because commits are sequential: events appended while one commit
	// is in flight already gather into the next batch, so a long linger only adds latency.
	// Measured on the emulator: 100µs gave ~4 ms Append→Follow and 10,000 appends stored in
	// ~0.37 s; 5 ms gave ~8–10 ms and ~0.5 s.
	DefaultLinger = 100 * time.Microsecond
	// maxBatchBytes keeps a commit under Firestore's 10 MiB request limit with room for the
	// field names and document paths.
	maxBatchBytes = 8 << 20
)

// Retry backoff of a failed commit.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = 2 * time.Second
)

// WriterOptions tune a Writer; zero values take the defaults.
type WriterOptions struct {
	// MaxBatch is the most events one commit carries (default DefaultMaxBatch, at most
	// MaxBatch); a full batch is committed without waiting for Linger.
	MaxBatch int
	// Linger is how long the first queued event waits for company before its batch is
	// committed, so that events appended back to back share one commit (default DefaultLinger).
	Linger time.Duration
	// Now stamps events appended with a zero At (default time.Now).
	Now func() time.Time
	// Empty says the session's log is known to be empty — a session being created, whose id was
	// never used — so the writer starts at idx 1 without reading the log first.
	Empty bool
}

// Writer numbers and stores one session's events. Only one Writer may exist per session at a
// time, anywhere: it assumes nobody else assigns idx, which the host's ownership of the session
// guarantees. Two writers would overwrite each other's events.
//
// Appended events are committed in order, one atomic batch after another, so readers see the
// log grow without holes. A failed commit is retried with backoff until it succeeds or the
// Writer is closed; events are never reordered or dropped.
type Writer struct {
	db        *firestore.Client
	col       *firestore.CollectionRef
	sessionID string
	maxBatch  int
	linger    time.Duration
	now       func() time.Time

	mu           sync.Mutex
	last         int64   // highest idx assigned
	durable      int64   // highest idx committed
	queue        []Event // assigned, not yet taken by the flusher, in idx order
	flushWaiters int
	closed       bool
	lastErr      error         // the latest commit failure, cleared by a success
	progress     chan struct{} // closed and replaced whenever durable or lastErr changes

	wake   chan struct{} // something is queued
	urgent chan struct{} // commit now: a batch is full or someone waits in Flush
	stop   context.CancelFunc
	done   chan struct{} // the flusher has exited
}

// OpenWriter starts the writer of sessionID's log, continuing after the highest idx already
// stored, so a host that takes over a session extends the same sequence.
func OpenWriter(ctx context.Context, db *firestore.Client, sessionID string, opts WriterOptions) (*Writer, error) {
	col, err := eventsOf(db, sessionID)
	if err != nil {
		return nil, err
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	opts.MaxBatch = min(opts.MaxBatch, MaxBatch)
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var last int64
	if !opts.Empty {
		if last, err = lastIdx(ctx, col); err != nil {
			return nil, fmt.Errorf("open event writer for session %s: %w", sessionID, err)
		}
	}
	runCtx, stop := context.WithCancel(context.Background())
	w := &Writer{
		db:        db,
		col:       col,
		sessionID: sessionID,
		maxBatch:  opts.MaxBatch,
		linger:    opts.Linger,
		now:       opts.Now,
		last:      last,
		durable:   last,
		progress:  make(chan struct{}),
		wake:      make(chan struct{}, 1),
		urgent:    make(chan struct{}, 1),
		stop:      stop,
		done:      make(chan struct{}),
	}
	go w.run(runCtx)
	return w, nil
}

// lastIdx returns the highest idx stored in col, 0 when it is empty.
func lastIdx(ctx context.Context, col *firestore.CollectionRef) (int64, error) {
	last, err := store.All[Event](col.OrderBy("idx", firestore.Desc).Limit(1).Documents(ctx))
	if err != nil {
		return 0, fmt.Errorf("read last event: %w", err)
	}
	if len(last) == 0 {
		return 0, nil
	}
	return last[0].Idx, nil
}

// LastIdx returns the highest idx assigned so far (0 before the session's first event).
func (w *Writer) LastIdx() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// Append assigns ev the next idx, queues it for writing and returns the idx without waiting for
// the write; Flush waits for it. Append is safe for concurrent use. Calling it after Close is a
// programming error and panics, since the event could never be stored.
func (w *Writer) Append(ev Event) int64 {
	payload, bad := normalizePayload(ev.PayloadJSON)
	ev.PayloadJSON = payload
	// Firestore refuses strings that are not UTF-8; a mangled name beats a stuck writer.
	ev.Kind = strings.ToValidUTF8(ev.Kind, "\uFFFD")
	ev.ToolName = strings.ToValidUTF8(ev.ToolName, "\uFFFD")

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		panic("eventlog: Append after Close on session " + w.sessionID)
	}
	w.last++
	ev.Idx = w.last
	if ev.At.IsZero() {
		// Stamped under the lock so that At never goes backwards as idx grows.
		ev.At = w.now()
	}
	w.queue = append(w.queue, ev)
	full := len(w.queue) >= w.maxBatch
	w.mu.Unlock()

	if bad != nil {
		slog.Warn("event payload replaced", "session_id", w.sessionID, "idx", ev.Idx, "kind", ev.Kind, "error", bad)
	}
	signal(w.wake)
	if full {
		signal(w.urgent)
	}
	return ev.Idx
}

// Flush waits until every event appended before the call is stored and readable. When ctx ends
// first it returns ctx's error together with the latest write failure, if any.
func (w *Writer) Flush(ctx context.Context) error {
	w.mu.Lock()
	target := w.last
	w.flushWaiters++
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.flushWaiters--
		w.mu.Unlock()
	}()
	signal(w.urgent)
	for {
		w.mu.Lock()
		durable, progress, lastErr := w.durable, w.progress, w.lastErr
		w.mu.Unlock()
		if durable >= target {
			return nil
		}
		select {
		case <-progress:
		case <-w.done:
			return fmt.Errorf("flush events of session %s: writer stopped with events %d..%d unwritten", w.sessionID, durable+1, target)
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("flush events %d..%d of session %s: %w (last write error: %v)", durable+1, target, w.sessionID, ctx.Err(), lastErr)
			}
			return fmt.Errorf("flush events %d..%d of session %s: %w", durable+1, target, w.sessionID, ctx.Err())
		}
	}
}

// Close flushes and stops the writer. When ctx ends before everything is stored, the events
// still queued are lost and the error says which. Closing twice is a no-op.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	err := w.Flush(ctx)
	w.stop()
	<-w.done
	if err != nil {
		return fmt.Errorf("close event writer: %w", err)
	}
	return nil
}

// run is the flusher: it commits queued events batch after batch, never two at once, because a
// commit that overtook an earlier one would let readers see a later idx before an earlier one.
func (w *Writer) run(ctx context.Context) {
	defer close(w.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		if !w.lingerFor(ctx) {
			return
		}
		for {
			batch := w.take()
			if len(batch) == 0 {
				break
			}
			if !w.commit(ctx, batch) {
				return
			}
		}
	}
}

// lingerFor waits up to the linger time for more events unless a commit is wanted now. It
// reports false when the writer is stopping.
func (w *Writer) lingerFor(ctx context.Context) bool {
	// An urgent signal left over from a batch already committed must not cut this linger short.
	select {
	case <-w.urgent:
	default:
	}
	w.mu.Lock()
	now := len(w.queue) >= w.maxBatch || w.flushWaiters > 0
	w.mu.Unlock()
	if now {
		return true
	}
	t := time.NewTimer(w.linger)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-w.urgent:
	}
	return true
}

// take removes the next batch from the queue: at most maxBatch events and maxBatchBytes of payload.
func (w *Writer) take() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, size := 0, 0
	for n < len(w.queue) && n < w.maxBatch {
		size += len(w.queue[n].PayloadJSON)
		if n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	return batch
}

// commit stores batch atomically, retrying with backoff until it succeeds; false means the
// writer stopped first.
func (w *Writer) commit(ctx context.Context, batch []Event) bool {
	delay := retryFirst
	for {
		// Set, not Create, so that retrying a commit whose answer was lost rewrites the same
		// documents instead of failing.
		wb := store.Batch(w.db)
		for _, ev := range batch {
			wb.Set(w.col.Doc(docID(ev.Idx)), ev)
		}
		_, err := wb.Commit(ctx)
		if err == nil {
			w.settle(batch[len(batch)-1].Idx, nil)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		err = fmt.Errorf("write events %d..%d of session %s: %w", batch[0].Idx, batch[len(batch)-1].Idx, w.sessionID, err)
		slog.Warn("event write failed, retrying", "error", err, "retry_in", delay)
		w.settle(0, err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		delay = min(2*delay, retryMax)
	}
}

// settle records a commit's outcome and wakes Flush callers.
func (w *Writer) settle(durable int64, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if durable > w.durable {
		w.durable = durable
	}
	w.lastErr = err
	close(w.progress)
	w.progress = make(chan struct{})
}

// signal wakes the receiver of ch without blocking; one pending wake-up is enough.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

package sessiondb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// PromptStatus is where a prompt is in an agent session's queue.
type PromptStatus string

// Prompt states: queued → running → done | failed | interrupted, or queued → dequeued.
const (
	PromptQueued      PromptStatus = "queued"
	PromptRunning     PromptStatus = "running"
	PromptDone        PromptStatus = "done"
	PromptFailed      PromptStatus = "failed"
	PromptInterrupted PromptStatus = "interrupted"
	PromptDequeued    PromptStatus = "dequeued"
)

// Prompt is one prompt of an agent session (`sessions/{id}/prompts/{prompt_id}`).
type Prompt struct {
	ID          string       `firestore:"id"`
	Text        string       `firestore:"text"`
	HarnessMode string       `firestore:"harness_mode"`
	Status      PromptStatus `firestore:"status"`
	// Seq orders the queue: prompts run in the order they were queued.
	Seq       int64     `firestore:"seq"`
	CreatedAt time.Time `firestore:"created_at"`
	StartedAt time.Time `firestore:"started_at"`
	EndedAt   time.Time `firestore:"ended_at"`
	// Version is the document's update time as last read or written here: ChangePrompt on a
	// prompt in hand writes conditionally on it without reading first.
	Version time.Time `firestore:"-"`
}

func (s *Store) prompts(id string) *firestore.CollectionRef {
	return s.doc(id).Collection("prompts")
}

// AddPrompt queues p, unless a prompt with its id exists: then it returns that one and false,
// so a retried SendPrompt never queues twice.
func (s *Store) AddPrompt(ctx context.Context, id string, p Prompt) (*Prompt, bool, error) {
	p.CreatedAt, p.Seq, p.Status = s.now(), s.now().UnixNano(), PromptQueued
	wr, err := s.prompts(id).Doc(p.ID).Create(ctx, p)
	if store.IsAlreadyExists(err) {
		cur, err := s.Prompt(ctx, id, p.ID)
		return cur, false, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("queue prompt %s of session %s: %w", p.ID, id, err)
	}
	p.Version = wr.UpdateTime
	return &p, true, nil
}

// Prompt reads one prompt; a missing one is ErrNotFound.
func (s *Store) Prompt(ctx context.Context, id, promptID string) (*Prompt, error) {
	return store.Read[Prompt](ctx, nil, s.prompts(id).Doc(promptID))
}

// NextQueued returns the oldest queued prompt, or nil.
func (s *Store) NextQueued(ctx context.Context, id string) (*Prompt, error) {
	ps, err := store.All[Prompt](s.prompts(id).Where("status", "==", string(PromptQueued)).OrderBy("seq", firestore.Asc).Limit(1).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("next prompt of session %s: %w", id, err)
	}
	if len(ps) == 0 {
		return nil, nil
	}
	return &ps[0], nil
}

// PromptsIn lists the session's prompts in the given states, in queue order.
func (s *Store) PromptsIn(ctx context.Context, id string, in ...PromptStatus) ([]Prompt, error) {
	vals := make([]string, len(in))
	for i, st := range in {
		vals[i] = string(st)
	}
	ps, err := store.All[Prompt](s.prompts(id).Where("status", "in", vals).OrderBy("seq", firestore.Asc).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list prompts of session %s: %w", id, err)
	}
	return ps, nil
}

// ErrPromptMoved is a prompt change whose prompt is no longer in the state the change needs.
var ErrPromptMoved = errors.New("prompt changed state")

// ChangePrompt applies change to a prompt that is in state from, as a compare-and-swap on its
// update time (re-read on a race). A prompt in another state is ErrPromptMoved, wrapped with
// the state it is in; a missing one ErrNotFound.
func (s *Store) ChangePrompt(ctx context.Context, id, promptID string, from PromptStatus, change func(*Prompt)) (*Prompt, error) {
	return s.changePrompt(ctx, id, promptID, nil, from, change)
}

// ChangeHeldPrompt is ChangePrompt on a prompt read or written before: its first write is
// conditional on held.Version, without a read, and only a lost race re-reads.
func (s *Store) ChangeHeldPrompt(ctx context.Context, id string, held *Prompt, from PromptStatus, change func(*Prompt)) (*Prompt, error) {
	return s.changePrompt(ctx, id, held.ID, held, from, change)
}

func (s *Store) changePrompt(ctx context.Context, id, promptID string, held *Prompt, from PromptStatus, change func(*Prompt)) (*Prompt, error) {
	var version time.Time
	if held != nil {
		version = held.Version
	}
	p, version, err := store.Swap(ctx, s.prompts(id).Doc(promptID), held, version, func(p *Prompt) ([]firestore.Update, error) {
		if p.Status != from {
			return nil, fmt.Errorf("prompt %s is %s, not %s: %w", promptID, p.Status, from, ErrPromptMoved)
		}
		change(p)
		return []firestore.Update{
			{Path: "text", Value: p.Text},
			{Path: "status", Value: p.Status},
			{Path: "started_at", Value: p.StartedAt},
			{Path: "ended_at", Value: p.EndedAt},
		}, nil
	})
	if errors.Is(err, ErrPromptMoved) {
		return p, err
	}
	if err != nil {
		return nil, fmt.Errorf("change prompt %s of session %s: %w", promptID, id, err)
	}
	p.Version = version
	return p, nil
}

// Usage is what an agent session's turns cost: tokens of input (the prompt cache's reads and
// writes apart) and output, and dollars.
type Usage struct {
	InputTokens      int64   `firestore:"input_tokens"`
	OutputTokens     int64   `firestore:"output_tokens"`
	CacheReadTokens  int64   `firestore:"cache_read_tokens"`
	CacheWriteTokens int64   `firestore:"cache_write_tokens"`
	CostUSD          float64 `firestore:"cost_usd"`
}

// AddUsage adds a turn's usage to the session's totals, in one write that needs no read (the
// increments commute), so that the API shows a session's totals without summing its events.
func (s *Store) AddUsage(ctx context.Context, id string, u Usage) error {
	_, err := s.doc(id).Update(ctx, []firestore.Update{
		{Path: "usage.input_tokens", Value: firestore.Increment(u.InputTokens)},
		{Path: "usage.output_tokens", Value: firestore.Increment(u.OutputTokens)},
		{Path: "usage.cache_read_tokens", Value: firestore.Increment(u.CacheReadTokens)},
		{Path: "usage.cache_write_tokens", Value: firestore.Increment(u.CacheWriteTokens)},
		{Path: "usage.cost_usd", Value: firestore.Increment(u.CostUSD)},
	})
	if err != nil {
		return fmt.Errorf("add usage to session %s: %w", id, err)
	}
	return nil
}

// SetHarnessResume records what the harness's last turn said to continue its conversation.
func (s *Store) SetHarnessResume(ctx context.Context, id, resume string) error {
	if _, err := s.doc(id).Update(ctx, []firestore.Update{{Path: "harness_resume", Value: resume}}); err != nil {
		return fmt.Errorf("record harness resume of session %s: %w", id, err)
	}
	return nil
}

package runs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// Reasons an event is dropped before a run.
const (
	DropDisabled       = "disabled"
	DropDuplicate      = "duplicate"
	DropConcurrency    = "concurrency_limit"
	DropInstanceClosed = "instance_closed"
	DropBadPayload     = "bad_payload"
	DropBadInputs      = "bad_inputs"
	// DropFiltered is an event an entrypoint filter rejected: Drops lists these too, kept apart
	// as FilteredEvent for the run windows and day counts.
	DropFiltered = "filtered"
)

// Drop is an event that started no run, and why.
type Drop struct {
	AutomationID string    `firestore:"automation_id"`
	EntrypointID string    `firestore:"entrypoint_id"`
	EventKey     string    `firestore:"event_key"`
	DeliveryKey  string    `firestore:"delivery_key"`
	Reason       string    `firestore:"reason"`
	Detail       string    `firestore:"detail"`
	DroppedAt    time.Time `firestore:"dropped_at"`
}

// FilteredEvent is one event an entrypoint filter rejected.
type FilteredEvent struct {
	AutomationID string    `firestore:"automation_id"`
	EntrypointID string    `firestore:"entrypoint_id"`
	EventKey     string    `firestore:"event_key,omitempty"`
	DeliveryKey  string    `firestore:"delivery_key"`
	At           time.Time `firestore:"at"`
}

// Sample is a received event payload, kept so automations can be rendered against real data.
// It is its registration's data: only whoever may read the registration it came through (its
// owner, admins) reads it, as only their automations receive the delivery.
type Sample struct {
	ID       string `firestore:"id"`
	EventKey string `firestore:"event_key"`
	// RegistrationID and RegistrationOwner name the webhook registration the delivery came
	// through and the user who created it ("" for a sample kept before they were recorded:
	// admins' only).
	RegistrationID    string    `firestore:"registration_id"`
	RegistrationOwner string    `firestore:"registration_owner"`
	Payload           string    `firestore:"payload"`
	ReceivedAt        time.Time `firestore:"received_at"`
	// Provider, DeliveryKey, Headers and Query are the rest of the delivery, so that a dry run
	// of the sample sees the event a delivered run saw ("" and nil in a sample kept before
	// they were recorded).
	Provider    string            `firestore:"provider,omitempty"`
	DeliveryKey string            `firestore:"delivery_key,omitempty"`
	Headers     map[string]string `firestore:"headers,omitempty"`
	Query       map[string]string `firestore:"query,omitempty"`
}

// SampleOf is the sample del leaves.
func SampleOf(del triggers.Delivery) Sample {
	return Sample{
		EventKey: del.EventKey, RegistrationID: del.RegistrationID, RegistrationOwner: del.RegistrationOwner,
		Payload: string(del.Payload), ReceivedAt: del.ReceivedAt,
		Provider: del.Provider, DeliveryKey: del.DeliveryKey, Headers: del.Headers, Query: del.Query,
	}
}

// Delivery is the delivery the sample was kept of. One kept before its provider was recorded
// has the provider its event key names, and its id for a delivery key.
func (smp *Sample) Delivery() triggers.Delivery {
	provider := smp.Provider
	if provider == "" {
		provider = triggers.ProviderGitHub
		if strings.HasPrefix(smp.EventKey, triggers.ProviderWebhook+".") {
			provider = triggers.ProviderWebhook
		}
	}
	return triggers.Delivery{
		RegistrationID: smp.RegistrationID, RegistrationOwner: smp.RegistrationOwner, Provider: provider,
		EventKey: smp.EventKey, DeliveryKey: cmp.Or(smp.DeliveryKey, smp.ID), Payload: json.RawMessage(smp.Payload),
		Headers: smp.Headers, Query: smp.Query, ReceivedAt: smp.ReceivedAt,
	}
}

// once keys the records of one event for one automation, so that a redelivered event writes
// the same document again instead of a second one.
func once(automationID, deliveryKey string) string {
	return ids.FromKey("evt", automationID+"\x00"+deliveryKey)
}

// RecordDrop keeps a drop. A duplicate's drop is keyed apart from the event's first outcome.
func (s *Store) RecordDrop(ctx context.Context, d Drop) error {
	if d.DroppedAt.IsZero() {
		d.DroppedAt = s.now()
	}
	doc := s.db.Collection(DropsCollection).Doc(once(d.AutomationID, d.DeliveryKey))
	if d.Reason == DropDuplicate {
		// Each duplicate is its own record: how often a sender redelivers is worth seeing.
		doc = s.db.Collection(DropsCollection).NewDoc()
	}
	if _, err := doc.Set(ctx, d); err != nil {
		return fmt.Errorf("record drop of %s for %s: %w", d.EventKey, d.AutomationID, err)
	}
	return nil
}

// Drops returns an automation's most recent drops, newest first, with the events its
// entrypoint filters rejected (reason DropFiltered): those reached it and did not run it either.
func (s *Store) Drops(ctx context.Context, automationID string, limit int) ([]Drop, error) {
	q := s.db.Collection(DropsCollection).Where("automation_id", "==", automationID).OrderBy("dropped_at", firestore.Desc).Limit(limit)
	drops, err := store.All[Drop](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list drops of %s: %w", automationID, err)
	}
	filtered, err := s.FilteredSince(ctx, automationID, time.Time{}, limit)
	if err != nil {
		return nil, err
	}
	out := make([]Drop, 0, min(len(drops)+len(filtered), limit))
	for len(out) < limit && (len(drops) > 0 || len(filtered) > 0) {
		if len(filtered) == 0 || (len(drops) > 0 && !filtered[0].At.After(drops[0].DroppedAt)) {
			out, drops = append(out, drops[0]), drops[1:]
			continue
		}
		f := filtered[0]
		filtered = filtered[1:]
		out = append(out, Drop{
			AutomationID: f.AutomationID, EntrypointID: f.EntrypointID, EventKey: f.EventKey, DeliveryKey: f.DeliveryKey,
			Reason: DropFiltered, Detail: "the entrypoint's filter rejected it", DroppedAt: f.At,
		})
	}
	return out, nil
}

// RecordFiltered counts an event an entrypoint filter rejected.
func (s *Store) RecordFiltered(ctx context.Context, f FilteredEvent) error {
	if f.At.IsZero() {
		f.At = s.now()
	}
	if _, err := s.db.Collection(FilteredCollection).Doc(once(f.AutomationID, f.DeliveryKey)).Set(ctx, f); err != nil {
		return fmt.Errorf("record filtered event for %s: %w", f.AutomationID, err)
	}
	return nil
}

// FilteredSince returns an automation's filtered events at or after t, newest first, at most
// limit of them.
func (s *Store) FilteredSince(ctx context.Context, automationID string, t time.Time, limit int) ([]FilteredEvent, error) {
	q := s.db.Collection(FilteredCollection).Where("automation_id", "==", automationID).
		Where("at", ">=", t).OrderBy("at", firestore.Desc).Limit(limit)
	out, err := store.All[FilteredEvent](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list filtered events of %s: %w", automationID, err)
	}
	return out, nil
}

// RecordSample keeps a received delivery, once; smp.ID is set from its event key and delivery
// key.
func (s *Store) RecordSample(ctx context.Context, smp Sample) error {
	smp.ID = ids.FromKey("smp", smp.EventKey+"\x00"+smp.DeliveryKey)
	b := store.Batch(s.db)
	b.Set(s.db.Collection(SamplesCollection).Doc(smp.ID), smp)
	b.Set(s.observed(smp.EventKey), map[string]any{"event_key": smp.EventKey, "last_at": smp.ReceivedAt})
	if _, err := b.Commit(ctx); err != nil {
		return fmt.Errorf("record sample of %s: %w", smp.EventKey, err)
	}
	return nil
}

// AnyOwner, as Samples' owner, lists the samples of every registration: an admin's reading.
const AnyOwner = "\x00any"

// SamplesReadBy is Samples' owner for p: every registration's samples for an admin, else those
// of the registrations p created ("" for a caller who is nobody: none). It is the rule
// dispatch's mayRead applies to deliveries, and ReadableBy to one sample.
func SamplesReadBy(p auth.Principal) string {
	if p.Admin {
		return AnyOwner
	}
	return p.UserID
}

// ReadableBy reports whether p may read the sample: an admin, or the owner of the registration
// it came through.
func (smp *Sample) ReadableBy(p auth.Principal) bool {
	return p.Admin || (p.UserID != "" && p.UserID == smp.RegistrationOwner)
}

// Samples returns the newest samples of the given event keys that came through registrations
// owner created (AnyOwner: every registration's).
func (s *Store) Samples(ctx context.Context, eventKeys []string, owner string, limit int) ([]Sample, error) {
	if len(eventKeys) == 0 || owner == "" {
		return nil, nil
	}
	q := s.db.Collection(SamplesCollection).Where("event_key", "in", eventKeys)
	if owner != AnyOwner {
		q = q.Where("registration_owner", "==", owner)
	}
	q = q.OrderBy("received_at", firestore.Desc).Limit(limit)
	out, err := store.All[Sample](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list samples of %v: %w", eventKeys, err)
	}
	return out, nil
}

// Sample reads one sample.
func (s *Store) Sample(ctx context.Context, id string) (*Sample, error) {
	return store.Read[Sample](ctx, nil, s.db.Collection(SamplesCollection).Doc(id))
}

// Observed reports which of the given event keys have ever been received.
func (s *Store) Observed(ctx context.Context, eventKeys []string) (map[string]bool, error) {
	refs := make([]*firestore.DocumentRef, len(eventKeys))
	for i, k := range eventKeys {
		refs[i] = s.observed(k)
	}
	snaps, err := s.db.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("find observed events: %w", err)
	}
	out := make(map[string]bool, len(snaps))
	for i, snap := range snaps {
		out[eventKeys[i]] = snap.Exists()
	}
	return out, nil
}

// observed is the marker of an event key received at least once.
func (s *Store) observed(eventKey string) *firestore.DocumentRef {
	return s.db.Collection(ObservedCollection).Doc(ids.FromKey("key", eventKey))
}

// bodyClaim is the first delivery of a body to an automation within its dedupe window.
type bodyClaim struct {
	AutomationID string    `firestore:"automation_id"`
	DeliveryKey  string    `firestore:"delivery_key"`
	At           time.Time `firestore:"at"`
	// ExpireAt is when the claim stops counting, for a Firestore TTL policy to delete it.
	ExpireAt time.Time `firestore:"expire_at"`
}

// ClaimBody records that deliveryKey brought bodyKey to an automation at at, unless another
// delivery brought it within window before: then it answers that delivery's key and records
// nothing. The window slides (it is not aligned to the clock), and two concurrent deliveries of
// one body cannot both pass: the claim is a create only one of them wins, and a claim past its
// window is replaced by a write conditional on its version.
//
// No transaction: the copies of one delivery often come at once (a sender's retry, a replay),
// and two transactions that each read the claim and then write it wait on each other's lock
// (the emulator let them go after about 2 s, during which neither delivery had a run).
func (s *Store) ClaimBody(ctx context.Context, automationID, bodyKey, deliveryKey string, at time.Time, window time.Duration) (earlier string, err error) {
	doc := s.db.Collection(BodiesCollection).Doc(ids.FromKey("body", automationID+"\x00"+bodyKey))
	claim := bodyClaim{AutomationID: automationID, DeliveryKey: deliveryKey, At: at, ExpireAt: at.Add(window)}
	for attempt := 1; ; attempt++ {
		_, err := doc.Create(ctx, claim)
		if err == nil {
			return "", nil
		}
		if !store.IsAlreadyExists(err) {
			return "", fmt.Errorf("claim body of %s for %s: %w", deliveryKey, automationID, err)
		}
		_, _, err = store.Swap(ctx, doc, nil, time.Time{}, func(cur *bodyClaim) ([]firestore.Update, error) {
			earlier = ""
			switch {
			case at.Sub(cur.At) >= window:
				return []firestore.Update{
					{Path: "automation_id", Value: claim.AutomationID},
					{Path: "delivery_key", Value: claim.DeliveryKey},
					{Path: "at", Value: claim.At},
					{Path: "expire_at", Value: claim.ExpireAt},
				}, nil
			case cur.DeliveryKey == deliveryKey:
				// A redelivery keeps the claim's start: the window does not slide with retries.
				return nil, errClaimed
			default:
				earlier = cur.DeliveryKey
				return nil, errClaimed
			}
		})
		switch {
		case err == nil, errors.Is(err, errClaimed):
			return earlier, nil
		case errors.Is(err, store.ErrNotFound) && attempt < maxClaimAttempts:
			// The expired claim was deleted between the create and the read: create it again.
		default:
			return "", fmt.Errorf("claim body of %s for %s: %w", deliveryKey, automationID, err)
		}
	}
}

// errClaimed ends a claim's swap that writes nothing: the claim stands as it is.
var errClaimed = errors.New("body claimed")

// maxClaimAttempts bounds ClaimBody's creates of a claim that keeps being deleted under it.
const maxClaimAttempts = 5

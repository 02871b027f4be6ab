// Package records owns the Firestore records of automations: `automations/{id}`, one document per
// automation with its settings, its state (enabled, archived), its schedule (next_fire_at) and a
// copy of its current version, and `automations/{id}/versions/{number}`, the immutable history
// of its definitions, numbered from 1.
//
// The automation document carries what the run side queries on, derived from the current
// version whenever it changes: event_keys (the event entrypoints' keys, for array-contains
// queries) and has_schedule. next_fire_at is set exactly while an automation is enabled, not
// archived and has a schedule entrypoint, so that one range query finds every automation due.
//
// Changes are compare-and-swaps on the automation's update time (store.Swap), never
// transactions that hold a lock across a read; SaveVersion commits the new version and the
// automation together, on the same condition.
package records

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/store"
)

// Collection names.
const (
	Collection         = "automations"
	VersionsCollection = "versions"
)

// IDPrefix starts every automation id ("auto_01jd…").
const IDPrefix = "auto"

// Kinds of automation.
const (
	KindCustom  = "custom"  // made by a user
	KindDraft   = "draft"   // being drafted by an agent session (DraftAutomation)
	KindBuiltin = "builtin" // shipped with Hangar, found by BuiltinKey
)

// ErrNotFound is an automation or version that does not exist.
var ErrNotFound = store.ErrNotFound

// ErrLimit is a Create refused because the non-archived automations are at the limit.
var ErrLimit = errors.New("too many automations")

// maxSaveAttempts bounds the retries of a SaveVersion that lost a race.
const maxSaveAttempts = 10

// AutomationRecord is an automation as Firestore stores it. JSON fields hold "{}" when empty.
type AutomationRecord struct {
	ID   string `firestore:"id"`
	Name string `firestore:"name"`
	// NameKey is the lowercased name, the list order.
	NameKey     string `firestore:"name_key"`
	Description string `firestore:"description"`
	Kind        string `firestore:"kind"`
	BuiltinKey  string `firestore:"builtin_key,omitempty"`
	Enabled     bool   `firestore:"enabled"`
	Archived    bool   `firestore:"archived"`
	// CurrentVersion is the number of the current version; Version is a copy of it, so that
	// one read gives an automation with its definition.
	CurrentVersion     int           `firestore:"current_version"`
	Version            VersionRecord `firestore:"version"`
	InputsJSON         string        `firestore:"inputs_json"`
	BlockOverridesJSON string        `firestore:"block_overrides_json"`
	SettingsJSON       string        `firestore:"settings_json"`
	// CreatedBy is "" for built-in automations, which only admins change.
	CreatedBy      string    `firestore:"created_by_user_id,omitempty"`
	NextFireAt     time.Time `firestore:"next_fire_at,omitempty"`
	LastFiredAt    time.Time `firestore:"last_fired_at,omitempty"`
	DraftSessionID string    `firestore:"draft_session_id,omitempty"`
	// EventKeys and HasSchedule are derived from the current version (SetVersion).
	EventKeys   []string  `firestore:"event_keys"`
	HasSchedule bool      `firestore:"has_schedule"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
}

// VersionRecord is one immutable version of an automation's definition.
type VersionRecord struct {
	AutomationID   string    `firestore:"automation_id"`
	Number         int       `firestore:"number"`
	DefinitionJSON string    `firestore:"definition_json"`
	CreatedBy      string    `firestore:"created_by_user_id,omitempty"`
	CreatedAt      time.Time `firestore:"created_at"`
}

// SetVersion makes v the current version, with def its parsed definition, and derives the
// fields queries use from it. It leaves next_fire_at to Reschedule.
func (r *AutomationRecord) SetVersion(v VersionRecord, def definition.Definition) {
	r.CurrentVersion, r.Version = v.Number, v
	r.EventKeys, r.HasSchedule = nil, false
	for _, ep := range def.Entrypoints {
		switch ep.Type {
		case definition.EntrypointEvent:
			if ep.EventKey != "" && !slices.Contains(r.EventKeys, ep.EventKey) {
				r.EventKeys = append(r.EventKeys, ep.EventKey)
			}
		case definition.EntrypointSchedule:
			r.HasSchedule = true
		}
	}
}

// ChangeableBy reports whether p may change the automation (stop its runs, close its
// instances): its creator and admins may; built-in automations have no creator.
func (r *AutomationRecord) ChangeableBy(p auth.Principal) bool {
	return p.Admin || (p.UserID != "" && p.UserID == r.CreatedBy)
}

// SetName sets the name and its sort key.
func (r *AutomationRecord) SetName(name string) {
	r.Name, r.NameKey = name, strings.ToLower(name)
}

// Definition parses the current version's definition.
func (r *AutomationRecord) Definition() (definition.Definition, error) {
	def, errs := definition.Parse([]byte(r.Version.DefinitionJSON))
	if len(errs) > 0 {
		return def, fmt.Errorf("automation %s version %d: %w", r.ID, r.CurrentVersion, errs[0])
	}
	return def, nil
}

// Settings parses the automation's settings.
func (r *AutomationRecord) Settings() (definition.Settings, error) {
	s, err := parseSettings(r.SettingsJSON)
	if err != nil {
		return s, fmt.Errorf("automation %s settings: %w", r.ID, err)
	}
	return s, nil
}

// Reschedule sets next_fire_at to the earliest time after now at which one of the current
// version's schedule entrypoints fires, or clears it when the automation is disabled, archived
// or has no schedule. The worker calls it after firing; the service after enabling, saving a
// version or changing the settings (whose time zone schedules may use).
func (r *AutomationRecord) Reschedule(now time.Time) error {
	r.NextFireAt = time.Time{}
	if !r.Enabled || r.Archived || !r.HasSchedule {
		return nil
	}
	def, err := r.Definition()
	if err != nil {
		return err
	}
	settings, err := r.Settings()
	if err != nil {
		return err
	}
	next, err := NextFire(def, settings, now)
	if err != nil {
		return fmt.Errorf("schedule automation %s: %w", r.ID, err)
	}
	r.NextFireAt = next
	return nil
}

// Store reads and writes automation records.
type Store struct {
	db  *firestore.Client
	now func() time.Time
}

// NewStore returns a store over db.
func NewStore(db *firestore.Client, now func() time.Time) *Store {
	return &Store{db: db, now: now}
}

func (s *Store) col() *firestore.CollectionRef { return s.db.Collection(Collection) }

func (s *Store) versionDoc(id string, n int) *firestore.DocumentRef {
	return s.col().Doc(id).Collection(VersionsCollection).Doc(strconv.Itoa(n))
}

// Create writes a new automation, whose Version must be its version 1, and that version, at
// once. With maxActive > 0 it refuses (ErrLimit) when that many non-archived automations exist;
// counting in the same transaction keeps concurrent creates at the limit from all passing.
func (s *Store) Create(ctx context.Context, r *AutomationRecord, maxActive int) error {
	if r.CurrentVersion != 1 || r.Version.Number != 1 {
		return fmt.Errorf("create automation %s: its version must be number 1, not %d", r.ID, r.Version.Number)
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	r.UpdatedAt = r.CreatedAt
	r.Version.AutomationID = r.ID
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if maxActive > 0 {
			n, err := s.countActive(ctx, tx)
			if err != nil {
				return err
			}
			if n >= maxActive {
				return ErrLimit
			}
		}
		if err := tx.Create(s.col().Doc(r.ID), r); err != nil {
			return err
		}
		return tx.Create(s.versionDoc(r.ID, 1), r.Version)
	})
	if err != nil {
		return fmt.Errorf("create automation %s: %w", r.ID, err)
	}
	return nil
}

// CountActive counts the automations not archived, outside any transaction: a check before
// work that Create's own count (which holds the limit) would otherwise refuse only afterwards.
func (s *Store) CountActive(ctx context.Context) (int, error) { return s.countActive(ctx, nil) }

func (s *Store) countActive(ctx context.Context, tx *firestore.Transaction) (int, error) {
	n, err := store.Count(ctx, s.col().Where("archived", "==", false), tx)
	if err != nil {
		return 0, fmt.Errorf("count automations: %w", err)
	}
	return int(n), nil
}

// Get reads one automation.
func (s *Store) Get(ctx context.Context, id string) (*AutomationRecord, error) {
	return store.Read[AutomationRecord](ctx, nil, s.col().Doc(id))
}

// GetBuiltin reads the built-in automation with key.
func (s *Store) GetBuiltin(ctx context.Context, key string) (*AutomationRecord, error) {
	recs, err := s.query(ctx, s.col().Where("builtin_key", "==", key).Limit(1))
	if err != nil {
		return nil, fmt.Errorf("get built-in automation %s: %w", key, err)
	}
	if len(recs) == 0 {
		return nil, ErrNotFound
	}
	return recs[0], nil
}

// List returns up to limit automations sorted by name, case-insensitively, then id; archived
// ones only with includeArchived.
func (s *Store) List(ctx context.Context, includeArchived bool, limit int) ([]*AutomationRecord, error) {
	q := s.col().Query
	if includeArchived {
		// Ordered in the query so that, past the limit, the cut falls by name.
		q = q.OrderBy("name_key", firestore.Asc)
	} else {
		// Sorted below: an equality filter with an order on another field would need a composite
		// index, and Create keeps the non-archived automations within the limit.
		q = q.Where("archived", "==", false)
	}
	recs, err := s.query(ctx, q.Limit(limit))
	if err != nil {
		return nil, fmt.Errorf("list automations: %w", err)
	}
	slices.SortFunc(recs, func(a, b *AutomationRecord) int {
		return cmp.Or(strings.Compare(a.NameKey, b.NameKey), strings.Compare(a.ID, b.ID))
	})
	return recs, nil
}

// MatchingEvent returns the non-archived automations whose current version has an event
// entrypoint for eventKey, disabled ones included: the dispatcher records their events as
// dropped, so that a user wondering why nothing ran sees why.
func (s *Store) MatchingEvent(ctx context.Context, eventKey string) ([]*AutomationRecord, error) {
	// The state is filtered here rather than in the query: one array-contains needs no composite
	// index, and few automations listen for any one event.
	recs, err := s.query(ctx, s.col().Where("event_keys", "array-contains", eventKey))
	if err != nil {
		return nil, fmt.Errorf("find automations for event %s: %w", eventKey, err)
	}
	return slices.DeleteFunc(recs, func(r *AutomationRecord) bool { return r.Archived }), nil
}

// Due returns the automations whose next scheduled fire is at or before now, earliest first.
// Only enabled, non-archived automations with a schedule have a next_fire_at.
func (s *Store) Due(ctx context.Context, now time.Time) ([]*AutomationRecord, error) {
	q := s.col().Where("next_fire_at", "<=", now).OrderBy("next_fire_at", firestore.Asc)
	recs, err := s.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("find due automations: %w", err)
	}
	return recs, nil
}

// Update changes an automation with fn, on the condition that nobody changed it since it was
// read; a lost race re-reads it and calls fn again. An error from fn ends the update and is
// returned as is. Only the fields fn changed are written, with updated_at; when fn changes
// nothing, nothing is written.
func (s *Store) Update(ctx context.Context, id string, fn func(*AutomationRecord) error) (*AutomationRecord, error) {
	rec, _, err := store.Swap(ctx, s.col().Doc(id), nil, time.Time{}, func(r *AutomationRecord) ([]firestore.Update, error) {
		before := *r
		before.EventKeys = slices.Clone(r.EventKeys)
		if err := fn(r); err != nil {
			return nil, err
		}
		updates := s.changes(&before, r)
		if len(updates) == 0 {
			return nil, errUnchanged
		}
		return updates, nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return rec, nil
	case errors.Is(err, store.ErrNotFound):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("update automation %s: %w", id, err)
	}
	return rec, nil
}

// errUnchanged ends a swap whose function changed nothing.
var errUnchanged = errors.New("unchanged")

// SaveVersion adds a version with the definition def (parsed: parsed) to automation id, numbered
// one past the current one, and makes it current. check sees the automation first and may refuse
// with an error, returned as is. The version and the automation are written in one commit on
// the condition that the automation did not change since it was read; a lost race starts over
// with a fresh read and the next free number.
func (s *Store) SaveVersion(ctx context.Context, id, def string, parsed definition.Definition, createdBy string, check func(*AutomationRecord) error) (*AutomationRecord, error) {
	ref := s.col().Doc(id)
	for attempt := 1; ; attempt++ {
		snap, err := ref.Get(ctx)
		if store.IsNotFound(err) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("read automation %s: %w", id, err)
		}
		var r AutomationRecord
		if err := snap.DataTo(&r); err != nil {
			return nil, fmt.Errorf("decode automation %s: %w", id, err)
		}
		if err := check(&r); err != nil {
			return nil, err
		}
		before := r
		now := s.now()
		v := VersionRecord{AutomationID: id, Number: r.CurrentVersion + 1, DefinitionJSON: def, CreatedBy: createdBy, CreatedAt: now}
		r.SetVersion(v, parsed)
		if err := r.Reschedule(now); err != nil {
			return nil, err
		}
		updates := s.changes(&before, &r)
		err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if err := tx.Create(s.versionDoc(id, v.Number), v); err != nil {
				return err
			}
			return tx.Update(ref, updates, firestore.LastUpdateTime(snap.UpdateTime))
		})
		if err == nil {
			return &r, nil
		}
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted:
			if attempt < maxSaveAttempts {
				continue
			}
		}
		return nil, fmt.Errorf("save version %d of automation %s: %w", v.Number, id, err)
	}
}

// changes lists the fields of after that differ from before, by their Firestore names, plus
// updated_at. An emptied omitempty field is deleted, as Create would not have written it: so a
// cleared next_fire_at leaves the range query of Due.
func (s *Store) changes(before, after *AutomationRecord) []firestore.Update {
	b, a := reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem()
	var out []firestore.Update
	for i := range a.NumField() {
		if reflect.DeepEqual(b.Field(i).Interface(), a.Field(i).Interface()) {
			continue
		}
		name, opts, _ := strings.Cut(a.Type().Field(i).Tag.Get("firestore"), ",")
		var value any = a.Field(i).Interface()
		if opts == "omitempty" && a.Field(i).IsZero() {
			value = firestore.Delete
		}
		out = append(out, firestore.Update{Path: name, Value: value})
	}
	if len(out) > 0 {
		after.UpdatedAt = s.now()
		out = append(out, firestore.Update{Path: "updated_at", Value: after.UpdatedAt})
	}
	return out
}

// ListVersions returns up to limit versions of automation id, newest first.
func (s *Store) ListVersions(ctx context.Context, id string, limit int) ([]*VersionRecord, error) {
	q := s.col().Doc(id).Collection(VersionsCollection).OrderBy("number", firestore.Desc).Limit(limit)
	out, err := store.All[*VersionRecord](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list versions of automation %s: %w", id, err)
	}
	return out, nil
}

// GetVersion reads version n of automation id.
func (s *Store) GetVersion(ctx context.Context, id string, n int) (*VersionRecord, error) {
	return store.Read[VersionRecord](ctx, nil, s.versionDoc(id, n))
}

func (s *Store) query(ctx context.Context, q firestore.Query) ([]*AutomationRecord, error) {
	return store.All[*AutomationRecord](q.Documents(ctx))
}

package records

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/ids"
)

// t0 is a Saturday, 09:00 UTC.
var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func newStore(t *testing.T) (*Store, *clock.Fake) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(t0)
	return NewStore(db, c.Now), c
}

func eventEntry(id, key string) definition.Entrypoint {
	return definition.Entrypoint{ID: id, Type: definition.EntrypointEvent, EventKey: key}
}

func scheduleEntry(id, cron, zone string) definition.Entrypoint {
	return definition.Entrypoint{ID: id, Type: definition.EntrypointSchedule, Cron: cron, TimeZone: zone}
}

// defOf is a definition with the entrypoints and one code block.
func defOf(eps ...definition.Entrypoint) definition.Definition {
	return definition.Definition{
		Version: definition.Version, Entrypoints: eps,
		Blocks: []definition.Block{{ID: "say", Type: definition.BlockCode, Fields: map[string]any{"source": "return 1"}}},
	}
}

// newRecord is an automation with def as version 1, not yet stored.
func newRecord(t *testing.T, name string, enabled bool, def definition.Definition) *AutomationRecord {
	t.Helper()
	b, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	r := &AutomationRecord{
		ID: ids.New(IDPrefix), Kind: KindCustom, Enabled: enabled, CreatedBy: "user_alice",
		InputsJSON: "{}", BlockOverridesJSON: "{}", SettingsJSON: "{}",
	}
	r.SetName(name)
	r.SetVersion(VersionRecord{Number: 1, DefinitionJSON: string(b), CreatedBy: "user_alice", CreatedAt: t0}, def)
	if err := r.Reschedule(t0); err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *Store) mustCreate(t *testing.T, r *AutomationRecord) *AutomationRecord {
	t.Helper()
	if err := s.Create(t.Context(), r, 0); err != nil {
		t.Fatal(err)
	}
	return r
}

func idsOf(recs []*AutomationRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	slices.Sort(out)
	return out
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

func TestCreateStoresAutomationAndVersionOne(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	r := s.mustCreate(t, newRecord(t, "Triage", true, defOf(eventEntry("e", "github.issues.opened"))))

	got, err := s.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Triage" || got.NameKey != "triage" || got.CurrentVersion != 1 || !slices.Equal(got.EventKeys, []string{"github.issues.opened"}) || got.HasSchedule {
		t.Fatalf("stored %+v", got)
	}
	v, err := s.GetVersion(t.Context(), r.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if v.DefinitionJSON != r.Version.DefinitionJSON || v.AutomationID != r.ID || !v.CreatedAt.Equal(t0) {
		t.Fatalf("version 1 is %+v", v)
	}
	if _, err := s.Get(t.Context(), ids.New(IDPrefix)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing automation: %v, want ErrNotFound", err)
	}
	if _, err := s.GetVersion(t.Context(), r.ID, 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of a missing version: %v, want ErrNotFound", err)
	}
}

func TestCreateRefusesPastTheLimitOfActiveAutomations(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	a := s.mustCreate(t, newRecord(t, "a", false, defOf()))
	if err := s.Create(t.Context(), newRecord(t, "b", false, defOf()), 1); !errors.Is(err, ErrLimit) {
		t.Fatalf("create at the limit: %v, want ErrLimit", err)
	}
	if _, err := s.Update(t.Context(), a.ID, func(r *AutomationRecord) error { r.Archived = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(t.Context(), newRecord(t, "b", false, defOf()), 1); err != nil {
		t.Fatalf("create once an automation is archived: %v", err)
	}
}

func TestSaveVersionNumbersVersionsAndKeepsOldOnes(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	r := s.mustCreate(t, newRecord(t, "a", true, defOf(eventEntry("e", "k1"))))
	v1 := r.Version.DefinitionJSON

	c.Advance(time.Minute)
	def2 := defOf(eventEntry("e", "k2"), scheduleEntry("s", "0 10 * * *", ""))
	b, _ := json.Marshal(def2)
	got, err := s.SaveVersion(t.Context(), r.ID, string(b), def2, "user_bob", func(*AutomationRecord) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.CurrentVersion != 2 || got.Version.Number != 2 || got.Version.CreatedBy != "user_bob" ||
		!slices.Equal(got.EventKeys, []string{"k2"}) || !got.HasSchedule ||
		!got.NextFireAt.Equal(time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)) || !got.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after SaveVersion: %+v", got)
	}
	stored, err := s.Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.CurrentVersion != 2 || stored.Version.DefinitionJSON != string(b) || !stored.NextFireAt.Equal(got.NextFireAt) {
		t.Fatalf("stored after SaveVersion: %+v", stored)
	}

	vs, err := s.ListVersions(t.Context(), r.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Number != 2 || vs[1].Number != 1 || vs[1].DefinitionJSON != v1 {
		t.Fatalf("versions: %+v", vs)
	}
	if vs, _ := s.ListVersions(t.Context(), r.ID, 1); len(vs) != 1 || vs[0].Number != 2 {
		t.Fatalf("newest version only: %+v", vs)
	}

	refused := errors.New("refused")
	if _, err := s.SaveVersion(t.Context(), r.ID, v1, defOf(), "", func(*AutomationRecord) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("a refused save: %v", err)
	}
	if _, err := s.SaveVersion(t.Context(), ids.New(IDPrefix), v1, defOf(), "", func(*AutomationRecord) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("save on a missing automation: %v", err)
	}
}

func TestConcurrentSaveVersionsGetDistinctNumbers(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	r := s.mustCreate(t, newRecord(t, "a", false, defOf()))
	const savers = 3
	var wg sync.WaitGroup
	errs := make([]error, savers)
	for i := range savers {
		wg.Go(func() {
			_, errs[i] = s.SaveVersion(t.Context(), r.ID, r.Version.DefinitionJSON, defOf(), "", func(*AutomationRecord) error { return nil })
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	vs, err := s.ListVersions(t.Context(), r.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var numbers []int
	for _, v := range vs {
		numbers = append(numbers, v.Number)
	}
	if !slices.Equal(numbers, []int{4, 3, 2, 1}) {
		t.Fatalf("version numbers %v, want 4 3 2 1", numbers)
	}
	if got, _ := s.Get(t.Context(), r.ID); got.CurrentVersion != 4 {
		t.Fatalf("current version %d, want 4", got.CurrentVersion)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	s, c := newStore(t)
	r := s.mustCreate(t, newRecord(t, "a", false, defOf()))
	c.Advance(time.Hour)

	unchanged, err := s.Update(t.Context(), r.ID, func(*AutomationRecord) error { return nil })
	if err != nil || !unchanged.UpdatedAt.Equal(t0) {
		t.Fatalf("an update that changes nothing: %v, updated_at %v, want %v", err, unchanged.UpdatedAt, t0)
	}
	changed, err := s.Update(t.Context(), r.ID, func(r *AutomationRecord) error { r.Description = "new"; return nil })
	if err != nil || !changed.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("an update: %v, updated_at %v", err, changed.UpdatedAt)
	}
	if got, _ := s.Get(t.Context(), r.ID); got.Description != "new" || got.Name != "a" {
		t.Fatalf("stored %+v", got)
	}
	refused := errors.New("refused")
	if _, err := s.Update(t.Context(), r.ID, func(*AutomationRecord) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("a refused update: %v", err)
	}
	if _, err := s.Update(t.Context(), ids.New(IDPrefix), func(*AutomationRecord) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of a missing automation: %v", err)
	}
}

func TestConcurrentUpdatesAllLand(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	r := s.mustCreate(t, newRecord(t, "a", false, defOf()))
	// Each writer adds its own key to the inputs: a lost update would drop one.
	writers := []string{"x", "y", "z"}
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Go(func() {
			_, err := s.Update(t.Context(), r.ID, func(r *AutomationRecord) error {
				in := map[string]bool{}
				if err := json.Unmarshal([]byte(r.InputsJSON), &in); err != nil {
					return err
				}
				in[w] = true
				b, _ := json.Marshal(in)
				r.InputsJSON = string(b)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, _ := s.Get(t.Context(), r.ID)
	if got.InputsJSON != `{"x":true,"y":true,"z":true}` {
		t.Fatalf("inputs after concurrent updates: %s", got.InputsJSON)
	}
}

func TestMatchingEventFindsLiveAutomationsWithTheKey(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	const key = "github.pull_request.opened"
	match := s.mustCreate(t, newRecord(t, "match", true, defOf(eventEntry("e", key))))
	both := s.mustCreate(t, newRecord(t, "both keys", true, defOf(eventEntry("a", "other"), eventEntry("b", key))))
	disabled := s.mustCreate(t, newRecord(t, "disabled", false, defOf(eventEntry("e", key))))
	s.mustCreate(t, newRecord(t, "other key", true, defOf(eventEntry("e", "other"))))
	s.mustCreate(t, newRecord(t, "schedule only", true, defOf(scheduleEntry("s", "@daily", ""))))
	archived := s.mustCreate(t, newRecord(t, "archived", true, defOf(eventEntry("e", key))))
	if _, err := s.Update(t.Context(), archived.ID, func(r *AutomationRecord) error { r.Archived = true; return nil }); err != nil {
		t.Fatal(err)
	}
	moved := s.mustCreate(t, newRecord(t, "moved away", true, defOf(eventEntry("e", key))))
	other := defOf(eventEntry("e", "other"))
	b, _ := json.Marshal(other)
	if _, err := s.SaveVersion(t.Context(), moved.ID, string(b), other, "", func(*AutomationRecord) error { return nil }); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		key  string
		want []string
	}{
		{key, sortedIDs(match.ID, both.ID, disabled.ID)},
		{"nobody.listens", nil},
	}
	for _, tt := range tests {
		got, err := s.MatchingEvent(t.Context(), tt.key)
		if err != nil {
			t.Fatal(err)
		}
		if g := idsOf(got); !slices.Equal(g, tt.want) {
			t.Errorf("MatchingEvent(%q) = %v, want %v", tt.key, g, tt.want)
		}
	}
}

func TestDueFindsEnabledSchedulesWhoseTimeHasCome(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	hourly := s.mustCreate(t, newRecord(t, "hourly", true, defOf(scheduleEntry("s", "0 * * * *", ""))))
	daily := s.mustCreate(t, newRecord(t, "daily", true, defOf(scheduleEntry("s", "0 12 * * *", ""))))
	s.mustCreate(t, newRecord(t, "disabled", false, defOf(scheduleEntry("s", "0 * * * *", ""))))
	s.mustCreate(t, newRecord(t, "events only", true, defOf(eventEntry("e", "k"))))
	off := s.mustCreate(t, newRecord(t, "turned off", true, defOf(scheduleEntry("s", "0 * * * *", ""))))
	if _, err := s.Update(t.Context(), off.ID, func(r *AutomationRecord) error {
		r.Enabled = false
		return r.Reschedule(t0)
	}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		at   time.Time
		want []string
	}{
		{t0, nil},
		{t0.Add(time.Hour), []string{hourly.ID}},
		{t0.Add(3 * time.Hour), []string{hourly.ID, daily.ID}},
	}
	for _, tt := range tests {
		got, err := s.Due(t.Context(), tt.at)
		if err != nil {
			t.Fatal(err)
		}
		var g []string
		for _, r := range got {
			g = append(g, r.ID)
		}
		if !slices.Equal(g, tt.want) {
			t.Errorf("Due(%v) = %v, want %v (earliest first)", tt.at, g, tt.want)
		}
	}
}

func TestListSortsByNameAndHidesArchived(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	b := s.mustCreate(t, newRecord(t, "beta", false, defOf()))
	a := s.mustCreate(t, newRecord(t, "Alpha", false, defOf()))
	z := s.mustCreate(t, newRecord(t, "zulu", false, defOf()))
	if _, err := s.Update(t.Context(), z.ID, func(r *AutomationRecord) error { r.Archived = true; return nil }); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		archived bool
		want     []string
	}{
		{false, []string{a.ID, b.ID}},
		{true, []string{a.ID, b.ID, z.ID}},
	}
	for _, tt := range tests {
		got, err := s.List(t.Context(), tt.archived, 10)
		if err != nil {
			t.Fatal(err)
		}
		var g []string
		for _, r := range got {
			g = append(g, r.ID)
		}
		if !slices.Equal(g, tt.want) {
			t.Errorf("List(include_archived=%v) = %v, want %v", tt.archived, g, tt.want)
		}
	}
}

func TestNextFire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		eps      []definition.Entrypoint
		settings definition.Settings
		want     time.Time
	}{
		{"no schedule", []definition.Entrypoint{eventEntry("e", "k")}, definition.Settings{}, time.Time{}},
		{"UTC by default", []definition.Entrypoint{scheduleEntry("s", "30 9 * * *", "")}, definition.Settings{},
			time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)},
		{"the settings' time zone", []definition.Entrypoint{scheduleEntry("s", "0 9 * * *", "")}, definition.Settings{TimeZone: "Europe/Berlin"},
			time.Date(2025, 3, 2, 8, 0, 0, 0, time.UTC)},
		{"the entrypoint's time zone first", []definition.Entrypoint{scheduleEntry("s", "0 9 * * *", "America/New_York")}, definition.Settings{TimeZone: "Europe/Berlin"},
			time.Date(2025, 3, 1, 14, 0, 0, 0, time.UTC)},
		{"the earliest of several", []definition.Entrypoint{scheduleEntry("a", "0 18 * * *", ""), scheduleEntry("b", "0 12 * * *", ""), eventEntry("e", "k")}, definition.Settings{},
			time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NextFire(defOf(tt.eps...), tt.settings, t0)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) {
				t.Fatalf("NextFire = %v, want %v", got, tt.want)
			}
		})
	}
}

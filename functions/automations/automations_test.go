package automations

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/records"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
)

func TestCreateAutomationStoresVersionOne(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	got := f.create(t, as(t, alice), &appv1.CreateAutomationRequest{
		Name: "  Label bugs ", Description: "Labels new issues.", DefinitionJson: eventDef, InputsJson: `{"label": "bug"}`,
	})
	if !ids.Valid(records.IDPrefix, got.GetId()) || got.GetName() != "Label bugs" || got.GetDescription() != "Labels new issues." ||
		got.GetKind() != records.KindCustom || got.GetEnabled() || got.GetArchived() || got.GetCurrentVersion() != 1 ||
		got.GetInputsJson() != `{"label": "bug"}` || got.GetBlockOverridesJson() != "{}" || got.GetCreatedByUserId() != alice ||
		got.NextFireAt != nil || got.GetCreatedAt() != "2025-03-01T09:00:00.000Z" || got.GetUpdatedAt() != got.GetCreatedAt() {
		t.Fatalf("created %v", got)
	}
	v := got.GetVersion()
	if v.GetAutomationId() != got.GetId() || v.GetNumber() != 1 || v.GetDefinitionJson() != eventDef || v.GetCreatedByUserId() != alice {
		t.Fatalf("version %v", v)
	}
	if stored := f.get(t, got.GetId()); stored.String() != got.String() {
		t.Fatalf("stored %v\nanswered %v", stored, got)
	}
	// Without inputs_json the inputs are "{}"; a definition without inputs needs none.
	sched := f.createSchedule(t, "Daily", true)
	if sched.GetInputsJson() != "{}" || sched.GetNextFireAt() != "2025-03-01T10:00:00.000Z" {
		t.Fatalf("schedule automation %v", sched)
	}
}

func TestCreateAutomationRefusesInvalidRequests(t *testing.T) {
	t.Parallel()
	lim := config.Default().Limits
	tests := []struct {
		name       string
		req        *appv1.CreateAutomationRequest
		wantFields []string
		// wantBlock and wantField name a BlockError detail the answer must carry.
		wantBlock, wantField string
	}{
		{"no name", &appv1.CreateAutomationRequest{DefinitionJson: scheduleDef}, []string{"name"}, "", ""},
		{"name too long", &appv1.CreateAutomationRequest{Name: strings.Repeat("n", lim.Automations.NameLen+1), DefinitionJson: scheduleDef}, []string{"name"}, "", ""},
		{"two-line name", &appv1.CreateAutomationRequest{Name: "a\nb", DefinitionJson: scheduleDef}, []string{"name"}, "", ""},
		{"description too long", &appv1.CreateAutomationRequest{Name: "a", Description: strings.Repeat("d", lim.Automations.DescriptionLen+1), DefinitionJson: scheduleDef}, []string{"description"}, "", ""},
		{"no definition", &appv1.CreateAutomationRequest{Name: "a"}, []string{"definition_json"}, "", ""},
		{"definition too big", &appv1.CreateAutomationRequest{Name: "a", DefinitionJson: scheduleDef + strings.Repeat(" ", lim.Automations.DefinitionBytes)}, []string{"definition_json"}, "", ""},
		{"definition not JSON", &appv1.CreateAutomationRequest{Name: "a", DefinitionJson: "{"}, []string{"definition_json"}, "", ""},
		{"unknown block type", &appv1.CreateAutomationRequest{Name: "a", DefinitionJson: badBlockDef}, []string{"definition_json"}, "weird", "type"},
		{"missing required input", &appv1.CreateAutomationRequest{Name: "a", DefinitionJson: eventDef}, []string{"inputs_json"}, "", ""},
		{"input of the wrong type", &appv1.CreateAutomationRequest{Name: "a", DefinitionJson: eventDef, InputsJson: `{"label": 3}`}, []string{"inputs_json"}, "", ""},
		{"everything at once", &appv1.CreateAutomationRequest{DefinitionJson: badBlockDef}, []string{"name", "definition_json"}, "weird", "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			_, err := f.svc.CreateAutomation(as(t, alice), connect.NewRequest(tt.req))
			fields := slices.Compact(testenv.ViolatedFields(t, err))
			if !slices.Equal(fields, tt.wantFields) {
				t.Fatalf("violated fields %v, want %v (%v)", fields, tt.wantFields, err)
			}
			if tt.wantBlock != "" && !hasBlockError(blockErrors(t, err), tt.wantBlock, tt.wantField) {
				t.Fatalf("no BlockError for block %q field %q in %v", tt.wantBlock, tt.wantField, blockErrors(t, err))
			}
		})
	}
}

func TestCreateAutomationRefusesPastTheLimit(t *testing.T) {
	t.Parallel()
	lim := config.Default().Limits
	lim.Automations.Max = 1
	f := newFixtureWith(t, lim, nil)
	f.createSchedule(t, "one", false)
	_, err := f.svc.CreateAutomation(as(t, alice), connect.NewRequest(&appv1.CreateAutomationRequest{Name: "two", DefinitionJson: scheduleDef}))
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
}

func TestGetAutomation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", false)
	builtin := &records.AutomationRecord{
		ID: ids.New(records.IDPrefix), Kind: records.KindBuiltin, BuiltinKey: "nightly-cleanup",
		InputsJSON: "{}", BlockOverridesJSON: "{}", SettingsJSON: "{}",
	}
	builtin.SetName("Nightly cleanup")
	def, _ := (&records.AutomationRecord{Version: records.VersionRecord{DefinitionJSON: scheduleDef}}).Definition()
	builtin.SetVersion(records.VersionRecord{Number: 1, DefinitionJSON: scheduleDef, CreatedAt: t0}, def)
	if err := f.svc.Store().Create(t.Context(), builtin, 0); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		req    *appv1.GetAutomationRequest
		wantID string
		code   connect.Code
	}{
		{"by id", &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: a.GetId()}}, a.GetId(), 0},
		{"by built-in key", &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_BuiltinKey{BuiltinKey: "nightly-cleanup"}}, builtin.ID, 0},
		{"unknown id", &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: ids.New(records.IDPrefix)}}, "", connect.CodeNotFound},
		{"malformed id", &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_Id{Id: "auto_nope"}}, "", connect.CodeNotFound},
		{"unknown built-in key", &appv1.GetAutomationRequest{Lookup: &appv1.GetAutomationRequest_BuiltinKey{BuiltinKey: "nope"}}, "", connect.CodeNotFound},
		{"no lookup", &appv1.GetAutomationRequest{}, "", connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.svc.GetAutomation(as(t, bob), connect.NewRequest(tt.req))
			if tt.code != 0 {
				testenv.WantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Msg.GetAutomation(); got.GetId() != tt.wantID || got.GetVersion().GetNumber() != 1 {
				t.Fatalf("got %v, want %s", got, tt.wantID)
			}
		})
	}
}

func TestSaveVersionAddsImmutableNumberedVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createEvent(t, "Triage", false)
	f.clock.Advance(time.Minute)

	resp, err := f.svc.SaveVersion(as(t, alice), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: a.GetId(), DefinitionJson: scheduleDef}))
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Msg.GetAutomation()
	if got.GetCurrentVersion() != 2 || got.GetVersion().GetNumber() != 2 || got.GetVersion().GetDefinitionJson() != scheduleDef ||
		got.GetUpdatedAt() != "2025-03-01T09:01:00.000Z" || got.GetInputsJson() != a.GetInputsJson() {
		t.Fatalf("after SaveVersion: %v", got)
	}
	// An admin may save a version of anyone's automation.
	if _, err := f.svc.SaveVersion(as(t, admin), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: a.GetId(), DefinitionJson: eventDef})); err != nil {
		t.Fatal(err)
	}

	list, err := f.svc.ListVersions(as(t, bob), connect.NewRequest(&appv1.ListVersionsRequest{AutomationId: a.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	vs := list.Msg.GetVersions()
	if len(vs) != 3 {
		t.Fatalf("%d versions, want 3", len(vs))
	}
	want := []struct {
		number int32
		def    string
		by     string
	}{{3, eventDef, admin}, {2, scheduleDef, alice}, {1, eventDef, alice}}
	for i, w := range want {
		if vs[i].GetNumber() != w.number || vs[i].GetDefinitionJson() != w.def || vs[i].GetCreatedByUserId() != w.by {
			t.Errorf("versions[%d] = %v, want number %d by %s", i, vs[i], w.number, w.by)
		}
	}
	if vs[2].GetCreatedAt() != "2025-03-01T09:00:00.000Z" {
		t.Errorf("version 1 changed: %v", vs[2])
	}
}

func TestSaveVersionRefusesAnInvalidDefinitionNamingTheBlock(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", false)
	_, err := f.svc.SaveVersion(as(t, alice), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: a.GetId(), DefinitionJson: badBlockDef}))
	if fields := slices.Compact(testenv.ViolatedFields(t, err)); !slices.Equal(fields, []string{"definition_json"}) {
		t.Fatalf("violated fields %v", fields)
	}
	if errs := blockErrors(t, err); !hasBlockError(errs, "weird", "type") {
		t.Fatalf("block errors %v, want one for block weird, field type", errs)
	}
	if got := f.get(t, a.GetId()); got.GetCurrentVersion() != 1 {
		t.Fatalf("a refused version was saved: %v", got)
	}
}

func TestSetAutomationEnabledSchedulesAndClearsTheNextFire(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", false)
	if a.NextFireAt != nil {
		t.Fatalf("a disabled automation has next_fire_at %s", a.GetNextFireAt())
	}
	steps := []struct {
		enabled bool
		advance time.Duration
		// want is next_fire_at, "" for none.
		want string
	}{
		{true, 0, "2025-03-01T10:00:00.000Z"},
		{true, 2 * time.Hour, "2025-03-01T10:00:00.000Z"}, // already enabled: nothing changes
		{false, 0, ""},
		{true, 0, "2025-03-02T10:00:00.000Z"}, // enabled again at 11:00: tomorrow's run
	}
	for i, s := range steps {
		f.clock.Advance(s.advance)
		resp, err := f.svc.SetAutomationEnabled(as(t, alice), connect.NewRequest(&appv1.SetAutomationEnabledRequest{Id: a.GetId(), Enabled: s.enabled}))
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := resp.Msg.GetAutomation()
		if got.GetEnabled() != s.enabled || (got.NextFireAt == nil) != (s.want == "") || got.GetNextFireAt() != s.want {
			t.Fatalf("step %d: enabled %v next_fire_at %q, want %v %q", i, got.GetEnabled(), got.GetNextFireAt(), s.enabled, s.want)
		}
		if stored := f.get(t, a.GetId()); stored.GetNextFireAt() != got.GetNextFireAt() {
			t.Fatalf("step %d: stored next_fire_at %q, answered %q", i, stored.GetNextFireAt(), got.GetNextFireAt())
		}
	}
}

func TestEnablingNeedsInputsThatFitTheVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Version 1 needs no inputs; version 2 requires "label", which the automation does not have.
	a := f.createSchedule(t, "Daily", false)
	if _, err := f.svc.SaveVersion(as(t, alice), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: a.GetId(), DefinitionJson: eventDef})); err != nil {
		t.Fatal(err)
	}
	enable := connect.NewRequest(&appv1.SetAutomationEnabledRequest{Id: a.GetId(), Enabled: true})
	_, err := f.svc.SetAutomationEnabled(as(t, alice), enable)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if errs := blockErrors(t, err); !hasBlockError(errs, "", "inputs_json") {
		t.Fatalf("block errors %v, want one for inputs_json", errs)
	}

	if _, err := f.svc.SetInputs(as(t, alice), connect.NewRequest(&appv1.SetInputsRequest{AutomationId: a.GetId(), InputsJson: `{"label": "bug"}`})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SetAutomationEnabled(as(t, alice), enable); err != nil {
		t.Fatalf("enable with inputs set: %v", err)
	}
}

func TestUpdateAutomationMeta(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", true)
	f.clock.Advance(time.Minute)

	resp, err := f.svc.UpdateAutomationMeta(as(t, alice), connect.NewRequest(&appv1.UpdateAutomationMetaRequest{
		Id: a.GetId(), Description: new("Says hello."), SettingsJson: new(`{"time_zone": "America/New_York"}`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Msg.GetAutomation()
	// The schedule now runs at 10:00 in New York: 15:00 UTC.
	if got.GetName() != "Daily" || got.GetDescription() != "Says hello." || got.GetNextFireAt() != "2025-03-01T15:00:00.000Z" {
		t.Fatalf("after UpdateAutomationMeta: %v", got)
	}
	resp, err = f.svc.UpdateAutomationMeta(as(t, alice), connect.NewRequest(&appv1.UpdateAutomationMetaRequest{Id: a.GetId(), Name: new("Hello")}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Msg.GetAutomation(); got.GetName() != "Hello" || got.GetDescription() != "Says hello." {
		t.Fatalf("after renaming: %v", got)
	}

	tests := []struct {
		name  string
		req   *appv1.UpdateAutomationMetaRequest
		field string
	}{
		{"empty name", &appv1.UpdateAutomationMetaRequest{Id: a.GetId(), Name: new(" ")}, "name"},
		{"settings not JSON", &appv1.UpdateAutomationMetaRequest{Id: a.GetId(), SettingsJson: new("{")}, "settings_json"},
		{"unknown time zone", &appv1.UpdateAutomationMetaRequest{Id: a.GetId(), SettingsJson: new(`{"time_zone": "Mars/Olympus"}`)}, "settings_json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.UpdateAutomationMeta(as(t, alice), connect.NewRequest(tt.req))
			if fields := slices.Compact(testenv.ViolatedFields(t, err)); !slices.Equal(fields, []string{tt.field}) {
				t.Fatalf("violated fields %v, want %s", fields, tt.field)
			}
		})
	}
}

func TestSetInputsChecksTheDeclaredInputs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createEvent(t, "Triage", false)
	tests := []struct {
		name   string
		inputs string
		ok     bool
	}{
		{"valid", `{"label": "feature"}`, true},
		{"missing required", `{}`, false},
		{"wrong type", `{"label": true}`, false},
		{"not JSON", `{"label"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.svc.SetInputs(as(t, alice), connect.NewRequest(&appv1.SetInputsRequest{AutomationId: a.GetId(), InputsJson: tt.inputs}))
			if !tt.ok {
				if fields := slices.Compact(testenv.ViolatedFields(t, err)); !slices.Equal(fields, []string{"inputs_json"}) {
					t.Fatalf("violated fields %v", fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Msg.GetAutomation().GetInputsJson(); got != tt.inputs {
				t.Fatalf("inputs %s, want %s", got, tt.inputs)
			}
		})
	}
}

func TestSetBlockOverridesAppliesThemToTheCurrentVersion(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createEvent(t, "Triage", false)
	tests := []struct {
		name      string
		overrides string
		ok        bool
	}{
		{"valid", `{"only_bugs": {"condition": "event.issue.number > 10"}}`, true},
		{"unknown block", `{"nope": {"condition": "true"}}`, false},
		{"not JSON", `{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := f.svc.SetBlockOverrides(as(t, alice), connect.NewRequest(&appv1.SetBlockOverridesRequest{AutomationId: a.GetId(), OverridesJson: tt.overrides}))
			if !tt.ok {
				if fields := slices.Compact(testenv.ViolatedFields(t, err)); !slices.Equal(fields, []string{"overrides_json"}) {
					t.Fatalf("violated fields %v", fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Msg.GetAutomation().GetBlockOverridesJson(); got != tt.overrides {
				t.Fatalf("overrides %s, want %s", got, tt.overrides)
			}
		})
	}
}

func TestDuplicateAutomation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src := f.createEvent(t, "Triage", true)
	if _, err := f.svc.UpdateAutomationMeta(as(t, alice), connect.NewRequest(&appv1.UpdateAutomationMetaRequest{
		Id: src.GetId(), Description: new("d"), SettingsJson: new(`{"time_zone": "Europe/Berlin"}`),
	})); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SaveVersion(as(t, alice), connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: src.GetId(), DefinitionJson: eventDef + " "})); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		newName  *string
		wantName string
	}{
		{"default name", nil, "Triage (copy)"},
		{"given name", new("Mine"), "Mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Anyone may duplicate; the copy is theirs.
			resp, err := f.svc.DuplicateAutomation(as(t, bob), connect.NewRequest(&appv1.DuplicateAutomationRequest{AutomationId: src.GetId(), Name: tt.newName}))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Msg.GetAutomation()
			if got.GetId() == src.GetId() || got.GetName() != tt.wantName || got.GetEnabled() || got.GetCreatedByUserId() != bob ||
				got.GetCurrentVersion() != 1 || got.GetVersion().GetDefinitionJson() != eventDef+" " ||
				got.GetInputsJson() != src.GetInputsJson() || got.GetDescription() != "d" || got.GetKind() != records.KindCustom {
				t.Fatalf("copy %v", got)
			}
		})
	}
	if got := copyName(strings.Repeat("é", 200), 120); len([]rune(got)) != 120 || !strings.HasSuffix(got, " (copy)") {
		t.Fatalf("copy name of a long name: %q", got)
	}
}

func TestArchiveAutomationIsIdempotentAndFreezesTheAutomation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", true)
	for range 2 {
		resp, err := f.svc.ArchiveAutomation(as(t, alice), connect.NewRequest(&appv1.ArchiveAutomationRequest{Id: a.GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Msg.GetAutomation(); !got.GetArchived() || got.GetEnabled() || got.NextFireAt != nil {
			t.Fatalf("archived automation %v", got)
		}
	}
	for name, call := range changes(a.GetId()) {
		t.Run(name, func(t *testing.T) {
			testenv.WantCode(t, call(f.svc, as(t, alice)), connect.CodeFailedPrecondition)
		})
	}
	// An archived automation is still read and duplicated.
	f.get(t, a.GetId())
	if _, err := f.svc.DuplicateAutomation(as(t, alice), connect.NewRequest(&appv1.DuplicateAutomationRequest{AutomationId: a.GetId()})); err != nil {
		t.Fatal(err)
	}
}

func TestOnlyTheCreatorOrAnAdminChangesAnAutomation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.createSchedule(t, "Daily", false)
	archive := func(s *Service, ctx context.Context) error {
		_, err := s.ArchiveAutomation(ctx, connect.NewRequest(&appv1.ArchiveAutomationRequest{Id: a.GetId()}))
		return err
	}
	for name, call := range changes(a.GetId()) {
		t.Run(name, func(t *testing.T) {
			testenv.WantCode(t, call(f.svc, as(t, bob)), connect.CodePermissionDenied)
		})
	}
	testenv.WantCode(t, archive(f.svc, as(t, bob)), connect.CodePermissionDenied)
	for name, call := range changes(a.GetId()) {
		t.Run(name+" by an admin", func(t *testing.T) {
			if err := call(f.svc, as(t, admin)); err != nil {
				t.Fatal(err)
			}
		})
	}
	if err := archive(f.svc, as(t, admin)); err != nil {
		t.Fatalf("archive by an admin: %v", err)
	}
}

// changes are the calls that change automation id, each valid for scheduleDef.
func changes(id string) map[string]func(*Service, context.Context) error {
	return map[string]func(*Service, context.Context) error{
		"SaveVersion": func(s *Service, ctx context.Context) error {
			_, err := s.SaveVersion(ctx, connect.NewRequest(&appv1.SaveVersionRequest{AutomationId: id, DefinitionJson: scheduleDef}))
			return err
		},
		"SetAutomationEnabled": func(s *Service, ctx context.Context) error {
			_, err := s.SetAutomationEnabled(ctx, connect.NewRequest(&appv1.SetAutomationEnabledRequest{Id: id, Enabled: true}))
			return err
		},
		"UpdateAutomationMeta": func(s *Service, ctx context.Context) error {
			_, err := s.UpdateAutomationMeta(ctx, connect.NewRequest(&appv1.UpdateAutomationMetaRequest{Id: id, Name: new("renamed")}))
			return err
		},
		"SetInputs": func(s *Service, ctx context.Context) error {
			_, err := s.SetInputs(ctx, connect.NewRequest(&appv1.SetInputsRequest{AutomationId: id, InputsJson: "{}"}))
			return err
		},
		"SetBlockOverrides": func(s *Service, ctx context.Context) error {
			_, err := s.SetBlockOverrides(ctx, connect.NewRequest(&appv1.SetBlockOverridesRequest{AutomationId: id, OverridesJson: "{}"}))
			return err
		},
	}
}

func TestChangesOfUnknownAutomationsAreNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{ids.New(records.IDPrefix), "auto_bad"} {
		for name, call := range changes(id) {
			t.Run(name+" "+id, func(t *testing.T) {
				testenv.WantCode(t, call(f.svc, as(t, admin)), connect.CodeNotFound)
			})
		}
	}
	for name, call := range changes("") {
		t.Run(name+" without an id", func(t *testing.T) {
			if fields := testenv.ViolatedFields(t, call(f.svc, as(t, admin))); len(fields) == 0 || !strings.HasSuffix(fields[0], "id") {
				t.Fatalf("violated fields %v, want the id field", fields)
			}
		})
	}
}

// runStats stands in for the run side's records: it answers from maps and remembers the since
// it was asked for.
type runStats struct {
	last  map[string]*appv1.AutomationRunBrief
	days  map[string][]*appv1.DayRunCount
	since chan time.Time
}

func (r runStats) LastRun(_ context.Context, id string) (*appv1.AutomationRunBrief, error) {
	return r.last[id], nil
}

func (r runStats) RunsByDay(_ context.Context, id string, since time.Time) ([]*appv1.DayRunCount, error) {
	r.since <- since
	return r.days[id], nil
}

func TestListAutomationsSummarisesTriggersAndRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		archived bool
		withRuns bool
	}{
		{"active, with run stats", false, true},
		{"archived too, without run stats", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stats := runStats{last: map[string]*appv1.AutomationRunBrief{}, days: map[string][]*appv1.DayRunCount{}, since: make(chan time.Time, 10)}
			var deps RunStats
			if tt.withRuns {
				deps = stats
			}
			f := newFixtureWith(t, config.Default().Limits, deps)
			daily := f.createSchedule(t, "daily report", true)
			triage := f.createEvent(t, "Bug triage", false)
			old := f.createSchedule(t, "Archived one", false)
			if _, err := f.svc.ArchiveAutomation(as(t, alice), connect.NewRequest(&appv1.ArchiveAutomationRequest{Id: old.GetId()})); err != nil {
				t.Fatal(err)
			}
			stats.last[triage.GetId()] = &appv1.AutomationRunBrief{Id: "run_1", AutomationId: triage.GetId(), Status: "completed"}
			stats.days[triage.GetId()] = []*appv1.DayRunCount{{Day: "2025-03-01", Completed: 1}}

			resp, err := f.svc.ListAutomations(as(t, bob), connect.NewRequest(&appv1.ListAutomationsRequest{IncludeArchived: tt.archived}))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.Msg.GetAutomations()
			want := []string{triage.GetId(), daily.GetId()}
			if tt.archived {
				want = []string{old.GetId(), triage.GetId(), daily.GetId()}
			}
			var gotIDs []string
			for _, s := range got {
				gotIDs = append(gotIDs, s.GetAutomation().GetId())
				if s.GetTriggerSummary() == "" {
					t.Errorf("%s has no trigger summary", s.GetAutomation().GetName())
				}
			}
			if !slices.Equal(gotIDs, want) {
				t.Fatalf("listed %v, want %v (by name, case-insensitively)", gotIDs, want)
			}
			if s := got[slices.Index(gotIDs, daily.GetId())].GetTriggerSummary(); !strings.Contains(s, "10:00") {
				t.Errorf("the daily schedule is summarised as %q", s)
			}
			triageSummary := got[slices.Index(gotIDs, triage.GetId())]
			if !tt.withRuns {
				if triageSummary.LastRun != nil || len(triageSummary.GetRuns_7D()) > 0 {
					t.Fatalf("run columns without run stats: %v", triageSummary)
				}
				return
			}
			if triageSummary.GetLastRun().GetId() != "run_1" || len(triageSummary.GetRuns_7D()) != 1 {
				t.Fatalf("triage summary %v", triageSummary)
			}
			if since := <-stats.since; !since.Equal(time.Date(2025, 2, 23, 0, 0, 0, 0, time.UTC)) {
				t.Fatalf("runs counted since %v, want the start of the UTC day six days ago", since)
			}
		})
	}
}

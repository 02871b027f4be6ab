package schedule

import (
	"slices"
	"testing"
	"time"
	_ "time/tzdata" // the DST cases must not depend on the machine's zoneinfo
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return loc
}

func mustParse(t testing.TB, expr string) Schedule {
	t.Helper()
	s, err := Parse(expr)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustTime(t testing.TB, rfc3339 string) time.Time {
	t.Helper()
	ts, err := time.Parse(time.RFC3339, rfc3339)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestNextFollowsTheSchedule(t *testing.T) {
	tests := []struct {
		name  string
		expr  string
		tz    string
		after string
		want  []string // successive fire times, RFC 3339 with the zone's offset
	}{
		{"steps cross the hour", "*/20 * * * *", "UTC", "2024-05-01T10:41:00Z",
			[]string{"2024-05-01T11:00:00Z", "2024-05-01T11:20:00Z", "2024-05-01T11:40:00Z", "2024-05-01T12:00:00Z"}},
		{"strictly after a fire time", "0 * * * *", "UTC", "2024-05-01T10:00:00Z",
			[]string{"2024-05-01T11:00:00Z"}},
		{"seconds round up to the next minute", "* * * * *", "UTC", "2024-05-01T10:00:30Z",
			[]string{"2024-05-01T10:01:00Z", "2024-05-01T10:02:00Z"}},
		{"daily in a zone", "0 3 * * *", "Europe/Paris", "2024-05-01T12:00:00+02:00",
			[]string{"2024-05-02T03:00:00+02:00", "2024-05-03T03:00:00+02:00"}},
		{"half-hour offset zone", "0 9 * * *", "Asia/Kolkata", "2024-05-01T09:00:00+05:30",
			[]string{"2024-05-02T09:00:00+05:30"}},
		{"hour steps", "0 9-17/4 * * *", "UTC", "2024-05-01T00:00:00Z",
			[]string{"2024-05-01T09:00:00Z", "2024-05-01T13:00:00Z", "2024-05-01T17:00:00Z", "2024-05-02T09:00:00Z"}},
		{"year wraps to January", "0 0 1 1 *", "UTC", "2024-06-15T00:00:00Z",
			[]string{"2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}},
		{"names and weekdays", "30 8 * JAN,JUL MON-FRI", "UTC", "2024-06-28T09:00:00Z",
			[]string{"2024-07-01T08:30:00Z", "2024-07-02T08:30:00Z"}},
		{"Sunday as 7", "0 12 * * 7", "UTC", "2024-05-01T00:00:00Z",
			[]string{"2024-05-05T12:00:00Z", "2024-05-12T12:00:00Z"}},
		{"both day fields restricted run on either", "0 0 13 * FRI", "UTC", "2024-09-01T00:00:00Z",
			[]string{"2024-09-06T00:00:00Z", "2024-09-13T00:00:00Z", "2024-09-20T00:00:00Z", "2024-09-27T00:00:00Z", "2024-10-04T00:00:00Z", "2024-10-11T00:00:00Z", "2024-10-13T00:00:00Z"}},
		{"day of month written with * runs on both", "0 0 */2 * MON", "UTC", "2024-09-01T00:00:00Z",
			[]string{"2024-09-09T00:00:00Z", "2024-09-23T00:00:00Z", "2024-10-07T00:00:00Z"}},
		{"last day of long months", "0 0 31 * *", "UTC", "2024-01-31T00:00:00Z",
			[]string{"2024-03-31T00:00:00Z", "2024-05-31T00:00:00Z", "2024-07-31T00:00:00Z", "2024-08-31T00:00:00Z"}},
		{"leap day", "0 12 29 2 *", "UTC", "2024-03-01T00:00:00Z",
			[]string{"2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"}},
		{"leap day skips 2100", "0 12 29 2 *", "UTC", "2096-03-01T00:00:00Z",
			[]string{"2104-02-29T12:00:00Z"}},

		// Europe/Paris: 2024-03-31 02:00 CET → 03:00 CEST; 2024-10-27 03:00 CEST → 02:00 CET.
		{"Paris skipped time fires once at the jump", "30 2 * * *", "Europe/Paris", "2024-03-30T12:00:00+01:00",
			[]string{"2024-03-31T03:00:00+02:00", "2024-04-01T02:30:00+02:00"}},
		{"Paris skipped minutes fire once at the jump", "*/15 2 * * *", "Europe/Paris", "2024-03-31T01:59:00+01:00",
			[]string{"2024-03-31T03:00:00+02:00", "2024-04-01T02:00:00+02:00"}},
		{"Paris skipped time and the jump fire once together", "0,30 2,3 * * *", "Europe/Paris", "2024-03-31T01:00:00+01:00",
			[]string{"2024-03-31T03:00:00+02:00", "2024-03-31T03:30:00+02:00", "2024-04-01T02:00:00+02:00"}},
		{"Paris hourly loses the skipped hour", "30 * * * *", "Europe/Paris", "2024-03-31T01:00:00+01:00",
			[]string{"2024-03-31T01:30:00+01:00", "2024-03-31T03:30:00+02:00"}},
		{"Paris repeated time fires once", "30 2 * * *", "Europe/Paris", "2024-10-26T12:00:00+02:00",
			[]string{"2024-10-27T02:30:00+02:00", "2024-10-28T02:30:00+01:00"}},
		{"Paris repeated minutes fire once each", "*/20 2 * * *", "Europe/Paris", "2024-10-27T01:00:00+02:00",
			[]string{"2024-10-27T02:00:00+02:00", "2024-10-27T02:20:00+02:00", "2024-10-27T02:40:00+02:00", "2024-10-28T02:00:00+01:00"}},
		{"Paris hourly fires in both repeated hours", "30 * * * *", "Europe/Paris", "2024-10-27T01:00:00+02:00",
			[]string{"2024-10-27T01:30:00+02:00", "2024-10-27T02:30:00+02:00", "2024-10-27T02:30:00+01:00", "2024-10-27T03:30:00+01:00"}},
		{"Paris every 20 minutes through the repeated hour", "*/20 * * * *", "Europe/Paris", "2024-10-27T02:30:00+02:00",
			[]string{"2024-10-27T02:40:00+02:00", "2024-10-27T02:00:00+01:00", "2024-10-27T02:20:00+01:00"}},
		{"Paris from inside the second repeated hour", "30 2 * * *", "Europe/Paris", "2024-10-27T02:10:00+01:00",
			[]string{"2024-10-28T02:30:00+01:00"}},

		// America/New_York: 2024-03-10 02:00 EST → 03:00 EDT; 2024-11-03 02:00 EDT → 01:00 EST.
		{"New York skipped time fires once at the jump", "30 2 * * *", "America/New_York", "2024-03-09T12:00:00-05:00",
			[]string{"2024-03-10T03:00:00-04:00", "2024-03-11T02:30:00-04:00"}},
		{"New York repeated time fires once", "30 1 * * *", "America/New_York", "2024-11-02T12:00:00-04:00",
			[]string{"2024-11-03T01:30:00-04:00", "2024-11-04T01:30:00-05:00"}},
		{"New York hourly fires in both repeated hours", "30 * * * *", "America/New_York", "2024-11-03T00:45:00-04:00",
			[]string{"2024-11-03T01:30:00-04:00", "2024-11-03T01:30:00-05:00", "2024-11-03T02:30:00-05:00"}},
		{"New York weekly across the change", "0 9 * * MON", "America/New_York", "2024-11-01T00:00:00-04:00",
			[]string{"2024-11-04T09:00:00-05:00", "2024-11-11T09:00:00-05:00"}},

		// America/Santiago skips midnight: 2024-09-08 00:00 → 01:00.
		{"Santiago skipped midnight fires at the jump", "0 0 * * *", "America/Santiago", "2024-09-07T12:00:00-04:00",
			[]string{"2024-09-08T01:00:00-03:00", "2024-09-09T00:00:00-03:00"}},
		// Australia/Lord_Howe moves by half an hour: 2024-04-07 02:00 → 01:30.
		{"Lord Howe half-hour repeat fires once", "45 1 * * *", "Australia/Lord_Howe", "2024-04-06T12:00:00+11:00",
			[]string{"2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.expr)
			loc := mustLoad(t, tt.tz)
			after := mustTime(t, tt.after)
			for i, want := range tt.want {
				got := s.Next(after, loc)
				if got.Format(time.RFC3339) != want {
					t.Fatalf("fire %d after %s = %s, want %s", i, after.Format(time.RFC3339), got.Format(time.RFC3339), want)
				}
				if got.Location() != loc {
					t.Errorf("fire %d is in %s, want %s", i, got.Location(), loc)
				}
				after = got
			}
		})
	}
}

func TestNextDefaultsToUTC(t *testing.T) {
	// 02:00 UTC: 03:00 is still ahead in UTC, though already past in Paris.
	got := mustParse(t, "0 3 * * *").Next(mustTime(t, "2024-05-01T04:00:00+02:00"), nil)
	if want := "2024-05-01T03:00:00Z"; got.Format(time.RFC3339) != want {
		t.Errorf("Next = %s, want %s", got.Format(time.RFC3339), want)
	}
}

func TestNextGivesUpOnAScheduleThatNeverFires(t *testing.T) {
	// Parse rejects February 30; a Schedule built around that check must still end the search.
	s, err := parseFields("0 0 30 2 *")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Next(mustTime(t, "2024-01-01T00:00:00Z"), time.UTC); !got.IsZero() {
		t.Errorf("Next = %s, want the zero Time", got)
	}
}

// TestNextMatchesAMinuteByMinuteScan checks Next against the definition of cron in zones without
// daylight-saving time: a minute fires when each of its wall-clock fields matches.
func TestNextMatchesAMinuteByMinuteScan(t *testing.T) {
	exprs := []string{"*/7 * * * *", "0 */5 * * *", "15,45 9-17 * * 1-5", "0 0 1,15 * *", "0 0 13 * 5",
		"0 0 */3 * 0", "59 23 28-31 * *", "0 12 * 2 *", "5 4 * * sun"}
	from := mustTime(t, "2024-01-25T00:00:00Z")
	for _, tz := range []string{"UTC", "Asia/Kolkata"} {
		loc := mustLoad(t, tz)
		for _, expr := range exprs {
			s := mustParse(t, expr)
			var want []time.Time
			for m := from.Add(time.Minute); m.Before(from.Add(60 * 24 * time.Hour)); m = m.Add(time.Minute) {
				if s.matchesWall(m.In(loc)) {
					want = append(want, m)
				}
			}
			var got []time.Time
			for ft := s.Next(from, loc); !ft.IsZero() && ft.Before(from.Add(60*24*time.Hour)); ft = s.Next(ft, loc) {
				got = append(got, ft)
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%s in %s: Next gives %d fire times, the scan %d", expr, tz, len(got), len(want))
			}
		}
	}
}

// matchesWall is cron's definition for one wall-clock minute.
func (s Schedule) matchesWall(w time.Time) bool {
	day := time.Date(w.Year(), w.Month(), w.Day(), 0, 0, 0, 0, time.UTC)
	return s.minute&(1<<w.Minute()) != 0 && s.hour&(1<<w.Hour()) != 0 &&
		s.month&(1<<w.Month()) != 0 && s.dayMatches(day)
}

func BenchmarkNext(b *testing.B) {
	paris := mustLoad(b, "Europe/Paris")
	after := mustTime(b, "2024-10-26T23:59:30+02:00")
	cases := []struct {
		name string
		expr string
		loc  *time.Location
	}{
		{"every-5-minutes-utc", "*/5 * * * *", time.UTC},
		{"daily-paris", "0 3 * * *", paris},
		{"weekdays-paris", "0 9 * * MON-FRI", paris},
		{"hourly-paris-fall-back", "30 * * * *", paris},
		{"leap-day-utc", "0 0 29 2 *", time.UTC},
	}
	for _, c := range cases {
		s := mustParse(b, c.expr)
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				s.Next(after, c.loc)
			}
		})
	}
}

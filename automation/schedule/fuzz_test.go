package schedule

import (
	"testing"
	"time"
)

// FuzzParse feeds cron expressions as automation authors write them: Parse answers an error or
// a Schedule that fires — Next finds a time after any instant in any zone, which the package
// promises for every Schedule Parse makes — and Summary describes it without failing.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/5 * * * *", "0 9 * * MON-FRI", "30 2 29 2 *", "0 0 30 2 *", "0 0 31 4,6 *",
		"@daily", "@hourly", "@yearly", "@reboot", "1-59/7 */3 1,15 JAN-MAR,DEC SUN", "0 0 * * 7",
		"59 23 31 12 *", "0 2 * * *", "60 * * * *", "*/0 * * * *", "5-1 * * * *", "a b c d e", "",
		"0 0 29 2 MON", "0/15 0-23/2 */2 * *",
	} {
		f.Add(seed, int64(1785000000))
	}
	zones := []string{"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kathmandu"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			f.Fatal(err)
		}
		locs[i] = loc
	}
	f.Fuzz(func(t *testing.T, expr string, unix int64) {
		s, err := Parse(expr)
		if err != nil {
			return
		}
		// Any instant from 1970 to 2200: the horizon of the search is what is under test.
		after := time.Unix(0, 0).Add(time.Duration(uint64(unix)%(230*365*24*3600)) * time.Second)
		for i, loc := range locs {
			next := s.Next(after, loc)
			if next.IsZero() || !next.After(after) {
				t.Fatalf("%q in %s after %s: Next = %s, want a time after it", expr, zones[i], after, next)
			}
			_ = Summary(expr, zones[i])
		}
	})
}

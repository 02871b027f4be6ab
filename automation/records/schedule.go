package records

import (
	"cmp"
	"fmt"
	"time"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/schedule"
)

// NextFire is the earliest time after after at which one of def's schedule entrypoints fires,
// each in its own time zone, else the settings', else UTC; the zero time when def has none.
func NextFire(def definition.Definition, settings definition.Settings, after time.Time) (time.Time, error) {
	var next time.Time
	for i, ep := range def.Entrypoints {
		if ep.Type != definition.EntrypointSchedule {
			continue
		}
		s, err := schedule.Parse(ep.Cron)
		if err != nil {
			return time.Time{}, fmt.Errorf("entrypoints[%d].cron: %w", i, err)
		}
		zone := cmp.Or(ep.TimeZone, settings.TimeZone, "UTC")
		loc, err := time.LoadLocation(zone)
		if err != nil {
			return time.Time{}, fmt.Errorf("entrypoints[%d]: time zone %q: %w", i, zone, err)
		}
		if t := s.Next(after, loc); !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next.UTC(), nil
}

// parseSettings reads stored settings_json, which the service validated ("" is no settings).
func parseSettings(settingsJSON string) (definition.Settings, error) {
	s, errs := definition.ParseSettings([]byte(settingsJSON))
	if len(errs) > 0 {
		return s, errs[0]
	}
	return s, nil
}

package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

var monthNames = [13]string{"", "January", "February", "March", "April", "May", "June", "July",
	"August", "September", "October", "November", "December"}

var dayNames = [7]string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}

// maxListed is how many times or days a sentence lists before it is clearer to show the cron.
const maxListed = 4

const (
	weekdays = 0b0111110 // Monday to Friday
	weekends = 0b1000001
)

// Summary describes a cron expression in one sentence, e.g. "Every day at 03:00 Europe/Paris",
// "Every hour at :15", "Every Monday at 09:00 UTC", "Every 5 minutes" or "At 09:00 on weekdays
// UTC". Sentences that name wall-clock days or times end with the time zone (tz, "UTC" when
// empty). Expressions it cannot say simply, and invalid ones, read
// "On cron schedule `<cron>` (<tz>)".
func Summary(cron, tz string) string {
	if tz == "" {
		tz = "UTC"
	}
	fallback := fmt.Sprintf("On cron schedule `%s` (%s)", strings.TrimSpace(cron), tz)
	s, err := Parse(cron)
	if err != nil {
		return fallback
	}
	if sentence, ok := s.describe(tz); ok {
		return sentence
	}
	return fallback
}

// describe composes a sentence from the day part and the time part of the schedule.
func (s Schedule) describe(tz string) (string, bool) {
	allMonths := full(s.month, 1, 12)
	everyDay := allMonths && full(s.dom, 1, 31) && full(s.dow, 0, 6)
	// With the day of month written as "*", cron's days are those of the day-of-week field.
	onWeekdays := allMonths && full(s.dom, 1, 31) && s.domStar
	onOneDate := bits.OnesCount64(s.dom) == 1 && s.dowStar && full(s.dow, 0, 6)
	if times, ok := s.fixedTimes(); ok {
		switch {
		case everyDay:
			return fmt.Sprintf("Every day at %s %s", times, tz), true
		case onWeekdays && bits.OnesCount64(s.dow) == 1:
			return fmt.Sprintf("Every %s at %s %s", dayNames[bits.TrailingZeros64(s.dow)], times, tz), true
		case onWeekdays:
			days, ok := dayList(s.dow)
			return fmt.Sprintf("At %s on %s %s", times, days, tz), ok
		case onOneDate && allMonths:
			return fmt.Sprintf("Every month on the %s at %s %s", ordinal(bits.TrailingZeros64(s.dom)), times, tz), true
		case onOneDate && bits.OnesCount64(s.month) == 1:
			return fmt.Sprintf("Every year on %s %d at %s %s", monthNames[bits.TrailingZeros64(s.month)],
				bits.TrailingZeros64(s.dom), times, tz), true
		}
		return "", false
	}
	cadence, ok := s.cadence()
	switch {
	case !ok:
		return "", false
	case everyDay:
		return cadence, true
	case onWeekdays:
		days := dayNames[bits.TrailingZeros64(s.dow)] + "s"
		if bits.OnesCount64(s.dow) > 1 {
			if days, ok = dayList(s.dow); !ok {
				return "", false
			}
		}
		return fmt.Sprintf("%s on %s %s", cadence, days, tz), true
	}
	return "", false
}

// fixedTimes lists the times of day of a schedule that fires at one minute of a few hours, e.g.
// "09:00 and 17:00".
func (s Schedule) fixedTimes() (string, bool) {
	if bits.OnesCount64(s.minute) != 1 || bits.OnesCount64(s.hour) > maxListed {
		return "", false
	}
	minute := bits.TrailingZeros64(s.minute)
	var times []string
	for h := nextBit(s.hour, 0); h < 24; h = nextBit(s.hour, h+1) {
		times = append(times, fmt.Sprintf("%02d:%02d", h, minute))
	}
	return joinList(times, "and"), true
}

// cadence says how often within a day a schedule fires: "Every minute", "Every 5 minutes",
// "Every hour at :15", "Every 2 hours at :00".
func (s Schedule) cadence() (string, bool) {
	minutes := bits.OnesCount64(s.minute)
	if full(s.hour, 0, 23) {
		if n, ok := evenStep(s.minute, 60); ok {
			if n == 1 {
				return "Every minute", true
			}
			return fmt.Sprintf("Every %d minutes", n), true
		}
		if minutes > maxListed {
			return "", false
		}
		var marks []string
		for m := nextBit(s.minute, 0); m < 60; m = nextBit(s.minute, m+1) {
			marks = append(marks, fmt.Sprintf(":%02d", m))
		}
		return "Every hour at " + joinList(marks, "and"), true
	}
	if n, ok := evenStep(s.hour, 24); ok && minutes == 1 {
		return fmt.Sprintf("Every %d hours at :%02d", n, bits.TrailingZeros64(s.minute)), true
	}
	return "", false
}

// evenStep reports whether set is 0, n, 2n, … up to size with n dividing size and more than one
// value, so that the schedule fires every n units without an uneven gap at the wrap.
func evenStep(set uint64, size int) (int, bool) {
	count := bits.OnesCount64(set)
	if set&1 == 0 || count < 2 || size%count != 0 {
		return 0, false
	}
	n := size / count
	for v := 0; v < size; v += n {
		if set&(1<<v) == 0 {
			return 0, false
		}
	}
	return n, true
}

func dayList(dow uint64) (string, bool) {
	switch dow {
	case weekdays:
		return "weekdays", true
	case weekends:
		return "weekends", true
	}
	if bits.OnesCount64(dow) > maxListed {
		return "", false
	}
	var names []string
	// Monday first, Sunday last, as people list the days of a week.
	for _, d := range []int{1, 2, 3, 4, 5, 6, 0} {
		if dow&(1<<d) != 0 {
			names = append(names, dayNames[d])
		}
	}
	return joinList(names, "and"), true
}

func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}

// joinList joins items as "a", "a and b" or "a, b and c".
func joinList(items []string, conjunction string) string {
	if len(items) <= 1 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " " + conjunction + " " + items[len(items)-1]
}

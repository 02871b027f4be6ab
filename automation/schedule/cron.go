// Package schedule is the clock of schedule entrypoints: it parses five-field cron expressions,
// finds their fire times in an IANA time zone (across daylight-saving changes) and describes them
// in one human sentence for trigger summaries.
//
// Daylight-saving rules, the same as Vixie cron's:
//   - A wall time the clocks skip (02:30 on a spring-forward night) fires once, at the instant the
//     clocks jump (03:00), when the hour field names fixed hours. A schedule that runs every hour
//     simply has one run fewer that night, so its runs stay an hour apart.
//   - A wall time the clocks repeat (02:30 on a fall-back night) fires once, at its first
//     occurrence, when the hour field names fixed hours. A schedule that runs every hour fires at
//     both occurrences, because they are an hour apart.
package schedule

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Schedule is a parsed cron expression. Its zero value is not a schedule; use Parse.
type Schedule struct {
	expr string
	// Each field is a bit set: bit i set means value i matches.
	minute, hour, dom, month, dow uint64
	// domStar and dowStar record a day field written starting with "*". Cron runs a job on a day
	// matching either day field when both are restricted, and on days matching both otherwise.
	domStar, dowStar bool
}

// field describes one of the five cron fields.
type field struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	minuteField = field{name: "minute", min: 0, max: 59}
	hourField   = field{name: "hour", min: 0, max: 23}
	domField    = field{name: "day-of-month", min: 1, max: 31}
	monthField  = field{name: "month", min: 1, max: 12, names: map[string]int{
		"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12,
	}}
	// Day-of-week accepts 7 for Sunday, as most crons do; it is folded onto 0 after parsing.
	dowField = field{name: "day-of-week", min: 0, max: 7, names: map[string]int{
		"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6,
	}}
)

var macros = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// daysInMonth is the longest each month gets (February in leap years).
var daysInMonth = [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// Parse reads a five-field cron expression (minute hour day-of-month month day-of-week) or one of
// the macros @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly. Fields take
// "*", numbers, names (JAN–DEC, SUN–SAT, any case), ranges "a-b", lists "a,b" and steps "*/n",
// "a-b/n" or "a/n" (a to the field's maximum). An expression that can never fire, such as
// "0 0 30 2 *", is an error too, since it would silently never run.
func Parse(expr string) (Schedule, error) {
	text := strings.TrimSpace(expr)
	if text == "" {
		return Schedule{}, fmt.Errorf("cron is empty")
	}
	if strings.HasPrefix(text, "@") {
		full, ok := macros[strings.ToLower(text)]
		if !ok {
			return Schedule{}, fmt.Errorf("cron %q: unknown macro (want @yearly, @monthly, @weekly, @daily or @hourly)", expr)
		}
		text = full
	}
	s, err := parseFields(text)
	if err != nil {
		return Schedule{}, fmt.Errorf("cron %q: %w", expr, err)
	}
	if err := s.checkReachable(); err != nil {
		return Schedule{}, fmt.Errorf("cron %q: %w", expr, err)
	}
	s.expr = strings.TrimSpace(expr)
	return s, nil
}

// String returns the expression as it was written.
func (s Schedule) String() string { return s.expr }

func parseFields(text string) (Schedule, error) {
	parts := strings.Fields(text)
	if len(parts) != 5 {
		return Schedule{}, fmt.Errorf("want five fields (minute hour day-of-month month day-of-week), got %d", len(parts))
	}
	var s Schedule
	var err error
	if s.minute, err = minuteField.parse(parts[0]); err != nil {
		return Schedule{}, err
	}
	if s.hour, err = hourField.parse(parts[1]); err != nil {
		return Schedule{}, err
	}
	if s.dom, err = domField.parse(parts[2]); err != nil {
		return Schedule{}, err
	}
	if s.month, err = monthField.parse(parts[3]); err != nil {
		return Schedule{}, err
	}
	if s.dow, err = dowField.parse(parts[4]); err != nil {
		return Schedule{}, err
	}
	if s.dow&(1<<7) != 0 {
		s.dow = s.dow&^(1<<7) | 1
	}
	s.domStar = strings.HasPrefix(parts[2], "*")
	s.dowStar = strings.HasPrefix(parts[4], "*")
	return s, nil
}

// checkReachable rejects day-of-month values that none of the chosen months has. Only the
// day-of-month field can make a schedule unreachable: a restricted day-of-week either widens the
// days (both restricted) or is the only restriction.
func (s Schedule) checkReachable() error {
	if s.domStar || !s.dowStar {
		return nil
	}
	var months []string
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) == 0 {
			continue
		}
		if s.dom&(1<<(daysInMonth[m]+1)-1) != 0 {
			return nil
		}
		months = append(months, monthNames[m])
	}
	return fmt.Errorf("day-of-month: no chosen day occurs in %s, so the schedule never fires", joinList(months, "or"))
}

// parse turns one field into its bit set.
func (f field) parse(text string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(text, ",") {
		bitsOfItem, err := f.parseItem(item)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", f.name, err)
		}
		set |= bitsOfItem
	}
	return set, nil
}

func (f field) parseItem(item string) (uint64, error) {
	if item == "" {
		return 0, fmt.Errorf("empty list item")
	}
	rangeText, stepText, hasStep := strings.Cut(item, "/")
	lo, hi := f.min, f.max
	switch {
	case rangeText == "*":
	case strings.Contains(rangeText, "-"):
		a, b, _ := strings.Cut(rangeText, "-")
		var err error
		if lo, err = f.value(a); err != nil {
			return 0, err
		}
		if hi, err = f.value(b); err != nil {
			return 0, err
		}
		if lo > hi {
			return 0, fmt.Errorf("range %q runs backwards", rangeText)
		}
	default:
		v, err := f.value(rangeText)
		if err != nil {
			return 0, err
		}
		lo = v
		// "a/n" steps from a to the field's maximum; a bare "a" is just a.
		if !hasStep {
			hi = v
		}
	}
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepText)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("step %q is not a positive number", stepText)
		}
		if n > f.max-f.min {
			return 0, fmt.Errorf("step %d is larger than the field's range %d-%d", n, f.min, f.max)
		}
		step = n
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

func (f field) value(text string) (int, error) {
	if v, ok := f.names[strings.ToUpper(text)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(text)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number%s", text, f.nameHint())
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", v, f.min, f.max)
	}
	return v, nil
}

func (f field) nameHint() string {
	switch f.name {
	case "month":
		return " or month name (JAN-DEC)"
	case "day-of-week":
		return " or day name (SUN-SAT)"
	}
	return ""
}

// nextBit returns the lowest set bit of set at or above i, or 64 when there is none.
func nextBit(set uint64, i int) int {
	if i >= 64 {
		return 64
	}
	return bits.TrailingZeros64(set >> i << i)
}

// full reports whether set holds every value from lo to hi.
func full(set uint64, lo, hi int) bool {
	want := uint64(1)<<(hi+1) - uint64(1)<<lo
	return set&want == want
}

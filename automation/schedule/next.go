package schedule

import "time"

// horizon bounds the search for the next fire time. The longest wait a reachable schedule can
// have is for February 29 across a skipped leap year (2096 to 2104), a little over eight years.
const horizon = 9 * 366 * 24 * time.Hour

// Wall-clock times are carried as time.Time values in UTC ("naive" times): a wall time w in a zone
// whose offset is o seconds east of UTC is the instant w - o.
const (
	maxOffset = 15 * time.Hour // beyond every offset any zone has used (+14:00)
	minOffset = -13 * time.Hour
)

// Next returns the first fire time strictly after after, in loc (UTC when nil). It returns the
// zero Time when nothing fires within the search horizon, which only a Schedule not made by
// Parse can cause.
func (s Schedule) Next(after time.Time, loc *time.Location) time.Time {
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := after.In(loc).Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	end := day.Add(horizon)
	for day.Before(end) {
		if s.month&(1<<day.Month()) == 0 {
			day = time.Date(day.Year(), day.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if s.dayMatches(day) {
			if t, ok := s.firstOnDay(day, after, loc); ok {
				return t.In(loc)
			}
		}
		day = day.Add(24 * time.Hour)
	}
	return time.Time{}
}

func (s Schedule) dayMatches(day time.Time) bool {
	domOK := s.dom&(1<<day.Day()) != 0
	dowOK := s.dow&(1<<day.Weekday()) != 0
	if s.domStar || s.dowStar {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// span is a stretch of time with one UTC offset; a zero end means it never ends.
type span struct {
	start, end time.Time
	offset     time.Duration
}

func (sp span) holds(t time.Time) bool {
	return !t.Before(sp.start) && (sp.end.IsZero() || t.Before(sp.end))
}

// spansOf appends to out the offsets in effect over every instant whose wall date in loc is day.
func spansOf(out []span, day time.Time, loc *time.Location) []span {
	from := day.Add(-maxOffset)
	to := day.Add(24*time.Hour - minOffset)
	for t := from; ; {
		z := t.In(loc)
		_, offset := z.Zone()
		start, end := z.ZoneBounds()
		out = append(out, span{start: start, end: end, offset: time.Duration(offset) * time.Second})
		if end.IsZero() || !end.Before(to) {
			return out
		}
		t = end
	}
}

// firstOnDay returns the earliest fire time after after among the wall times of day.
func (s Schedule) firstOnDay(day, after time.Time, loc *time.Location) (time.Time, bool) {
	var spanBuf [4]span
	spans := spansOf(spanBuf[:0], day, loc)
	lowest, highest := spans[0].offset, spans[0].offset
	for _, sp := range spans[1:] {
		lowest = min(lowest, sp.offset)
		highest = max(highest, sp.offset)
	}
	// A wall time w is the instant w - offset, so only walls after after+lowest can fire after
	// after; and once a wall's earliest instant (w - highest) passes the best found, none later
	// can beat it.
	startMinute := 0
	if floor := after.Add(lowest); !floor.Before(day) {
		startMinute = int(floor.Sub(day)/time.Minute) + 1
	}
	var best time.Time
	var buf [2]time.Time
	everyHour := full(s.hour, 0, 23)
	for h := nextBit(s.hour, startMinute/60); h < 24; h = nextBit(s.hour, h+1) {
		from := 0
		if h == startMinute/60 {
			from = startMinute % 60
		}
		for mi := nextBit(s.minute, from); mi < 60; mi = nextBit(s.minute, mi+1) {
			wall := day.Add(time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute)
			if !best.IsZero() && wall.Add(-highest).After(best) {
				return best, true
			}
			for _, t := range resolve(buf[:0], wall, spans, everyHour) {
				if t.After(after) && (best.IsZero() || t.Before(best)) {
					best = t
				}
			}
		}
	}
	return best, !best.IsZero()
}

// resolve returns the instants a wall time fires at: usually one; both occurrences of a repeated
// wall time when the schedule runs every hour, else the first; for a skipped wall time nothing
// when the schedule runs every hour, else the instant the clocks jump past it. It appends to out.
func resolve(out []time.Time, wall time.Time, spans []span, everyHour bool) []time.Time {
	for _, sp := range spans {
		if t := wall.Add(-sp.offset); sp.holds(t) {
			out = append(out, t)
			if !everyHour {
				return out
			}
		}
	}
	if len(out) > 0 || everyHour {
		return out
	}
	for _, sp := range spans {
		if sp.start.Add(sp.offset).After(wall) {
			return append(out, sp.start)
		}
	}
	return out
}

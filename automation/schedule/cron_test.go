package schedule

import (
	"strings"
	"testing"
)

func set(values ...int) uint64 {
	var s uint64
	for _, v := range values {
		s |= 1 << v
	}
	return s
}

func rangeSet(lo, hi, step int) uint64 {
	var s uint64
	for v := lo; v <= hi; v += step {
		s |= 1 << v
	}
	return s
}

func TestParseReadsEveryFieldForm(t *testing.T) {
	tests := []struct {
		expr                          string
		minute, hour, dom, month, dow uint64
		domStar, dowStar              bool
	}{
		{"* * * * *", rangeSet(0, 59, 1), rangeSet(0, 23, 1), rangeSet(1, 31, 1), rangeSet(1, 12, 1), rangeSet(0, 6, 1), true, true},
		{"*/15 9-17 1,15 * MON-FRI", set(0, 15, 30, 45), rangeSet(9, 17, 1), set(1, 15), rangeSet(1, 12, 1), rangeSet(1, 5, 1), false, false},
		{"5/20 */6 * jan,Jul sun", set(5, 25, 45), set(0, 6, 12, 18), rangeSet(1, 31, 1), set(1, 7), set(0), true, false},
		{"0 0 * * 7", set(0), set(0), rangeSet(1, 31, 1), rangeSet(1, 12, 1), set(0), true, false},
		{"0 0 * * 5-7", set(0), set(0), rangeSet(1, 31, 1), rangeSet(1, 12, 1), set(0, 5, 6), true, false},
		{"0-10/5,30 1-3 */10 MAR-MAY/2 *", set(0, 5, 10, 30), set(1, 2, 3), set(1, 11, 21, 31), set(3, 5), rangeSet(0, 6, 1), true, true},
		{"@hourly", set(0), rangeSet(0, 23, 1), rangeSet(1, 31, 1), rangeSet(1, 12, 1), rangeSet(0, 6, 1), true, true},
		{"@daily", set(0), set(0), rangeSet(1, 31, 1), rangeSet(1, 12, 1), rangeSet(0, 6, 1), true, true},
		{"@weekly", set(0), set(0), rangeSet(1, 31, 1), rangeSet(1, 12, 1), set(0), true, false},
		{"@monthly", set(0), set(0), set(1), rangeSet(1, 12, 1), rangeSet(0, 6, 1), false, true},
		{"@YEARLY", set(0), set(0), set(1), set(1), rangeSet(0, 6, 1), false, true},
		{"  0   3  * *  *  ", set(0), set(3), rangeSet(1, 31, 1), rangeSet(1, 12, 1), rangeSet(0, 6, 1), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got := [5]uint64{s.minute, s.hour, s.dom, s.month, s.dow}
			want := [5]uint64{tt.minute, tt.hour, tt.dom, tt.month, tt.dow}
			if got != want {
				t.Errorf("fields = %b, want %b", got, want)
			}
			if s.domStar != tt.domStar || s.dowStar != tt.dowStar {
				t.Errorf("star flags = %v/%v, want %v/%v", s.domStar, s.dowStar, tt.domStar, tt.dowStar)
			}
		})
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"", "cron is empty"},
		{"* * * *", "want five fields"},
		{"* * * * * *", "got 6"},
		{"60 * * * *", "minute: 60 is out of range 0-59"},
		{"* 24 * * *", "hour: 24 is out of range 0-23"},
		{"* * 0 * *", "day-of-month: 0 is out of range 1-31"},
		{"* * * 13 *", "month: 13 is out of range 1-12"},
		{"* * * FOO *", `month: "FOO" is not a number or month name (JAN-DEC)`},
		{"* * * * MOM", `day-of-week: "MOM" is not a number or day name (SUN-SAT)`},
		{"* * * * 8", "day-of-week: 8 is out of range 0-7"},
		{"MON * * * *", `minute: "MON" is not a number`},
		{"*/0 * * * *", `minute: step "0" is not a positive number`},
		{"*/x * * * *", `minute: step "x" is not a positive number`},
		{"* */24 * * *", "hour: step 24 is larger than the field's range 0-23"},
		{"* 17-9 * * *", `hour: range "17-9" runs backwards`},
		{"1,,2 * * * *", "minute: empty list item"},
		{"* * * * FRI-MON", `day-of-week: range "FRI-MON" runs backwards`},
		{"@reboot", "unknown macro"},
		{"0 0 30 2 *", "day-of-month: no chosen day occurs in February, so the schedule never fires"},
		{"0 0 31 4,6,9,11 *", "no chosen day occurs in April, June, September or November"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := Parse(tt.expr)
			if err == nil {
				t.Fatalf("Parse(%q) succeeded, want error containing %q", tt.expr, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) = %q, want it to contain %q", tt.expr, err, tt.want)
			}
		})
	}
}

func TestParseAcceptsDayOfMonthThatOnlyDayOfWeekCanReach(t *testing.T) {
	// With both day fields restricted cron runs on either, so Fridays in February still fire.
	for _, expr := range []string{"0 0 30 2 FRI", "0 0 29 2 *", "0 0 31 1-2 *"} {
		if _, err := Parse(expr); err != nil {
			t.Errorf("Parse(%q): %v", expr, err)
		}
	}
}

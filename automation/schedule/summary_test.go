package schedule

import "testing"

func TestSummarySaysTheScheduleInOneSentence(t *testing.T) {
	tests := []struct {
		cron, tz string
		want     string
	}{
		{"0 3 * * *", "Europe/Paris", "Every day at 03:00 Europe/Paris"},
		{"@daily", "", "Every day at 00:00 UTC"},
		{"0 9,17 * * *", "UTC", "Every day at 09:00 and 17:00 UTC"},
		{"0 */6 * * *", "UTC", "Every day at 00:00, 06:00, 12:00 and 18:00 UTC"},
		{"15 * * * *", "UTC", "Every hour at :15"},
		{"@hourly", "Europe/Paris", "Every hour at :00"},
		{"5/15 * * * *", "UTC", "Every hour at :05, :20, :35 and :50"},
		{"* * * * *", "UTC", "Every minute"},
		{"*/5 * * * *", "UTC", "Every 5 minutes"},
		{"0,30 * * * *", "UTC", "Every 30 minutes"},
		{"0 */2 * * *", "UTC", "Every 2 hours at :00"},
		{"0 9 * * 1", "UTC", "Every Monday at 09:00 UTC"},
		{"@weekly", "America/New_York", "Every Sunday at 00:00 America/New_York"},
		{"0 9 * * 1-5", "UTC", "At 09:00 on weekdays UTC"},
		{"0 10 * * SAT,SUN", "UTC", "At 10:00 on weekends UTC"},
		{"30 8 * * 0,1,3", "UTC", "At 08:30 on Monday, Wednesday and Sunday UTC"},
		{"*/10 * * * MON-FRI", "Europe/Paris", "Every 10 minutes on weekdays Europe/Paris"},
		{"0 * * * 2", "UTC", "Every hour at :00 on Tuesdays UTC"},
		{"@monthly", "UTC", "Every month on the 1st at 00:00 UTC"},
		{"0 6 22 * *", "UTC", "Every month on the 22nd at 06:00 UTC"},
		{"0 6 13 * *", "UTC", "Every month on the 13th at 06:00 UTC"},
		{"@yearly", "UTC", "Every year on January 1 at 00:00 UTC"},
		{"0 0 29 2 *", "UTC", "Every year on February 29 at 00:00 UTC"},

		{"*/10 9-17 * * 1-5", "UTC", "On cron schedule `*/10 9-17 * * 1-5` (UTC)"},
		{"*/7 * * * *", "UTC", "On cron schedule `*/7 * * * *` (UTC)"},
		{"0 0 13 * FRI", "UTC", "On cron schedule `0 0 13 * FRI` (UTC)"},
		{"0 0 */2 * *", "UTC", "On cron schedule `0 0 */2 * *` (UTC)"},
		{"0 0 1 1,7 *", "Europe/Paris", "On cron schedule `0 0 1 1,7 *` (Europe/Paris)"},
		{"0 9 * JAN *", "UTC", "On cron schedule `0 9 * JAN *` (UTC)"},
		{"61 * * * *", "", "On cron schedule `61 * * * *` (UTC)"},
	}
	for _, tt := range tests {
		t.Run(tt.cron, func(t *testing.T) {
			if got := Summary(tt.cron, tt.tz); got != tt.want {
				t.Errorf("Summary(%q, %q) = %q, want %q", tt.cron, tt.tz, got, tt.want)
			}
		})
	}
}

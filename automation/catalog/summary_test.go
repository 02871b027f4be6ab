package catalog

import (
	"testing"

	"github.com/hangar-dev/hangar/automation/definition"
)

func event(key string) definition.Entrypoint {
	return definition.Entrypoint{ID: key, Type: definition.EntrypointEvent, EventKey: key}
}

func cron(expr, tz string) definition.Entrypoint {
	return definition.Entrypoint{ID: "s", Type: definition.EntrypointSchedule, Cron: expr, TimeZone: tz}
}

var manual = definition.Entrypoint{ID: "m", Type: definition.EntrypointManual}

func TestTriggerSummarySaysWhatStartsTheAutomation(t *testing.T) {
	tests := []struct {
		name        string
		entrypoints []definition.Entrypoint
		timeZone    string // the settings' time zone
		want        string
	}{
		{"one GitHub event", []definition.Entrypoint{event("github.pull_request.opened")},
			"", "When a GitHub pull request is opened"},
		{"same subject shares a clause",
			[]definition.Entrypoint{event("github.pull_request.opened"), event("github.pull_request.synchronize"), event("github.pull_request.reopened")},
			"", "When a GitHub pull request is opened, updated with new commits or reopened"},
		{"repeated event said once",
			[]definition.Entrypoint{event("github.issues.opened"), event("github.issues.opened")},
			"", "When a GitHub issue is opened"},
		{"different subjects joined with or",
			[]definition.Entrypoint{event("github.pull_request.opened"), event("github.issue_comment.created"), event("github.pull_request.closed")},
			"", "When a GitHub pull request is opened or closed or someone comments on a GitHub issue or pull request"},
		{"push", []definition.Entrypoint{event("github.push")},
			"", "When commits are pushed to a GitHub repository"},
		{"check run", []definition.Entrypoint{event("github.check_run.completed")},
			"", "When a GitHub check run completes"},
		{"webhook registration", []definition.Entrypoint{event("webhook.whk_01hwz3k8q4m2v7c9d5e6f7g8h9")},
			"", "When webhook whk_01hwz3k8q4m2v7c9d5e6f7g8h9 receives an event"},
		{"event the catalog does not know", []definition.Entrypoint{event("github.deployment.created")},
			"", "When event `github.deployment.created` arrives"},
		{"schedule in its own zone", []definition.Entrypoint{cron("0 3 * * *", "Europe/Paris")},
			"America/New_York", "Every day at 03:00 Europe/Paris"},
		{"schedule in the settings' zone", []definition.Entrypoint{cron("0 9 * * 1-5", "")},
			"America/New_York", "At 09:00 on weekdays America/New_York"},
		{"schedule in UTC by default", []definition.Entrypoint{cron("0 9 * * MON", "")},
			"", "Every Monday at 09:00 UTC"},
		{"complex schedule", []definition.Entrypoint{cron("*/10 9-17 * * 1-5", "")},
			"", "On cron schedule `*/10 9-17 * * 1-5` (UTC)"},
		{"events then schedules",
			[]definition.Entrypoint{cron("0 3 * * *", "Europe/Paris"), event("github.release.published"), manual},
			"", "When a GitHub release is published or every day at 03:00 Europe/Paris"},
		{"two schedules", []definition.Entrypoint{cron("*/5 * * * *", ""), cron("0 9 * * 1-5", "UTC")},
			"", "Every 5 minutes or at 09:00 on weekdays UTC"},
		{"manual only", []definition.Entrypoint{manual}, "", "Run manually"},
		{"no entrypoints", nil, "", "Run manually"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := definition.Definition{Version: definition.Version, Entrypoints: tt.entrypoints}
			got := TriggerSummary(def, definition.Settings{TimeZone: tt.timeZone})
			if got != tt.want {
				t.Errorf("TriggerSummary = %q\n                 want %q", got, tt.want)
			}
		})
	}
}

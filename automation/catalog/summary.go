package catalog

import (
	"cmp"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/automation/schedule"
)

// TriggerSummary says in one line what starts an automation (AutomationSummary.trigger_summary):
//
//	When a GitHub pull request is opened or reopened
//	When webhook whk_01hx… receives an event
//	Every day at 03:00 Europe/Paris
//	Run manually
//
// Event entrypoints make one "When …" clause, entrypoints about the same thing sharing a subject
// ("a GitHub pull request is opened, updated with new commits or reopened"); schedules follow,
// each read in its time zone (else the settings', else UTC). The parts are joined with " or ".
// Manual entrypoints are mentioned only when nothing else starts the automation, since any
// automation can be run by hand.
func TriggerSummary(def definition.Definition, settings definition.Settings) string {
	var clauses []clause
	var parts []string
	for _, ep := range def.Entrypoints {
		switch ep.Type {
		case definition.EntrypointEvent:
			clauses = addClause(clauses, eventClause(ep.EventKey))
		case definition.EntrypointSchedule:
			parts = append(parts, schedule.Summary(ep.Cron, cmp.Or(ep.TimeZone, settings.TimeZone)))
		}
	}
	if len(clauses) > 0 {
		phrases := make([]string, len(clauses))
		for i, c := range clauses {
			phrases[i] = c.subject + " " + joinOr(c.predicates)
		}
		parts = slices.Insert(parts, 0, "When "+strings.Join(phrases, " or "))
	}
	if len(parts) == 0 {
		return "Run manually"
	}
	for i := 1; i < len(parts); i++ {
		parts[i] = lowerFirst(parts[i])
	}
	return strings.Join(parts, " or ")
}

// clause is one subject with everything it does that starts the automation.
type clause struct {
	subject    string
	predicates []string
}

func eventClause(key string) clause {
	if id, ok := WebhookRegistrationID(key); ok {
		return clause{subject: "webhook " + id, predicates: []string{"receives an event"}}
	}
	if e, ok := eventsByKey[key]; ok {
		return clause{subject: e.subject, predicates: []string{e.predicate}}
	}
	return clause{subject: "event `" + key + "`", predicates: []string{"arrives"}}
}

// addClause merges c into the clause with the same subject, keeping first-seen order and
// dropping repeated predicates.
func addClause(clauses []clause, c clause) []clause {
	for i := range clauses {
		if clauses[i].subject == c.subject {
			for _, p := range c.predicates {
				if !slices.Contains(clauses[i].predicates, p) {
					clauses[i].predicates = append(clauses[i].predicates, p)
				}
			}
			return clauses
		}
	}
	return append(clauses, c)
}

// joinOr joins as "a", "a or b", "a, b or c".
func joinOr(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}

// lowerFirst lowers a sentence's first letter so it can follow another; sentences here start
// with an ASCII capital.
func lowerFirst(s string) string {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return s
	}
	return string(s[0]+('a'-'A')) + s[1:]
}

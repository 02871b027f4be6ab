// Package catalog is the static half of the automation catalogs: the events each provider sends
// (label, JSON Schema of the fields automations use, a real-shaped sample), the actions an
// automation can run, the options of inputs that pick from fixed sets, and the one-line trigger
// summary of a definition. It holds data and pure functions; the service adds what depends on
// records (observed events, webhook registrations, profiles, repositories).
//
// Event keys are "<provider>.<name>":
//   - GitHub: "github.<X-GitHub-Event>[.<action>]"; EventKey derives it from a delivery.
//   - Generic webhooks: "webhook.<registration id>", one key per registration (WebhookEventKey).
//     All registrations' events have the shape the entry "webhook.received" describes; that entry
//     is documentation, not a key an entrypoint names. Registration ids are record ids such as
//     "whk_01hx…" and always hold an underscore, so none collides with "received".
//   - Schedules: "schedule.fired" is the event a schedule entrypoint's run sees.
package catalog

import (
	"slices"
	"strings"
)

// Provider names.
const (
	ProviderWebhook  = "webhook"
	ProviderSchedule = "schedule"
	// ProviderHangar names the actions Hangar itself runs: the block types.
	ProviderHangar = "hangar"
)

// Keys of the catalog entries of generic webhooks and schedules.
const (
	WebhookReceived = ProviderWebhook + ".received"
	ScheduleFired   = ProviderSchedule + ".fired"
)

// Event is one catalog entry (the service adds `observed`).
type Event struct {
	Key         string
	Label       string // e.g. "Pull request opened"
	Description string
	SchemaJSON  string // JSON Schema 2020-12 of the payload's useful fields
	SampleJSON  string // a payload as the provider sends it
	// Hidden entries are rare or legacy; editors list them only on request.
	Hidden bool

	// subject and predicate make the trigger summary clause "When <subject> <predicate>"; entries
	// with the same subject share one clause ("a GitHub pull request is opened or reopened").
	subject, predicate string
}

// Scope is what a provider's events belong to, e.g. a GitHub repository.
type Scope struct {
	Key   string
	Label string
}

// Variable is a short alias for a path in an event, e.g. pr_number for pull_request.number.
type Variable struct {
	Path  string
	Alias string
}

// Provider is one provider's event catalog.
type Provider struct {
	Name      string
	Label     string
	Events    []Event
	Scope     *Scope // nil when the provider's events belong to nothing narrower
	Variables []Variable
	// keysAreEntrypoints says event entrypoints name this provider's keys as listed; webhook
	// entrypoints name a registration's key instead and schedules are their own entrypoint type.
	keysAreEntrypoints bool
}

var providers = []Provider{
	{
		Name:               ProviderGitHub,
		Label:              "GitHub",
		Events:             githubEvents(),
		Scope:              &Scope{Key: "repository", Label: "Repository"},
		Variables:          githubVariables,
		keysAreEntrypoints: true,
	},
	{
		Name:   ProviderWebhook,
		Label:  "Webhook",
		Events: []Event{webhookEvent()},
		Variables: []Variable{
			{Path: "body", Alias: "body"},
			{Path: "headers", Alias: "headers"},
			{Path: "query", Alias: "query"},
			{Path: "registration_id", Alias: "registration_id"},
			{Path: "delivery_id", Alias: "delivery_id"},
		},
	},
	{
		Name:   ProviderSchedule,
		Label:  "Schedule",
		Events: []Event{scheduleEvent()},
	},
}

var eventsByKey = func() map[string]Event {
	byKey := make(map[string]Event)
	for _, p := range providers {
		for _, e := range p.Events {
			byKey[e.Key] = e
		}
	}
	return byKey
}()

// Providers returns every provider's catalog, in a fixed order.
func Providers() []Provider {
	out := make([]Provider, len(providers))
	for i, p := range providers {
		out[i] = p.clone()
	}
	return out
}

// LookupProvider returns one provider's catalog.
func LookupProvider(name string) (Provider, bool) {
	for _, p := range providers {
		if p.Name == name {
			return p.clone(), true
		}
	}
	return Provider{}, false
}

func (p Provider) clone() Provider {
	p.Events = slices.Clone(p.Events)
	p.Variables = slices.Clone(p.Variables)
	if p.Scope != nil {
		scope := *p.Scope
		p.Scope = &scope
	}
	return p
}

// LookupEvent returns the entry of an event key. A webhook registration's key
// ("webhook.<registration id>") answers with the "webhook.received" entry under the asked key.
func LookupEvent(key string) (Event, bool) {
	if e, ok := eventsByKey[key]; ok {
		return e, true
	}
	if _, ok := WebhookRegistrationID(key); ok {
		e := eventsByKey[WebhookReceived]
		e.Key = key
		return e, true
	}
	return Event{}, false
}

// WebhookEventKey is the event key of a generic webhook registration's deliveries.
func WebhookEventKey(registrationID string) string {
	return ProviderWebhook + "." + registrationID
}

// WebhookRegistrationID returns the registration an event key names, if it is a webhook
// registration's key.
func WebhookRegistrationID(eventKey string) (string, bool) {
	id, ok := strings.CutPrefix(eventKey, ProviderWebhook+".")
	if !ok || id == "" || eventKey == WebhookReceived {
		return "", false
	}
	return id, true
}

// webhookEvent describes what a generic webhook delivery becomes: the request, with a JSON body
// decoded and any other body kept as text.
func webhookEvent() Event {
	const label = "Webhook received"
	schema := eventSchema(label, obj{
		"registration_id": str("The webhook registration that received the request."),
		"delivery_id":     str("Unique per delivery: sha256:<hex> of the signed timestamp and body."),
		"received_at":     str("RFC 3339 UTC."),
		"method":          enum("", "POST", "PUT", "PATCH"),
		"content_type":    str("The request's media type without parameters."),
		"headers": with(object(obj{}), obj{
			"description":          "Request headers, names lower-cased; repeated headers joined with \", \".",
			"additionalProperties": str(""),
		}),
		"query": with(object(obj{}), obj{
			"description":          "Query parameters; repeated ones keep the first value.",
			"additionalProperties": str(""),
		}),
		"body": obj{"description": "The body: decoded when it is JSON, else the raw text."},
	}, "registration_id", "delivery_id", "received_at", "method", "headers", "body")
	sample := obj{
		"registration_id": "whk_01hwz3k8q4m2v7c9d5e6f7g8h9",
		"delivery_id":     "sha256:9b2c6f0e4d7a1358c2e9f4b6a0d3e7c5b8f1a4d6e9c2b5f8a1d4e7c0b3f6a9d2",
		"received_at":     "2024-05-02T09:44:06Z",
		"method":          "POST",
		"content_type":    "application/json",
		"headers": obj{
			"content-type": "application/json",
			"user-agent":   "Buildkite-Agent/3.67.0",
		},
		"query": obj{"source": "ci"},
		"body": obj{
			"event": "build.finished",
			"build": obj{
				"number":  9813,
				"state":   "failed",
				"branch":  "retry-backoff",
				"commit":  syncSHA,
				"web_url": "https://ci.acme.dev/widgets/builds/9813",
				"pipeline": obj{
					"slug": "widgets-deploy",
					"name": "Widgets deploy",
				},
				"started_at":  "2024-05-02T09:40:11Z",
				"finished_at": "2024-05-02T09:44:05Z",
			},
		},
	}
	return Event{
		Key:   WebhookReceived,
		Label: label,
		Description: "A request reached a generic inbound webhook registration. Entrypoints name a " +
			"registration's key, \"webhook.<registration id>\"; every registration's events have this shape.",
		SchemaJSON: mustJSON(schema),
		SampleJSON: mustJSON(sample),
		subject:    "a webhook", predicate: "receives an event",
	}
}

// scheduleEvent describes the event of a run a schedule entrypoint started.
func scheduleEvent() Event {
	const label = "Schedule fired"
	schema := eventSchema(label, obj{
		"scheduled_for": str("The fire time the run is for, RFC 3339 UTC; one run per fire time."),
		"entrypoint_id": str("The schedule entrypoint that fired."),
		"time_zone":     str("The IANA time zone the cron is read in."),
		"cron":          str("The entrypoint's five-field cron expression."),
	}, "scheduled_for", "entrypoint_id", "time_zone")
	sample := obj{
		"scheduled_for": "2024-05-02T01:00:00Z",
		"entrypoint_id": "nightly",
		"time_zone":     "Europe/Paris",
		"cron":          "0 3 * * *",
	}
	return Event{
		Key:         ScheduleFired,
		Label:       label,
		Description: "A schedule entrypoint reached one of its fire times.",
		SchemaJSON:  mustJSON(schema),
		SampleJSON:  mustJSON(sample),
		subject:     "a schedule", predicate: "fires",
	}
}

// Package triggers holds what starts automation runs.
package triggers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Providers of inbound webhooks.
const (
	// ProviderGitHub is GitHub's webhooks: X-Hub-Signature-256, X-GitHub-Event, X-GitHub-Delivery.
	ProviderGitHub = "github"
	// ProviderWebhook is any sender that signs a timestamp and its body with HMAC-SHA256 in
	// X-Hangar-Signature.
	ProviderWebhook = "webhook"
)

// Delivery is one verified inbound webhook delivery, as published to the automation events
// topic for the worker that starts runs.
type Delivery struct {
	RegistrationID string `json:"registration_id"`
	// RegistrationOwner is the user who created the registration: only automations whose owner
	// may read the registration (that user, or an admin) receive its deliveries.
	RegistrationOwner string `json:"registration_owner,omitempty"`
	// Provider is ProviderGitHub or ProviderWebhook.
	Provider string `json:"provider"`
	// EventKey names the event, e.g. "github.pull_request.opened" or "webhook.<registration id>".
	EventKey string `json:"event_key"`
	// DeliveryKey identifies the delivery, so that a redelivery keeps it and runs are not
	// started twice: X-GitHub-Delivery, or for a generic sender "sha256:<hex of the signed
	// "<t>.<body>">", which no unsigned header can change.
	DeliveryKey string `json:"delivery_key"`
	// BodyKey is "sha256:<hex of the payload>" when the delivery key is not signed (GitHub's):
	// the same body under another delivery key within the automation's dedupe window is a
	// replay, not a new event.
	BodyKey string `json:"body_key,omitempty"`
	// Payload is the body, always a JSON object.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Headers are the request's descriptive headers (lowercase names: event, delivery, hook,
	// user-agent, content-type), never its signatures.
	Headers map[string]string `json:"headers,omitempty"`
	// Query is a generic delivery's query parameters (the first value of each).
	Query      map[string]string `json:"query,omitempty"`
	ReceivedAt time.Time         `json:"received_at"`
}

// The message attributes a published Delivery carries, so subscribers can filter and route
// without decoding it.
const (
	AttrEventKey       = "event_key"
	AttrRegistrationID = "registration_id"
	AttrDeliveryKey    = "delivery_key"
)

// Attributes are d's message attributes.
func (d Delivery) Attributes() map[string]string {
	return map[string]string{AttrEventKey: d.EventKey, AttrRegistrationID: d.RegistrationID, AttrDeliveryKey: d.DeliveryKey}
}

// Encode is d as a message's data.
func (d Delivery) Encode() ([]byte, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	if !json.Valid(d.Payload) {
		return nil, fmt.Errorf("invalid delivery %q: payload is not valid JSON", d.DeliveryKey)
	}
	// The payload, by far the largest part, goes in as it is: encoding/json would validate
	// and compact it once more, which made a fifth of a delivery's CPU time.
	payload := d.Payload
	d.Payload = nil
	head, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encode delivery %s: %w", d.DeliveryKey, err)
	}
	out := make([]byte, 0, len(head)+len(`,"payload":`)+len(payload))
	out = append(out, head[:len(head)-1]...) // without its closing brace
	out = append(out, `,"payload":`...)
	out = append(out, payload...)
	return append(out, '}'), nil
}

// Decode reads what Encode made, refusing a delivery that lacks what a run needs. (Decoding
// validates the payload's JSON with the rest.)
func Decode(data []byte) (Delivery, error) {
	var d Delivery
	if err := json.Unmarshal(data, &d); err != nil {
		return Delivery{}, fmt.Errorf("decode delivery: %w", err)
	}
	if err := d.check(); err != nil {
		return Delivery{}, err
	}
	return d, nil
}

func (d Delivery) check() error {
	var missing []error
	for _, f := range []struct{ name, val string }{
		{"registration_id", d.RegistrationID}, {"provider", d.Provider},
		{"event_key", d.EventKey}, {"delivery_key", d.DeliveryKey},
	} {
		if f.val == "" {
			missing = append(missing, fmt.Errorf("%s is empty", f.name))
		}
	}
	if !objectShaped(d.Payload) {
		missing = append(missing, errors.New("payload is not a JSON object"))
	}
	if err := errors.Join(missing...); err != nil {
		return fmt.Errorf("invalid delivery %q: %w", d.DeliveryKey, err)
	}
	return nil
}

// Event is what a run of d sees as its event, the one rule for a delivered event and for a dry
// run or run by hand of a kept delivery: a GitHub payload as GitHub sent it; a generic
// webhook's request described as the catalog's webhook.received entry shows it (its body, its
// headers, its query, its delivery key). event is for expressions, raw for the run's
// trigger; ok is false when the payload is not a JSON object.
func (d Delivery) Event() (event map[string]any, raw json.RawMessage, ok bool) {
	var body map[string]any
	if err := json.Unmarshal(d.Payload, &body); err != nil || body == nil {
		return nil, nil, false
	}
	if d.Provider != ProviderWebhook {
		return body, d.Payload, true
	}
	headers := make(map[string]any, len(d.Headers))
	for k, v := range d.Headers {
		headers[k] = v
	}
	query := make(map[string]any, len(d.Query))
	for k, v := range d.Query {
		query[k] = v
	}
	event = map[string]any{
		"registration_id": d.RegistrationID, "delivery_id": d.DeliveryKey,
		"received_at": d.ReceivedAt.UTC().Format(time.RFC3339), "method": http.MethodPost,
		"content_type": d.Headers["content-type"], "headers": headers, "query": query, "body": body,
	}
	raw, err := json.Marshal(event)
	if err != nil {
		return nil, nil, false
	}
	return event, raw, true
}

// IsJSONObject reports whether b is one valid JSON object.
func IsJSONObject(b []byte) bool {
	return objectShaped(b) && json.Valid(b)
}

// objectShaped reports whether b, if valid JSON, is an object: the cheap part of IsJSONObject.
func objectShaped(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

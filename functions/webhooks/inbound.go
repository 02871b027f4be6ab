package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/store"
)

// InboundPath is the route senders post deliveries to, outside /rpc and without an API key:
// the signature is the authentication.
const InboundPath = "/api/v1/webhooks/{id}"

// Signature headers, each "sha256=<hex of HMAC-SHA256(secret, raw body)>".
const (
	// GitHubSignatureHeader is GitHub's, also sent by GitHub-compatible senders (Gitea, Forgejo).
	GitHubSignatureHeader = "X-Hub-Signature-256"
	// SignatureHeader is the one a generic sender uses.
	SignatureHeader = "X-Hangar-Signature"
)

// signatureHeaders are the headers each provider's signature may come in, in order of
// preference. A generic registration accepts GitHub's header too, so the many senders that
// already sign the GitHub way need no change.
var signatureHeaders = map[string][]string{
	triggers.ProviderGitHub:  {GitHubSignatureHeader},
	triggers.ProviderWebhook: {SignatureHeader, GitHubSignatureHeader},
}

// keptHeaders are the request headers a Delivery carries, per provider: descriptive ones only,
// never a signature.
var keptHeaders = map[string][]string{
	triggers.ProviderGitHub: {
		"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
		"X-GitHub-Hook-Installation-Target-Type", "X-GitHub-Hook-Installation-Target-ID",
		"User-Agent", "Content-Type",
	},
	triggers.ProviderWebhook: {"Idempotency-Key", "X-Delivery-Id", "User-Agent", "Content-Type"},
}

const (
	// publishTimeout leaves a sender waiting at most this long for the publish: GitHub gives up
	// after 10 seconds.
	publishTimeout = 8 * time.Second
	// deliveryEvery is how stale last_delivery_at may get before a delivery rewrites it, so
	// that a burst of deliveries costs one write a minute.
	deliveryEvery = time.Minute
	// maxDeliveryKeyLen bounds a sender's delivery id (GitHub's are 36-character GUIDs).
	maxDeliveryKeyLen = 200
)

// refusal is a delivery turned away with an HTTP status and a message for the sender's logs.
type refusal struct {
	status int
	msg    string
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, format string, args ...any) *refusal {
	return &refusal{status: status, msg: fmt.Sprintf(format, args...)}
}

// Inbound serves InboundPath. It answers only after the delivery is published (202, with its
// delivery_key), so that a 2xx never loses one; a GitHub ping verifies and answers 200 without
// publishing. Refusals publish nothing: 404 unknown registration, 413 body over
// Limits.MaxBodyBytes, 401 missing or wrong signature, 400 a body or header that cannot make
// a delivery; 503 when the publish fails, so the sender retries.
func (s *Service) Inbound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.receive(w, r)
		var ref *refusal
		switch {
		case errors.As(err, &ref):
			s.log.InfoContext(r.Context(), "webhook delivery refused", "registration", r.PathValue("id"), "status", ref.status, "reason", ref.msg)
			writeJSON(w, ref.status, map[string]string{"error": ref.msg})
		case err != nil:
			s.log.ErrorContext(r.Context(), "webhook delivery failed", "registration", r.PathValue("id"), "err", err)
			w.Header().Set("Retry-After", "10")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the delivery could not be accepted now; retry later"})
		case d.EventKey == pingEventKey:
			writeJSON(w, http.StatusOK, map[string]string{"event_key": d.EventKey, "delivery_key": d.DeliveryKey})
		default:
			writeJSON(w, http.StatusAccepted, map[string]string{"event_key": d.EventKey, "delivery_key": d.DeliveryKey})
		}
	})
}

// pingEventKey is GitHub's ping, sent when a webhook is created: verified, never published.
const pingEventKey = "github.ping"

// receive verifies, publishes and records one delivery.
func (s *Service) receive(w http.ResponseWriter, r *http.Request) (triggers.Delivery, error) {
	id := r.PathValue("id")
	limit := int64(s.lim.MaxBodyBytes)
	if r.ContentLength > limit {
		return triggers.Delivery{}, tooLarge(limit)
	}
	reg, err := s.cache.get(r.Context(), id)
	if err != nil {
		return triggers.Delivery{}, fmt.Errorf("look up webhook registration %s: %w", id, err)
	}
	if reg == nil {
		return triggers.Delivery{}, refuse(http.StatusNotFound, "no webhook registration %q", id)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return triggers.Delivery{}, tooLarge(limit)
	}
	if err != nil {
		return triggers.Delivery{}, refuse(http.StatusBadRequest, "read body: %v", err)
	}
	if err := verify(reg, r.Header, body); err != nil {
		return triggers.Delivery{}, err
	}
	d, err := delivery(reg, r.Header, body)
	if err != nil {
		return triggers.Delivery{}, err
	}
	if reg.provider == triggers.ProviderWebhook {
		for k, v := range r.URL.Query() {
			if d.Query == nil {
				d.Query = map[string]string{}
			}
			d.Query[k] = v[0]
		}
	}
	d.ReceivedAt = s.clock.Now()
	if d.EventKey != pingEventKey {
		if err := s.publish(r.Context(), d); err != nil {
			return triggers.Delivery{}, err
		}
	}
	s.touch(r.Context(), reg, d.ReceivedAt)
	return d, nil
}

func tooLarge(limit int64) *refusal {
	return refuse(http.StatusRequestEntityTooLarge, "the body is larger than %d bytes, the most a delivery may carry", limit)
}

// verify checks the body's HMAC-SHA256 signature under the registration's secret, in constant
// time.
func verify(reg *registration, h http.Header, body []byte) error {
	names := signatureHeaders[reg.provider]
	var header, sig string
	for _, n := range names {
		if sig = h.Get(n); sig != "" {
			header = n
			break
		}
	}
	if sig == "" {
		return refuse(http.StatusUnauthorized, "missing signature: send %s: sha256=<hex of HMAC-SHA256 of the body under the registration's secret>", strings.Join(names, " or "))
	}
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSum)
	if !ok || err != nil {
		return refuse(http.StatusUnauthorized, "malformed %s: want sha256=<hex>", header)
	}
	mac := hmac.New(sha256.New, reg.secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return refuse(http.StatusUnauthorized, "%s does not match the body: sign the exact raw body with the registration's current secret", header)
	}
	return nil
}

// delivery makes the Delivery a verified request carries, as its provider defines it.
func delivery(reg *registration, h http.Header, body []byte) (triggers.Delivery, error) {
	d := triggers.Delivery{RegistrationID: reg.id, RegistrationOwner: reg.owner, Provider: reg.provider, Headers: map[string]string{}}
	for _, name := range keptHeaders[reg.provider] {
		if v := h.Get(name); v != "" {
			d.Headers[strings.ToLower(name)] = v
		}
	}
	var err error
	switch reg.provider {
	case triggers.ProviderGitHub:
		err = gitHubDelivery(&d, h, body)
	default:
		err = genericDelivery(&d, h, body)
	}
	return d, err
}

// gitHubDelivery reads GitHub's headers and payload, in either content type GitHub offers:
// application/json, or application/x-www-form-urlencoded (the default of GitHub's form) with
// the JSON in the payload field.
func gitHubDelivery(d *triggers.Delivery, h http.Header, body []byte) error {
	event := h.Get("X-GitHub-Event")
	if event == "" {
		return refuse(http.StatusBadRequest, "missing X-GitHub-Event: a github registration takes GitHub's deliveries")
	}
	key, err := deliveryKey("X-GitHub-Delivery", h.Get("X-GitHub-Delivery"))
	if err != nil {
		return err
	}
	if key == "" {
		return refuse(http.StatusBadRequest, "missing X-GitHub-Delivery: a github registration takes GitHub's deliveries")
	}
	payload := body
	if ct, _, _ := mime.ParseMediaType(h.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return refuse(http.StatusBadRequest, "decode form body: %v", err)
		}
		payload = []byte(form.Get("payload"))
	}
	// EventKey decodes the payload, so it checks that it is a JSON object.
	eventKey, err := catalog.EventKey(event, payload)
	if err != nil {
		return refuse(http.StatusBadRequest, "%v", err)
	}
	d.EventKey, d.DeliveryKey, d.Payload = eventKey, key, payload
	return nil
}

// genericDelivery takes the body as the payload. Its delivery key is the sender's
// Idempotency-Key or X-Delivery-Id, else the body's hash, so that the same body sent twice
// without either starts one run.
func genericDelivery(d *triggers.Delivery, h http.Header, body []byte) error {
	if !triggers.IsJSONObject(body) {
		return refuse(http.StatusBadRequest, "the body must be a JSON object")
	}
	key := ""
	for _, name := range []string{"Idempotency-Key", "X-Delivery-Id"} {
		var err error
		if key, err = deliveryKey(name, h.Get(name)); err != nil {
			return err
		}
		if key != "" {
			break
		}
	}
	if key == "" {
		sum := sha256.Sum256(body)
		key = "sha256:" + hex.EncodeToString(sum[:])
	}
	d.EventKey, d.DeliveryKey, d.Payload = catalog.WebhookEventKey(d.RegistrationID), key, body
	return nil
}

// deliveryKey checks a sender's delivery id from header name: short and printable.
func deliveryKey(name, v string) (string, error) {
	if len(v) > maxDeliveryKeyLen || strings.ContainsFunc(v, func(r rune) bool { return r < '!' || r > '~' }) {
		return "", refuse(http.StatusBadRequest, "%s must be at most %d printable ASCII characters", name, maxDeliveryKeyLen)
	}
	return v, nil
}

// publish sends d to the automation events topic and waits for Pub/Sub's acknowledgement.
func (s *Service) publish(ctx context.Context, d triggers.Delivery) error {
	data, err := d.Encode()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := s.pubsub.Publish(ctx, pubsub.TopicAutomationEvents, data, d.Attributes()); err != nil {
		return fmt.Errorf("publish delivery %s of %s: %w", d.DeliveryKey, d.RegistrationID, err)
	}
	return nil
}

// touch records a verified delivery in last_delivery_at, at most once a deliveryEvery per
// registration and instance. A failure only leaves it older, so it is logged, not answered.
func (s *Service) touch(ctx context.Context, reg *registration, now time.Time) {
	if now.Sub(reg.lastDeliveryAt) < deliveryEvery {
		return
	}
	s.cache.delivered(reg.id, now)
	_, err := s.doc(reg.id).Update(ctx, []firestore.Update{{Path: "last_delivery_at", Value: now}})
	if err != nil && !store.IsNotFound(err) {
		s.log.WarnContext(ctx, "record webhook delivery time", "registration", reg.id, "err", err)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

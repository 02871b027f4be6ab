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
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/triggers"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// keptHeaders are the request headers a Delivery carries, per provider: descriptive ones only,
// never a signature.
var keptHeaders = map[string][]string{
	triggers.ProviderGitHub: {
		"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
		"X-GitHub-Hook-Installation-Target-Type", "X-GitHub-Hook-Installation-Target-ID",
		"User-Agent", "Content-Type",
	},
	triggers.ProviderWebhook: {"User-Agent", "Content-Type"},
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

// Inbound serves httpapi.InboundWebhookPath. It answers only after the delivery is published (202,
// with its delivery_key), so that a 2xx never loses one; a GitHub ping verifies and answers 200
// without publishing. Refusals publish nothing: 404 unknown registration, 413 body over
// Limits.MaxBodyBytes, 401 missing, wrong or expired signature, 400 a body or header that cannot
// make a delivery; 503 when the publish fails, so the sender retries.
func (s *Service) Inbound() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, err := s.receive(w, r)
		var ref *refusal
		switch {
		case errors.As(err, &ref):
			s.log.InfoContext(r.Context(), "webhook delivery refused", "registration", r.PathValue("id"), "status", ref.status, "reason", ref.msg)
			telemetry.WebhookDelivery(r.Context(), "refused_"+strconv.Itoa(ref.status))
			writeJSON(w, ref.status, map[string]string{"error": ref.msg})
		case err != nil:
			s.log.ErrorContext(r.Context(), "webhook delivery failed", "registration", r.PathValue("id"), "err", err)
			telemetry.WebhookDelivery(r.Context(), "failed")
			w.Header().Set("Retry-After", "10")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "the delivery could not be accepted now; retry later"})
		case d.EventKey == pingEventKey:
			telemetry.WebhookDelivery(r.Context(), "ping")
			writeJSON(w, http.StatusOK, map[string]string{"event_key": d.EventKey, "delivery_key": d.DeliveryKey})
		default:
			telemetry.WebhookDelivery(r.Context(), "accepted")
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
	now := s.clock.Now()
	d, err := s.verified(reg, r.Header, body, now)
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
	d.ReceivedAt = now
	if d.EventKey != pingEventKey {
		if err := s.publish(r.Context(), d); err != nil {
			return triggers.Delivery{}, err
		}
	}
	s.touch(r.Context(), reg, d.ReceivedAt)
	return d, nil
}

// verified checks body's signature as reg's provider signs and makes its Delivery.
func (s *Service) verified(reg *registration, h http.Header, body []byte, now time.Time) (triggers.Delivery, error) {
	if reg.provider == triggers.ProviderGitHub {
		if err := verifyGitHub(reg.secret, h, body); err != nil {
			return triggers.Delivery{}, err
		}
		return gitHubDelivery(reg, h, body)
	}
	signed, err := verifyGeneric(reg.secret, h.Get(httpapi.SignatureHeader), body, now, s.lim.SignatureTolerance)
	if err != nil {
		return triggers.Delivery{}, err
	}
	return genericDelivery(reg, h, body, signed)
}

func tooLarge(limit int64) *refusal {
	return refuse(http.StatusRequestEntityTooLarge, "the body is larger than %d bytes, the most a delivery may carry", limit)
}

// verifyGitHub checks GitHub's body signature under the registration's secret, in constant
// time.
func verifyGitHub(secret []byte, h http.Header, body []byte) error {
	sig := h.Get(httpapi.GitHubSignatureHeader)
	if sig == "" {
		return refuse(http.StatusUnauthorized, "missing signature: send %s: sha256=<hex of HMAC-SHA256 of the body under the registration's secret>", httpapi.GitHubSignatureHeader)
	}
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	got, err := hex.DecodeString(hexSum)
	if !ok || err != nil {
		return refuse(http.StatusUnauthorized, "malformed %s: want sha256=<hex>", httpapi.GitHubSignatureHeader)
	}
	if !hmac.Equal(got, httpapi.SignatureSum(secret, body)) {
		return refuse(http.StatusUnauthorized, "%s does not match the body: sign the exact raw body with the registration's current secret", httpapi.GitHubSignatureHeader)
	}
	return nil
}

// verifyGeneric checks a generic sender's httpapi.SignatureHeader, sig, in constant time, and that
// its timestamp is within tolerance of now either way (a sender's clock may be ahead). It answers
// the signed message, the material the delivery key is made of. Several v1 values may come (a
// sender that signs under two secrets while rotating); one must match. Other schemes are ignored,
// as Stripe's clients do.
func verifyGeneric(secret []byte, sig string, body []byte, now time.Time, tolerance time.Duration) ([]byte, error) {
	const want = "t=<unix seconds>,v1=<hex of HMAC-SHA256 of \"<t>.<raw body>\" under the registration's secret>"
	if sig == "" {
		return nil, refuse(http.StatusUnauthorized, "missing signature: send %s: %s (the body-only sha256= form is not accepted: it cannot be dated, so a captured delivery could be replayed)", httpapi.SignatureHeader, want)
	}
	var ts string
	var sums [][]byte
	for _, part := range strings.Split(sig, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sum, err := hex.DecodeString(v); err == nil {
				sums = append(sums, sum)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sums) == 0 {
		return nil, refuse(http.StatusUnauthorized, "malformed %s: want %s", httpapi.SignatureHeader, want)
	}
	msg := httpapi.SignedMessage(ts, body)
	expected := httpapi.SignatureSum(secret, msg)
	matched := false
	for _, sum := range sums {
		matched = hmac.Equal(sum, expected) || matched
	}
	if !matched {
		return nil, refuse(http.StatusUnauthorized, "%s does not match: sign \"<t>.<raw body>\" with the registration's current secret", httpapi.SignatureHeader)
	}
	if skew := now.Sub(time.Unix(unix, 0)); skew > tolerance || skew < -tolerance {
		return nil, refuse(http.StatusUnauthorized, "the %s timestamp is %s from now, beyond the %s tolerance: sign each delivery when sending it (an old one may be a replay)", httpapi.SignatureHeader, skew.Round(time.Second).Abs(), tolerance)
	}
	return msg, nil
}

// newDelivery is a Delivery of reg with the request's descriptive headers.
func newDelivery(reg *registration, h http.Header) triggers.Delivery {
	d := triggers.Delivery{RegistrationID: reg.id, RegistrationOwner: reg.owner, Provider: reg.provider, Headers: map[string]string{}}
	for _, name := range keptHeaders[reg.provider] {
		if v := h.Get(name); v != "" {
			d.Headers[strings.ToLower(name)] = v
		}
	}
	return d
}

// gitHubDelivery reads GitHub's headers and payload, in either content type GitHub offers:
// application/json, or application/x-www-form-urlencoded (the default of GitHub's form) with
// the JSON in the payload field. Its delivery key is X-GitHub-Delivery, which a redelivery
// keeps; the signature covers the body only, so the delivery id is unsigned and the payload's
// hash goes along as BodyKey for the dispatcher's body window.
func gitHubDelivery(reg *registration, h http.Header, body []byte) (triggers.Delivery, error) {
	d := newDelivery(reg, h)
	event := h.Get("X-GitHub-Event")
	if event == "" {
		return d, refuse(http.StatusBadRequest, "missing X-GitHub-Event: a github registration takes GitHub's deliveries")
	}
	key, err := deliveryKey("X-GitHub-Delivery", h.Get("X-GitHub-Delivery"))
	if err != nil {
		return d, err
	}
	if key == "" {
		return d, refuse(http.StatusBadRequest, "missing X-GitHub-Delivery: a github registration takes GitHub's deliveries")
	}
	payload := body
	if ct, _, _ := mime.ParseMediaType(h.Get("Content-Type")); ct == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return d, refuse(http.StatusBadRequest, "decode form body: %v", err)
		}
		payload = []byte(form.Get("payload"))
	}
	// EventKey decodes the payload, so it checks that it is a JSON object.
	eventKey, err := catalog.EventKey(event, payload)
	if err != nil {
		return d, refuse(http.StatusBadRequest, "%v", err)
	}
	d.EventKey, d.DeliveryKey, d.Payload, d.BodyKey = eventKey, key, payload, hashKey(payload)
	return d, nil
}

// genericDelivery takes the body as the payload. Its delivery key is the hash of the signed
// message, never an unsigned header: a replay within the signature tolerance has the same key
// and starts no second run, and a sender retrying a delivery resends it as signed.
func genericDelivery(reg *registration, h http.Header, body, signed []byte) (triggers.Delivery, error) {
	d := newDelivery(reg, h)
	if !triggers.IsJSONObject(body) {
		return d, refuse(http.StatusBadRequest, "the body must be a JSON object")
	}
	d.EventKey, d.DeliveryKey, d.Payload = catalog.WebhookEventKey(d.RegistrationID), hashKey(signed), body
	return d, nil
}

// hashKey is "sha256:<hex of b>".
func hashKey(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
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

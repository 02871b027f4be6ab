package webhooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/hangar-dev/hangar/automation/triggers"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// serve puts s's inbound route on a loopback HTTP server and returns its base URL.
func serve(t testing.TB, s *Service) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST "+httpapi.InboundWebhookPath, s.Inbound())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// sign is GitHub's body-only signature.
func sign(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(httpapi.SignatureSum([]byte(secret), body))
}

// signed is a generic sender's headers for body signed at t.
func signed(secret string, t time.Time, body string) http.Header {
	return http.Header{httpapi.SignatureHeader: {httpapi.Sign([]byte(secret), t, []byte(body))}}
}

// signedKey is the delivery key of a generic body signed at t.
func signedKey(t time.Time, body string) string {
	sum := sha256.Sum256([]byte(strconv.FormatInt(t.Unix(), 10) + "." + body))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// answer is what the route said.
type answer struct {
	status int
	body   map[string]string
	header http.Header
}

func post(t testing.TB, url string, header http.Header, body []byte) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("answer %d is not a JSON object: %q", resp.StatusCode, raw)
	}
	return a
}

// published receives the automation events subscription for the rest of t.
func published(t *testing.T, s *Service) <-chan pubsub.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan pubsub.Message, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := s.pubsub.Receive(ctx, pubsub.WorkerSubscription(pubsub.TopicAutomationEvents), func(_ context.Context, m pubsub.Message) error {
			got <- m
			return nil
		})
		if err != nil {
			t.Errorf("receive: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return got
}

func nextMessage(t *testing.T, ch <-chan pubsub.Message) pubsub.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("nothing published within 30s")
		return pubsub.Message{}
	}
}

// assertNothingPublished publishes a marker and fails t if anything arrives before it: the
// emulator delivers in publish order, so whatever a refused request might have published
// would come first.
func assertNothingPublished(t *testing.T, s *Service, got <-chan pubsub.Message) {
	t.Helper()
	id, err := s.pubsub.Publish(t.Context(), pubsub.TopicAutomationEvents, []byte("marker"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if m := nextMessage(t, got); m.ID != id {
		t.Fatalf("published %q (%v), want nothing", m.Data, m.Attributes)
	}
}

const (
	secret     = "s3cret-for-the-tests-0123456789"
	delivery1  = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	ghAgent    = "GitHub-Hookshot/044aadd"
	prOpened   = `{"action":"opened","number":7,"pull_request":{"title":"Fix it"}}`
	pushEvent  = `{"ref":"refs/heads/main","commits":[]}`
	zenPing    = `{"zen":"Keep it logically awesome.","hook_id":1}`
	genericObj = `{"build":"green","n":1}`
)

func gitHubHeader(event, body string) http.Header {
	return http.Header{
		"X-Github-Event": {event}, "X-Github-Delivery": {delivery1}, "X-Github-Hook-Id": {"42"},
		"User-Agent": {ghAgent}, "Content-Type": {"application/json"},
		"X-Hub-Signature-256": {sign(secret, []byte(body))}, "X-Hub-Signature": {"sha1=legacy"},
	}
}

func withHeader(h http.Header, kv ...string) http.Header {
	h = h.Clone()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			h.Del(kv[i])
		} else {
			h.Set(kv[i], kv[i+1])
		}
	}
	return h
}

func formBody(payload string) string { return url.Values{"payload": {payload}}.Encode() }

func TestDeliveries(t *testing.T) {
	t.Parallel()
	form := formBody(prOpened)
	for _, tc := range []struct {
		name     string
		provider string
		header   http.Header
		body     string
		// status is the answer; for a 202 the delivery is received with eventKey, deliveryKey
		// and headers, and for anything else nothing is published.
		status      int
		eventKey    string
		deliveryKey string
		payload     string
		headers     map[string]string
	}{
		{
			name: "GitHub event with an action", provider: "github", header: gitHubHeader("pull_request", prOpened), body: prOpened,
			status: 202, eventKey: "github.pull_request.opened", deliveryKey: delivery1, payload: prOpened,
			headers: map[string]string{"x-github-event": "pull_request", "x-github-delivery": delivery1, "x-github-hook-id": "42", "user-agent": ghAgent, "content-type": "application/json"},
		},
		{
			name: "GitHub event without an action", provider: "github", header: gitHubHeader("push", pushEvent), body: pushEvent,
			status: 202, eventKey: "github.push", deliveryKey: delivery1, payload: pushEvent,
			headers: map[string]string{"x-github-event": "push", "x-github-delivery": delivery1, "x-github-hook-id": "42", "user-agent": ghAgent, "content-type": "application/json"},
		},
		{
			name: "GitHub form-encoded", provider: "github",
			header: withHeader(gitHubHeader("pull_request", form), "Content-Type", "application/x-www-form-urlencoded"), body: form,
			status: 202, eventKey: "github.pull_request.opened", deliveryKey: delivery1, payload: prOpened,
			headers: map[string]string{"x-github-event": "pull_request", "x-github-delivery": delivery1, "x-github-hook-id": "42", "user-agent": ghAgent, "content-type": "application/x-www-form-urlencoded"},
		},
		{name: "GitHub ping", provider: "github", header: gitHubHeader("ping", zenPing), body: zenPing, status: 200, eventKey: "github.ping", deliveryKey: delivery1},
		{
			name: "generic, keyed by its signed timestamp and body", provider: "webhook", body: genericObj,
			header: withHeader(signed(secret, t0, genericObj), "Content-Type", "application/json", "Idempotency-Key", "build-77"),
			status: 202, eventKey: "webhook.<id>", deliveryKey: signedKey(t0, genericObj), payload: genericObj,
			headers: map[string]string{"content-type": "application/json", "user-agent": "Go-http-client/1.1"},
		},
		{
			name: "generic signed under two secrets while rotating", provider: "webhook", body: genericObj,
			header: http.Header{httpapi.SignatureHeader: {httpapi.Sign([]byte("the-next-secret-0123456789"), t0, []byte(genericObj)) + ",v1=" + strings.Split(httpapi.Sign([]byte(secret), t0, []byte(genericObj)), "v1=")[1]}},
			status: 202, eventKey: "webhook.<id>", deliveryKey: signedKey(t0, genericObj), payload: genericObj,
			headers: map[string]string{"user-agent": "Go-http-client/1.1"},
		},
		{name: "generic signed the GitHub way, body only", provider: "webhook", header: http.Header{"X-Hub-Signature-256": {sign(secret, []byte(genericObj))}}, body: genericObj, status: 401},
		{name: "generic body-only signature in its own header", provider: "webhook", header: http.Header{httpapi.SignatureHeader: {sign(secret, []byte(genericObj))}}, body: genericObj, status: 401},
		{name: "generic signature without a timestamp", provider: "webhook", header: http.Header{httpapi.SignatureHeader: {strings.Split(httpapi.Sign([]byte(secret), t0, []byte(genericObj)), ",")[1]}}, body: genericObj, status: 401},
		{name: "generic signature with another timestamp", provider: "webhook", header: http.Header{httpapi.SignatureHeader: {strings.Replace(httpapi.Sign([]byte(secret), t0, []byte(genericObj)), "t=1", "t=2", 1)}}, body: genericObj, status: 401},
		{name: "generic signature of another body", provider: "webhook", header: signed(secret, t0, genericObj+" "), body: genericObj, status: 401},
		{name: "wrong signature", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Hub-Signature-256", sign("another-secret-entirely", []byte(pushEvent))), body: pushEvent, status: 401},
		{name: "signature of another body", provider: "github", header: gitHubHeader("push", pushEvent+" "), body: pushEvent, status: 401},
		{name: "missing signature", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Hub-Signature-256", ""), body: pushEvent, status: 401},
		{name: "SHA-1 signature only", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Hub-Signature-256", "sha1=0123"), body: pushEvent, status: 401},
		{name: "hex without its prefix", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Hub-Signature-256", strings.TrimPrefix(sign(secret, []byte(pushEvent)), "sha256=")), body: pushEvent, status: 401},
		{name: "generic signature header on a GitHub registration", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Hub-Signature-256", "", "X-Hangar-Signature", sign(secret, []byte(pushEvent))), body: pushEvent, status: 401},
		{name: "not JSON", provider: "webhook", header: signed(secret, t0, "hello"), body: "hello", status: 400},
		{name: "a JSON array", provider: "webhook", header: signed(secret, t0, "[1]"), body: "[1]", status: 400},
		{name: "GitHub non-JSON", provider: "github", header: gitHubHeader("push", "nope"), body: "nope", status: 400},
		{name: "missing X-GitHub-Event", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Github-Event", ""), body: pushEvent, status: 400},
		{name: "missing X-GitHub-Delivery", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Github-Delivery", ""), body: pushEvent, status: 400},
		{name: "event name with a dot", provider: "github", header: gitHubHeader("push.forged", pushEvent), body: pushEvent, status: 400},
		{name: "action with a dot", provider: "github", header: gitHubHeader("issues", `{"action":"a.b"}`), body: `{"action":"a.b"}`, status: 400},
		{name: "delivery key too long", provider: "github", header: withHeader(gitHubHeader("push", pushEvent), "X-Github-Delivery", strings.Repeat("k", maxDeliveryKeyLen+1)), body: pushEvent, status: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newService(t, limits())
			reg := create(t, s, alice, tc.provider, proto.String(secret)).GetRegistration()
			got := published(t, s)
			a := post(t, serve(t, s)+reg.GetUrlPath(), tc.header, []byte(tc.body))
			if a.status != tc.status {
				t.Fatalf("status %d (%v), want %d", a.status, a.body, tc.status)
			}
			if tc.status >= 300 {
				if a.body["error"] == "" {
					t.Errorf("refusal %d has no error message: %v", a.status, a.body)
				}
				assertNothingPublished(t, s, got)
				return
			}
			eventKey := strings.ReplaceAll(tc.eventKey, "<id>", reg.GetId())
			if a.body["delivery_key"] != tc.deliveryKey || a.body["event_key"] != eventKey {
				t.Errorf("answered %v, want delivery_key %q and event_key %q", a.body, tc.deliveryKey, eventKey)
			}
			if tc.status == http.StatusOK {
				assertNothingPublished(t, s, got)
				return
			}
			m := nextMessage(t, got)
			d, err := triggers.Decode(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			if d.RegistrationID != reg.GetId() || d.Provider != tc.provider || d.EventKey != eventKey || d.DeliveryKey != tc.deliveryKey || !d.ReceivedAt.Equal(t0) {
				t.Errorf("published %+v, want registration %s, provider %s, event key %s, delivery key %s, received at %v", d, reg.GetId(), tc.provider, eventKey, tc.deliveryKey, t0)
			}
			// GitHub's delivery id is not signed, so its body goes along for the body window.
			if wantBody := map[string]string{"github": hashKey([]byte(tc.payload))}[tc.provider]; d.BodyKey != wantBody {
				t.Errorf("body key %q, want %q", d.BodyKey, wantBody)
			}
			if !jsonEqual(t, d.Payload, tc.payload) {
				t.Errorf("payload %s, want %s", d.Payload, tc.payload)
			}
			if !maps.Equal(d.Headers, tc.headers) {
				t.Errorf("headers %v, want %v", d.Headers, tc.headers)
			}
			wantAttrs := map[string]string{"event_key": eventKey, "registration_id": reg.GetId(), "delivery_key": tc.deliveryKey}
			if !maps.Equal(m.Attributes, wantAttrs) {
				t.Errorf("attributes %v, want %v", m.Attributes, wantAttrs)
			}
		})
	}
}

func jsonEqual(t *testing.T, got []byte, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestUnknownRegistrationsAndOversizedBodiesAreRefused(t *testing.T) {
	t.Parallel()
	lim := limits()
	lim.MaxBodyBytes = 1024
	s, _ := newService(t, lim)
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	got := published(t, s)
	base := serve(t, s)
	big := []byte(`{"pad":"` + strings.Repeat("x", 1024) + `"}`)
	header := signed(secret, t0, string(big))
	for _, tc := range []struct {
		name   string
		path   string
		body   io.Reader
		status int
	}{
		{"unknown id", URLPath(ids.New(idPrefix)), strings.NewReader(genericObj), 404},
		{"malformed id", URLPath("nope"), strings.NewReader(genericObj), 404},
		{"too large, by Content-Length", reg.GetUrlPath(), bytes.NewReader(big), 413},
		// A reader of unknown length is sent chunked: the cap applies while reading.
		{"too large, chunked", reg.GetUrlPath(), io.MultiReader(bytes.NewReader(big)), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	assertNothingPublished(t, s, got)
}

// GitHub's documented test vector (docs.github.com, "Validating webhook deliveries"): the
// secret "It's a Secret to Everybody" and the body "Hello, World!" sign as below.
const (
	gitHubVectorSecret = "It's a Secret to Everybody"
	gitHubVectorBody   = "Hello, World!"
	gitHubVectorSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestGitHubsTestVectorVerifies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sig string
		ok        bool
	}{
		{"GitHub's signature", gitHubVectorSig, true},
		{"one digit changed", gitHubVectorSig[:len(gitHubVectorSig)-1] + "f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyGitHub([]byte(gitHubVectorSecret), http.Header{httpapi.GitHubSignatureHeader: {tc.sig}}, []byte(gitHubVectorBody))
			if (err == nil) != tc.ok {
				t.Fatalf("verify: %v, want ok %v", err, tc.ok)
			}
		})
	}
}

// A GitHub registration takes a secret with spaces, GitHub's test vector's, and its deliveries
// signed with it are received.
func TestAGitHubSecretWithSpacesIsRegisteredAndVerifies(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, limits())
	reg := create(t, s, alice, "github", proto.String(gitHubVectorSecret))
	if reg.GetSecret() != gitHubVectorSecret {
		t.Fatalf("registered secret %q, want the one given", reg.GetSecret())
	}
	h := gitHubHeader("push", pushEvent)
	h.Set(httpapi.GitHubSignatureHeader, sign(gitHubVectorSecret, []byte(pushEvent)))
	if a := post(t, serve(t, s)+reg.GetRegistration().GetUrlPath(), h, []byte(pushEvent)); a.status != 202 {
		t.Fatalf("delivery signed with the secret: %d %v", a.status, a.body)
	}
}

func TestRotationRetiresTheOldSecret(t *testing.T) {
	t.Parallel()
	s, c := newService(t, limits())
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	// other is another instance of the function over the same database, its cache warm.
	other := New(Deps{DB: s.db, Sealer: s.sealer, PubSub: s.pubsub, Clock: c, Limits: s.lim, Log: s.log})
	here, there := serve(t, s)+reg.GetUrlPath(), serve(t, other)+reg.GetUrlPath()
	signedWith := func(secret string) http.Header {
		return signed(secret, c.Now(), genericObj)
	}
	for _, u := range []string{here, there} {
		if a := post(t, u, signedWith(secret), []byte(genericObj)); a.status != 202 {
			t.Fatalf("before rotation: %d %v", a.status, a.body)
		}
	}

	resp, err := s.RotateWebhookSecret(as(t, alice), connect.NewRequest(&appv1.RotateWebhookSecretRequest{Id: reg.GetId()}))
	if err != nil {
		t.Fatal(err)
	}
	fresh := resp.Msg.GetSecret()
	for _, tc := range []struct {
		name   string
		url    string
		secret string
		want   int
	}{
		{"old secret, same instance", here, secret, 401},
		{"new secret, same instance", here, fresh, 202},
		{"old secret, other instance within the cache TTL", there, secret, 202},
	} {
		if a := post(t, tc.url, signedWith(tc.secret), []byte(genericObj)); a.status != tc.want {
			t.Errorf("%s: %d %v, want %d", tc.name, a.status, a.body, tc.want)
		}
	}
	c.Advance(s.lim.CacheTTL)
	if a := post(t, there, signedWith(secret), []byte(genericObj)); a.status != 401 {
		t.Errorf("old secret, other instance past the cache TTL: %d %v, want 401", a.status, a.body)
	}
	if a := post(t, there, signedWith(fresh), []byte(genericObj)); a.status != 202 {
		t.Errorf("new secret, other instance past the cache TTL: %d %v, want 202", a.status, a.body)
	}
}

func TestDeletedRegistrationAnswers404(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, limits())
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	u := serve(t, s) + reg.GetUrlPath()
	h := signed(secret, t0, genericObj)
	if a := post(t, u, h, []byte(genericObj)); a.status != 202 {
		t.Fatalf("before delete: %d %v", a.status, a.body)
	}
	if _, err := s.DeleteWebhookRegistration(as(t, alice), connect.NewRequest(&appv1.DeleteWebhookRegistrationRequest{Id: reg.GetId()})); err != nil {
		t.Fatal(err)
	}
	if a := post(t, u, h, []byte(genericObj)); a.status != 404 {
		t.Errorf("after delete: %d %v, want 404", a.status, a.body)
	}
}

func TestDeliveriesRecordLastDeliveryAtOnceAMinute(t *testing.T) {
	t.Parallel()
	s, c := newService(t, limits())
	reg := create(t, s, alice, "github", proto.String(secret)).GetRegistration()
	u := serve(t, s) + reg.GetUrlPath()
	lastDelivery := func() string {
		for _, r := range list(t, s, alice) {
			if r.GetId() == reg.GetId() {
				return r.GetLastDeliveryAt()
			}
		}
		t.Fatal("registration not listed")
		return ""
	}
	if got := lastDelivery(); got != "" {
		t.Fatalf("last_delivery_at %q before any delivery", got)
	}
	steps := []struct {
		advance time.Duration
		want    time.Time
	}{
		{0, t0},                          // the first delivery is recorded
		{30 * time.Second, t0},           // one 30s later is not
		{31 * time.Second, t0.Add(61e9)}, // one more than a minute after the record is
	}
	for i, st := range steps {
		c.Advance(st.advance)
		if a := post(t, u, gitHubHeader("push", pushEvent), []byte(pushEvent)); a.status != 202 {
			t.Fatalf("delivery %d: %d %v", i, a.status, a.body)
		}
		if got := lastDelivery(); got != clock.Format(st.want) {
			t.Errorf("after delivery %d: last_delivery_at %q, want %q", i, got, clock.Format(st.want))
		}
	}
}

func TestFailedPublishAnswers503(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	testenv.RequirePubSub(t)
	// A project without Hangar's topics: every publish fails.
	bare, err := pubsub.Open(t.Context(), testenv.Project(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bare.Close() })
	s := New(Deps{DB: db, Sealer: sealer, PubSub: bare, Clock: clock.NewFake(t0), Limits: limits(), Log: testLog(t)})
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	a := post(t, serve(t, s)+reg.GetUrlPath(), signed(secret, t0, genericObj), []byte(genericObj))
	if a.status != 503 || a.header.Get("Retry-After") == "" || a.body["error"] == "" {
		t.Errorf("got %d %v (Retry-After %q), want 503 with Retry-After and an error", a.status, a.body, a.header.Get("Retry-After"))
	}
}

func TestSecurityAGenericReplayWithANewIdempotencyKeyKeepsItsDeliveryKey(t *testing.T) {
	t.Parallel()
	s, _ := newService(t, limits())
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	got := published(t, s)
	u := serve(t, s) + reg.GetUrlPath()
	captured := signed(secret, t0, genericObj)
	var keys []string
	for _, idem := range []string{"", "replay-1", "replay-2"} {
		a := post(t, u, withHeader(captured, "Idempotency-Key", idem, "X-Delivery-Id", idem), []byte(genericObj))
		if a.status != 202 {
			t.Fatalf("replay with Idempotency-Key %q: %d %v", idem, a.status, a.body)
		}
		d, err := triggers.Decode(nextMessage(t, got).Data)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, d.DeliveryKey)
	}
	// The dispatcher starts one run per delivery key (automation/dispatch), so one key is one run.
	if keys[0] != signedKey(t0, genericObj) || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("delivery keys %v: want the signed material's key for each", keys)
	}
}

func TestSecurityGenericSignaturesOutsideTheToleranceAreRefused(t *testing.T) {
	t.Parallel()
	lim := limits()
	s, c := newService(t, lim)
	reg := create(t, s, alice, "webhook", proto.String(secret)).GetRegistration()
	got := published(t, s)
	u := serve(t, s) + reg.GetUrlPath()
	captured := signed(secret, t0, genericObj)
	c.Advance(lim.SignatureTolerance + time.Second)
	for _, tc := range []struct {
		name   string
		header http.Header
		want   int
	}{
		{"a captured delivery replayed past the tolerance", captured, 401},
		{"signed just within the tolerance", signed(secret, c.Now().Add(-lim.SignatureTolerance+time.Second), genericObj), 202},
		{"a sender's clock ahead within the tolerance", signed(secret, c.Now().Add(lim.SignatureTolerance-time.Second), genericObj), 202},
		{"dated in the future beyond the tolerance", signed(secret, c.Now().Add(lim.SignatureTolerance+time.Second), genericObj), 401},
	} {
		a := post(t, u, tc.header, []byte(genericObj))
		if a.status != tc.want {
			t.Fatalf("%s: %d %v, want %d", tc.name, a.status, a.body, tc.want)
		}
		if a.status == 202 {
			nextMessage(t, got)
		} else if !strings.Contains(a.body["error"], "tolerance") {
			t.Errorf("%s: error %q does not name the tolerance", tc.name, a.body["error"])
		}
	}
	assertNothingPublished(t, s, got)
}

package pubsub_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// receiveAll runs Receive on sub until t ends, sending every message h sees to the returned
// channel before h decides its fate.
func receiveAll(t *testing.T, c *pubsub.Client, sub string, h pubsub.Handler) <-chan pubsub.Message {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan pubsub.Message, 100)
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, sub, func(ctx context.Context, m pubsub.Message) error {
			got <- m
			return h(ctx, m)
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Receive: %v", err)
		}
	})
	return got
}

func next(t *testing.T, ch <-chan pubsub.Message) pubsub.Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message within 30s")
		return pubsub.Message{}
	}
}

func ack(context.Context, pubsub.Message) error { return nil }

func TestPublishedMessageIsReceivedWithDataAndAttributes(t *testing.T) {
	c := testenv.PubSub(t)
	before := time.Now().Add(-time.Second)
	id, err := c.Publish(t.Context(), pubsub.TopicAutomationEvents, []byte(`{"a":1}`), map[string]string{"event_key": "github.push"})
	if err != nil {
		t.Fatal(err)
	}
	got := next(t, receiveAll(t, c, pubsub.WorkerSubscription(pubsub.TopicAutomationEvents), ack))
	if got.ID != id || string(got.Data) != `{"a":1}` || got.Attributes["event_key"] != "github.push" {
		t.Errorf("got %+v, want id %s with the published data and attributes", got, id)
	}
	if got.DeliveryAttempt != 1 {
		t.Errorf("delivery attempt %d, want 1 on a dead-lettering subscription", got.DeliveryAttempt)
	}
	if got.PublishTime.Before(before) {
		t.Errorf("publish time %v is before the publish", got.PublishTime)
	}
}

func TestPublishToAMissingTopicFails(t *testing.T) {
	c := testenv.PubSub(t)
	if _, err := c.Publish(t.Context(), "no-such-topic", []byte("x"), nil); err == nil {
		t.Fatal("publish to a missing topic succeeded")
	}
}

func TestFailedMessageIsDeliveredAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func() error
	}{
		{"handler error", func() error { return errors.New("not yet") }},
		{"handler panic", func() error { panic("boom") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.PubSub(t)
			id, err := c.Publish(t.Context(), pubsub.TopicAutomationRuns, []byte("step"), nil)
			if err != nil {
				t.Fatal(err)
			}
			var failed atomic.Bool
			got := receiveAll(t, c, pubsub.WorkerSubscription(pubsub.TopicAutomationRuns), func(context.Context, pubsub.Message) error {
				if !failed.Swap(true) {
					return tc.fail()
				}
				return nil
			})
			first, second := next(t, got), next(t, got)
			if first.ID != id || second.ID != id {
				t.Fatalf("got messages %s then %s, want %s twice", first.ID, second.ID, id)
			}
			if first.DeliveryAttempt != 1 || second.DeliveryAttempt != 2 {
				t.Errorf("delivery attempts %d then %d, want 1 then 2", first.DeliveryAttempt, second.DeliveryAttempt)
			}
		})
	}
}

func TestProvisionTwiceIsHarmless(t *testing.T) {
	c := testenv.PubSub(t) // provisioned once already
	if err := c.Provision(t.Context()); err != nil {
		t.Fatalf("second Provision: %v", err)
	}
}

// The emulator pushes to a loopback server exactly as production Pub/Sub pushes to Cloud Run:
// a JSON envelope with base64 data, acknowledged by a 2xx and delivered again otherwise.
func TestPushHandlerTakesTheEmulatorsPushes(t *testing.T) {
	c := testenv.PubSub(t)
	got := make(chan pubsub.Message, 10)
	var failed atomic.Bool
	srv := httptest.NewServer(pubsub.PushHandler(func(_ context.Context, m pubsub.Message) error {
		got <- m
		if !failed.Swap(true) {
			return errors.New("first delivery fails")
		}
		return nil
	}))
	t.Cleanup(srv.Close)
	cfg := pubsub.Worker(pubsub.TopicAutomationEvents)
	cfg.PushEndpoint = srv.URL + "/push"
	if err := c.EnsureSubscription(t.Context(), "push-test", cfg); err != nil {
		t.Fatal(err)
	}
	data := []byte{0, 1, 2, 0xff, '"'}
	id, err := c.Publish(t.Context(), pubsub.TopicAutomationEvents, data, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	first, second := next(t, got), next(t, got)
	for i, m := range []pubsub.Message{first, second} {
		if m.ID != id || string(m.Data) != string(data) || m.Attributes["k"] != "v" || m.PublishTime.IsZero() {
			t.Errorf("push %d: got %+v, want message %s with its data, attributes and publish time", i+1, m, id)
		}
	}
	// The emulator leaves deliveryAttempt out of its pushes; production's decoding of it is
	// TestPushHandlerDecodesProductionEnvelope's.
}

func TestPushHandlerDecodesProductionEnvelope(t *testing.T) {
	// As documented for push subscriptions with a dead-letter policy, snake_case twins included.
	body := `{"message":{"attributes":{"event_key":"github.push"},"data":"eyJhIjoxfQ==","messageId":"2070443601311540",` +
		`"message_id":"2070443601311540","publishTime":"2021-02-26T19:13:55.749Z","publish_time":"2021-02-26T19:13:55.749Z"},` +
		`"subscription":"projects/myproject/subscriptions/mysubscription","deliveryAttempt":5}`
	var got pubsub.Message
	h := pubsub.PushHandler(func(_ context.Context, m pubsub.Message) error { got = m; return nil })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/push", strings.NewReader(body)))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d, want 204 (%s)", rec.Code, rec.Body)
	}
	want := pubsub.Message{
		ID: "2070443601311540", Data: []byte(`{"a":1}`), Attributes: map[string]string{"event_key": "github.push"},
		DeliveryAttempt: 5, PublishTime: time.Date(2021, 2, 26, 19, 13, 55, 749e6, time.UTC),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestPushHandlerRefusesWhatIsNotAPush(t *testing.T) {
	h := pubsub.PushHandler(func(context.Context, pubsub.Message) error { return errors.New("cannot") })
	for _, tc := range []struct {
		name, method, body string
		want               int
	}{
		{"not JSON", http.MethodPost, "hello", http.StatusBadRequest},
		{"no message id", http.MethodPost, `{"message":{"data":"aGk="}}`, http.StatusBadRequest},
		{"data not base64", http.MethodPost, `{"message":{"data":"%%","messageId":"1"}}`, http.StatusBadRequest},
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed},
		{"handler fails", http.MethodPost, `{"message":{"data":"aGk=","messageId":"1"}}`, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/push", strings.NewReader(tc.body)))
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tc.want, rec.Body)
			}
		})
	}
}

// BenchmarkReceive publishes 1,000 messages and receives them all, per iteration: Receive's
// throughput from the emulator with Hangar's receive settings.
func BenchmarkReceive(b *testing.B) {
	c := testenv.PubSub(b)
	const batch = 1000
	got := make(chan struct{}, batch)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, pubsub.WorkerSubscription(pubsub.TopicAutomationRuns), func(context.Context, pubsub.Message) error {
			got <- struct{}{}
			return nil
		})
	}()
	b.Cleanup(func() { cancel(); <-done })
	data := []byte(strings.Repeat("x", 1024))
	n := 0
	for b.Loop() {
		errs := make(chan error, batch)
		for range batch {
			go func() {
				_, err := c.Publish(ctx, pubsub.TopicAutomationRuns, data, nil)
				errs <- err
			}()
		}
		for range batch {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		for range batch {
			<-got
		}
		n += batch
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "messages/s")
}

// BenchmarkPublishToReceive is one message's trip through the emulator: published, then handed
// to a streaming-pull handler — the floor under anything a worker does with a message.
func BenchmarkPublishToReceive(b *testing.B) {
	c := testenv.PubSub(b)
	got := make(chan string, 1)
	ctx, cancel := context.WithCancel(b.Context())
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(ctx, pubsub.WorkerSubscription(pubsub.TopicAutomationRuns), func(_ context.Context, m pubsub.Message) error {
			got <- string(m.Data)
			return nil
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	n := 0
	for b.Loop() {
		n++
		want := strconv.Itoa(n)
		if _, err := c.Publish(b.Context(), pubsub.TopicAutomationRuns, []byte(want), nil); err != nil {
			b.Fatal(err)
		}
		for m := <-got; m != want; m = <-got {
		}
	}
}

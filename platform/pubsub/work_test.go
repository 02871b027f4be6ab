package pubsub_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/pubsub"
)

// A worker run by Work gets each topic's messages in that topic's handler, keeps ticking when
// a tick fails, and returns nil once its context ends.
func TestWorkDeliversEachTopicToItsHandlerAndTicksUntilItsContextEnds(t *testing.T) {
	c := testenv.PubSub(t)
	ctx, cancel := context.WithCancel(t.Context())
	events, runs := make(chan string, 10), make(chan string, 10)
	var ticks atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- c.Work(ctx, "test", map[string]pubsub.Handler{
			pubsub.TopicAutomationEvents: func(_ context.Context, m pubsub.Message) error { events <- string(m.Data); return nil },
			pubsub.TopicAutomationRuns:   func(_ context.Context, m pubsub.Message) error { runs <- string(m.Data); return nil },
		}, 10*time.Millisecond, func(context.Context) error {
			ticks.Add(1)
			return errors.New("a failing tick is logged, and the next one runs")
		}, slog.New(slog.DiscardHandler))
	}()
	for topic, data := range map[string]string{pubsub.TopicAutomationEvents: "event", pubsub.TopicAutomationRuns: "run"} {
		if _, err := c.Publish(t.Context(), topic, []byte(data), nil); err != nil {
			t.Fatal(err)
		}
	}
	for ch, want := range map[chan string]string{events: "event", runs: "run"} {
		select {
		case got := <-ch:
			if got != want {
				t.Fatalf("handler got %q, want %q", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no %q delivered within 30s", want)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ticks.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d ticks within 30s, want 2: a failed tick must not stop the next", ticks.Load())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Work after its context ended: %v", err)
	}
}

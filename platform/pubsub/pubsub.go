// Package pubsub owns Hangar's use of Google Cloud Pub/Sub: the names of its topics and
// subscriptions, creating them idempotently, publishing that returns only once the server has
// acknowledged the message, and consuming either by streaming pull (Receive) or by push
// (PushHandler) with one handler shape, where nil acknowledges and an error asks for redelivery.
package pubsub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	gpubsub "cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	otelcodes "go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Hangar's topics. Each has one worker subscription, WorkerSubscription(topic).
const (
	// TopicAutomationEvents carries inbound webhook deliveries (automation/triggers.Delivery).
	TopicAutomationEvents = "hangar-automation-events"
	// TopicAutomationRuns carries automation run steps to execute.
	TopicAutomationRuns = "hangar-automation-runs"
	// TopicImageJobs carries image enable jobs to advance (functions/imagesvc).
	TopicImageJobs = "hangar-image-jobs"
)

// WorkerSubscription is the subscription that the workers of topic consume: "<topic>-worker".
func WorkerSubscription(topic string) string { return topic + "-worker" }

// DeadLetterTopic is where topic's worker subscription parks a message that failed
// MaxDeliveryAttempts times: "<topic>-dead".
func DeadLetterTopic(topic string) string { return topic + "-dead" }

// DeadLetterSubscription keeps what reaches DeadLetterTopic(topic) for an operator to inspect
// or replay: a topic without a subscription would drop it.
func DeadLetterSubscription(topic string) string { return DeadLetterTopic(topic) + "-kept" }

// Message is one received message.
type Message struct {
	ID         string
	Data       []byte
	Attributes map[string]string
	// DeliveryAttempt counts deliveries of this message, from 1; Pub/Sub reports it only on
	// subscriptions with a dead-letter policy, and it is 0 elsewhere.
	DeliveryAttempt int
	PublishTime     time.Time
}

// Handler processes one message: nil acknowledges it, an error has it redelivered after the
// subscription's retry backoff. Handlers log their own failures; Receive and PushHandler only
// turn them into acknowledgements.
type Handler func(context.Context, Message) error

// SubscriptionConfig is how a subscription delivers.
type SubscriptionConfig struct {
	Topic string
	// AckDeadline is how long a delivered message may go unacknowledged before Pub/Sub delivers
	// it again (10s–600s). Receive extends it while a handler runs; a push request must be
	// answered within it.
	AckDeadline time.Duration
	// MinBackoff and MaxBackoff bound the delay before a failed message is delivered again
	// (0–600s); each failure doubles it.
	MinBackoff, MaxBackoff time.Duration
	// DeadLetterTopic, when set, receives messages that failed MaxDeliveryAttempts (5–100)
	// times instead of retrying them until retention ends.
	DeadLetterTopic     string
	MaxDeliveryAttempts int
	// PushEndpoint, when set, makes Pub/Sub POST each message there (see PushHandler) rather
	// than wait for Receive to pull it.
	PushEndpoint string
	// Retention is how long an unacknowledged message is kept (10 minutes–7 days; 0: 7 days).
	Retention time.Duration
}

// Worker is the configuration of Hangar's worker subscriptions: a lease long enough for a
// handler that calls Firestore a few times, backoff from 1s (a blip) to 10 minutes (an outage),
// and dead-lettering after 10 attempts so that one poison message cannot retry for a week.
func Worker(topic string) SubscriptionConfig {
	return SubscriptionConfig{
		Topic: topic, AckDeadline: 60 * time.Second,
		MinBackoff: time.Second, MaxBackoff: 10 * time.Minute,
		DeadLetterTopic: DeadLetterTopic(topic), MaxDeliveryAttempts: 10,
	}
}

// Client publishes and receives on one project's Pub/Sub.
type Client struct {
	c *gpubsub.Client

	mu         sync.Mutex
	publishers map[string]*gpubsub.Publisher
}

// Open connects to project's Pub/Sub; PUBSUB_EMULATOR_HOST, when set, points the client at the
// emulator (without credentials).
func Open(ctx context.Context, project string) (*Client, error) {
	c, err := gpubsub.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("open pubsub for project %s: %w", project, err)
	}
	return &Client{c: c, publishers: make(map[string]*gpubsub.Publisher)}, nil
}

// Close flushes pending publishes and releases the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	for _, p := range c.publishers {
		p.Stop()
	}
	c.publishers = map[string]*gpubsub.Publisher{}
	c.mu.Unlock()
	return c.c.Close()
}

// Subscription is one subscription Hangar uses, by name, with how it delivers.
type Subscription struct {
	Name   string
	Config SubscriptionConfig
}

// Topics are every topic Hangar uses: each of its topics and that topic's dead-letter topic.
// Provision creates them, and the deployment's Terraform declares them from this list.
func Topics() []string {
	var ts []string
	for _, topic := range workerTopics {
		ts = append(ts, topic, DeadLetterTopic(topic))
	}
	return ts
}

// Subscriptions are every subscription Hangar uses: per topic, the kept copy of its dead
// letters and its worker subscription (Worker's configuration). Provision creates them, and
// the deployment's Terraform declares them from this list, with push endpoints added.
func Subscriptions() []Subscription {
	var subs []Subscription
	for _, topic := range workerTopics {
		subs = append(subs,
			Subscription{DeadLetterSubscription(topic), SubscriptionConfig{Topic: DeadLetterTopic(topic), AckDeadline: 60 * time.Second}},
			Subscription{WorkerSubscription(topic), Worker(topic)})
	}
	return subs
}

// workerTopics are Hangar's topics, each consumed by its worker subscription.
var workerTopics = []string{TopicAutomationEvents, TopicAutomationRuns, TopicImageJobs}

// Provision creates every topic and subscription Hangar uses (Topics, Subscriptions); existing
// ones are left as they are. `hangar dev` runs it at start; a deployment declares the same in
// Terraform (deploy/).
func (c *Client) Provision(ctx context.Context) error {
	for _, t := range Topics() {
		if err := c.EnsureTopic(ctx, t); err != nil {
			return err
		}
	}
	for _, s := range Subscriptions() {
		if err := c.EnsureSubscription(ctx, s.Name, s.Config); err != nil {
			return err
		}
	}
	return nil
}

// EnsureTopic creates topic unless it exists.
func (c *Client) EnsureTopic(ctx context.Context, topic string) error {
	_, err := c.c.TopicAdminClient.CreateTopic(ctx, &pubsubpb.Topic{Name: c.topicName(topic)})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// EnsureSubscription creates subscription as cfg says unless it exists; an existing one keeps
// its configuration.
func (c *Client) EnsureSubscription(ctx context.Context, subscription string, cfg SubscriptionConfig) error {
	sub := &pubsubpb.Subscription{
		Name:               c.subscriptionName(subscription),
		Topic:              c.topicName(cfg.Topic),
		AckDeadlineSeconds: int32(cfg.AckDeadline / time.Second),
	}
	if cfg.MinBackoff > 0 || cfg.MaxBackoff > 0 {
		sub.RetryPolicy = &pubsubpb.RetryPolicy{
			MinimumBackoff: durationpb.New(cfg.MinBackoff),
			MaximumBackoff: durationpb.New(cfg.MaxBackoff),
		}
	}
	if cfg.DeadLetterTopic != "" {
		sub.DeadLetterPolicy = &pubsubpb.DeadLetterPolicy{
			DeadLetterTopic:     c.topicName(cfg.DeadLetterTopic),
			MaxDeliveryAttempts: int32(cfg.MaxDeliveryAttempts),
		}
	}
	if cfg.PushEndpoint != "" {
		sub.PushConfig = &pubsubpb.PushConfig{PushEndpoint: cfg.PushEndpoint}
	}
	if cfg.Retention > 0 {
		sub.MessageRetentionDuration = durationpb.New(cfg.Retention)
	}
	_, err := c.c.SubscriptionAdminClient.CreateSubscription(ctx, sub)
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create subscription %s on %s: %w", subscription, cfg.Topic, err)
	}
	return nil
}

// Publish sends data with attrs to topic and returns the message id once the server has
// acknowledged it, so a nil error means the message will be delivered. Concurrent publishes to
// one topic share requests.
func (c *Client) Publish(ctx context.Context, topic string, data []byte, attrs map[string]string) (string, error) {
	ctx, span := tracer.Start(ctx, topic+" publish", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(semconv.MessagingSystemGCPPubSub, semconv.MessagingDestinationName(topic)))
	defer span.End()
	id, err := c.publisher(topic).Publish(ctx, &gpubsub.Message{Data: data, Attributes: carry(ctx, attrs)}).Get(ctx)
	if err != nil {
		span.SetStatus(otelcodes.Error, err.Error())
		return "", fmt.Errorf("publish to %s: %w", topic, err)
	}
	span.SetAttributes(semconv.MessagingMessageID(id))
	return id, nil
}

// Ping asks for one of Hangar's topics, for readiness probes: any answer but an error (a
// missing topic included, which Provision fixes) is Pub/Sub reachable.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: c.topicName(TopicAutomationEvents)})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("pubsub: %w", err)
	}
	return nil
}

// publishDelay is how long a publish waits for others to share its request. Pub/Sub's 10ms
// default suits batch jobs; Hangar publishes while a caller waits for the answer.
const publishDelay = time.Millisecond

func (c *Client) publisher(topic string) *gpubsub.Publisher {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.publishers[topic]
	if !ok {
		p = c.c.Publisher(topic)
		p.PublishSettings.DelayThreshold = publishDelay
		p.PublishSettings.Timeout = 30 * time.Second
		c.publishers[topic] = p
	}
	return p
}

// ReceiveOption tunes Receive.
type ReceiveOption func(*gpubsub.ReceiveSettings)

// MaxInFlight bounds how many messages the handler processes at once (default 100).
func MaxInFlight(n int) ReceiveOption {
	return func(s *gpubsub.ReceiveSettings) { s.MaxOutstandingMessages = n }
}

// receiveSettings are tuned for small messages on small instances: ten pull streams (the
// library's default of one received 1,900 messages/s from the emulator here, four 5,300/s, ten
// 8,200/s; BenchmarkReceive), a bounded number and size of messages held at once so that an
// instance's memory holds them, and leases extended for as long as the longest handler Hangar
// runs.
func receiveSettings(opts []ReceiveOption) gpubsub.ReceiveSettings {
	s := gpubsub.ReceiveSettings{
		NumGoroutines:          10,
		MaxOutstandingMessages: 100,
		MaxOutstandingBytes:    64 << 20,
		MaxExtension:           30 * time.Minute,
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

// Receive pulls subscription's messages and calls h on each, concurrently, until ctx is done;
// it returns nil then, once in-flight handlers have returned, or a non-retryable error from
// the service. A panicking handler nacks its message.
func (c *Client) Receive(ctx context.Context, subscription string, h Handler, opts ...ReceiveOption) error {
	sub := c.c.Subscriber(subscription)
	sub.ReceiveSettings = receiveSettings(opts)
	err := sub.Receive(ctx, func(ctx context.Context, m *gpubsub.Message) {
		msg := Message{ID: m.ID, Data: m.Data, Attributes: m.Attributes, PublishTime: m.PublishTime}
		if m.DeliveryAttempt != nil {
			msg.DeliveryAttempt = *m.DeliveryAttempt
		}
		if err := handle(ctx, subscription, h, msg); err != nil {
			m.Nack()
			return
		}
		m.Ack()
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("receive from %s: %w", subscription, err)
	}
	return nil
}

// handle runs h in a consumer span that continues the trace the message was published in,
// with the publisher's request id, turning a panic into an error so that one bad message
// cannot stop the others.
func handle(ctx context.Context, subscription string, h Handler, m Message) (err error) {
	ctx = carried(ctx, m.Attributes)
	ctx, span := tracer.Start(ctx, subscription+" process", trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(semconv.MessagingSystemGCPPubSub, semconv.MessagingMessageID(m.ID),
			semconv.MessagingConsumerGroupName(subscription), semconv.MessagingGCPPubSubMessageDeliveryAttempt(m.DeliveryAttempt)))
	defer func() {
		if r := recover(); r != nil {
			slog.ErrorContext(ctx, "pubsub handler panicked", "message", m.ID, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v", r)
		}
		if err != nil {
			span.SetStatus(otelcodes.Error, err.Error())
		}
		span.End()
	}()
	return h(ctx, m)
}

func (c *Client) topicName(topic string) string {
	return "projects/" + c.c.Project() + "/topics/" + topic
}

func (c *Client) subscriptionName(sub string) string {
	return "projects/" + c.c.Project() + "/subscriptions/" + sub
}

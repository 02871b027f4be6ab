package composition

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hangar-dev/hangar/functions/automationworker"
	"github.com/hangar-dev/hangar/functions/imagesvc"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/httpapi"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/store"
)

// Deployment is what the deployment's Terraform (deploy/) takes from the code rather than
// writing it a second time: the functions, the load balancer's path rules, Pub/Sub's topics
// and subscriptions with their push endpoints, and the Firestore TTL policies. `hangar
// functions --terraform` writes it as deploy/hangar.gen.tf.json (a Terraform local), and a test
// fails when that file is stale.
type Deployment struct {
	// Functions are the Cloud Run functions by name (Function.Name).
	Functions map[string]DeployedFunction `json:"functions"`
	// PathRules route the load balancer's paths to functions; DefaultFunction takes the rest.
	PathRules       []PathRule `json:"path_rules"`
	DefaultFunction string     `json:"default_function"`
	// AppsFunction serves the apps' own origins (any path of a host under HANGAR_APPS_DOMAIN).
	AppsFunction string `json:"apps_function"`
	// WorkerFunction receives the push subscriptions and the scheduler's tick at TickPath.
	WorkerFunction string `json:"worker_function"`
	TickPath       string `json:"tick_path"`
	// Topics and Subscriptions are pubsub.Topics and pubsub.Subscriptions, by name.
	Topics        []string                        `json:"topics"`
	Subscriptions map[string]DeployedSubscription `json:"subscriptions"`
	// TTL is each expiring collection's time field (store.ExpiringCollections).
	TTL map[string]string `json:"ttl"`
}

// DeployedFunction is one function as Terraform needs it. Role picks its settings and service
// account: "api" (a public service), "worker" or "dashboard".
type DeployedFunction struct {
	EntryPoint string `json:"entry_point"`
	Service    string `json:"service"`
	Public     bool   `json:"public"`
	Role       string `json:"role"`
	// Streaming functions hold requests open (server or client streams, SSE, shells), so
	// their request timeout must be Cloud Run's longest.
	Streaming bool `json:"streaming"`
}

// PathRule is one path rule of the load balancer's URL map.
type PathRule struct {
	Paths    []string `json:"paths"`
	Function string   `json:"function"`
}

// DeployedSubscription is one subscription; zero values are settings it does not have.
type DeployedSubscription struct {
	Topic               string `json:"topic"`
	AckDeadlineSeconds  int    `json:"ack_deadline_seconds"`
	MinimumBackoff      string `json:"minimum_backoff"`
	MaximumBackoff      string `json:"maximum_backoff"`
	DeadLetterTopic     string `json:"dead_letter_topic"`
	MaxDeliveryAttempts int    `json:"max_delivery_attempts"`
	// PushPath is the worker function's path Pub/Sub pushes to; "" for a pull subscription.
	PushPath string `json:"push_path"`
}

// pushPaths are the worker function's push endpoints, by the topic whose worker subscription
// delivers there (automationworker.Worker.Routes, imagesvc.Worker.Routes).
var pushPaths = map[string]string{
	pubsub.TopicAutomationEvents: automationworker.EventsPushPath,
	pubsub.TopicAutomationRuns:   automationworker.RunsPushPath,
	pubsub.TopicImageJobs:        imagesvc.JobsPushPath,
}

// plainRoutePaths are the load balancer's paths of the plain HTTP routes (API.routes), by the
// service whose function serves them; TestPlainRoutesReachTheirFunctionThroughTheLoadBalancer
// checks that every route the API registers falls under its own service's path. The URL map
// picks the longest matching path, so the OAuth callback wins over /api/auth/*.
var plainRoutePaths = []struct {
	path, service string
}{
	{"/api/v1/sessions/*", appv1connect.SessionServiceName},
	{"/api/v1/webhooks/*", appv1connect.WebhookRegistrationServiceName},
	{"/api/auth/*", appv1connect.ApiKeyServiceName},
	{"/api/auth/oauth/callback", appv1connect.OAuthCredentialServiceName},
}

// Deploy is the Deployment of this build.
func Deploy() (Deployment, error) {
	d := Deployment{
		Functions:       map[string]DeployedFunction{},
		DefaultFunction: Dashboard.Name(),
		TickPath:        automationworker.TickPath,
		Topics:          pubsub.Topics(),
		Subscriptions:   map[string]DeployedSubscription{},
		TTL:             map[string]string{},
	}
	byService := map[string]string{}
	for _, fn := range Functions() {
		df := DeployedFunction{EntryPoint: fn.EntryPoint, Service: fn.Service, Public: fn.Public}
		switch {
		case fn == Dashboard:
			df.Role = "dashboard"
		case fn.Service == "":
			df.Role = "worker"
			d.WorkerFunction = fn.Name()
		default:
			df.Role = "api"
			streaming, err := hasStreams(fn.Service)
			if err != nil {
				return Deployment{}, err
			}
			df.Streaming = streaming
			byService[fn.Service] = fn.Name()
			d.PathRules = append(d.PathRules, PathRule{Paths: []string{httpapi.RPCPrefix + "/" + fn.Service + "/*"}, Function: fn.Name()})
		}
		d.Functions[fn.Name()] = df
	}
	for _, r := range plainRoutePaths {
		name, ok := byService[r.service]
		if !ok {
			return Deployment{}, fmt.Errorf("route %s: %s has no function", r.path, r.service)
		}
		d.PathRules = append(d.PathRules, PathRule{Paths: []string{r.path}, Function: name})
	}
	d.AppsFunction = byService[appv1connect.SessionServiceName]
	for _, s := range pubsub.Subscriptions() {
		ds := DeployedSubscription{
			Topic: s.Config.Topic, AckDeadlineSeconds: int(s.Config.AckDeadline / time.Second),
			DeadLetterTopic: s.Config.DeadLetterTopic, MaxDeliveryAttempts: s.Config.MaxDeliveryAttempts,
		}
		if s.Config.MinBackoff > 0 || s.Config.MaxBackoff > 0 {
			ds.MinimumBackoff, ds.MaximumBackoff = seconds(s.Config.MinBackoff), seconds(s.Config.MaxBackoff)
		}
		if s.Name == pubsub.WorkerSubscription(s.Config.Topic) {
			path, ok := pushPaths[s.Config.Topic]
			if !ok {
				return Deployment{}, fmt.Errorf("subscription %s: no worker endpoint to push to", s.Name)
			}
			ds.PushPath = path
		}
		d.Subscriptions[s.Name] = ds
	}
	for _, e := range store.ExpiringCollections() {
		if f, ok := d.TTL[e.Collection]; ok && f != e.Field {
			return Deployment{}, fmt.Errorf("collection %s expires at both %s and %s: Firestore keeps one TTL field per collection", e.Collection, f, e.Field)
		}
		d.TTL[e.Collection] = e.Field
	}
	return d, nil
}

// seconds is d as a protobuf Duration's JSON, which Terraform's Pub/Sub durations take.
func seconds(d time.Duration) string { return fmt.Sprintf("%ds", int(d/time.Second)) }

// hasStreams reports whether service has a client or server streaming method.
func hasStreams(service string) (bool, error) {
	desc, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return false, fmt.Errorf("find %s: %w", service, err)
	}
	sd, ok := desc.(protoreflect.ServiceDescriptor)
	if !ok {
		return false, fmt.Errorf("%s is not a service", service)
	}
	for i := range sd.Methods().Len() {
		if m := sd.Methods().Get(i); m.IsStreamingClient() || m.IsStreamingServer() {
			return true, nil
		}
	}
	return false, nil
}

// TerraformJSON is Deploy as deploy/hangar.gen.tf.json: one Terraform local, hangar.
func TerraformJSON() ([]byte, error) {
	d, err := Deploy()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(map[string]any{
		"//":     "Generated by `go run ./cmd/hangar functions --terraform`: what deploy/ takes from the code. Do not edit; TestDeployMatchesCode fails when it is stale.",
		"locals": map[string]any{"hangar": d},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the deployment: %w", err)
	}
	return append(out, '\n'), nil
}

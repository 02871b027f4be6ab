// Package hangar is the Cloud Run functions entry point: one HTTP function per built public
// service and the automation worker (composition.Functions), registered with the Functions Framework
// for Go under their entry points (TaskService, ProfileService, …, AutomationWorker). `make
// deploy` deploys each from this module; what they serve is composed by composition.OpenFromEnv, the
// same composition `hangar dev` runs.
package hangar

import (
	"cmp"
	"context"
	"log/slog"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/platform/telemetry"
)

// instance is this Cloud Run instance's API, opened from the environment on first use.
// Its logs are Cloud Logging's structured JSON on stdout, and its traces and metrics go to
// OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/observability.md).
var instance = func() *composition.Instance {
	log := telemetry.NewLogger(os.Stdout, slog.LevelInfo, cmp.Or(os.Getenv("HANGAR_PROJECT"), os.Getenv("GOOGLE_CLOUD_PROJECT")))
	slog.SetDefault(log)
	if _, err := telemetry.Setup(context.Background(), telemetry.Options{Service: "hangar-api"}); err != nil {
		// Serving without traces beats not serving.
		log.Error("telemetry", "err", err)
	}
	return composition.NewInstance(func(ctx context.Context) (*composition.API, error) {
		a, _, err := composition.OpenFromEnv(ctx, composition.Options{Log: log, BehindProxy: true})
		return a, err
	}, log)
}()

func init() {
	for _, fn := range composition.Functions() {
		functions.HTTP(fn.EntryPoint, instance.Handler(fn))
	}
}

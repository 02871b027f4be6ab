// Package hangar is the Cloud Run functions entry point: one HTTP function per built public
// service and the automation worker (composition.Functions), registered with the Functions Framework
// for Go under their entry points (TaskService, ProfileService, …, AutomationWorker). `make
// deploy` deploys each from this module; what they serve is composed by composition.OpenFromEnv, the
// same composition `hangar dev` runs.
package hangar

import (
	"context"
	"log/slog"
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"github.com/hangar-dev/hangar/composition"
)

// instance is this Cloud Run instance's API, opened from the environment on first use.
var instance = func() *composition.Instance {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil))
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

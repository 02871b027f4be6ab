// Package imagesvc serves ImageService: the images sessions start from and the registries their
// pulls sign in to. registries.go holds the registry methods, over the registry store
// (records/registries); the others answer unimplemented until the image pipeline serves them.
package imagesvc

import (
	"log/slog"

	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/records/registries"
)

// Service implements ImageService.
type Service struct {
	appv1connect.UnimplementedImageServiceHandler
	registries *registries.Store
	log        *slog.Logger
}

var _ appv1connect.ImageServiceHandler = (*Service)(nil)

// New returns the service over the registry store; log takes the audit lines of registry changes.
func New(regs *registries.Store, log *slog.Logger) *Service {
	return &Service{registries: regs, log: log}
}

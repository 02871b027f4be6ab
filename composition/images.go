package composition

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/registries"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// imagesService wires ImageService: its registries wherever there is a keyset (passwords are
// sealed), and its images with the enable-job worker where jobs can run (hosts through a bucket
// and sealer, and Pub/Sub to carry the jobs). It returns the service sessions resolve images
// with only in the second case; else sessions take image_uri as a plain OCI reference, and the
// methods that start jobs answer failed_precondition naming what is missing.
func (a *API) imagesService(d Deps, opts connect.HandlerOption, add func(string, http.Handler), hosts *hostclient.Pool, secretStore *secrets.Store) *imagesvc.Service {
	if d.Sealer == nil {
		add(appv1connect.NewImageServiceHandler(appv1connect.UnimplementedImageServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("images and registries are not kept here: set HANGAR_SEAL_KEYSET"))))
		return nil
	}
	// Tags resolve with the credentials hosts pull with: the registries an admin added.
	regs := registries.New(d.DB, d.Sealer, d.Clock.Now)
	deps := imagesvc.Deps{
		DB: d.DB, Clock: d.Clock, Registries: d.Config.Registries, RegistryStore: regs,
		Keychain: registryauth.New(regs, registryauth.Options{HTTP: d.Config.Registries.Client(egress.MaxRedirects, nil)}),
		Log:      d.Log,
	}
	if secretStore != nil {
		deps.Secrets = secretStore
		deps.Acting = func(ctx context.Context, userID string) (auth.Principal, error) {
			return a.keys.Acting(ctx, userID, "image")
		}
	}
	jobs := hosts != nil && d.PubSub != nil
	if jobs {
		deps.Hosts, deps.Queue = hosts, imagesvc.PubSubQueue{PubSub: d.PubSub}
	}
	svc := imagesvc.New(deps)
	add(appv1connect.NewImageServiceHandler(svc, opts))
	if !jobs {
		return nil
	}
	a.images = svc
	host, _ := os.Hostname()
	a.imageWorker = svc.Worker(imagesvc.WorkerOptions{Name: fmt.Sprintf("%s/%d", host, os.Getpid()), Log: d.Log})
	return svc
}

// Images is ImageService, nil when images are not enabled here.
func (a *API) Images() *imagesvc.Service { return a.images }

// ImageWorker is the worker that advances image enable jobs: `hangar dev` runs it in process;
// nil when images are not enabled here.
func (a *API) ImageWorker() *imagesvc.Worker { return a.imageWorker }

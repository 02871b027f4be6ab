package api

import (
	"fmt"
	"net/http"
	"os"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/functions/imagesvc"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/records/registries"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/records/secrets"
	"github.com/hangar-dev/hangar/sandboxhosts/hostclient"
)

// imagesService wires ImageService and its enable-job worker when the API has what jobs need
// (hosts through a bucket and sealer, and Pub/Sub to carry the jobs); else it answers
// unavailable, naming what to configure, and sessions take image_uri as a plain OCI reference.
func (a *API) imagesService(d Deps, opts connect.HandlerOption, add func(string, http.Handler), hosts *hostclient.Pool, secretStore *secrets.Store) *imagesvc.Service {
	if hosts == nil || d.PubSub == nil {
		add(appv1connect.NewImageServiceHandler(appv1connect.UnimplementedImageServiceHandler{}, opts,
			connect.WithInterceptors(unavailable("images are not enabled here: set HANGAR_BLOB_URL, HANGAR_SEAL_KEYSET, HANGAR_HOST_TOKEN and give the API Pub/Sub"))))
		return nil
	}
	// Tags resolve with the credentials hosts pull with: the registries an admin added.
	regs := registries.New(d.DB, d.Sealer, d.Clock.Now)
	deps := imagesvc.Deps{
		DB: d.DB, Hosts: hosts, Queue: imagesvc.PubSubQueue{PubSub: d.PubSub}, Clock: d.Clock,
		Registries: d.Config.Registries, RegistryStore: regs,
		Keychain: registryauth.New(regs, registryauth.Options{HTTP: d.Config.Registries.Client(egress.MaxRedirects, nil)}),
		Log:      d.Log,
	}
	if secretStore != nil {
		deps.Secrets = secretStore
	}
	svc := imagesvc.New(deps)
	a.images = svc
	host, _ := os.Hostname()
	a.imageWorker = svc.Worker(imagesvc.WorkerOptions{Name: fmt.Sprintf("%s/%d", host, os.Getpid()), Log: d.Log})
	add(appv1connect.NewImageServiceHandler(svc, opts))
	return svc
}

// Images is ImageService, nil when images are not enabled here.
func (a *API) Images() *imagesvc.Service { return a.images }

// ImageWorker is the worker that advances image enable jobs: `hangar dev` runs it in process;
// nil when images are not enabled here.
func (a *API) ImageWorker() *imagesvc.Worker { return a.imageWorker }

package composition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"cloud.google.com/go/firestore"
	"github.com/google/go-containerregistry/pkg/authn"
	"gocloud.dev/blob"

	"github.com/hangar-dev/hangar/harnesses/builtin"
	"github.com/hangar-dev/hangar/harnesses/harnesscatalog"
	"github.com/hangar-dev/hangar/platform/bucket"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/pubsub"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/records/registryauth"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// Options are what an entry point adds to the config; production sets only Log.
type Options struct {
	Log   *slog.Logger
	Clock clock.Clock
	// HarnessCacheDir keeps compiled harness plugins across restarts ("": in memory only).
	HarnessCacheDir string
	// JSCacheDir is Deps.JSCacheDir.
	JSCacheDir string
	// BehindProxy is Deps.BehindProxy: true for the Cloud Run functions.
	BehindProxy bool
}

// Resources are the connections the config names, opened by OpenResources: the one place every
// entry point (the Cloud Run functions, `hangar dev`, `hangar host`) opens them, so none of them
// can forget one.
type Resources struct {
	Config config.Config
	DB     *firestore.Client
	// PubSub is nil when it cannot be opened: webhooks and automation runs then answer
	// unavailable and the rest serves.
	PubSub *pubsub.Client
	// Bucket is nil without HANGAR_BLOB_URL, Sealer without HANGAR_SEAL_KEYSET, Harnesses
	// without a bucket: sessions (and what needs them) then answer unavailable, naming them.
	Bucket    *blob.Bucket
	Sealer    *seal.Sealer
	Harnesses *harnesscatalog.Catalog
}

// OpenResources opens Firestore, Pub/Sub, the blob bucket, the sealer and the harness catalog
// as cfg says. A setting that is present but wrong (an unreadable keyset, a bad bucket URL) is
// an error, not a service quietly missing.
func OpenResources(ctx context.Context, cfg config.Config, o Options) (*Resources, error) {
	o = o.withDefaults()
	r := &Resources{Config: cfg}
	var err error
	if r.DB, err = store.Open(ctx, cfg.Project); err != nil {
		return nil, fmt.Errorf("open firestore: %w", err)
	}
	if r.PubSub, err = pubsub.Open(ctx, cfg.Project); err != nil {
		o.Log.Error("open pubsub: webhooks and automation runs answer unavailable", "err", err)
	}
	if len(cfg.SealKeyset) > 0 {
		if r.Sealer, err = seal.FromKeysetJSON(cfg.SealKeyset); err != nil {
			return nil, errors.Join(fmt.Errorf("HANGAR_SEAL_KEYSET: %w", err), r.Close())
		}
	}
	if cfg.BlobURL != "" {
		if r.Bucket, err = bucket.Open(ctx, cfg.BlobURL); err != nil {
			return nil, errors.Join(fmt.Errorf("HANGAR_BLOB_URL: %w", err), r.Close())
		}
		if r.Harnesses, err = OpenHarnesses(ctx, r.DB, r.Bucket, r.Sealer, cfg, o.Clock, o.HarnessCacheDir); err != nil {
			return nil, errors.Join(err, r.Close())
		}
	}
	return r, nil
}

// OpenHarnesses is the harness catalog over db and b: the embedded built-in plugins and the
// uploaded ones (pulled only from cfg.Registries, signed in with the registries an admin added,
// as image pulls are; anonymously without a sealer), compiled into cacheDir ("": in memory).
func OpenHarnesses(ctx context.Context, db *firestore.Client, b *blob.Bucket, sealer *seal.Sealer, cfg config.Config, c clock.Clock, cacheDir string) (*harnesscatalog.Catalog, error) {
	rt, err := wasm.NewRuntime(ctx, wasm.Options{CacheDir: cacheDir})
	if err != nil {
		return nil, fmt.Errorf("harness plugin runtime: %w", err)
	}
	var keychain authn.Keychain
	if sealer != nil {
		keychain = registryauth.ForDeployment(db, sealer, cfg.Registries)
	}
	return harnesscatalog.New(db, b, rt, builtin.Modules(), cfg.Registries, keychain, c.Now), nil
}

// Deps are the services' dependencies over r.
func (r *Resources) Deps(o Options) Deps {
	o = o.withDefaults()
	return Deps{
		DB: r.DB, Config: r.Config, Clock: o.Clock, Log: o.Log, Bucket: r.Bucket, Sealer: r.Sealer,
		DefaultImage: r.Config.DefaultImage, Harnesses: r.Harnesses, PubSub: r.PubSub, JSCacheDir: o.JSCacheDir,
		BehindProxy: o.BehindProxy,
	}
}

// Close closes what OpenResources opened.
func (r *Resources) Close() error {
	var errs []error
	if r.Bucket != nil {
		errs = append(errs, r.Bucket.Close())
	}
	if r.PubSub != nil {
		errs = append(errs, r.PubSub.Close())
	}
	if r.DB != nil {
		errs = append(errs, r.DB.Close())
	}
	return errors.Join(errs...)
}

// Open opens everything cfg names and builds the API over it: the one composition of the
// system. Close the Resources when the API is done.
func Open(ctx context.Context, cfg config.Config, o Options) (*API, *Resources, error) {
	r, err := OpenResources(ctx, cfg, o)
	if err != nil {
		return nil, nil, err
	}
	return New(r.Deps(o)), r, nil
}

// OpenFromEnv is Open with the configuration in the environment (config.FromEnv).
func OpenFromEnv(ctx context.Context, o Options) (*API, *Resources, error) {
	cfg, err := config.FromEnv()
	if err != nil {
		return nil, nil, err
	}
	return Open(ctx, cfg, o)
}

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	return o
}

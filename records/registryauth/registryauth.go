// Package registryauth is Hangar's one credential resolver for image pulls: a go-containerregistry
// authn.Keychain over the registry store (records/registries), resolving by registry host. The
// sandbox hosts pull sessions' images with it and the image enable jobs resolve and pull with it,
// so every pull of the deployment signs in the same way, wherever it runs.
//
// It runs in the process that pulls (a sandbox host, an enable worker), never in a sandbox: the
// password is opened and the cloud tokens are minted there, and what a sandbox later sees is the
// unpacked image, not how it was fetched.
//
// By kind: static answers the stored username and password; anonymous and hosts with no record
// answer no credentials (the docker config of the machine is not consulted, so a pull works the
// same on every host); workload_identity mints a Google access token for the service account
// through the IAM Credentials API (generateAccessToken, with the process's own Google
// credentials) and answers it as Artifact Registry expects (user oauth2accesstoken);
// cloud_registry assumes the AWS role with STS (when one is named) and answers ECR's
// GetAuthorizationToken. Minted tokens are kept until shortly before they expire; store reads are
// kept for Options.Recheck, so a registry deleted or re-added by another process takes effect
// within it, and until this process adds or deletes a registry (registries.Generation), so an
// admin's fix through this process's API is used by the next pull.
package registryauth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/oauth2/google"
	"golang.org/x/sync/singleflight"
	"google.golang.org/api/iamcredentials/v1"
	"google.golang.org/api/option"

	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/records/registries"
)

// Options tune a Keychain; the zero value serves production.
type Options struct {
	// Google are options of the IAM Credentials client that mints workload_identity tokens
	// (default: the process's Application Default Credentials and Google's endpoint); tests
	// point it at a loopback fake with option.WithEndpoint and option.WithoutAuthentication.
	Google []option.ClientOption
	// AWS is the base AWS configuration that cloud_registry starts from: the credentials that
	// assume the role, or that ask ECR directly (default: the SDK's default chain, loaded at
	// first use). Its region is used for an ECR host whose name does not say one.
	AWS *aws.Config
	// STSEndpoint and ECREndpoint replace the services' endpoints (loopback fakes in tests).
	STSEndpoint, ECREndpoint string
	// HTTP carries the AWS calls when AWS does not set a client (default: the SDK's own).
	HTTP *http.Client
	// Recheck is how long a store read is reused (default 5 s): long enough that the many requests
	// of one pull read the store once, short enough that an admin who adds a registry after a
	// refused pull can retry within seconds.
	Recheck time.Duration
	Clock   clock.Clock
	// Log takes a line per minted token (default slog.Default()).
	Log *slog.Logger
}

// Keychain resolves a registry host to the credentials the store says to use there.
type Keychain struct {
	store *registries.Store
	opts  Options

	flight singleflight.Group
	mu     sync.Mutex
	// records holds store reads by host; tokens holds minted tokens by registry id, so a
	// registry deleted and added again never reuses the old one's token.
	records map[string]cached[found]
	tokens  map[string]cached[authn.AuthConfig]

	awsOnce sync.Once
	awsBase aws.Config
	awsErr  error
}

type found struct {
	creds registries.Credentials
	ok    bool
	// gen is registries.Generation before the read: a change in this process since makes the
	// read stale, even one made while it was under way.
	gen uint64
}

type cached[T any] struct {
	v     T
	until time.Time
}

// maxCached is how many entries a cache holds before its expired ones are dropped: image
// references name any host a user likes, and the hosts with no registry are cached too.
const maxCached = 1024

// put stores v under key until until, first dropping what expired by now when m is full.
func put[T any](m map[string]cached[T], key string, v T, until, now time.Time) {
	if len(m) >= maxCached {
		for k, c := range m {
			if !now.Before(c.until) {
				delete(m, k)
			}
		}
	}
	m[key] = cached[T]{v: v, until: until}
}

// tokenMargin is how long before its expiry a minted token is replaced: a pull that starts
// with it must not see it expire halfway.
const tokenMargin = 5 * time.Minute

// New returns the keychain over store.
func New(store *registries.Store, opts Options) *Keychain {
	if opts.Recheck <= 0 {
		opts.Recheck = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	return &Keychain{store: store, opts: opts, records: map[string]cached[found]{}, tokens: map[string]cached[authn.AuthConfig]{}}
}

// ForDeployment is the keychain a process of the deployment pulls with: the registry store over
// db, opened with sealer, its AWS calls dialled through policy (the operator's
// HANGAR_PRIVATE_REGISTRIES). Sandbox hosts and the image enable jobs both use it.
func ForDeployment(db *firestore.Client, sealer *seal.Sealer, policy egress.Policy) *Keychain {
	return New(registries.New(db, sealer, time.Now), Options{HTTP: policy.Client(egress.MaxRedirects, nil)})
}

var _ authn.ContextKeychain = (*Keychain)(nil)

// Resolve implements authn.Keychain.
func (k *Keychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	return k.ResolveContext(context.Background(), r)
}

// ResolveContext implements authn.ContextKeychain. The authenticator it returns looks the host
// up each time it is asked (from the caches), because go-containerregistry keeps it for as long
// as it keeps a repository's transport: a token that expires or a registry an admin changes is
// picked up on the next request for a registry token, not never.
func (k *Keychain) ResolveContext(_ context.Context, r authn.Resource) (authn.Authenticator, error) {
	return hostAuth{k: k, host: strings.ToLower(r.RegistryStr())}, nil
}

type hostAuth struct {
	k    *Keychain
	host string
}

func (a hostAuth) Authorization() (*authn.AuthConfig, error) {
	return a.AuthorizationContext(context.Background())
}

func (a hostAuth) AuthorizationContext(ctx context.Context) (*authn.AuthConfig, error) {
	cfg, err := a.k.AuthConfig(ctx, a.host)
	if err != nil {
		return nil, err
	}
	return &cfg, nil
}

// AuthConfig returns the credentials to send to the registry at host; an empty AuthConfig means
// none. A failure names the registry and its kind, never a secret.
func (k *Keychain) AuthConfig(ctx context.Context, host string) (authn.AuthConfig, error) {
	l, err := k.lookup(ctx, host)
	if err != nil {
		return authn.AuthConfig{}, err
	}
	if !l.ok {
		return authn.AuthConfig{}, nil
	}
	c := l.creds
	switch c.Kind {
	case registries.Static:
		return authn.AuthConfig{Username: c.Principal, Password: c.Password}, nil
	case registries.Anonymous:
		return authn.AuthConfig{}, nil
	case registries.WorkloadIdentity, registries.CloudRegistry:
		return k.token(ctx, c)
	}
	return authn.AuthConfig{}, fmt.Errorf("registry %s: unknown auth kind %q", host, c.Kind)
}

// lookup reads host's record, reusing a read younger than Recheck that no registry change of
// this process has made stale.
func (k *Keychain) lookup(ctx context.Context, host string) (found, error) {
	now := k.opts.Clock.Now()
	gen := registries.Generation()
	k.mu.Lock()
	c, hit := k.records[host]
	k.mu.Unlock()
	if hit && now.Before(c.until) && c.v.gen == gen {
		return c.v, nil
	}
	// The generation is in the flight's key: a lookup after a change never joins a read that
	// began before it.
	v, err, _ := k.flight.Do(fmt.Sprintf("record %d %s", gen, host), func() (any, error) {
		creds, ok, err := k.store.Credentials(ctx, host)
		if err != nil {
			return found{}, fmt.Errorf("registry %s: read its credentials: %w", host, err)
		}
		l := found{creds: creds, ok: ok, gen: gen}
		k.mu.Lock()
		put(k.records, host, l, now.Add(k.opts.Recheck), now)
		k.mu.Unlock()
		return l, nil
	})
	if err != nil {
		return found{}, err
	}
	return v.(found), nil
}

// token returns the registry's minted token, minting one when none is held or it is about to
// expire; concurrent pulls wait for one mint.
func (k *Keychain) token(ctx context.Context, c registries.Credentials) (authn.AuthConfig, error) {
	k.mu.Lock()
	t, hit := k.tokens[c.ID]
	k.mu.Unlock()
	if hit && k.opts.Clock.Now().Before(t.until) {
		return t.v, nil
	}
	v, err, _ := k.flight.Do("token "+c.ID, func() (any, error) {
		var cfg authn.AuthConfig
		var expiry time.Time
		var err error
		if c.Kind == registries.WorkloadIdentity {
			cfg, expiry, err = k.googleToken(ctx, c.Principal)
		} else {
			cfg, expiry, err = k.ecrToken(ctx, c.Host, c.Principal)
		}
		if err != nil {
			as := c.Principal
			if as == "" {
				as = "this process's own identity"
			}
			return nil, &egress.SignInError{Err: fmt.Errorf("registry %s (%s as %s): %w", c.Host, c.Kind, as, err)}
		}
		k.mu.Lock()
		put(k.tokens, c.ID, cfg, expiry.Add(-tokenMargin), k.opts.Clock.Now())
		k.mu.Unlock()
		k.opts.Log.Info("registry token minted", "host", c.Host, "kind", c.Kind, "principal", c.Principal, "expires", expiry)
		return cfg, nil
	})
	if err != nil {
		return authn.AuthConfig{}, err
	}
	return v.(authn.AuthConfig), nil
}

// cloudPlatform is the scope Artifact Registry's tokens need.
const cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"

// googleToken mints an access token of the service account sa by impersonation, or of the
// process's own credentials when sa is empty.
func (k *Keychain) googleToken(ctx context.Context, sa string) (authn.AuthConfig, time.Time, error) {
	if sa == "" {
		ts, err := google.DefaultTokenSource(ctx, cloudPlatform)
		if err != nil {
			return authn.AuthConfig{}, time.Time{}, fmt.Errorf("find Google credentials: %w", err)
		}
		tok, err := ts.Token()
		if err != nil {
			return authn.AuthConfig{}, time.Time{}, fmt.Errorf("get a Google access token: %w", err)
		}
		return googleAuth(tok.AccessToken), tok.Expiry, nil
	}
	svc, err := iamcredentials.NewService(ctx, k.opts.Google...)
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, fmt.Errorf("IAM credentials client: %w", err)
	}
	resp, err := svc.Projects.ServiceAccounts.GenerateAccessToken("projects/-/serviceAccounts/"+sa,
		&iamcredentials.GenerateAccessTokenRequest{Scope: []string{cloudPlatform}, Lifetime: "3600s"}).Context(ctx).Do()
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, fmt.Errorf("impersonate: %w", err)
	}
	expiry, err := time.Parse(time.RFC3339, resp.ExpireTime)
	if err != nil || resp.AccessToken == "" {
		return authn.AuthConfig{}, time.Time{}, errors.New("impersonate: the IAM credentials answer has no token or expiry")
	}
	return googleAuth(resp.AccessToken), expiry, nil
}

// googleAuth is how Artifact Registry and gcr.io take an access token.
func googleAuth(token string) authn.AuthConfig {
	return authn.AuthConfig{Username: "oauth2accesstoken", Password: token}
}

// ecrHost is an ECR registry host: the account, then the region.
var ecrHost = regexp.MustCompile(`^[0-9]{12}\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// roleSession names Hangar's sessions in the role's CloudTrail.
const roleSession = "hangar-registry-pull"

// ecrToken asks ECR for an authorization token for host, as the role when one is named.
func (k *Keychain) ecrToken(ctx context.Context, host, role string) (authn.AuthConfig, time.Time, error) {
	cfg, err := k.awsConfig(ctx)
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, err
	}
	if m := ecrHost.FindStringSubmatch(host); m != nil {
		cfg.Region = m[1]
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if role != "" {
		client := sts.NewFromConfig(cfg, func(o *sts.Options) {
			if k.opts.STSEndpoint != "" {
				o.BaseEndpoint = aws.String(k.opts.STSEndpoint)
			}
		})
		cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(client, role, func(o *stscreds.AssumeRoleOptions) {
			o.RoleSessionName = roleSession
		}))
	}
	client := ecr.NewFromConfig(cfg, func(o *ecr.Options) {
		if k.opts.ECREndpoint != "" {
			o.BaseEndpoint = aws.String(k.opts.ECREndpoint)
		}
	})
	out, err := client.GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return authn.AuthConfig{}, time.Time{}, fmt.Errorf("ECR authorization token: %w", err)
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil || out.AuthorizationData[0].ExpiresAt == nil {
		return authn.AuthConfig{}, time.Time{}, errors.New("ECR authorization token: the answer has no token or expiry")
	}
	d := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
	user, pass, ok := strings.Cut(string(raw), ":")
	if err != nil || !ok {
		return authn.AuthConfig{}, time.Time{}, errors.New("ECR authorization token: not base64 of user:password")
	}
	return authn.AuthConfig{Username: user, Password: pass}, *d.ExpiresAt, nil
}

// awsConfig is the base AWS configuration, loaded once.
func (k *Keychain) awsConfig(ctx context.Context) (aws.Config, error) {
	k.awsOnce.Do(func() {
		if k.opts.AWS != nil {
			k.awsBase = k.opts.AWS.Copy()
		} else {
			k.awsBase, k.awsErr = awsconfig.LoadDefaultConfig(ctx)
		}
		if k.awsBase.HTTPClient == nil && k.opts.HTTP != nil {
			k.awsBase.HTTPClient = k.opts.HTTP
		}
	})
	if k.awsErr != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", k.awsErr)
	}
	return k.awsBase.Copy(), nil
}

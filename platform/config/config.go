// Package config reads Hangar's settings from the environment, once, into one struct: addresses,
// the Google Cloud project, and every limit the API enforces, so that all of them live in one
// place (and in docs/configuration.md's table). Each setting's variable and default are its
// field's `env` tag, decoded by github.com/sethvargo/go-envconfig; a tag's `min` is the least
// whole number the variable takes (1 without it). Settings the environment cannot change have
// FIXED_ keys, which are never looked up.
package config

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/paging"
)

// Config is everything a function needs to know about its deployment.
type Config struct {
	// Project is the Google Cloud project whose Firestore and Pub/Sub hold Hangar's data.
	Project string `env:"HANGAR_PROJECT"`
	// Limits bounds every list, request and cache.
	Limits Limits
	// Host is the sandbox host's behaviour.
	Host Host
	// HostToken authenticates the functions to the sandbox hosts' internal API.
	HostToken string `env:"HANGAR_HOST_TOKEN"`
	// BlobURL is the gocloud.dev bucket of snapshots and artifacts, e.g. gs://bucket or
	// file:///dir.
	BlobURL string `env:"HANGAR_BLOB_URL"`
	// SealKeyset is the Tink AEAD keyset (JSON) that seals secrets kept in records.
	SealKeyset []byte
	// DefaultImage is the image of sessions created without image_uri ("": image_uri is
	// required); `hangar dev` sets its own dev image.
	DefaultImage string `env:"HANGAR_DEFAULT_IMAGE"`
	// ModelRouters are the model routers the deployment offers, from HANGAR_MODEL_ROUTERS (a
	// JSON list) or HANGAR_MODEL_ROUTERS_FILE (a JSON file holding one); none by default.
	ModelRouters []ModelRouter
	// AutomationHTTPHosts are the hosts automation http blocks may call: exact names or
	// "*.suffix" patterns, from HANGAR_AUTOMATION_HTTP_HOSTS (comma-separated); none by default.
	AutomationHTTPHosts []string
	// Egress is what every outbound request of Hangar may reach beyond public addresses (host
	// names, "*.suffix", IP addresses, CIDR prefixes), from HANGAR_EGRESS_ALLOW; none by default.
	Egress egress.Policy
	// Registries is what image and plugin pulls may reach: Egress and the private registries of
	// HANGAR_PRIVATE_REGISTRIES (same entry forms).
	Registries egress.Policy
	// SignIn is dashboard sign-in and `hangar login` (functions/signin).
	SignIn SignIn
	// Apps is where session apps get origins of their own (functions/sessions).
	Apps Apps
	// OAuthProviders is a JSON list of OAuth providers added to (or replacing by id) the
	// built-in ones OAuthCredentialService signs in to; functions/oauthcreds reads it.
	OAuthProviders string `env:"HANGAR_OAUTH_PROVIDERS"`
}

// Apps serves each session app on an origin of its own, a subdomain of Domain, so that one
// app's pages can script neither the dashboard nor another app.
type Apps struct {
	// Domain is the apps' parent domain, host[:port] ("apps.hangar.example.com",
	// "apps.localhost:8080"): app web of a session is served at web-<session>.<Domain>, with
	// PublicURL's scheme. Empty: apps are served under the API's origin only, sandboxed.
	// `hangar dev` sets apps.localhost:<its port>.
	Domain string `env:"HANGAR_APPS_DOMAIN"`
	// CookieTTL is how long an app's own sign-in cookie lasts.
	CookieTTL time.Duration `env:"HANGAR_APPS_COOKIE_TTL, default=8h"`
}

// SignIn configures /api/auth: OpenID Connect sign-in to the dashboard, its session cookies, and
// the device authorization grant of `hangar login`.
type SignIn struct {
	// PublicURL is where browsers reach Hangar (scheme://host[:port]): the OIDC redirect URI is
	// PublicURL/api/auth/callback, and cookie-authenticated calls must come from its origin.
	// `hangar dev` sets its own address.
	PublicURL string `env:"HANGAR_PUBLIC_URL"`
	// OIDCIssuer, OIDCClientID and OIDCClientSecret name the OpenID Connect provider; the client
	// secret is the org secret of that name (never the secret itself). Without an issuer there is
	// no OIDC sign-in.
	OIDCIssuer       string `env:"HANGAR_OIDC_ISSUER"`
	OIDCClientID     string `env:"HANGAR_OIDC_CLIENT_ID"`
	OIDCClientSecret string `env:"HANGAR_OIDC_CLIENT_SECRET, default=oidc-client-secret"`
	// AllowedDomains are the email domains that may sign in (none: nobody may).
	AllowedDomains []string `env:"HANGAR_OIDC_ALLOWED_DOMAINS"`
	// AdminEmail is the first admin: signing in with it gives an admin session.
	AdminEmail string `env:"HANGAR_ADMIN_EMAIL"`
	// SessionTTL is how long a dashboard session lasts.
	SessionTTL time.Duration `env:"HANGAR_SESSION_TTL, default=12h"`
	// DeviceCodeTTL is how long a `hangar login` code may wait for approval; DeviceInterval is
	// the least time between two polls of it (RFC 8628's interval).
	DeviceCodeTTL  time.Duration `env:"FIXED_DEVICE_CODE_TTL, default=10m"`
	DeviceInterval time.Duration `env:"FIXED_DEVICE_INTERVAL, default=5s"`
	// DevSignIn enables POST /api/auth/dev, which signs in DevAdminEmail without a provider from
	// loopback only; only `hangar dev` sets it.
	DevSignIn     bool
	DevAdminEmail string
}

// Limits are the API's bounds. Each has a default in its tag; those with a HANGAR_ variable can
// be changed by the environment.
type Limits struct {
	Tasks    paging.Bounds `env:"FIXED_TASKS_PAGE_SIZE, default=50/200"`
	Profiles paging.Bounds `env:"FIXED_PROFILES_PAGE_SIZE, default=100/500"`
	ApiKeys  paging.Bounds `env:"FIXED_API_KEYS_PAGE_SIZE, default=100/1000"`
	// MaxRequestBytes caps the size of one request message.
	MaxRequestBytes int `env:"HANGAR_MAX_REQUEST_BYTES, default=4194304"`
	// AuthCacheTTL is how long a verified key is trusted without reading Firestore again; a key
	// revoked on another instance stops working within this time, on this one at once.
	AuthCacheTTL time.Duration `env:"HANGAR_AUTH_CACHE_TTL, default=10s"`
	// MaxProfileEnvVars, MaxProfileListItems and MaxValueBytes bound a profile's contents.
	MaxProfileEnvVars   int `env:"FIXED_MAX_PROFILE_ENV_VARS, default=200"`
	MaxProfileListItems int `env:"FIXED_MAX_PROFILE_LIST_ITEMS, default=100"`
	MaxValueBytes       int `env:"FIXED_MAX_VALUE_BYTES, default=32768"`
	// MaxPromptBytes bounds a task's prompt.
	MaxPromptBytes int `env:"HANGAR_MAX_PROMPT_BYTES, default=262144"`
	// MaxToolResultBytes bounds a client tool result (CompleteToolCall's result_json); it stays
	// under what one supervisor request carries to a harness's stdin.
	MaxToolResultBytes int `env:"FIXED_MAX_TOOL_RESULT_BYTES, default=262144"`
	// TaskTreeDepth bounds how deep a task tree grows, so an agent splitting work recursively
	// stops with a clear error instead of growing a tree nobody can read.
	TaskTreeDepth int `env:"FIXED_TASK_TREE_DEPTH, default=10"`
	// TaskDescendants bounds the descendants GetTask returns, oldest first.
	TaskDescendants int `env:"FIXED_TASK_DESCENDANTS, default=1000"`
	// TaskListOffset bounds how deep ListTasks pages go, as search APIs do: Firestore reads (and
	// bills) every task an offset skips.
	TaskListOffset int `env:"FIXED_TASK_LIST_OFFSET, default=10000"`
	// Sessions bounds ListSessions, which takes no paging: it returns the newest this many.
	Sessions int `env:"FIXED_SESSIONS, default=500"`
	// Events bounds ListSessionEvents and GetLog pages.
	Events paging.Bounds `env:"FIXED_EVENTS_PAGE_SIZE, default=100/1000"`
	// MaxSessionsPerUser caps one user's live sessions (those holding or getting a sandbox:
	// creating, running, idle, snapshotting, resuming), admins' too, so one user cannot take
	// every sandbox slot of the fleet.
	MaxSessionsPerUser int `env:"HANGAR_MAX_SESSIONS_PER_USER, default=8"`
	// MaxSessionEnvBytes bounds a session's secrets and harness_env together.
	MaxSessionEnvBytes int `env:"FIXED_MAX_SESSION_ENV_BYTES, default=65536"`
	// ExecTimeout is the default and the ceiling of an exec's timeout_secs.
	ExecTimeout TimeoutBounds `env:", prefix=HANGAR_EXEC_TIMEOUT_"`
	// MaxFileBytes caps one file written, read, copied or published as an artifact.
	MaxFileBytes int64 `env:"HANGAR_MAX_FILE_BYTES, default=1073741824"`
	// MaxShellsPerSession caps the interactive shells open at once in one session.
	MaxShellsPerSession int `env:"HANGAR_MAX_SHELLS_PER_SESSION, default=8"`
	// MaxAppConnsPerSession caps the connections open at once into one session's apps.
	MaxAppConnsPerSession int `env:"HANGAR_MAX_APP_CONNS_PER_SESSION, default=256"`
	// MaxCopyPaths bounds the paths of one CopyFiles.
	MaxCopyPaths int `env:"FIXED_MAX_COPY_PATHS, default=100"`
	// RouterCatalogTimeout, MaxRouterCatalogBytes and MaxRouterModels bound one refresh of a
	// model router's catalog: the upstream's time to answer, its answer's size, and the models
	// kept from it. OpenRouter's catalog is about 350 models and 1 MiB.
	RouterCatalogTimeout  time.Duration `env:"FIXED_ROUTER_CATALOG_TIMEOUT, default=30s"`
	MaxRouterCatalogBytes int64         `env:"FIXED_MAX_ROUTER_CATALOG_BYTES, default=16777216"`
	MaxRouterModels       int           `env:"FIXED_MAX_ROUTER_MODELS, default=5000"`
	// MaxSecretBytes caps one org secret's value and one OAuth credential bundle; MaxOrgSecrets
	// bounds how many org secrets exist, so ListOrgSecrets always shows them all. The defaults are
	// GCP Secret Manager's cap on a value and GitHub's on an organisation's secrets.
	MaxSecretBytes int `env:"HANGAR_MAX_SECRET_BYTES, default=65536"`
	MaxOrgSecrets  int `env:"FIXED_MAX_ORG_SECRETS, default=1000"`
	// Automations bounds automations and what they hold.
	Automations AutomationLimits
	// Webhooks bounds inbound webhook registrations and deliveries.
	Webhooks WebhookLimits
	// Reviews bounds pull-request reviews.
	Reviews ReviewLimits
}

// ReviewLimits bound pull-request reviews and say where GitHub's API is.
type ReviewLimits struct {
	// Page bounds ListReviews pages; ListScan is how many of the newest active passes it
	// filters (older ones are not listed).
	Page     paging.Bounds `env:"FIXED_REVIEWS_PAGE_SIZE, default=50/200"`
	ListScan int           `env:"FIXED_REVIEWS_LIST_SCAN, default=2000"`
	// AgentTimeout is how long a finder or verifier may take before its pass fails (and a fix
	// task before it is stopped); Poll is how often a pass waiting on an agent checks on it.
	AgentTimeout time.Duration `env:"HANGAR_REVIEW_AGENT_TIMEOUT, default=30m"`
	Poll         time.Duration `env:"FIXED_REVIEW_POLL, default=10s"`
	// Lease is how long a worker holds a pass between writes; Attempts is how many times a step
	// that failed transiently (GitHub 5xx, a rate limit, a lost connection) is tried before its
	// pass fails.
	Lease    time.Duration `env:"FIXED_REVIEW_LEASE, default=2m"`
	Attempts int           `env:"FIXED_REVIEW_ATTEMPTS, default=5"`
	// GitHubAPI is the base URL of GitHub's REST API (GitHub Enterprise Server: https://HOST/api/v3/).
	GitHubAPI string `env:"HANGAR_GITHUB_API_URL, default=https://api.github.com/"`
}

// WebhookLimits bound inbound webhooks.
type WebhookLimits struct {
	// Max bounds the registrations, so that ListWebhookRegistrations always shows them all.
	Max int `env:"FIXED_MAX_WEBHOOKS, default=500"`
	// MaxBodyBytes caps one delivery's body (413 beyond); it must stay under Pub/Sub's 10 MB
	// message, which carries the body. GitHub's event payloads are tens of KiB (its own cap is
	// 25 MB).
	MaxBodyBytes int `env:"HANGAR_MAX_WEBHOOK_BODY_BYTES, default=1048576"`
	// CacheTTL is how long an instance uses a registration (and its secret) without reading
	// Firestore again: a rotation or deletion made through another instance takes effect on
	// this one within it, on the same instance at once.
	CacheTTL time.Duration `env:"HANGAR_WEBHOOK_CACHE_TTL, default=5s"`
	// SignatureTolerance is how far a generic delivery's signed timestamp may be from now,
	// either way: an older one is refused as a possible replay. The default is Stripe's.
	SignatureTolerance time.Duration `env:"HANGAR_WEBHOOK_SIGNATURE_TOLERANCE, default=5m"`
}

// AutomationLimits bound automations.
type AutomationLimits struct {
	// Max bounds the non-archived automations, so that ListAutomations always shows them all.
	Max int `env:"FIXED_MAX_AUTOMATIONS, default=500"`
	// Versions bounds ListVersions, which returns the newest this many.
	Versions int `env:"FIXED_AUTOMATION_VERSIONS, default=100"`
	// NameLen and DescriptionLen are in characters; DefinitionBytes bounds a definition_json and
	// JSONBytes each of inputs_json, block_overrides_json and settings_json. Together they keep an
	// automation, which carries a copy of its current definition, well inside a Firestore
	// document's 1 MiB.
	NameLen         int `env:"FIXED_AUTOMATION_NAME_LEN, default=120"`
	DescriptionLen  int `env:"FIXED_AUTOMATION_DESCRIPTION_LEN, default=2000"`
	DefinitionBytes int `env:"FIXED_AUTOMATION_DEFINITION_BYTES, default=262144"`
	JSONBytes       int `env:"FIXED_AUTOMATION_JSON_BYTES, default=65536"`
	// Runs, Instances, Drops and Samples bound ListRuns, ListInstances, ListRecentDrops and
	// ListEventSamples; FilteredEvents bounds the filtered events ListRuns groups into windows.
	Runs           paging.Bounds `env:"FIXED_AUTOMATION_RUNS_PAGE_SIZE, default=50/500"`
	Instances      paging.Bounds `env:"FIXED_AUTOMATION_INSTANCES_PAGE_SIZE, default=50/500"`
	Drops          paging.Bounds `env:"FIXED_AUTOMATION_DROPS_PAGE_SIZE, default=50/500"`
	Samples        paging.Bounds `env:"FIXED_AUTOMATION_SAMPLES_PAGE_SIZE, default=20/100"`
	FilteredEvents int           `env:"FIXED_AUTOMATION_FILTERED_EVENTS, default=1000"`
	// Concurrency caps an automation's runs in progress when its settings name no limit.
	Concurrency int `env:"FIXED_AUTOMATION_CONCURRENCY, default=10"`
	// RunLease is how long a worker holds a run between writes: a run whose worker died is
	// taken over this long after its last write.
	RunLease time.Duration `env:"FIXED_AUTOMATION_RUN_LEASE, default=2m"`
	// TaskPoll is how often a task or prompt block that waits checks on what it waits for.
	TaskPoll time.Duration `env:"FIXED_AUTOMATION_TASK_POLL, default=10s"`
	// EvalsPerUser and Evals bound the scripts and expressions that EvalCode (and TestRender's
	// code blocks) evaluate at once on one instance, for one caller and in all: each may spin
	// a CPU until its deadline, so a caller past a bound is refused (resource_exhausted) rather
	// than queued, and one caller's endless loops do not hold everyone else's evaluations.
	EvalsPerUser int `env:"HANGAR_MAX_EVALS_PER_USER, default=2"`
	Evals        int `env:"HANGAR_MAX_EVALS, default=4"`
}

// TimeoutBounds is a timeout's default and ceiling, read from <prefix>DEFAULT and <prefix>MAX; its
// defaults are the exec timeout's, its only use.
type TimeoutBounds struct {
	Default time.Duration `env:"DEFAULT, default=10m"`
	Max     time.Duration `env:"MAX, default=2h"`
}

// Host is how a sandbox host runs.
type Host struct {
	// HeartbeatInterval is how often a host reports to the fleet; a host silent for HostTimeout
	// is lost, and its sessions become recoverable elsewhere.
	HeartbeatInterval time.Duration `env:"HANGAR_HEARTBEAT_INTERVAL, default=5s"`
	HostTimeout       time.Duration `env:"HANGAR_HOST_TIMEOUT, default=20s"`
	// Zone says where the host runs (a cloud zone, a rack), for FleetService to show.
	Zone string `env:"HANGAR_HOST_ZONE"`
	// IdleAfter moves a quiet running session to idle; EvictIdleAfter snapshots and evicts an
	// idle one (0: never).
	IdleAfter      time.Duration `env:"HANGAR_IDLE_AFTER, default=2m"`
	EvictIdleAfter time.Duration `env:"HANGAR_EVICT_IDLE_AFTER, default=30m"`
	// CheckpointInterval checkpoints a session that changed since its last checkpoint once
	// that is this old, so a crash of its host loses at most about this much of its files
	// (0: only Snapshot, eviction and shutdown checkpoint).
	CheckpointInterval time.Duration `env:"HANGAR_CHECKPOINT_INTERVAL, default=10m"`
	// MaxSandboxes, CPUs and MemoryBytes are the host's capacity as registered in the fleet.
	MaxSandboxes int `env:"HANGAR_MAX_SANDBOXES, default=64"`
	// WarmSandboxes is how many booted sandboxes a host keeps ready for each of its recently used
	// images, so a new session of one skips the boot (0: none).
	WarmSandboxes int `env:"HANGAR_WARM_SANDBOXES, default=1" min:"0"`
	// SandboxCPUs, SandboxMemoryBytes and SandboxPids are a sandbox's limits when its image
	// suggests none.
	SandboxCPUs        float64 `env:"FIXED_SANDBOX_CPUS, default=2"`
	SandboxMemoryBytes int64   `env:"FIXED_SANDBOX_MEMORY_BYTES, default=2147483648"`
	SandboxPids        int64   `env:"FIXED_SANDBOX_PIDS, default=1024"`
	// SandboxDiskBytes is the size of a sandbox's disk — the file system holding its changes to
	// its image and its run dir — when its image suggests none; MaxSandboxDiskBytes caps what an
	// image may suggest. A sandbox that fills its disk gets ENOSPC; the host's disk does not fill.
	// Sparse: a sandbox's disk takes host space only for what it holds.
	SandboxDiskBytes    int64 `env:"HANGAR_SANDBOX_DISK_BYTES, default=10737418240"`
	MaxSandboxDiskBytes int64 `env:"HANGAR_MAX_SANDBOX_DISK_BYTES, default=107374182400"`
	// MaxImageBytes caps an image's layers, both as the registry serves them (the manifest's
	// sizes) and unpacked. A CUDA or full-toolchain image is 5-10 GiB unpacked.
	MaxImageBytes int64 `env:"HANGAR_MAX_IMAGE_BYTES, default=21474836480"`
	// MemoryOvercommitRatio bounds the memory limits of a host's sandboxes together: at most the
	// host's RAM times this. 1 never promises more memory than there is.
	MemoryOvercommitRatio float64 `env:"HANGAR_MEMORY_OVERCOMMIT_RATIO, default=1"`
	// Egress bounds what sandboxes' connections through the host's egress proxy hold of it.
	Egress EgressLimits
	// SandboxEgress is what the host's egress proxy opens to sandboxes beyond public addresses
	// (an operator's own model gateways at private addresses), from HANGAR_SANDBOX_EGRESS_ALLOW
	// (comma-separated, HANGAR_EGRESS_ALLOW's entry forms); none by default. It is not
	// HANGAR_EGRESS_ALLOW, which is the server's own. A session's network policy must still
	// allow a destination; the host's own addresses, link-local and metadata servers stay
	// closed whatever it lists (egress.Policy.ForSandboxes).
	SandboxEgress egress.Policy
	// SandboxEgressCA is the operator's CA bundle (PEM) read from the file
	// HANGAR_SANDBOX_EGRESS_CA_FILE names: the proxy trusts it for upstream TLS to what
	// SandboxEgress lists, and sandboxes' trust bundles carry it.
	SandboxEgressCA []byte
}

// EgressLimits bound the connections sandboxes make through their host's egress proxy, each of
// which holds two of the host's file descriptors until it ends.
type EgressLimits struct {
	// IdleTimeout ends a connection that carried no data either way this long; Lifetime ends
	// one this old whatever it carries, long enough for a streamed model answer. Each is at
	// most its ceiling.
	IdleTimeout    time.Duration `env:"HANGAR_EGRESS_IDLE_TIMEOUT, default=5m"`
	MaxIdleTimeout time.Duration `env:"FIXED_EGRESS_IDLE_TIMEOUT_MAX, default=1h"`
	Lifetime       time.Duration `env:"HANGAR_EGRESS_CONN_LIFETIME, default=1h"`
	MaxLifetime    time.Duration `env:"FIXED_EGRESS_CONN_LIFETIME_MAX, default=24h"`
	// MaxConnections caps the connections of all a host's sandboxes together (0: three
	// eighths of the host process's file descriptor limit, leaving a quarter of them to the
	// rest); a host that is full takes connections from the sandboxes holding more than their
	// share for the others. MaxPerSandbox caps one sandbox's; MinShare is what a sandbox may
	// hold however many share the host.
	MaxConnections int `env:"HANGAR_EGRESS_MAX_CONNECTIONS, default=0" min:"0"`
	MaxPerSandbox  int `env:"HANGAR_EGRESS_MAX_CONNECTIONS_PER_SANDBOX, default=1024"`
	MinShare       int `env:"HANGAR_EGRESS_MIN_CONNECTION_SHARE, default=64"`
}

// environment is what the environment holds beyond Config's own fields: the values that need a
// step after decoding (a fallback, a list, a JSON document) before they become Config's.
type environment struct {
	Config
	// GoogleCloudProject is Project when HANGAR_PROJECT is unset.
	GoogleCloudProject string `env:"GOOGLE_CLOUD_PROJECT, default=hangar-local"`
	// TasksPageSizeMax overrides Limits.Tasks.Max.
	TasksPageSizeMax    int     `env:"HANGAR_TASKS_PAGE_SIZE_MAX, default=200"`
	SealKeyset          string  `env:"HANGAR_SEAL_KEYSET"`
	AutomationHTTPHosts string  `env:"HANGAR_AUTOMATION_HTTP_HOSTS"`
	EgressAllow         string  `env:"HANGAR_EGRESS_ALLOW"`
	SandboxEgressAllow  string  `env:"HANGAR_SANDBOX_EGRESS_ALLOW"`
	SandboxEgressCAFile string  `env:"HANGAR_SANDBOX_EGRESS_CA_FILE"`
	PrivateRegistries   string  `env:"HANGAR_PRIVATE_REGISTRIES"`
	ModelRouters        *string `env:"HANGAR_MODEL_ROUTERS, noinit"`
	ModelRoutersFile    *string `env:"HANGAR_MODEL_ROUTERS_FILE, noinit"`
}

// fixedPrefix starts the keys of settings the environment cannot change: their tags only hold
// their values, so every default lives in a tag, and fromEnvironment never looks them up.
const fixedPrefix = "FIXED_"

// fromEnvironment looks variables up in the process's environment, except the fixed settings.
var fromEnvironment = envconfig.LookuperFunc(func(key string) (string, bool) {
	if strings.HasPrefix(key, fixedPrefix) {
		return "", false
	}
	return os.LookupEnv(key)
})

// Default is the configuration with no environment: every field's tag default.
func Default() Config {
	c, err := load(envconfig.MapLookuper(nil))
	if err != nil {
		panic(fmt.Sprintf("config: the tag defaults do not load: %v", err))
	}
	return c
}

// FromEnv is Default overridden by HANGAR_* variables (and GOOGLE_CLOUD_PROJECT).
func FromEnv() (Config, error) {
	return load(fromEnvironment)
}

// load decodes l into the tagged structs, checking every number and duration as it goes, then
// applies what tags cannot say.
func load(l envconfig.Lookuper) (Config, error) {
	var e environment
	err := envconfig.ProcessWith(context.Background(), &envconfig.Config{
		Target:   &e,
		Lookuper: l,
		Mutators: []envconfig.Mutator{envconfig.MutatorFunc(checkValue)},
	})
	if err != nil {
		return Config{}, err
	}
	c := e.Config
	if c.Project == "" {
		c.Project = cmp.Or(e.GoogleCloudProject, "hangar-local")
	}
	c.Limits.Tasks.Max = e.TasksPageSizeMax
	if c.Host.SandboxDiskBytes > c.Host.MaxSandboxDiskBytes {
		return c, fmt.Errorf("HANGAR_SANDBOX_DISK_BYTES (%d) is more than HANGAR_MAX_SANDBOX_DISK_BYTES (%d)", c.Host.SandboxDiskBytes, c.Host.MaxSandboxDiskBytes)
	}
	if err := c.Host.Egress.check(); err != nil {
		return c, err
	}
	for _, h := range strings.Split(e.AutomationHTTPHosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.AutomationHTTPHosts = append(c.AutomationHTTPHosts, h)
		}
	}
	egressAllow, err := egress.Parse(strings.Split(e.EgressAllow, ","))
	if err != nil {
		return c, fmt.Errorf("HANGAR_EGRESS_ALLOW: %w", err)
	}
	registries, err := egress.Parse(strings.Split(e.PrivateRegistries, ","))
	if err != nil {
		return c, fmt.Errorf("HANGAR_PRIVATE_REGISTRIES: %w", err)
	}
	c.Egress, c.Registries = egressAllow, egressAllow.Union(registries)
	if c.Host.SandboxEgress, err = egress.Parse(strings.Split(e.SandboxEgressAllow, ",")); err != nil {
		return c, fmt.Errorf("HANGAR_SANDBOX_EGRESS_ALLOW: %w", err)
	}
	if c.Host.SandboxEgressCA, err = readCABundle(e.SandboxEgressCAFile); err != nil {
		return c, fmt.Errorf("HANGAR_SANDBOX_EGRESS_CA_FILE: %w", err)
	}
	if e.SealKeyset != "" {
		c.SealKeyset = []byte(e.SealKeyset)
	}
	if c.ModelRouters, err = loadModelRouters(e.ModelRouters, e.ModelRoutersFile); err != nil {
		return c, err
	}
	return c, nil
}

// readCABundle reads the PEM certificates of the file at path ("": none), refusing a file that
// holds no certificate or one that does not parse.
func readCABundle(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rest, n := b, 0
	for {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", path, n+1, err)
		}
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return b, nil
}

// check refuses egress timeouts that are zero (a connection that never expires) or past their
// ceilings.
func (l EgressLimits) check() error {
	for _, d := range []struct {
		key        string
		v, ceiling time.Duration
	}{{"HANGAR_EGRESS_IDLE_TIMEOUT", l.IdleTimeout, l.MaxIdleTimeout}, {"HANGAR_EGRESS_CONN_LIFETIME", l.Lifetime, l.MaxLifetime}} {
		if d.v <= 0 || d.v > d.ceiling {
			return fmt.Errorf("%s=%s: want a duration above 0 and at most %s", d.key, d.v, d.ceiling)
		}
	}
	return nil
}

// checks are the rules of the variables' values by the fields' types, so that a value the
// environment sets is refused with the variable's name, and numbers are read in base 10 only.
var checks = map[reflect.Type]func(key, v string, field reflect.StructField) (string, error){
	reflect.TypeFor[int](): func(key, v string, f reflect.StructField) (string, error) {
		least := 1
		if m, ok := f.Tag.Lookup("min"); ok {
			least, _ = strconv.Atoi(m)
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < least {
			return "", fmt.Errorf("%s=%q: want a whole number of at least %d", key, v, least)
		}
		return strconv.Itoa(n), nil
	},
	reflect.TypeFor[int64](): func(key, v string, _ reflect.StructField) (string, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("%s=%q: want a positive whole number", key, v)
		}
		return strconv.FormatInt(n, 10), nil
	},
	reflect.TypeFor[float64](): func(key, v string, _ reflect.StructField) (string, error) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) {
			return "", fmt.Errorf("%s=%q: want a positive number such as 1.5", key, v)
		}
		return v, nil
	},
	reflect.TypeFor[time.Duration](): func(key, v string, _ reflect.StructField) (string, error) {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return "", fmt.Errorf("%s=%q: want a duration such as 10s", key, v)
		}
		return v, nil
	},
}

// fieldsByKey maps every variable to its field, from the tags.
var fieldsByKey = func() map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for _, v := range variables() {
		m[v.Key] = v.Field
	}
	return m
}()

// checkValue is the mutator applying checks to every value, the environment's or a default.
// It takes the resolved key, which carries the prefix= of a nested struct.
func checkValue(_ context.Context, _, key, _, v string) (string, bool, error) {
	f, ok := fieldsByKey[key]
	if !ok {
		return v, false, nil
	}
	check, ok := checks[f.Type]
	if !ok {
		return v, false, nil
	}
	v, err := check(key, v, f)
	return v, false, err
}

// variable is one tagged field: its variable, its default ("" when none), its field.
type variable struct {
	Key, Default string
	Field        reflect.StructField
}

// variables lists every tagged field of environment (Config's included), fixed ones too,
// following envconfig's nesting and prefix= rules.
func variables() []variable {
	var out []variable
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag, tagged := f.Tag.Lookup("env")
			parts := strings.Split(tag, ",")
			key := strings.TrimSpace(parts[0])
			def, pre := "", ""
			for _, o := range parts[1:] {
				o = strings.TrimSpace(o)
				if d, ok := strings.CutPrefix(o, "default="); ok {
					def = d
				}
				if p, ok := strings.CutPrefix(o, "prefix="); ok {
					pre = p
				}
			}
			if key == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, prefix+pre)
				continue
			}
			if tagged {
				out = append(out, variable{Key: prefix + key, Default: def, Field: f})
			}
		}
	}
	walk(reflect.TypeFor[environment](), "")
	return out
}

// Package config reads Hangar's settings from the environment, once, into one struct: addresses,
// the Google Cloud project, and every limit the API enforces, so that all of them live in one
// place (and in the README's configuration table).
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/paging"
)

// Config is everything a function needs to know about its deployment.
type Config struct {
	// Project is the Google Cloud project whose Firestore and Pub/Sub hold Hangar's data.
	Project string
	// Limits bounds every list, request and cache.
	Limits Limits
	// Host is the sandbox host's behaviour.
	Host Host
	// HostToken authenticates the functions to the sandbox hosts' internal API.
	HostToken string
	// BlobURL is the gocloud.dev bucket of snapshots and artifacts, e.g. gs://bucket or
	// file:///dir.
	BlobURL string
	// SealKeyset is the Tink AEAD keyset (JSON) that seals secrets kept in records.
	SealKeyset []byte
	// DefaultImage is the image of sessions created without image_uri ("": image_uri is
	// required); `hangar dev` sets its own dev image.
	DefaultImage string
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
}

// Limits are the API's bounds. Each has a default here and an environment override.
type Limits struct {
	Tasks    paging.Bounds
	Profiles paging.Bounds
	ApiKeys  paging.Bounds
	// MaxRequestBytes caps the size of one request message.
	MaxRequestBytes int
	// AuthCacheTTL is how long a verified key is trusted without reading Firestore again; a key
	// revoked on another instance stops working within this time, on this one at once.
	AuthCacheTTL time.Duration
	// MaxProfileEnvVars, MaxProfileListItems and MaxValueBytes bound a profile's contents.
	MaxProfileEnvVars   int
	MaxProfileListItems int
	MaxValueBytes       int
	// MaxPromptBytes bounds a task's prompt.
	MaxPromptBytes int
	// MaxToolResultBytes bounds a client tool result (CompleteToolCall's result_json); it stays
	// under what one supervisor request carries to a harness's stdin.
	MaxToolResultBytes int
	// TaskTreeDepth bounds how deep a task tree grows, so an agent splitting work recursively
	// stops with a clear error instead of growing a tree nobody can read.
	TaskTreeDepth int
	// TaskDescendants bounds the descendants GetTask returns, oldest first.
	TaskDescendants int
	// TaskListOffset bounds how deep ListTasks pages go, as search APIs do: Firestore reads (and
	// bills) every task an offset skips.
	TaskListOffset int
	// Sessions bounds ListSessions, which takes no paging: it returns the newest this many.
	Sessions int
	// Events bounds ListSessionEvents and GetLog pages.
	Events paging.Bounds
	// MaxSessionsPerUser caps one user's live sessions (those holding or getting a sandbox:
	// creating, running, idle, snapshotting, resuming), admins' too, so one user cannot take
	// every sandbox slot of the fleet.
	MaxSessionsPerUser int
	// MaxSessionEnvBytes bounds a session's secrets and harness_env together.
	MaxSessionEnvBytes int
	// ExecTimeout is the default and the ceiling of an exec's timeout_secs.
	ExecTimeout TimeoutBounds
	// MaxFileBytes caps one file written, read, copied or published as an artifact.
	MaxFileBytes int64
	// MaxCopyPaths bounds the paths of one CopyFiles.
	MaxCopyPaths int
	// RouterCatalogTimeout, MaxRouterCatalogBytes and MaxRouterModels bound one refresh of a
	// model router's catalog: the upstream's time to answer, its answer's size, and the models
	// kept from it.
	RouterCatalogTimeout  time.Duration
	MaxRouterCatalogBytes int64
	MaxRouterModels       int
	// MaxSecretBytes caps one org secret's value and one OAuth credential bundle; MaxOrgSecrets
	// bounds how many org secrets exist, so ListOrgSecrets always shows them all.
	MaxSecretBytes int
	MaxOrgSecrets  int
	// Automations bounds automations and what they hold.
	Automations AutomationLimits
	// Webhooks bounds inbound webhook registrations and deliveries.
	Webhooks WebhookLimits
}

// WebhookLimits bound inbound webhooks.
type WebhookLimits struct {
	// Max bounds the registrations, so that ListWebhookRegistrations always shows them all.
	Max int
	// MaxBodyBytes caps one delivery's body (413 beyond); it must stay under Pub/Sub's 10 MB
	// message, which carries the body.
	MaxBodyBytes int
	// CacheTTL is how long an instance uses a registration (and its secret) without reading
	// Firestore again: a rotation or deletion made through another instance takes effect on
	// this one within it, on the same instance at once.
	CacheTTL time.Duration
	// SignatureTolerance is how far a generic delivery's signed timestamp may be from now,
	// either way: an older one is refused as a possible replay.
	SignatureTolerance time.Duration
}

// AutomationLimits bound automations.
type AutomationLimits struct {
	// Max bounds the non-archived automations, so that ListAutomations always shows them all.
	Max int
	// Versions bounds ListVersions, which returns the newest this many.
	Versions int
	// NameLen and DescriptionLen are in characters; DefinitionBytes bounds a definition_json and
	// JSONBytes each of inputs_json, block_overrides_json and settings_json. Together they keep an
	// automation, which carries a copy of its current definition, well inside a Firestore
	// document's 1 MiB.
	NameLen         int
	DescriptionLen  int
	DefinitionBytes int
	JSONBytes       int
	// Runs, Instances, Drops and Samples bound ListRuns, ListInstances, ListRecentDrops and
	// ListEventSamples; FilteredEvents bounds the filtered events ListRuns groups into windows.
	Runs, Instances, Drops, Samples paging.Bounds
	FilteredEvents                  int
	// Concurrency caps an automation's runs in progress when its settings name no limit.
	Concurrency int
	// RunLease is how long a worker holds a run between writes: a run whose worker died is
	// taken over this long after its last write.
	RunLease time.Duration
	// TaskPoll is how often a task or prompt block that waits checks on what it waits for.
	TaskPoll time.Duration
}

// TimeoutBounds is a timeout's default and ceiling.
type TimeoutBounds struct {
	Default, Max time.Duration
}

// Host is how a sandbox host runs.
type Host struct {
	// HeartbeatInterval is how often a host reports to the fleet; a host silent for HostTimeout
	// is lost, and its sessions become recoverable elsewhere.
	HeartbeatInterval time.Duration
	HostTimeout       time.Duration
	// IdleAfter moves a quiet running session to idle; EvictIdleAfter snapshots and evicts an
	// idle one (0: never).
	IdleAfter      time.Duration
	EvictIdleAfter time.Duration
	// CheckpointInterval checkpoints a session that changed since its last checkpoint once
	// that is this old, so a crash of its host loses at most about this much of its files
	// (0: only Snapshot, eviction and shutdown checkpoint).
	CheckpointInterval time.Duration
	// MaxSandboxes, CPUs and MemoryBytes are the host's capacity as registered in the fleet.
	MaxSandboxes int
	// WarmSandboxes is how many booted sandboxes a host keeps ready for each of its recently used
	// images, so a new session of one skips the boot (0: none).
	WarmSandboxes int
	// SandboxCPUs, SandboxMemoryBytes and SandboxPids are a sandbox's limits when its image
	// suggests none.
	SandboxCPUs        float64
	SandboxMemoryBytes int64
	SandboxPids        int64
	// SandboxDiskBytes is the size of a sandbox's disk — the file system holding its changes to
	// its image and its run dir — when its image suggests none; MaxSandboxDiskBytes caps what an
	// image may suggest. A sandbox that fills its disk gets ENOSPC; the host's disk does not fill.
	SandboxDiskBytes    int64
	MaxSandboxDiskBytes int64
	// MaxImageBytes caps an image's layers, both as the registry serves them (the manifest's
	// sizes) and unpacked.
	MaxImageBytes int64
	// MemoryOvercommitRatio bounds the memory limits of a host's sandboxes together: at most the
	// host's RAM times this. 1 never promises more memory than there is.
	MemoryOvercommitRatio float64
}

// Default is the configuration with no environment.
func Default() Config {
	return Config{
		Project: "hangar-local",
		Limits: Limits{
			Tasks:               paging.Bounds{Default: 50, Max: 200},
			Profiles:            paging.Bounds{Default: 100, Max: 500},
			ApiKeys:             paging.Bounds{Default: 100, Max: 1000},
			MaxRequestBytes:     4 << 20,
			AuthCacheTTL:        10 * time.Second,
			MaxProfileEnvVars:   200,
			MaxProfileListItems: 100,
			MaxValueBytes:       32 << 10,
			MaxPromptBytes:      256 << 10,
			MaxToolResultBytes:  256 << 10,
			TaskTreeDepth:       10,
			TaskDescendants:     1000,
			TaskListOffset:      10000,
			Sessions:            500,
			Events:              paging.Bounds{Default: 100, Max: 1000},
			MaxSessionsPerUser:  8,
			MaxSessionEnvBytes:  64 << 10,
			ExecTimeout:         TimeoutBounds{Default: 10 * time.Minute, Max: 2 * time.Hour},
			MaxFileBytes:        1 << 30,
			MaxCopyPaths:        100,
			// OpenRouter's catalog is about 350 models and 1 MiB.
			RouterCatalogTimeout:  30 * time.Second,
			MaxRouterCatalogBytes: 16 << 20,
			MaxRouterModels:       5000,
			// GCP Secret Manager's cap on a value; GitHub's on an organisation's secrets.
			MaxSecretBytes: 64 << 10,
			MaxOrgSecrets:  1000,
			Automations: AutomationLimits{
				Max: 500, Versions: 100, NameLen: 120, DescriptionLen: 2000,
				DefinitionBytes: 256 << 10, JSONBytes: 64 << 10,
				Runs: paging.Bounds{Default: 50, Max: 500}, Instances: paging.Bounds{Default: 50, Max: 500},
				Drops: paging.Bounds{Default: 50, Max: 500}, Samples: paging.Bounds{Default: 20, Max: 100},
				FilteredEvents: 1000, Concurrency: 10, RunLease: 2 * time.Minute, TaskPoll: 10 * time.Second,
			},
			// GitHub's event payloads are tens of KiB; its own cap is 25 MB, Pub/Sub's 10 MB.
			// Stripe's tolerance for its signed timestamps.
			Webhooks: WebhookLimits{Max: 500, MaxBodyBytes: 1 << 20, CacheTTL: 5 * time.Second, SignatureTolerance: 5 * time.Minute},
		},
		Host: Host{
			HeartbeatInterval:  5 * time.Second,
			HostTimeout:        20 * time.Second,
			IdleAfter:          2 * time.Minute,
			EvictIdleAfter:     30 * time.Minute,
			CheckpointInterval: 10 * time.Minute,
			MaxSandboxes:       64,
			WarmSandboxes:      1,
			SandboxCPUs:        2,
			SandboxMemoryBytes: 2 << 30,
			SandboxPids:        1024,
			// Sparse: a sandbox's disk takes host space only for what it holds.
			SandboxDiskBytes:    10 << 30,
			MaxSandboxDiskBytes: 100 << 30,
			// A CUDA or full-toolchain image is 5-10 GiB unpacked.
			MaxImageBytes:         20 << 30,
			MemoryOvercommitRatio: 1,
		},
	}
}

// FromEnv is Default overridden by HANGAR_* variables (and GOOGLE_CLOUD_PROJECT).
func FromEnv() (Config, error) {
	c := Default()
	if p := os.Getenv("GOOGLE_CLOUD_PROJECT"); p != "" {
		c.Project = p
	}
	if p := os.Getenv("HANGAR_PROJECT"); p != "" {
		c.Project = p
	}
	ints := []struct {
		env string
		dst *int
		min int
	}{
		{"HANGAR_TASKS_PAGE_SIZE_MAX", &c.Limits.Tasks.Max, 1},
		{"HANGAR_MAX_REQUEST_BYTES", &c.Limits.MaxRequestBytes, 1},
		{"HANGAR_MAX_PROMPT_BYTES", &c.Limits.MaxPromptBytes, 1},
		{"HANGAR_MAX_SECRET_BYTES", &c.Limits.MaxSecretBytes, 1},
		{"HANGAR_MAX_WEBHOOK_BODY_BYTES", &c.Limits.Webhooks.MaxBodyBytes, 1},
		{"HANGAR_MAX_SANDBOXES", &c.Host.MaxSandboxes, 1},
		{"HANGAR_WARM_SANDBOXES", &c.Host.WarmSandboxes, 0},
		{"HANGAR_MAX_SESSIONS_PER_USER", &c.Limits.MaxSessionsPerUser, 1},
	}
	for _, e := range ints {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < e.min {
			return c, fmt.Errorf("%s=%q: want a whole number of at least %d", e.env, v, e.min)
		}
		*e.dst = n
	}
	sizes := []struct {
		env string
		dst *int64
	}{
		{"HANGAR_MAX_FILE_BYTES", &c.Limits.MaxFileBytes},
		{"HANGAR_SANDBOX_DISK_BYTES", &c.Host.SandboxDiskBytes},
		{"HANGAR_MAX_SANDBOX_DISK_BYTES", &c.Host.MaxSandboxDiskBytes},
		{"HANGAR_MAX_IMAGE_BYTES", &c.Host.MaxImageBytes},
	}
	for _, e := range sizes {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive whole number", e.env, v)
		}
		*e.dst = n
	}
	if c.Host.SandboxDiskBytes > c.Host.MaxSandboxDiskBytes {
		return c, fmt.Errorf("HANGAR_SANDBOX_DISK_BYTES (%d) is more than HANGAR_MAX_SANDBOX_DISK_BYTES (%d)", c.Host.SandboxDiskBytes, c.Host.MaxSandboxDiskBytes)
	}
	if v, ok := os.LookupEnv("HANGAR_MEMORY_OVERCOMMIT_RATIO"); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) {
			return c, fmt.Errorf("HANGAR_MEMORY_OVERCOMMIT_RATIO=%q: want a positive number such as 1.5", v)
		}
		c.Host.MemoryOvercommitRatio = f
	}
	durations := []struct {
		env string
		dst *time.Duration
	}{
		{"HANGAR_AUTH_CACHE_TTL", &c.Limits.AuthCacheTTL},
		{"HANGAR_WEBHOOK_CACHE_TTL", &c.Limits.Webhooks.CacheTTL},
		{"HANGAR_WEBHOOK_SIGNATURE_TOLERANCE", &c.Limits.Webhooks.SignatureTolerance},
		{"HANGAR_EXEC_TIMEOUT_DEFAULT", &c.Limits.ExecTimeout.Default},
		{"HANGAR_EXEC_TIMEOUT_MAX", &c.Limits.ExecTimeout.Max},
		{"HANGAR_HEARTBEAT_INTERVAL", &c.Host.HeartbeatInterval},
		{"HANGAR_HOST_TIMEOUT", &c.Host.HostTimeout},
		{"HANGAR_IDLE_AFTER", &c.Host.IdleAfter},
		{"HANGAR_EVICT_IDLE_AFTER", &c.Host.EvictIdleAfter},
		{"HANGAR_CHECKPOINT_INTERVAL", &c.Host.CheckpointInterval},
	}
	for _, e := range durations {
		v, ok := os.LookupEnv(e.env)
		if !ok {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return c, fmt.Errorf("%s=%q: want a duration such as 10s", e.env, v)
		}
		*e.dst = d
	}
	c.HostToken = os.Getenv("HANGAR_HOST_TOKEN")
	c.BlobURL = os.Getenv("HANGAR_BLOB_URL")
	c.DefaultImage = os.Getenv("HANGAR_DEFAULT_IMAGE")
	for _, h := range strings.Split(os.Getenv("HANGAR_AUTOMATION_HTTP_HOSTS"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			c.AutomationHTTPHosts = append(c.AutomationHTTPHosts, h)
		}
	}
	egressAllow, err := egress.Parse(strings.Split(os.Getenv("HANGAR_EGRESS_ALLOW"), ","))
	if err != nil {
		return c, fmt.Errorf("HANGAR_EGRESS_ALLOW: %w", err)
	}
	registries, err := egress.Parse(strings.Split(os.Getenv("HANGAR_PRIVATE_REGISTRIES"), ","))
	if err != nil {
		return c, fmt.Errorf("HANGAR_PRIVATE_REGISTRIES: %w", err)
	}
	c.Egress, c.Registries = egressAllow, egressAllow.Union(registries)
	c.SealKeyset = []byte(os.Getenv("HANGAR_SEAL_KEYSET"))
	routers, err := loadModelRouters()
	if err != nil {
		return c, err
	}
	c.ModelRouters = routers
	return c, nil
}

package sessions

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/gitremote"
	"github.com/hangar-dev/hangar/records/secrets"
)

// TaskSession is the session a task runs in, as the task and its profile describe it (TaskService
// builds one; the composition hands it over). StartForTask turns it into a session: it reads the
// profile's secrets, mints the placeholders of those the egress proxy injects, and has the host
// clone the profile's repos and the task's checkouts.
type TaskSession struct {
	// Key, when set, makes the start idempotent: the same caller and key find the session
	// the first start made. The session's id derives from them with the deployment's secret.
	Key                                 string
	Image, Harness, HarnessMode, Prompt string
	Model, Effort, ModelRouter          string
	// Env is the profile's env vars, the session's harness_env.
	Env map[string]string
	// SecretRefs are the profile's secrets in mode "env": environment variable → org secret,
	// read into the session's secrets for the caller and ProfileID, each secret's access policy
	// checked then, whatever it was when the profile was saved.
	SecretRefs map[string]string
	ProfileID  string
	// Network is the profile's egress: its network section and the hosts of its repos and of
	// the task's checkouts.
	Network TaskNetwork
	// Repos are the profile's repos, cloned into the session at its start.
	Repos []*appv1.ProfileRepo
	// Checkouts are what the task adds to Repos; one at a path a profile repo also uses takes
	// its place.
	Checkouts []Checkout
	// ProxySecrets are the profile's secrets in mode "proxy": the session holds a placeholder
	// in EnvVar, and the egress proxy puts the secret in requests to its hosts.
	ProxySecrets []*appv1.ProfileSecret
	// Apps are the profile's apps, which the session serves.
	Apps []*appv1.SessionApp
	// IncludeUserTokens is the profile's include_user_tokens: the caller's OAuth credential of
	// the harness's provider goes with the session (as a placeholder the egress proxy swaps)
	// when they have one connected.
	IncludeUserTokens bool
	// ProfileOwner is who decides the profile's network (TaskStart.ProfileOwner).
	ProfileOwner string
}

// TaskNetwork is what a task's profile lets its session reach.
type TaskNetwork struct {
	DefaultAllow      bool
	AllowHosts        []string
	AllowHostPatterns []string
}

// Checkout is a repository a task's session clones at start beyond its profile's repos: URL's
// Branch, moved to Commit when set, at Path. Credential, when set, is a token for URL's host
// that the egress proxy injects into the session's requests to that host, clone, fetch and push
// alike; the session holds only a placeholder, kept in the clone's config.
type Checkout struct {
	Path, URL, Branch, Commit string
	Credential                string
}

// StartForTask creates the agent session t describes, for ctx's caller, and answers its id. The
// caller's (and the profile's) right to each secret the profile names is checked now, as
// CreateSession checks a router's key.
func (s *Service) StartForTask(ctx context.Context, t TaskSession) (string, error) {
	caller, _ := auth.Caller(ctx)
	sub := secrets.SubjectOf(caller, t.ProfileID)
	if s.d.Secrets == nil && (len(t.SecretRefs) > 0 || len(t.ProxySecrets) > 0) {
		return "", apierr.FailedPrecondition("profile %s names org secrets, and this deployment keeps none", t.ProfileID)
	}
	secretEnv := map[string]string{}
	if len(t.SecretRefs) > 0 {
		var err error
		if secretEnv, err = s.d.Secrets.Resolve(ctx, sub, t.SecretRefs); err != nil {
			return "", err
		}
	}
	network := &hostv1.SandboxNetwork{
		DefaultAllow: t.Network.DefaultAllow, AllowHosts: t.Network.AllowHosts, AllowHostPatterns: t.Network.AllowHostPatterns,
	}
	// A proxy-mode secret's value goes to the egress proxy; the session sees a placeholder.
	for _, ps := range t.ProxySecrets {
		value, err := s.d.Secrets.Use(ctx, sub, ps.GetRef())
		if err != nil {
			return "", fmt.Errorf("secret for %s: %w", ps.GetEnvVar(), err)
		}
		placeholder := NewPlaceholder()
		secretEnv[ps.GetEnvVar()] = placeholder
		network.Secrets = append(network.Secrets, &hostv1.ProxySecret{
			Name: ps.GetRef(), Placeholder: placeholder, Value: value,
			AllowHosts: ps.GetAllowHosts(), AllowHostPatterns: ps.GetAllowHostPatterns(), Slots: APIKeySlots(),
		})
	}
	// A checkout's credential, like a proxy-mode secret, reaches only the proxy; the clone
	// keeps its placeholder, so the agent's fetch and push are injected too.
	for _, c := range t.Checkouts {
		if c.Credential == "" {
			continue
		}
		u, err := url.Parse(c.URL)
		if err != nil {
			return "", fmt.Errorf("checkout %s: %w", c.Path, err)
		}
		network.Secrets = append(network.Secrets, &hostv1.ProxySecret{
			Name: checkoutSecret(c), Placeholder: NewPlaceholder(), Value: c.Credential,
			AllowHosts: []string{strings.ToLower(u.Hostname())}, Slots: GitSlots(),
		})
	}
	req := &appv1.CreateSessionRequest{ImageUri: t.Image, Mode: ModeAgent, HarnessEnv: t.Env, Secrets: secretEnv}
	for _, a := range t.Apps {
		req.Apps = append(req.Apps, &appv1.AppEndpoint{Hostname: a.GetName(), Port: a.GetPort()})
	}
	for _, f := range []struct {
		dst **string
		val string
	}{
		{&req.Harness, t.Harness}, {&req.HarnessMode, t.HarnessMode}, {&req.Prompt, t.Prompt},
		{&req.Model, t.Model}, {&req.Effort, t.Effort}, {&req.ModelRouter, t.ModelRouter},
	} {
		if f.val != "" {
			*f.dst = &f.val
		}
	}
	start := TaskStart{Network: network, Repos: checkouts(t.Repos, t.Checkouts), UserTokens: t.IncludeUserTokens, ProfileOwner: t.ProfileOwner}
	resp, err := s.createForTask(ctx, req, t.Key, start)
	if err != nil {
		return "", profileImageErr(t.Image, err)
	}
	return resp.Msg.GetSessionId(), nil
}

// profileImageErr reports a refusal of the image_uri the API sent for a profile as what it is to
// the caller, who never sent an image_uri: the profile's image_id cannot be used.
func profileImageErr(image string, err error) error {
	if why, ok := apierr.Violation(err, "image_uri"); ok {
		return apierr.FailedPrecondition("the profile's image_id %q cannot be used: %s", image, why)
	}
	return err
}

// checkouts are a profile's repos as the host clones them (gitremote.CloneURL), then the task's own checkouts, last; a profile repo at a path a
// task checkout also uses gives way to it.
func checkouts(repos []*appv1.ProfileRepo, extra []Checkout) []*hostv1.RepoCheckout {
	var out []*hostv1.RepoCheckout
	for _, r := range repos {
		if slices.ContainsFunc(extra, func(c Checkout) bool { return path.Clean(c.Path) == path.Clean(r.GetPath()) }) {
			continue
		}
		u, ref := gitremote.CloneURL(r.GetRemoteUrl(), r.GetRemote())
		out = append(out, &hostv1.RepoCheckout{Path: r.GetPath(), Url: u, Ref: ref})
	}
	for _, c := range extra {
		rc := &hostv1.RepoCheckout{Path: c.Path, Url: c.URL, Ref: c.Branch, Commit: c.Commit}
		if c.Credential != "" {
			rc.Secret = checkoutSecret(c)
		}
		out = append(out, rc)
	}
	return out
}

// checkoutSecret names the proxy secret of a task checkout's credential.
func checkoutSecret(c Checkout) string {
	return "credential of the checkout at " + path.Clean(c.Path)
}

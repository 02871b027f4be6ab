package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/hangar-dev/hangar/platform/opt"

	"google.golang.org/protobuf/encoding/protojson"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
)

// Sessions is what tasks need of SessionService; the composition wires the real one in.
type Sessions interface {
	// Start creates an agent session for a task and sends it prompt ("" sends none).
	Start(ctx context.Context, spec SessionSpec) (string, error)
	// Sessions reads sessions by id; ids it does not find are left out.
	Sessions(ctx context.Context, ids []string) (map[string]*appv1.Session, error)
	// SyncTask moves the task of a session to where the session is now, for a task stored after
	// its session started (whose first moves had no task to move).
	SyncTask(ctx context.Context, id string) error
	// Delete deletes a session; deleting one already gone succeeds.
	Delete(ctx context.Context, id string) error
}

// SessionSpec is the session a task runs in, from the task and its profile.
type SessionSpec struct {
	// Key, when set, makes the start idempotent: the same caller and key find the session
	// the first start made. The session's id derives from them with the deployment's secret.
	Key                                 string
	Image, Harness, HarnessMode, Prompt string
	Model, Effort, ModelRouter          string
	// Env is the profile's env vars, the session's harness_env.
	Env map[string]string
	// SecretRefs are the profile's secrets in mode "env": environment variable → org secret,
	// read into the session's secrets for the task's creator (ctx's caller) and ProfileID, each
	// secret's access policy checked then, whatever it was when the profile was saved.
	SecretRefs map[string]string
	ProfileID  string
	// ProfileOwner is the profile's owner, who decides its network: a harness's egress opens in
	// the session only if an admin approved it or the profile's owner registered it, never
	// because the task's creator did (sessions.TaskStart.ProfileOwner).
	ProfileOwner string
	// Network is the profile's egress: its network section and its repos' hosts.
	Network Network
	// Repos are the profile's repos, cloned into the session at its start.
	Repos []*appv1.ProfileRepo
	// Checkouts are what the task's creator adds to Repos (see Checkout); one at a path a
	// profile repo also uses takes its place.
	Checkouts []Checkout
	// ProxySecrets are the profile's secrets in mode "proxy": the session holds a placeholder
	// in EnvVar, and the egress proxy puts the secret in requests to its hosts.
	ProxySecrets []*appv1.ProfileSecret
	// Apps are the profile's apps, which the session serves.
	Apps []*appv1.SessionApp
	// IncludeUserTokens is the profile's include_user_tokens: the task creator's OAuth
	// credential of the harness's provider goes with the session (as a placeholder the egress
	// proxy swaps) when they have one connected.
	IncludeUserTokens bool
}

// Checkout is a repository an in-process caller (a review) has a task's session clone at start
// beyond its profile's repos: URL's Branch, moved to Commit when set, at Path. Credential, when
// set, is a token for URL's host that the egress proxy injects into the session's requests to
// that host, clone, fetch and push alike; the session holds only a placeholder, kept in the
// clone's config.
type Checkout struct {
	Path, URL, Branch, Commit string
	Credential                string
}

// Network is what a profile lets its sessions reach.
type Network struct {
	DefaultAllow      bool
	AllowHosts        []string
	AllowHostPatterns []string
}

// networkOf is a profile's egress: its network section and the hosts of its repos and of the
// task's checkouts.
func networkOf(n *appv1.ProfileNetwork, repos []*appv1.ProfileRepo, checkouts []Checkout) Network {
	out := Network{DefaultAllow: n.GetDefault() == "allow", AllowHosts: slices.Clone(n.GetAllowHosts()), AllowHostPatterns: slices.Clone(n.GetAllowHostPatterns())}
	for _, r := range repos {
		if h := repoHost(r); h != "" {
			out.AllowHosts = append(out.AllowHosts, h)
		}
	}
	for _, c := range checkouts {
		if u, err := url.Parse(c.URL); err == nil && u.Hostname() != "" {
			out.AllowHosts = append(out.AllowHosts, strings.ToLower(u.Hostname()))
		}
	}
	return out
}

// repoHost is the host a repo is cloned from: its remote's, or its remote_url's (an https URL
// or scp-like git@host:path).
func repoHost(r *appv1.ProfileRepo) string {
	if h := r.GetRemote().GetHost(); h != "" {
		return strings.ToLower(h)
	}
	raw := r.GetRemoteUrl()
	if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
		return strings.ToLower(u.Hostname())
	}
	if _, rest, ok := strings.Cut(raw, "@"); ok {
		host, _, _ := strings.Cut(rest, ":")
		return strings.ToLower(host)
	}
	return ""
}

// secretRefs splits the profile's secrets: those in mode "env" as environment variable → org
// secret, and those in mode "proxy", which reach the session only as placeholders.
func secretRefs(profileSecrets []*appv1.ProfileSecret) (map[string]string, []*appv1.ProfileSecret) {
	refs := make(map[string]string, len(profileSecrets))
	var proxied []*appv1.ProfileSecret
	for _, ps := range profileSecrets {
		if ps.GetMode() == "proxy" {
			proxied = append(proxied, ps)
			continue
		}
		refs[ps.GetEnvVar()] = ps.GetRef()
	}
	return refs, proxied
}

// follow fills each task's sessions, as SessionService shows them, with the primary one's role
// and the profile snapshot the task started from. Statuses are not read here: the writers of
// sessions move their tasks as things happen (records/taskstatus). Without session state (no
// Sessions, or it failed) the sessions stay bare, and unavailable says so.
func (s *Service) follow(ctx context.Context, recs []record, tasks []*appv1.Task) (unavailable bool) {
	if s.sessions == nil {
		return false
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.SessionIDs...)
	}
	if len(ids) == 0 {
		return false
	}
	sessions, err := s.sessions.Sessions(ctx, ids)
	if err != nil {
		return true
	}
	for i, r := range recs {
		var src source
		_ = json.Unmarshal([]byte(r.SourceJSON), &src)
		profile := &appv1.ProfileSnapshot{}
		if protojson.Unmarshal(src.Profile, profile) != nil {
			profile = nil
		}
		for j, ref := range tasks[i].Sessions {
			sess, ok := sessions[ref.GetSessionId()]
			if !ok {
				continue
			}
			ref.Session, ref.Profile = sess, profile
			if j == 0 {
				ref.Role = opt.String("primary")
			}
		}
	}
	return false
}

// StopSessions deletes the sessions of the caller's task taskID, which stops its agent (a
// review's agent that ran out of time must not keep working); sessions already gone are no
// error. The task stays, following its sessions' end.
func (s *Service) StopSessions(ctx context.Context, taskID string) error {
	if s.sessions == nil {
		return nil
	}
	rec, err := s.load(ctx, nil, "task", taskID)
	if err != nil {
		return err
	}
	for _, id := range rec.SessionIDs {
		if err := s.sessions.Delete(ctx, id); err != nil {
			return fmt.Errorf("stop session %s of task %s: %w", id, taskID, err)
		}
	}
	return nil
}

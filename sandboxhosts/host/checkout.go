package host

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"

	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/sandboxhosts/egressproxy"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// Events of a session's repository checkouts at start.
const (
	KindRepoCloneStarted = "repo.clone.started"
	KindRepoCloned       = "repo.cloned"
	KindRepoCloneFailed  = "repo.clone.failed"
)

// cloneTail is how much of a failed clone's output its event and error keep.
const cloneTail = 2 << 10

// checkout clones repos into the sandbox with the image's git, as the image's user, over the
// egress proxy, at the remote's default branch or the requested ref (a branch or tag). A repo
// whose host one of the session's proxy secrets may go to is fetched with that secret's
// placeholder as its credential, which the proxy swaps for the value: the credential never
// enters the sandbox. The first failure stops and is returned.
func (h *Host) checkout(ctx context.Context, b *box, repos []*hostv1.RepoCheckout, network *hostv1.SandboxNetwork) error {
	for _, r := range repos {
		if err := h.clone(ctx, b, r, network); err != nil {
			return err
		}
	}
	return nil
}

func (h *Host) clone(ctx context.Context, b *box, r *hostv1.RepoCheckout, network *hostv1.SandboxNetwork) error {
	p := path.Clean(r.GetPath())
	u, err := url.Parse(r.GetUrl())
	if !path.IsAbs(p) || p == "/" || err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
		return apierr.InvalidArgument("repos", fmt.Sprintf("repo %q at %q: want an https URL without credentials and an absolute path", r.GetUrl(), r.GetPath()))
	}
	info := map[string]any{"path": p, "url": u.Redacted(), "ref": r.GetRef()}
	b.emit(KindRepoCloneStarted, info)
	if err := b.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return h.cloneFailed(b, info, err.Error())
	}
	if err := b.user.chown(b.root, path.Dir(p)); err != nil && path.Dir(p) != "/" {
		return h.cloneFailed(b, info, err.Error())
	}
	argv := []string{"git", "clone", "--progress"}
	if header := gitCredential(u, network); header != "" {
		// In the clone's config, for its host only, so that the agent's own fetches and pushes
		// carry the placeholder too: it is worth nothing outside this session's proxy, which
		// swaps it for the value on the way to that host alone.
		argv = append(argv, "--config", "http."+u.Scheme+"://"+u.Host+"/.extraHeader="+header)
	}
	if r.GetRef() != "" {
		argv = append(argv, "--branch", r.GetRef())
	}
	argv = append(argv, "--", u.String(), p)
	env := append([]string{"GIT_TERMINAL_PROMPT=0"}, b.env...)
	var out strings.Builder
	exit, err := b.sup.Exec(ctx, supervisor.ExecRequest{
		Argv: argv, Env: env, User: b.user.identity(), Timeout: h.opts.Limits.ExecTimeout.Max,
	}, supervisor.Events{Output: func(o supervisor.Output) error {
		out.Write(o.Data)
		return nil
	}})
	if err != nil {
		return h.cloneFailed(b, info, "cannot run git: "+err.Error())
	}
	if code := exit.ShellExitStatus(); code != 0 {
		msg := tail(out.String(), cloneTail)
		if code == 127 {
			msg = "the image has no git"
		}
		return h.cloneFailed(b, info, fmt.Sprintf("git clone exited %d: %s", code, msg))
	}
	b.emit(KindRepoCloned, info)
	return nil
}

// cloneFailed reports a failed clone and returns the error that fails the session.
func (h *Host) cloneFailed(b *box, info map[string]any, why string) error {
	info["error"] = why
	b.emit(KindRepoCloneFailed, info)
	what := fmt.Sprint(info["url"])
	if ref, _ := info["ref"].(string); ref != "" {
		what += "#" + ref
	}
	return apierr.FailedPrecondition("clone %s into %s: %s", what, info["path"], why)
}

// gitCredential is the Authorization header that makes the proxy inject the credential of a
// secret that may go to u's host: the secret's placeholder as a GitHub-style token.
func gitCredential(u *url.URL, network *hostv1.SandboxNetwork) string {
	port := 443
	if p, err := strconv.Atoi(u.Port()); err == nil {
		port = p
	}
	for _, s := range network.GetSecrets() {
		sec := egressproxy.Secret{AllowHosts: s.GetAllowHosts(), AllowHostPatterns: s.GetAllowHostPatterns()}
		if sec.Allows(u.Hostname(), port) {
			return "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+s.GetPlaceholder()))
		}
	}
	return ""
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

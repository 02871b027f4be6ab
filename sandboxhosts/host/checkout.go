package host

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"regexp"
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
	commit := r.GetCommit()
	if commit != "" && !objectName.MatchString(commit) {
		return apierr.InvalidArgument("repos", fmt.Sprintf("repo %q: commit %q is not a hex object name", r.GetUrl(), commit))
	}
	info := map[string]any{"path": p, "url": u.Redacted(), "ref": r.GetRef()}
	if commit != "" {
		info["commit"] = commit
	}
	b.emit(KindRepoCloneStarted, info)
	if err := b.root.MkdirAll(path.Dir(p), 0o755); err != nil {
		return h.cloneFailed(b, info, err.Error())
	}
	if err := b.user.chown(b.root, path.Dir(p)); err != nil && path.Dir(p) != "/" {
		return h.cloneFailed(b, info, err.Error())
	}
	env := append([]string{"GIT_TERMINAL_PROMPT=0"}, b.env...)
	argv := []string{"git", "clone", "--progress"}
	if header := gitCredential(u, r.GetSecret(), network); header != "" {
		// In the clone's config, for its host only, so that the agent's own fetches and pushes
		// carry the placeholder too: it is worth nothing outside this session's proxy, which
		// swaps it for the value on the way to that host alone.
		argv = append(argv, "--config", "http."+u.Scheme+"://"+u.Host+"/.extraHeader="+header)
	}
	if r.GetRef() != "" {
		argv = append(argv, "--branch", r.GetRef())
	}
	if err := h.git(ctx, b, append(argv, "--", u.String(), p), env, ""); err != nil {
		return h.cloneFailed(b, info, err.Error())
	}
	if commit != "" {
		// A commit the clone's refs do not reach (an older push, a fork's head) is fetched by
		// name, which GitHub serves for any commit of the repository.
		steps := [][]string{{"git", "checkout", "-q", "--detach", commit}}
		if r.GetRef() != "" {
			steps[0] = []string{"git", "reset", "-q", "--hard", commit}
		}
		if h.git(ctx, b, []string{"git", "cat-file", "-e", commit + "^{commit}"}, env, p) != nil {
			steps = append([][]string{{"git", "fetch", "-q", "origin", commit}}, steps...)
		}
		for _, argv := range steps {
			if err := h.git(ctx, b, argv, env, p); err != nil {
				return h.cloneFailed(b, info, err.Error())
			}
		}
	}
	b.emit(KindRepoCloned, info)
	return nil
}

// objectName is a git object name: a commit a checkout may name.
var objectName = regexp.MustCompile(`^[0-9a-f]{7,64}$`)

// git runs one step of a checkout in dir ("" for the sandbox's default), as the image's user,
// and answers its failure with the tail of what it said.
func (h *Host) git(ctx context.Context, b *box, argv, env []string, dir string) error {
	var out strings.Builder
	exit, err := b.sup.Exec(ctx, supervisor.ExecRequest{
		Argv: argv, Env: env, Workdir: dir, User: b.user.identity(), Timeout: h.opts.Limits.ExecTimeout.Max,
	}, supervisor.Events{Output: func(o supervisor.Output) error {
		out.Write(o.Data)
		return nil
	}})
	if err != nil {
		return fmt.Errorf("cannot run git: %w", err)
	}
	if code := exit.ShellExitStatus(); code != 0 {
		msg := tail(out.String(), cloneTail)
		if code == 127 {
			msg = "the image has no git"
		}
		return fmt.Errorf("git %s exited %d: %s", argv[1], code, msg)
	}
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
// secret that may go to u's host (the one named secret, when named): the secret's placeholder
// as a GitHub-style token.
func gitCredential(u *url.URL, secret string, network *hostv1.SandboxNetwork) string {
	port := 443
	if p, err := strconv.Atoi(u.Port()); err == nil {
		port = p
	}
	for _, s := range network.GetSecrets() {
		if secret != "" && s.GetName() != secret {
			continue
		}
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

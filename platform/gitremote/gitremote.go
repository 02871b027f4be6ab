// Package gitremote reads the git remotes profiles name: a remote URL in any network form git
// accepts, split into host, owner and name, and the branch or tag after its "#". Profiles check
// them with it when they are written, and sessions clone them with it, so both read a remote
// the same way.
package gitremote

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/egress"
)

var errLocalRemote = errors.New("is a local path, not a network remote: use https://host/owner/name or git@host:owner/name")

// ParseRemote splits a git remote URL into host, owner and name. It reads the network forms git
// accepts: https://, http://, ssh:// (with an optional port) and git:// URLs, and the scp-like
// [user@]host:owner/name. A trailing ".git" and slashes are dropped; the host is lowercased and
// loses any user info and port. Everything before the last path segment is the owner, so nested
// groups (GitLab's group/sub/project) keep their whole path as owner. Local paths and file://
// URLs name no host, so they are errors. A "#ref" (see SplitRef) is not part of the remote.
func ParseRemote(raw string) (*appv1.ProfileRepoRemote, error) {
	s, _, _ := SplitRef(strings.TrimSpace(raw))
	if s == "" {
		return nil, errors.New("is empty")
	}
	host, repoPath, err := splitRemote(s)
	if err != nil {
		return nil, err
	}
	if host == "" {
		return nil, errors.New("has no host")
	}
	if host, err = egress.CanonicalHost(host); err != nil {
		return nil, fmt.Errorf("has an invalid host: it %w", err)
	}
	owner, name, err := splitRepoPath(repoPath)
	if err != nil {
		return nil, err
	}
	return &appv1.ProfileRepoRemote{Host: host, Owner: owner, Name: name}, nil
}

// splitRemote returns the host and repository path of a URL or of git's scp-like form.
func splitRemote(s string) (host, repoPath string, err error) {
	scheme, _, isURL := strings.Cut(s, "://")
	if !isURL {
		return splitSCPLike(s)
	}
	switch strings.ToLower(scheme) {
	case "https", "http", "ssh", "git":
	case "file":
		return "", "", errors.New("is a file:// URL, which names a local repository, not a network remote")
	default:
		return "", "", fmt.Errorf("has scheme %q: use https, http, ssh or git", scheme)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", "", fmt.Errorf("is not a valid URL: %w", errors.Unwrap(err))
	}
	return u.Hostname(), u.Path, nil
}

// splitSCPLike reads [user@]host:path. Like git, it takes a colon before any slash to mean a
// remote host, and anything else to be a local path; a one-letter "host" is a Windows drive.
func splitSCPLike(s string) (host, repoPath string, err error) {
	colon := strings.IndexByte(s, ':')
	if colon <= 1 || strings.ContainsAny(s[:colon], `/\`) {
		return "", "", errLocalRemote
	}
	host = s[:colon]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	return host, s[colon+1:], nil
}

// splitRepoPath splits "owner/…/name(.git)" at its last slash.
func splitRepoPath(p string) (owner, name string, err error) {
	p = strings.TrimSuffix(strings.Trim(p, "/"), ".git")
	segments := strings.Split(p, "/")
	if len(segments) < 2 {
		return "", "", errors.New("must name an owner and a repository, as in host/owner/name")
	}
	for _, seg := range segments {
		if seg == "" || seg == "." || seg == ".." {
			return "", "", fmt.Errorf("has path %q with an empty, \".\" or \"..\" segment", p)
		}
	}
	last := len(segments) - 1
	return strings.Join(segments[:last], "/"), segments[last], nil
}

// SplitRef splits a remote_url into the remote and the ref a session checks out: the branch or
// tag after a "#", as Docker build contexts and npm's git URLs name one, or "" for the remote's
// default branch. No remote git accepts holds a "#" of its own.
// hasRef says whether it held a "#" at all, as an empty ref after one is a mistake to name.
func SplitRef(remoteURL string) (remote, ref string, hasRef bool) {
	return strings.Cut(remoteURL, "#")
}

// refRe is a branch or tag name as `git clone --branch` takes it, within git's
// check-ref-format rules: no leading '-' or '.', none of space, '~', '^', ':', '?', '*', '[',
// '\\' or control characters.
var refRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/+@-]*$`)

// CheckRef says what is wrong with ref as a branch or tag to check out ("" when nothing is).
func CheckRef(ref string) string {
	switch {
	case ref == "":
		return "names no ref after '#': name a branch or tag, or drop the '#'"
	case len(ref) > 255:
		return "has a ref of more than 255 characters"
	case !refRe.MatchString(ref), strings.Contains(ref, ".."), strings.Contains(ref, "//"),
		strings.Contains(ref, "@{"), strings.HasSuffix(ref, "/"), strings.HasSuffix(ref, "."),
		strings.HasSuffix(ref, ".lock"):
		return fmt.Sprintf("has ref %q, which is not a branch or tag name git accepts", ref)
	}
	return ""
}

// CloneURL is the URL and ref a session clones a profile repo at: its remote_url's remote (the
// part before any "#ref") when that is https, else https from its parsed remote's host, owner
// and name (a scp-like or ssh remote_url's), as sessions reach git over the egress proxy.
func CloneURL(remoteURL string, r *appv1.ProfileRepoRemote) (cloneURL, ref string) {
	u, ref, _ := SplitRef(remoteURL)
	if !strings.HasPrefix(u, "https://") && r.GetHost() != "" && r.GetOwner() != "" && r.GetName() != "" {
		u = "https://" + r.GetHost() + "/" + r.GetOwner() + "/" + strings.TrimSuffix(r.GetName(), ".git") + ".git"
	}
	return u, ref
}

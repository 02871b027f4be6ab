package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/hangar-dev/hangar/platform/egress"
)

// ModelRouter is one model router the deployment offers: an upstream with a model catalog
// (OpenRouter's shape: GET <BaseURL>/models) that sessions may send model traffic through.
type ModelRouter struct {
	ID          string `json:"id"`
	Label       string `json:"label"`
	Description string `json:"description"`
	// BaseURL is the API root, e.g. https://openrouter.ai/api/v1; https, or http to loopback.
	BaseURL   string   `json:"base_url"`
	Protocols []string `json:"protocols"`
	// CredentialSecret names the secret holding the router's API key; never the key itself.
	CredentialSecret string   `json:"credential_secret"`
	EgressHosts      []string `json:"egress_hosts"`
	DefaultModel     string   `json:"default_model"`
}

// Router environment variables (environment's tags name them too): the list inline as JSON, or
// the path of a JSON file holding it.
const (
	envModelRouters     = "HANGAR_MODEL_ROUTERS"
	envModelRoutersFile = "HANGAR_MODEL_ROUTERS_FILE"
)

var (
	routerIDPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$`)
	secretRefRegexp = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./-]{0,127}$`)
	hostPattern     = regexp.MustCompile(`^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$`)
)

// loadModelRouters reads the routers from the inline list or the file, whichever is set; none
// when neither is.
func loadModelRouters(inline, path *string) ([]ModelRouter, error) {
	switch {
	case inline != nil && path != nil:
		return nil, fmt.Errorf("set %s or %s, not both", envModelRouters, envModelRoutersFile)
	case inline != nil:
		rs, err := ParseModelRouters([]byte(*inline))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", envModelRouters, err)
		}
		return rs, nil
	case path != nil:
		b, err := os.ReadFile(*path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", envModelRoutersFile, err)
		}
		rs, err := ParseModelRouters(b)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", envModelRoutersFile, *path, err)
		}
		return rs, nil
	}
	return nil, nil
}

// ParseModelRouters decodes a JSON list of routers and validates every one, refusing unknown
// fields so a misspelt key is an error rather than a silently missing setting.
func ParseModelRouters(data []byte) ([]ModelRouter, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var rs []ModelRouter
	if err := dec.Decode(&rs); err != nil {
		return nil, fmt.Errorf("decode model routers (a JSON list of {id, label, base_url, ...}): %w", err)
	}
	seen := make(map[string]bool, len(rs))
	var errs []error
	for i := range rs {
		r := &rs[i]
		if r.Label == "" {
			r.Label = r.ID
		}
		if err := r.validate(); err != nil {
			errs = append(errs, fmt.Errorf("model router %d (%q): %w", i, r.ID, err))
		}
		if seen[r.ID] {
			errs = append(errs, fmt.Errorf("model router %d: id %q is used twice", i, r.ID))
		}
		seen[r.ID] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rs, nil
}

func (r ModelRouter) validate() error {
	var errs []error
	if !routerIDPattern.MatchString(r.ID) {
		errs = append(errs, errors.New("id: want a slug of lowercase letters, digits and inner dashes, at most 63 characters"))
	}
	if err := checkBaseURL(r.BaseURL); err != nil {
		errs = append(errs, fmt.Errorf("base_url: %w", err))
	}
	for _, p := range r.Protocols {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, errors.New("protocols: empty entry"))
		}
	}
	if r.CredentialSecret != "" {
		if !secretRefRegexp.MatchString(r.CredentialSecret) {
			errs = append(errs, errors.New("credential_secret: want a secret's reference name (letters, digits, _ . / -)"))
		} else if strings.HasPrefix(r.CredentialSecret, "sk-") {
			errs = append(errs, errors.New("credential_secret: looks like an API key; give the name of the secret that holds it"))
		}
	}
	for _, h := range r.EgressHosts {
		if !hostPattern.MatchString(h) {
			errs = append(errs, fmt.Errorf("egress_hosts: %q is not a host name", h))
		} else if egress.IsMetadataHost(strings.Split(h, ":")[0]) {
			errs = append(errs, fmt.Errorf("egress_hosts: %q is a link-local or cloud metadata address", h))
		}
	}
	return errors.Join(errs...)
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	switch {
	case host == "":
		return fmt.Errorf("%q has no host", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: want no credentials, query or fragment", raw)
	case egress.IsMetadataHost(host):
		return fmt.Errorf("%q is a link-local or cloud metadata address, which would expose the deployment's own credentials", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(host):
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("%q: http is allowed only to loopback; use https", raw)
	}
	return fmt.Errorf("%q: want an https URL", raw)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

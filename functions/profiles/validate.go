package profiles

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/gitremote"
)

// Bounds on a profile's text fields, in characters, and on the whole stored profile.
const (
	maxNameLen        = 80
	maxDescriptionLen = 2000
	maxIconLen        = 64
	// maxShortLen bounds harness, model, effort, designation, model_router and a grant's
	// connection_id and operation: names, not prose.
	maxShortLen = 100
	// maxImageIDLen leaves room for a full OCI reference with a digest.
	maxImageIDLen    = 512
	maxConstraintLen = 256
	maxPathLen       = 4096
	maxRemoteURLLen  = 2048
	// maxProfileBytes keeps a profile well inside Firestore's 1 MiB document limit, leaving room
	// for the field names Firestore stores beside the values.
	maxProfileBytes = 900 << 10
)

// Values of the enumerated string fields; the first of each pair is what "" means.
const (
	networkDeny  = "deny"
	networkAllow = "allow"
	modeEnv      = "env"
	modeProxy    = "proxy"
	scopeUser    = "user"
	scopeOrg     = "org"
)

var (
	envNameRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	skillRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	secretRefRe = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)
	appNameRe   = regexp.MustCompile(`^[a-z][a-z0-9-]{0,30}$`)
)

// spec is every field of a profile a client sets: CreateProfileRequest and UpdateProfileRequest
// both satisfy it, so both methods go through one validation and one record-building path.
type spec interface {
	GetName() string
	GetDescription() string
	GetIcon() string
	GetImageId() string
	GetIncludeUserTokens() bool
	GetEnvVars() map[string]string
	GetSkills() []string
	GetNetwork() *appv1.ProfileNetwork
	GetSecrets() []*appv1.ProfileSecret
	GetHarness() string
	GetModel() string
	GetEffort() string
	GetDesignation() string
	GetIntegrationGrants() []*appv1.ProfileIntegrationGrant
	GetRepos() []*appv1.ProfileRepo
	GetModelRouter() string
	GetApps() []*appv1.SessionApp
}

var (
	_ spec = (*appv1.CreateProfileRequest)(nil)
	_ spec = (*appv1.UpdateProfileRequest)(nil)
)

// parseSpec validates in, adding every problem to v, and returns the normalised record (without
// id, owner or times). The record is only meaningful when v stays empty.
func parseSpec(v *apierr.Violations, in spec, lim config.Limits) record {
	c := checker{Violations: v, lim: lim}
	r := record{
		Name:              c.requiredText("name", in.GetName(), maxNameLen),
		Description:       c.text("description", in.GetDescription(), maxDescriptionLen, true),
		Icon:              c.text("icon", in.GetIcon(), maxIconLen, false),
		ImageID:           c.requiredText("image_id", in.GetImageId(), maxImageIDLen),
		IncludeUserTokens: in.GetIncludeUserTokens(),
		EnvVars:           c.envVars(in.GetEnvVars()),
		Skills:            c.skills(in.GetSkills()),
		Network:           c.network(in.GetNetwork()),
		Secrets:           c.secrets(in.GetSecrets(), in.GetEnvVars()),
		Harness:           c.text("harness", in.GetHarness(), maxShortLen, false),
		Model:             c.text("model", in.GetModel(), maxShortLen, false),
		Effort:            c.text("effort", in.GetEffort(), maxShortLen, false),
		Designation:       c.text("designation", in.GetDesignation(), maxShortLen, false),
		ModelRouter:       c.text("model_router", in.GetModelRouter(), maxShortLen, false),
		IntegrationGrants: c.grants(in.GetIntegrationGrants()),
		Repos:             c.repos(in.GetRepos()),
		Apps:              c.apps(in.GetApps()),
	}
	r.NameKey = nameKey(r.Name)
	if v.Err() == nil {
		c.size(r.proto())
	}
	return r
}

// nameKey is the form in which names are unique: case does not make two profiles different.
func nameKey(name string) string { return strings.ToLower(name) }

type checker struct {
	*apierr.Violations
	lim config.Limits
}

// text trims s and checks its length and that it has no control characters (multiline text may
// have newlines and tabs). Why trim: surrounding spaces are invisible in every client, so two
// names differing only by them would look like duplicates.
func (c checker) text(field, s string, limit int, multiline bool) string {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n > limit {
		c.Addf(field, "must be at most %d characters (is %d)", limit, n)
	}
	if strings.ContainsFunc(s, func(r rune) bool {
		return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\t' || r == '\r'))
	}) {
		c.Add(field, "must not contain control characters")
	}
	return s
}

func (c checker) requiredText(field, s string, limit int) string {
	s = c.text(field, s, limit, false)
	if s == "" {
		c.Add(field, "is required")
	}
	return s
}

// fits reports whether a list is within the item limit, reporting it otherwise. The items of an
// oversized list are not checked one by one, so one request cannot produce thousands of
// violations.
func (c checker) fits(field string, n int) bool {
	if n > c.lim.MaxProfileListItems {
		c.Addf(field, "has %d items; at most %d are allowed", n, c.lim.MaxProfileListItems)
		return false
	}
	return true
}

// firstSeen finds duplicates within one list: it maps each key to the index it first appeared at.
type firstSeen[K comparable] map[K]int

// dup reports the earlier index of k, or records i as its first.
func (s firstSeen[K]) dup(k K, i int) (int, bool) {
	if j, ok := s[k]; ok {
		return j, true
	}
	s[k] = i
	return 0, false
}

func index(field string, i int) string { return fmt.Sprintf("%s[%d]", field, i) }

func (c checker) envVars(in map[string]string) map[string]string {
	if len(in) > c.lim.MaxProfileEnvVars {
		c.Addf("env_vars", "has %d entries; at most %d are allowed", len(in), c.lim.MaxProfileEnvVars)
		return nil
	}
	// Sorted, so that violations come in the same order on every call.
	for _, name := range slices.Sorted(maps.Keys(in)) {
		field := fmt.Sprintf("env_vars[%q]", name)
		value := in[name]
		if !envNameRe.MatchString(name) {
			c.Add(field, "name must be a letter or '_' followed by letters, digits or '_'")
		}
		if len(value) > c.lim.MaxValueBytes {
			c.Addf(field, "value must be at most %d bytes (is %d)", c.lim.MaxValueBytes, len(value))
		}
		// Why: a process environment is a list of NUL-terminated strings; no value can hold one.
		if strings.ContainsRune(value, 0) {
			c.Add(field, "value must not contain a NUL character")
		}
	}
	if len(in) == 0 {
		return nil
	}
	return in
}

func (c checker) skills(in []string) []string {
	if !c.fits("skills", len(in)) {
		return nil
	}
	seen := firstSeen[string]{}
	for i, s := range in {
		if !skillRe.MatchString(s) {
			c.Add(index("skills", i), "must be 1-64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
		} else if j, dup := seen.dup(s, i); dup {
			c.Addf(index("skills", i), "duplicates skills[%d]", j)
		}
	}
	return in
}

func (c checker) network(in *appv1.ProfileNetwork) networkRecord {
	def := in.GetDefault()
	switch def {
	case "":
		def = networkDeny
	case networkDeny, networkAllow:
	default:
		c.Addf("network.default", "must be %q (the default) or %q", networkDeny, networkAllow)
	}
	// Why keep the allow lists under "allow": switching back to "deny" then restores them.
	return networkRecord{
		Default:           def,
		AllowHosts:        c.hosts("network.allow_hosts", in.GetAllowHosts(), egress.NormalizeHost),
		AllowHostPatterns: c.hosts("network.allow_host_patterns", in.GetAllowHostPatterns(), egress.NormalizeHostPattern),
	}
}

// hosts normalises a list of hosts or host patterns, reporting invalid and duplicate entries.
func (c checker) hosts(field string, in []string, normalize func(string) (string, error)) []string {
	if !c.fits(field, len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	seen := firstSeen[string]{}
	for i, raw := range in {
		h, err := normalize(raw)
		if err != nil {
			c.Add(index(field, i), err.Error())
		} else if j, dup := seen.dup(h, i); dup {
			c.Addf(index(field, i), "duplicates %s", index(field, j))
		}
		out[i] = h
	}
	return out
}

// secrets checks secret bindings. env is the profile's env_vars: a variable has one source, so a
// secret may not bind a name env_vars also sets.
func (c checker) secrets(in []*appv1.ProfileSecret, env map[string]string) []secretRecord {
	if !c.fits("secrets", len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]secretRecord, len(in))
	envVars := firstSeen[string]{}
	for i, s := range in {
		f := index("secrets", i)
		switch ref := s.GetRef(); {
		case ref == "":
			c.Add(f+".ref", "is required")
		case !secretRefRe.MatchString(ref):
			c.Add(f+".ref", "must be 1-128 of A-Z, a-z, 0-9, '_', '.', '/' and '-'")
		}
		name := s.GetEnvVar()
		switch _, inEnv := env[name]; {
		case name == "":
			c.Add(f+".env_var", "is required")
		case !envNameRe.MatchString(name):
			c.Add(f+".env_var", "must be a letter or '_' followed by letters, digits or '_'")
		case inEnv:
			c.Addf(f+".env_var", "is also set in env_vars[%q]; a variable takes its value from one place", name)
		default:
			if j, dup := envVars.dup(name, i); dup {
				c.Addf(f+".env_var", "duplicates secrets[%d].env_var", j)
			}
		}
		out[i] = secretRecord{
			Ref: s.GetRef(), EnvVar: name, Mode: c.secretMode(f, s),
			AllowHosts:        c.hosts(f+".allow_hosts", s.GetAllowHosts(), egress.NormalizeHost),
			AllowHostPatterns: c.hosts(f+".allow_host_patterns", s.GetAllowHostPatterns(), egress.NormalizeHostPattern),
		}
	}
	return out
}

// secretMode checks a secret's mode against its host lists and returns the mode normalised.
func (c checker) secretMode(f string, s *appv1.ProfileSecret) string {
	hosts, patterns := len(s.GetAllowHosts()), len(s.GetAllowHostPatterns())
	switch s.GetMode() {
	case "", modeEnv:
		// Why refuse hosts: an env secret is readable by every process in the sandbox, whatever
		// it talks to, and a host list would suggest otherwise.
		const why = "applies only to mode \"proxy\"; a secret in mode \"env\" is visible to the whole sandbox"
		if hosts > 0 {
			c.Add(f+".allow_hosts", why)
		}
		if patterns > 0 {
			c.Add(f+".allow_host_patterns", why)
		}
		return modeEnv
	case modeProxy:
		// Why: the egress proxy adds the secret only to requests bound for these hosts.
		if hosts+patterns == 0 {
			c.Add(f+".allow_hosts", "or allow_host_patterns must name at least one host in mode \"proxy\": the proxy injects the secret only into requests to them")
		}
		return modeProxy
	}
	c.Addf(f+".mode", "must be %q (the default) or %q", modeEnv, modeProxy)
	return s.GetMode()
}

func (c checker) grants(in []*appv1.ProfileIntegrationGrant) []grantRecord {
	if !c.fits("integration_grants", len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]grantRecord, len(in))
	for i, g := range in {
		f := index("integration_grants", i)
		scope := g.GetCredentialScope()
		switch scope {
		case "":
			scope = scopeUser
		case scopeUser, scopeOrg:
		default:
			c.Addf(f+".credential_scope", "must be %q (the default) or %q", scopeUser, scopeOrg)
		}
		out[i] = grantRecord{
			ConnectionID:        c.requiredText(f+".connection_id", g.GetConnectionId(), maxShortLen),
			Operation:           c.requiredText(f+".operation", g.GetOperation(), maxShortLen),
			ResourceConstraints: c.constraints(f+".resource_constraints", g.GetResourceConstraints()),
			CredentialScope:     scope,
		}
	}
	return out
}

func (c checker) constraints(field string, in []string) []string {
	if !c.fits(field, len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = c.requiredText(index(field, i), s, maxConstraintLen)
	}
	return out
}

func (c checker) repos(in []*appv1.ProfileRepo) []repoRecord {
	if !c.fits("repos", len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]repoRecord, len(in))
	seen := firstSeen[string]{}
	for i, r := range in {
		f := index("repos", i)
		p := c.requiredText(f+".path", r.GetPath(), maxPathLen)
		switch {
		case p == "": // requiredText said so
		case !path.IsAbs(p):
			c.Add(f+".path", "must be absolute")
		// A clean absolute path has no ".." left in it, so this also keeps repos inside the tree.
		case path.Clean(p) != p:
			c.Addf(f+".path", "must be clean (no '.', '..', repeated or trailing '/'); did you mean %q?", path.Clean(p))
		case p == "/":
			c.Add(f+".path", "must not be the root directory")
		default:
			if j, dup := seen.dup(p, i); dup {
				c.Addf(f+".path", "duplicates repos[%d].path", j)
			}
		}
		// The client's remote is ignored: it is always derived from remote_url.
		out[i] = repoRecord{Path: p}
		out[i].RemoteURL, out[i].Remote = c.remote(f+".remote_url", r.GetRemoteUrl())
	}
	return out
}

// remote checks an optional remote URL and returns it with its parsed parts.
func (c checker) remote(field, raw string) (string, *remoteRecord) {
	s := c.text(field, raw, maxRemoteURLLen, false)
	if s == "" {
		return "", nil
	}
	// Why: every member of the organisation reads profiles, so a token in a URL would leak to all
	// of them; credentials belong in secrets.
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || u.Scheme == "https" || u.Scheme == "http" {
			c.Add(field, "must not carry credentials; give them to the session as a secret")
			return s, nil
		}
	}
	if _, ref, hasRef := gitremote.SplitRef(s); hasRef {
		if why := gitremote.CheckRef(ref); why != "" {
			c.Add(field, why)
			return s, nil
		}
	}
	rem, err := gitremote.ParseRemote(s)
	if err != nil {
		c.Add(field, err.Error())
		return s, nil
	}
	return s, &remoteRecord{Host: rem.GetHost(), Owner: rem.GetOwner(), Name: rem.GetName()}
}

// reservedApps are the names of every session's built-in apps (functions/sessions: IDEApp,
// BrowserApp), which a session's own apps cannot take.
var reservedApps = map[string]bool{"ide": true, "browser": true}

func (c checker) apps(in []*appv1.SessionApp) []appRecord {
	if !c.fits("apps", len(in)) || len(in) == 0 {
		return nil
	}
	out := make([]appRecord, len(in))
	names, ports := firstSeen[string]{}, firstSeen[uint32]{}
	for i, a := range in {
		f := index("apps", i)
		if !appNameRe.MatchString(a.GetName()) {
			c.Add(f+".name", "must be 1-31 of a-z, 0-9 and '-', starting with a letter")
		} else if reservedApps[a.GetName()] {
			c.Addf(f+".name", "%q is reserved for the built-in app EnsureIde / EnsureBrowser start", a.GetName())
		} else if j, dup := names.dup(a.GetName(), i); dup {
			c.Addf(f+".name", "duplicates apps[%d].name", j)
		}
		if a.GetPort() == 0 || a.GetPort() > 65535 {
			c.Add(f+".port", "must be from 1 to 65535")
		} else if j, dup := ports.dup(a.GetPort(), i); dup {
			c.Addf(f+".port", "duplicates apps[%d].port", j)
		}
		out[i] = appRecord{Name: a.GetName(), Port: a.GetPort()}
	}
	return out
}

// size keeps the stored profile within maxProfileBytes, so that a large but otherwise valid
// request is a clear invalid_argument rather than a failed write. It names the largest field,
// the one worth trimming.
func (c checker) size(p *appv1.Profile) {
	total := proto.Size(p)
	if total <= maxProfileBytes {
		return
	}
	m := p.ProtoReflect()
	largest, most := "", 0
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		alone := m.Type().New()
		alone.Set(fd, v)
		if n := proto.Size(alone.Interface()); n > most {
			largest, most = string(fd.Name()), n
		}
		return true
	})
	c.Addf(largest, "makes the profile %d bytes, more than the %d one profile may hold (this field is %d of them)", total, maxProfileBytes, most)
}

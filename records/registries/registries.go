// Package registries is the store of container registry credentials: one record per registry
// host saying how Hangar authenticates its pulls there — a static username and password, no
// credentials at all, a Google service account to impersonate (Artifact Registry) or an AWS role
// to assume (ECR). A static password is sealed with the deployment's Tink keyset, bound to its
// host, and leaves the store only through Credentials, for the keychain that pulls
// (records/registryauth); every other read is a Summary, which has no secret in it.
//
// Both the API (ImageService's registry methods) and the sandbox hosts read the store, so it is
// a record of its own rather than a service's.
package registries

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
)

// Collection holds one document per registry host, its id the host itself, so that a second
// registry for a host is refused by the create.
const Collection = "registries"

// IDPrefix starts every registry's id.
const IDPrefix = "reg"

// Kind is how Hangar authenticates to a registry; the API's auth_kind.
type Kind string

// The kinds, named as AddRegistryRequest's auth oneof names them.
const (
	// Static sends a username and password (the password sealed at rest).
	Static Kind = "static"
	// Anonymous sends nothing; recorded so that an admin says on purpose the registry is open.
	Anonymous Kind = "anonymous"
	// WorkloadIdentity sends a Google access token of the service account Principal, minted by
	// impersonating it with the host's own Google credentials (Artifact Registry, gcr.io); with
	// no Principal, a token of the host's own credentials.
	WorkloadIdentity Kind = "workload_identity"
	// CloudRegistry sends an Amazon ECR authorization token, got with the host's own AWS
	// credentials after assuming the role Principal (when set).
	CloudRegistry Kind = "cloud_registry"
)

// MaxRegistries bounds the store: a registry is a host an organisation pulls from, a handful.
const MaxRegistries = 100

// MaxPasswordBytes bounds a static password (registry tokens such as a GitHub PAT or a Docker
// Hub access token are well under it; a JSON key file for _json_key logins is a few KiB).
const MaxPasswordBytes = 16 << 10

// Summary is what may be shown of a registry: everything but its password.
type Summary struct {
	ID   string `firestore:"id"`
	Host string `firestore:"host"`
	Kind Kind   `firestore:"kind"`
	// Principal is who Hangar authenticates as: the static username, the service account to
	// impersonate or the role to assume ("" for anonymous, or for the host's own identity).
	Principal string    `firestore:"principal"`
	CreatedAt time.Time `firestore:"created_at"`
	CreatedBy string    `firestore:"created_by"`
}

type record struct {
	Summary
	Sealed []byte `firestore:"sealed"`
}

// Credentials is a registry's summary with its password opened, for the keychain alone.
type Credentials struct {
	Summary
	Password string
}

// Add is one new registry. Principal is the username (Static), the service account
// (WorkloadIdentity) or the role ARN (CloudRegistry); Password is for Static only.
type Add struct {
	Host      string
	Kind      Kind
	Principal string
	Password  string
	By        string
}

// Store reads and writes registry records.
type Store struct {
	db     *firestore.Client
	sealer *seal.Sealer
	now    func() time.Time
}

// New returns the store over db, sealing with sealer.
func New(db *firestore.Client, sealer *seal.Sealer, now func() time.Time) *Store {
	return &Store{db: db, sealer: sealer, now: now}
}

// hostLabel is one DNS label; a registry host is labels joined by dots, with an optional port.
var hostLabel = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// maxHost bounds a host with its port: a DNS name is at most 253 bytes.
const maxHost = 253 + len(":65535")

// NormalHost checks a registry host as an admin gives it and returns it as image references
// name it (lower case; docker.io is index.docker.io): a DNS name or an IP address with an
// optional port, never a scheme, a path, credentials or a query. The error says what is wrong,
// for the field named field.
func NormalHost(field, host string) (string, error) {
	h := strings.ToLower(strings.TrimSpace(host))
	bad := func(why string) (string, error) { return "", apierr.InvalidArgument(field, why) }
	switch {
	case h == "":
		return bad("is required")
	case len(h) > maxHost:
		return bad(fmt.Sprintf("must be at most %d bytes", maxHost))
	case strings.Contains(h, "://"):
		return bad("must be a host name without a scheme, such as ghcr.io or registry.example.com:5000")
	case strings.ContainsAny(h, "/?#"):
		return bad("must be a host name without a path, such as ghcr.io (credentials are per host, not per repository)")
	case strings.Contains(h, "@"):
		return bad("must not carry credentials; give them in the auth fields")
	}
	hostname, port := h, ""
	if i := strings.LastIndex(h, ":"); i >= 0 && !strings.HasSuffix(h, "]") {
		hostname, port = h[:i], h[i+1:]
		if strings.Contains(hostname, ":") && !strings.HasPrefix(hostname, "[") {
			return bad("must bracket an IPv6 address with a port: [::1]:5000")
		}
	}
	if port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("must have a port from 1 to 65535")
		}
	}
	if ip := strings.Trim(hostname, "[]"); net.ParseIP(ip) == nil {
		for _, l := range strings.Split(hostname, ".") {
			if !hostLabel.MatchString(l) {
				return bad("must be a DNS name (letters, digits, '-' and dots) or an IP address, with an optional :port")
			}
		}
	}
	reg, err := name.NewRegistry(h, name.StrictValidation)
	if err != nil {
		return bad("is not a registry host")
	}
	return reg.RegistryStr(), nil
}

// principal patterns, checked so that a typo is caught at Add, not at the first pull.
var (
	serviceAccount = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}@[a-z0-9][a-z0-9.-]{0,190}\.gserviceaccount\.com$`)
	roleARN        = regexp.MustCompile(`^arn:aws[a-z-]{0,16}:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$`)
)

// Add stores a new registry and returns its summary; a second one for the same host is
// already_exists.
func (s *Store) Add(ctx context.Context, a Add) (Summary, error) {
	var v apierr.Violations
	host, err := NormalHost("host", a.Host)
	if err != nil {
		msg, _ := apierr.Violation(err, "host")
		v.Add("host", msg)
	}
	switch a.Kind {
	case Static:
		if a.Principal == "" || len(a.Principal) > 256 || strings.ContainsAny(a.Principal, ":\n\r") {
			v.Add("static.username", "is required: 1 to 256 bytes without ':' or line breaks")
		}
		if a.Password == "" {
			v.Add("static.password", "is required")
		}
		if len(a.Password) > MaxPasswordBytes {
			v.Addf("static.password", "must be at most %d bytes", MaxPasswordBytes)
		}
	case WorkloadIdentity:
		if a.Principal != "" && !serviceAccount.MatchString(a.Principal) {
			v.Add("workload_identity.impersonate_sa", "must be a service account email such as puller@my-project.iam.gserviceaccount.com")
		}
	case CloudRegistry:
		if a.Principal != "" && !roleARN.MatchString(a.Principal) {
			v.Add("cloud_registry.assume_role_arn", "must be an IAM role ARN such as arn:aws:iam::123456789012:role/ecr-pull")
		}
	case Anonymous:
	default:
		v.Add("auth", "is required: one of static, anonymous, workload_identity or cloud_registry")
	}
	if a.Kind != Static && a.Password != "" {
		v.Add("auth", "only static registries have a password")
	}
	if err := v.Err(); err != nil {
		return Summary{}, err
	}
	rec := record{Summary: Summary{
		ID: ids.New(IDPrefix), Host: host, Kind: a.Kind, Principal: a.Principal, CreatedAt: s.now(), CreatedBy: a.By,
	}}
	if a.Kind == Static {
		if rec.Sealed, err = s.sealer.Seal([]byte(a.Password), owner(host)); err != nil {
			return Summary{}, err
		}
	}
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, host)
		if err != nil {
			return err
		}
		if cur != nil {
			return apierr.AlreadyExists("registry %s is already configured (as %s); delete it first to change how Hangar signs in", host, cur.Kind)
		}
		n, err := store.Count(ctx, s.db.Collection(Collection).Query, tx)
		if err != nil {
			return fmt.Errorf("count registries: %w", err)
		}
		if n >= MaxRegistries {
			return apierr.ResourceExhausted("%d registries are configured, the most allowed; delete one first", n)
		}
		return tx.Create(s.doc(host), rec)
	})
	if err != nil {
		return Summary{}, fmt.Errorf("add registry %s: %w", host, err)
	}
	generation.Add(1)
	return rec.Summary, nil
}

// generation counts the registries Add and Delete changed in this process, through any Store.
var generation atomic.Uint64

// Generation is a number that changes whenever Add or Delete changed a registry in this
// process: a cache of Credentials read before it changed is stale, whichever Store it came
// through. (Another process's changes are not seen here; a cache rechecks for those.)
func Generation() uint64 { return generation.Load() }

// List returns every registry's summary, by host.
func (s *Store) List(ctx context.Context) ([]Summary, error) {
	recs, err := store.All[record](s.db.Collection(Collection).OrderBy("host", firestore.Asc).Limit(MaxRegistries).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list registries: %w", err)
	}
	out := make([]Summary, len(recs))
	for i, r := range recs {
		out[i] = r.Summary
	}
	return out, nil
}

// Delete deletes the registry of host and returns what it was; an unknown host is not_found.
func (s *Store) Delete(ctx context.Context, host string) (Summary, error) {
	h, err := NormalHost("host", host)
	if err != nil {
		return Summary{}, err
	}
	var out Summary
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, h)
		if err != nil {
			return err
		}
		if cur == nil {
			return apierr.NotFound("registry", h)
		}
		out = cur.Summary
		return tx.Delete(s.doc(h))
	})
	if err != nil {
		return Summary{}, fmt.Errorf("delete registry %s: %w", h, err)
	}
	generation.Add(1)
	return out, nil
}

// Credentials returns how to authenticate to the registry at host (as image references name
// it), its password opened; ok is false when no registry is configured for host.
func (s *Store) Credentials(ctx context.Context, host string) (Credentials, bool, error) {
	host, err := NormalHost("host", host)
	if err != nil {
		return Credentials{}, false, nil
	}
	rec, err := s.read(ctx, nil, host)
	if err != nil || rec == nil {
		return Credentials{}, false, err
	}
	c := Credentials{Summary: rec.Summary}
	if rec.Kind == Static {
		pw, err := s.sealer.Open(rec.Sealed, owner(host))
		if err != nil {
			return Credentials{}, false, err
		}
		c.Password = string(pw)
	}
	return c, true, nil
}

// read returns host's record, nil when there is none; in tx when tx is set.
func (s *Store) read(ctx context.Context, tx *firestore.Transaction, host string) (*record, error) {
	rec, err := store.Read[record](ctx, tx, s.doc(host))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("registry %s: %w", host, err)
	}
	return rec, nil
}

// doc is host's document. A normal host has no '/', so it is a valid Firestore id as it is.
func (s *Store) doc(host string) *firestore.DocumentRef {
	return s.db.Collection(Collection).Doc(host)
}

// owner binds a sealed password to its registry host: copied onto another host, it does not open.
func owner(host string) string { return Collection + "/" + host }

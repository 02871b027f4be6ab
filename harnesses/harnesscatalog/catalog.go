// Package harnesscatalog is the deployment's list of harnesses: the built-in plugins embedded in the
// binary and those registered from OCI artifacts, whose modules are kept in the blob store and
// whose records live in Firestore (`harnesses/{name}`). It hands out loaded plugins by name, each
// module compiled once per process.
package harnesscatalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/go-containerregistry/pkg/authn"
	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/builtin"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/harnesses/oci"
	"github.com/hangar-dev/hangar/platform/egress"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/runtimes/wasm"
)

// Collection holds the registered harnesses' records.
const Collection = "harnesses"

var (
	// ErrNotFound is a name the catalog does not hold.
	ErrNotFound = errors.New("harness not found")
	// ErrExists is a name already taken, by a built-in or a registered harness.
	ErrExists = errors.New("harness name is taken")
	// ErrBuiltIn is a change to a built-in harness.
	ErrBuiltIn = errors.New("built-in harnesses cannot be changed")
	// ErrInvalid is a registration whose name, reference or module is not acceptable; it comes
	// as an *InvalidError saying which and why.
	ErrInvalid = errors.New("invalid harness")
	// ErrChanged is an approval of a harness whose artifact is no longer what was registered.
	ErrChanged = errors.New("harness artifact changed since it was registered")
)

// InvalidError is a registration refused for one of its fields ("name" or "oci_ref").
type InvalidError struct{ Field, Reason string }

func (e *InvalidError) Error() string        { return e.Field + ": " + e.Reason }
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Names are lowercase slugs, as the built-ins' are.
var validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// Entry is one harness of the catalog.
type Entry struct {
	Name       string
	Descriptor abi.Descriptor
	BuiltIn    bool
	// Registered harnesses only.
	Owner     string
	OCIRef    string
	Digest    string // the artifact's manifest digest
	ModuleSHA string // sha256 of the module, its key in the blob store
	CreatedBy string
	CreatedAt time.Time
	// EgressApprovedBy is the admin who registered the harness or approved its egress; "" while
	// a harness a non-admin registered waits for one. See EgressAppliesFor.
	EgressApprovedBy string
}

// EgressAppliesFor says whether the harness's egress may open in a session whose network user
// decides: the session's owner for a session of its own, the profile's owner for a task's. A
// registered harness's egress reaches every session that picks it, including sessions holding
// other people's profile secrets and credentials, so it opens there only once an admin vouched
// for it (built in, registered or approved by an admin); until then only where its registrant
// decides the network anyway (their own sessions and tasks on profiles they own), since a
// profile of their own could open those hosts too. user "" matches no registrant.
func (e *Entry) EgressAppliesFor(user string) bool {
	return e.BuiltIn || e.EgressApprovedBy != "" || (user != "" && e.CreatedBy == user)
}

// record is Entry as Firestore keeps it.
type record struct {
	Name           string    `firestore:"name"`
	DescriptorJSON string    `firestore:"descriptor_json"`
	Owner          string    `firestore:"owner"`
	OCIRef         string    `firestore:"oci_ref"`
	Digest         string    `firestore:"digest"`
	ModuleSHA      string    `firestore:"module_sha256"`
	CreatedBy      string    `firestore:"created_by"`
	CreatedAt      time.Time `firestore:"created_at"`
	// EgressApprovedBy is absent on records from before approvals: their egress stays their
	// registrant's until an admin approves it.
	EgressApprovedBy string `firestore:"egress_approved_by"`
}

// Catalog is the harness catalog over its stores.
type Catalog struct {
	db       *firestore.Client
	bucket   *blob.Bucket
	rt       *wasm.Runtime
	builtins map[string]builtin.Module
	// registries is what plugin pulls may reach beyond public addresses; keychain signs them in.
	registries egress.Policy
	keychain   authn.Keychain
	now        func() time.Time

	mu     sync.Mutex
	loaded map[string]*harness.Plugin // by module sha256, built-ins by builtinKey
}

// New returns the catalog. builtins are the embedded modules by name; registries is what
// Register's pulls may reach beyond public addresses (config.Config.Registries) and keychain
// their credentials (the registry store's keychain that image pulls use; nil: anonymous).
func New(db *firestore.Client, bucket *blob.Bucket, rt *wasm.Runtime, builtins map[string]builtin.Module, registries egress.Policy, keychain authn.Keychain, now func() time.Time) *Catalog {
	return &Catalog{db: db, bucket: bucket, rt: rt, builtins: builtins, registries: registries, keychain: keychain, now: now, loaded: map[string]*harness.Plugin{}}
}

// List returns every harness: built-ins first, then registered ones, each by name.
func (c *Catalog) List(ctx context.Context) ([]Entry, error) {
	var out []Entry
	names := make([]string, 0, len(c.builtins))
	for n := range c.builtins {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e, err := c.builtIn(ctx, n)
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	recs, err := store.All[record](c.db.Collection(Collection).OrderBy("name", firestore.Asc).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list harnesses: %w", err)
	}
	for _, r := range recs {
		e, err := r.entry()
		if err != nil {
			return nil, err
		}
		out = append(out, *e)
	}
	return out, nil
}

// Get returns the harness called name.
func (c *Catalog) Get(ctx context.Context, name string) (*Entry, error) {
	if _, ok := c.builtins[name]; ok {
		return c.builtIn(ctx, name)
	}
	r, err := c.read(ctx, name)
	if err != nil {
		return nil, err
	}
	return r.entry()
}

// Plugin returns the loaded plugin of the harness called name. Each turn asks for it, so a
// module already loaded is neither read from the blob store nor hashed again.
func (c *Catalog) Plugin(ctx context.Context, name string) (*harness.Plugin, error) {
	if m, ok := c.builtins[name]; ok {
		return c.load(ctx, builtinKey(name), func() ([]byte, error) { return m.Wasm, nil })
	}
	r, err := c.read(ctx, name)
	if err != nil {
		return nil, err
	}
	return c.load(ctx, r.ModuleSHA, func() ([]byte, error) {
		wasm, err := c.bucket.ReadAll(ctx, moduleKey(r.ModuleSHA))
		if err != nil {
			return nil, fmt.Errorf("read module of harness %s: %w", name, err)
		}
		return wasm, nil
	})
}

// Register fetches the plugin at ociRef, loads it (which runs its describe under the host's
// limits) and records it under name. The descriptor's name becomes name: the catalog, not the
// plugin, decides what a harness is called. approvedBy is the admin registering it ("" for
// anyone else), whose registration approves the harness's egress.
func (c *Catalog) Register(ctx context.Context, name, ociRef, owner, createdBy, approvedBy string) (*Entry, error) {
	if !validName.MatchString(name) {
		return nil, &InvalidError{"name", fmt.Sprintf("%q must be 1 to 40 of a-z, 0-9 and '-', starting with a letter", name)}
	}
	if _, ok := c.builtins[name]; ok {
		return nil, fmt.Errorf("%w: %q is a built-in harness", ErrExists, name)
	}
	if ociRef == "" {
		return nil, &InvalidError{"oci_ref", "is required"}
	}
	m, err := oci.Fetch(ctx, ociRef, c.registries, c.keychain)
	if err != nil {
		return nil, &InvalidError{"oci_ref", err.Error()}
	}
	sum := sha256.Sum256(m.Wasm)
	p, err := c.load(ctx, hex.EncodeToString(sum[:]), func() ([]byte, error) { return m.Wasm, nil })
	if err != nil {
		return nil, &InvalidError{"oci_ref", "the module is not a usable harness plugin: " + err.Error()}
	}
	d := p.Descriptor()
	d.Name = name
	js, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	r := record{
		Name: name, DescriptorJSON: string(js), Owner: owner, OCIRef: ociRef, Digest: m.Digest,
		ModuleSHA: hex.EncodeToString(sum[:]), CreatedBy: createdBy, CreatedAt: c.now(), EgressApprovedBy: approvedBy,
	}
	// The module goes first: a record never names bytes that are not there. Modules are keyed
	// by content, so a lost race or a retry writes the same object.
	if err := c.bucket.WriteAll(ctx, moduleKey(r.ModuleSHA), m.Wasm, nil); err != nil {
		return nil, fmt.Errorf("store module of harness %s: %w", name, err)
	}
	if _, err := c.db.Collection(Collection).Doc(name).Create(ctx, r); store.IsAlreadyExists(err) {
		return nil, fmt.Errorf("%w: %q is registered already", ErrExists, name)
	} else if err != nil {
		return nil, fmt.Errorf("record harness %s: %w", name, err)
	}
	return r.entry()
}

// Approve records that the admin by approves the egress of the registered harness called name,
// fetched from ociRef. What is approved is what was registered: ociRef must be the harness's
// own (ErrExists otherwise, as a registration of a taken name is) and still point at the
// artifact registered (ErrChanged otherwise: a tag moved since, so the harness must be
// registered again to be reviewed as it now is).
func (c *Catalog) Approve(ctx context.Context, name, ociRef, by string) (*Entry, error) {
	if _, ok := c.builtins[name]; ok {
		return nil, fmt.Errorf("%w: %q is a built-in harness", ErrExists, name)
	}
	r, err := c.read(ctx, name)
	if err != nil {
		return nil, err
	}
	if r.OCIRef != ociRef {
		return nil, fmt.Errorf("%w: %q is registered already, from %s", ErrExists, name, r.OCIRef)
	}
	m, err := oci.Fetch(ctx, ociRef, c.registries, c.keychain)
	if err != nil {
		return nil, &InvalidError{"oci_ref", err.Error()}
	}
	if m.Digest != r.Digest {
		return nil, fmt.Errorf("%w: %s now points at %s, harness %s was registered from %s: delete it and register it again", ErrChanged, ociRef, m.Digest, name, r.Digest)
	}
	if r.EgressApprovedBy == "" {
		// The digest is the precondition: a harness deleted and registered again from another
		// artifact in between is not approved.
		err := c.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			cur, err := store.Read[record](ctx, tx, c.db.Collection(Collection).Doc(name))
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w: %q", ErrNotFound, name)
			}
			if err != nil {
				return err
			}
			if cur.Digest != r.Digest {
				return fmt.Errorf("%w: harness %s was registered again while it was approved", ErrChanged, name)
			}
			return tx.Update(c.db.Collection(Collection).Doc(name), []firestore.Update{{Path: "egress_approved_by", Value: by}})
		})
		if err != nil {
			return nil, fmt.Errorf("approve harness %s: %w", name, err)
		}
		r.EgressApprovedBy = by
	}
	return r.entry()
}

// Delete removes a registered harness; false when there was none. Its module stays in the blob
// store when another harness uses the same bytes.
func (c *Catalog) Delete(ctx context.Context, name string) (bool, error) {
	if _, ok := c.builtins[name]; ok {
		return false, fmt.Errorf("%w: %q is built in", ErrBuiltIn, name)
	}
	r, err := c.read(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := c.db.Collection(Collection).Doc(name).Delete(ctx); err != nil {
		return false, fmt.Errorf("delete harness %s: %w", name, err)
	}
	others, err := store.All[record](c.db.Collection(Collection).Where("module_sha256", "==", r.ModuleSHA).Limit(1).Documents(ctx))
	if err != nil {
		return true, fmt.Errorf("check module users of %s: %w", name, err)
	}
	if len(others) == 0 {
		if err := c.bucket.Delete(ctx, moduleKey(r.ModuleSHA)); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return true, fmt.Errorf("delete module of harness %s: %w", name, err)
		}
	}
	return true, nil
}

func (c *Catalog) read(ctx context.Context, name string) (*record, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	r, err := store.Read[record](ctx, nil, c.db.Collection(Collection).Doc(name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", name, err)
	}
	return r, nil
}

// builtIn describes a built-in harness from the descriptor recorded when it was built, and
// loads the module only when there is none.
func (c *Catalog) builtIn(ctx context.Context, name string) (*Entry, error) {
	m := c.builtins[name]
	var d abi.Descriptor
	if m.Descriptor == nil || json.Unmarshal(m.Descriptor, &d) != nil {
		p, err := c.load(ctx, builtinKey(name), func() ([]byte, error) { return m.Wasm, nil })
		if err != nil {
			return nil, fmt.Errorf("built-in harness %s: %w", name, err)
		}
		d = p.Descriptor()
	}
	d.Name = name
	return &Entry{Name: name, Descriptor: d, BuiltIn: true}, nil
}

// load compiles the module known by key once per process; later calls share its plugin, and
// module is called for the bytes only by the first.
func (c *Catalog) load(ctx context.Context, key string, module func() ([]byte, error)) (*harness.Plugin, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.loaded[key]; ok {
		return p, nil
	}
	b, err := module()
	if err != nil {
		return nil, err
	}
	p, err := harness.Load(ctx, c.rt, b)
	if err != nil {
		return nil, err
	}
	c.loaded[key] = p
	return p, nil
}

func (r record) entry() (*Entry, error) {
	var d abi.Descriptor
	if err := json.Unmarshal([]byte(r.DescriptorJSON), &d); err != nil {
		return nil, fmt.Errorf("decode descriptor of harness %s: %w", r.Name, err)
	}
	return &Entry{
		Name: r.Name, Descriptor: d, Owner: r.Owner, OCIRef: r.OCIRef, Digest: r.Digest,
		ModuleSHA: r.ModuleSHA, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, EgressApprovedBy: r.EgressApprovedBy,
	}, nil
}

func moduleKey(sha string) string { return "harness-modules/" + sha + ".wasm" }

// builtinKey keys a built-in's plugin by its name, which no module sha256 can be.
func builtinKey(name string) string { return "builtin:" + name }

// Package secrets is the organisation's secret store: named values (model router keys, the
// secrets profiles give sessions) kept in Firestore, each sealed with the deployment's Tink
// AEAD keyset and bound to its name, so that a database read alone reveals nothing and a sealed
// value copied onto another name does not open. Values are write-only to the API: Use, Resolve
// and Lookup are for the services that hand them on (to an upstream, into a session), never for
// a read a caller sees.
//
// Each secret carries an access policy (access.go): Access.Allows is the one rule of who may
// use it, which Check applies when a profile or automation naming the secret is saved and Use
// and Resolve apply again whenever the secret is handed on for someone.
//
// Every put makes a new version (1 for a new secret); writes may name the version they expect,
// and a mismatch is aborted, so two admins editing one secret cannot silently overwrite each
// other.
package secrets

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/seal"
	"github.com/hangar-dev/hangar/platform/store"
)

// Collection holds one document per secret.
const Collection = "org_secrets"

// nameRe is the reference profiles and model routers use for a secret.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_./-]{1,128}$`)

// ValidName reports whether name may name a secret.
func ValidName(name string) bool { return nameRe.MatchString(name) }

// Meta is what may be shown of a secret: everything but its value.
type Meta struct {
	Name        string    `firestore:"name"`
	Description string    `firestore:"description"`
	Version     int64     `firestore:"version"`
	CreatedAt   time.Time `firestore:"created_at"`
	UpdatedAt   time.Time `firestore:"updated_at"`
	CreatedBy   string    `firestore:"created_by"`
	UpdatedBy   string    `firestore:"updated_by"`
	// Access is who besides admins may use the secret (access.go).
	Access Access `firestore:"access"`
}

type record struct {
	Meta
	Sealed []byte `firestore:"sealed"`
}

// Limits bound the store.
type Limits struct {
	// MaxValueBytes caps one value; MaxSecrets the number of secrets.
	MaxValueBytes int
	MaxSecrets    int
}

// Store reads and writes the organisation's secrets.
type Store struct {
	db     *firestore.Client
	sealer *seal.Sealer
	now    func() time.Time
	lim    Limits
}

// New returns the store over db, sealing with sealer.
func New(db *firestore.Client, sealer *seal.Sealer, now func() time.Time, lim Limits) *Store {
	return &Store{db: db, sealer: sealer, now: now, lim: lim}
}

// Put is one write of a secret.
type Put struct {
	Name, Value string
	// Description, when set, replaces the secret's description.
	Description *string
	// ExpectedVersion, when set, is the version the writer saw (0: the secret must not exist).
	ExpectedVersion *int64
	// Access, when set, replaces the secret's access policy (a new secret's is AdminsOnly).
	Access *Access
	// By is the user writing.
	By string
}

// Put stores p's value as the secret's next version and returns the new metadata, and whether
// it created the secret.
func (s *Store) Put(ctx context.Context, p Put) (Meta, bool, error) {
	var v apierr.Violations
	if !ValidName(p.Name) {
		v.Add("name", "must be 1 to 128 letters, digits, '_', '.', '/' or '-'")
	}
	if p.Value == "" {
		v.Add("value", "is required")
	}
	if len(p.Value) > s.lim.MaxValueBytes {
		v.Addf("value", "must be at most %d bytes (is %d)", s.lim.MaxValueBytes, len(p.Value))
	}
	if p.Description != nil && len(*p.Description) > maxDescription {
		v.Addf("description", "must be at most %d bytes", maxDescription)
	}
	if p.ExpectedVersion != nil && *p.ExpectedVersion < 0 {
		v.Add("expected_version", "must not be negative")
	}
	var access Access
	if p.Access != nil {
		access = p.Access.checked(&v, "access")
	}
	if err := v.Err(); err != nil {
		return Meta{}, false, err
	}
	sealed, err := s.sealer.Seal([]byte(p.Value), owner(p.Name))
	if err != nil {
		return Meta{}, false, err
	}
	var out record
	var created bool
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, p.Name)
		if err != nil {
			return err
		}
		if err := checkVersion(p.Name, cur, p.ExpectedVersion); err != nil {
			return err
		}
		now := s.now()
		created = cur == nil
		if created {
			if err := s.checkRoom(ctx, tx); err != nil {
				return err
			}
			cur = &record{Meta: Meta{Name: p.Name, CreatedAt: now, CreatedBy: p.By, Access: Access{Visibility: AdminsOnly}}}
		}
		out = *cur
		out.Version++
		out.UpdatedAt, out.UpdatedBy, out.Sealed = now, p.By, sealed
		if p.Description != nil {
			out.Description = *p.Description
		}
		if p.Access != nil {
			out.Access = access
		}
		return tx.Set(s.doc(p.Name), out)
	})
	if err != nil {
		return Meta{}, false, fmt.Errorf("put secret %s: %w", p.Name, err)
	}
	return out.Meta, created, nil
}

// maxDescription bounds a secret's description.
const maxDescription = 1024

// Lookup is the secret's value, with ok false when there is no such secret. It checks no access
// policy: only for the operator's own use (a router's key); users' uses go through Use and Resolve.
func (s *Store) Lookup(ctx context.Context, name string) (string, bool, error) {
	if !ValidName(name) {
		return "", false, nil
	}
	rec, err := s.read(ctx, nil, name)
	if err != nil || rec == nil {
		return "", false, err
	}
	pt, err := s.sealer.Open(rec.Sealed, owner(name))
	if err != nil {
		return "", false, err
	}
	return string(pt), true, nil
}

// Exists reports whether there is a secret called name, without opening it.
func (s *Store) Exists(ctx context.Context, name string) (bool, error) {
	if !ValidName(name) {
		return false, nil
	}
	rec, err := s.read(ctx, nil, name)
	return rec != nil, err
}

// List returns every secret's metadata, by name.
func (s *Store) List(ctx context.Context) ([]Meta, error) {
	recs, err := store.All[record](s.db.Collection(Collection).OrderBy("name", firestore.Asc).Limit(s.lim.MaxSecrets).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	out := make([]Meta, len(recs))
	for i, r := range recs {
		out[i] = r.Meta
	}
	return out, nil
}

// Delete deletes the secret (only at expected, when set) and returns what it was.
func (s *Store) Delete(ctx context.Context, name string, expected *int64) (Meta, error) {
	if !ValidName(name) {
		return Meta{}, apierr.InvalidArgument("name", "must be 1 to 128 letters, digits, '_', '.', '/' or '-'")
	}
	var out Meta
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, name)
		if err != nil {
			return err
		}
		if cur == nil {
			return apierr.NotFound("org secret", name)
		}
		if err := checkVersion(name, cur, expected); err != nil {
			return err
		}
		out = cur.Meta
		return tx.Delete(s.doc(name))
	})
	if err != nil {
		return Meta{}, fmt.Errorf("delete secret %s: %w", name, err)
	}
	return out, nil
}

// Resolve reads the secrets refs name (environment variable → secret name) into an
// environment for sub, checking each secret's policy as Use does.
func (s *Store) Resolve(ctx context.Context, sub Subject, refs map[string]string) (map[string]string, error) {
	env := make(map[string]string, len(refs))
	for name, ref := range refs {
		v, err := s.Use(ctx, sub, ref)
		if err != nil {
			return nil, fmt.Errorf("secret for %s: %w", name, err)
		}
		env[name] = v
	}
	return env, nil
}

// checkVersion answers aborted when expected is set and cur is at another version (a missing
// secret is at version 0).
func checkVersion(name string, cur *record, expected *int64) error {
	if expected == nil {
		return nil
	}
	var have int64
	if cur != nil {
		have = cur.Version
	}
	if have != *expected {
		return apierr.Aborted("org secret %s is at version %d, not %d", name, have, *expected)
	}
	return nil
}

// checkRoom keeps the number of secrets within MaxSecrets, counting inside the transaction so
// that concurrent creates at the limit cannot all pass.
func (s *Store) checkRoom(ctx context.Context, tx *firestore.Transaction) error {
	n, err := store.Count(ctx, s.db.Collection(Collection).Query, tx)
	if err != nil {
		return fmt.Errorf("count secrets: %w", err)
	}
	if n >= int64(s.lim.MaxSecrets) {
		return apierr.ResourceExhausted("the organisation has %d secrets, the most allowed; delete one first", n)
	}
	return nil
}

// read returns the secret's record, nil when there is none; in tx when tx is set.
func (s *Store) read(ctx context.Context, tx *firestore.Transaction, name string) (*record, error) {
	rec, err := store.Read[record](ctx, tx, s.doc(name))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return rec, nil
}

// doc is the secret's document. Names may hold '/', which Firestore ids may not, so the id is
// the name in unpadded base64url.
func (s *Store) doc(name string) *firestore.DocumentRef {
	return s.db.Collection(Collection).Doc(base64.RawURLEncoding.EncodeToString([]byte(name)))
}

// owner binds a sealed value to its secret's name.
func owner(name string) string { return Collection + "/" + name }

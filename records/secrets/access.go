package secrets

import (
	"context"
	"fmt"
	"slices"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
)

// Visibility says who besides admins may use a secret, after GitHub's organisation secret
// visibility.
type Visibility string

// Visibilities. The zero Visibility (a record written before secrets had a policy) reads as
// AdminsOnly.
const (
	AdminsOnly Visibility = "admins_only"
	AllUsers   Visibility = "all_users"
	Selected   Visibility = "selected"
)

// Access is a secret's access policy: who may name it in a profile or automation and have it
// resolved. Admins always may; the lists count only for Selected.
type Access struct {
	Visibility    Visibility `firestore:"visibility"`
	UserIDs       []string   `firestore:"user_ids"`
	ServiceKeyIDs []string   `firestore:"service_key_ids"`
	ProfileIDs    []string   `firestore:"profile_ids"`
}

// Subject is who would use a secret: a user (with the key it acts through, if any) and, when
// the secret comes from a profile, that profile.
type Subject struct {
	UserID, KeyID, ProfileID string
	Admin                    bool
}

// SubjectOf is the subject of principal p using a secret through profileID ("" for none).
func SubjectOf(p auth.Principal, profileID string) Subject {
	return Subject{UserID: p.UserID, KeyID: p.KeyID, ProfileID: profileID, Admin: p.Admin}
}

// Allows is the one rule of who may use a secret: admins always; others as the visibility says.
func (a Access) Allows(s Subject) bool {
	switch {
	case s.Admin:
		return true
	case a.Visibility == AllUsers:
		return true
	case a.Visibility == Selected:
		return listed(a.UserIDs, s.UserID) || listed(a.ServiceKeyIDs, s.KeyID) || listed(a.ProfileIDs, s.ProfileID)
	}
	return false
}

func listed(ids []string, id string) bool { return id != "" && slices.Contains(ids, id) }

// maxSelected bounds each of a policy's lists.
const maxSelected = 100

// checked validates a policy written under field and returns it normalised: no visibility is
// AdminsOnly, and lists are kept without duplicates.
func (a Access) checked(v *apierr.Violations, field string) Access {
	switch a.Visibility {
	case "":
		a.Visibility = AdminsOnly
	case AdminsOnly, AllUsers, Selected:
	default:
		v.Addf(field+".visibility", "must be admins_only, all_users or selected (is %q)", a.Visibility)
	}
	for _, l := range []struct {
		name string
		ids  *[]string
	}{{"user_ids", &a.UserIDs}, {"service_key_ids", &a.ServiceKeyIDs}, {"profile_ids", &a.ProfileIDs}} {
		f := field + "." + l.name
		if len(*l.ids) > 0 && a.Visibility != Selected {
			v.Add(f, "is only for visibility selected")
			continue
		}
		if len(*l.ids) > maxSelected {
			v.Addf(f, "must list at most %d ids", maxSelected)
		}
		for i, id := range *l.ids {
			if id == "" || len(id) > 128 {
				v.Addf(fmt.Sprintf("%s[%d]", f, i), "must be an id of 1 to 128 characters")
			}
		}
		slices.Sort(*l.ids)
		*l.ids = slices.Compact(*l.ids)
	}
	return a
}

// SetAccess replaces the secret's access policy, and answers its metadata; the value and the
// version stay. An unknown secret is not_found.
func (s *Store) SetAccess(ctx context.Context, name string, access Access, by string) (Meta, error) {
	var v apierr.Violations
	if !ValidName(name) {
		v.Add("name", "must be 1 to 128 letters, digits, '_', '.', '/' or '-'")
	}
	access = access.checked(&v, "access")
	if err := v.Err(); err != nil {
		return Meta{}, err
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
		cur.Access, cur.UpdatedAt, cur.UpdatedBy = access, s.now(), by
		out = cur.Meta
		return tx.Set(s.doc(name), cur)
	})
	if err != nil {
		return Meta{}, fmt.Errorf("set access of secret %s: %w", name, err)
	}
	return out, nil
}

// Check is the save-time check: it answers permission_denied naming the first of names that
// sub may not use. A secret that does not exist grants no one, so only admins may name it
// (before an admin puts it); others hear the same answer as for a secret kept from them, so
// the answer does not tell which names exist.
func (s *Store) Check(ctx context.Context, sub Subject, names ...string) error {
	for _, name := range names {
		if _, _, err := s.usable(ctx, sub, name); err != nil {
			return err
		}
	}
	return nil
}

// Use is the resolve-time check and read: the value of the secret called name, once sub may
// use it (permission_denied naming it otherwise). A secret that does not exist is
// failed_precondition for an admin (only an admin can put it) and permission_denied for others.
func (s *Store) Use(ctx context.Context, sub Subject, name string) (string, error) {
	rec, ok, err := s.usable(ctx, sub, name)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", apierr.FailedPrecondition("org secret %q does not exist: an admin must put it first", name)
	}
	pt, err := s.sealer.Open(rec.Sealed, owner(name))
	if err != nil {
		return "", fmt.Errorf("open secret %s: %w", name, err)
	}
	return string(pt), nil
}

// usable reads the secret called name for sub: ok is false when it does not exist (and sub is
// an admin); a subject its policy does not allow is permission_denied naming it.
func (s *Store) usable(ctx context.Context, sub Subject, name string) (*record, bool, error) {
	var rec *record
	if ValidName(name) {
		var err error
		if rec, err = s.read(ctx, nil, name); err != nil {
			return nil, false, err
		}
	}
	if sub.Admin {
		return rec, rec != nil, nil
	}
	if rec == nil || !rec.Access.Allows(sub) {
		return nil, false, apierr.PermissionDenied("org secret %q may not be used here: it is kept for admins and those its access policy selects (an admin shares it with SetOrgSecretAccess)", name)
	}
	return rec, true, nil
}

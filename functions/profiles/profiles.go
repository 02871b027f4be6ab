// Package profiles serves ProfileService. It owns profiles, the organisation's shared recipes
// that sessions and tasks start from (image, environment, network policy, secrets, integration
// grants, repositories, apps, harness and model): their validation, their unique names, their
// soft deletion, and the snapshot a task takes of one.
package profiles

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/hangar-dev/hangar/automation/catalog"
	hostv1 "github.com/hangar-dev/hangar/gen/host/v1"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/gitremote"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
	"github.com/hangar-dev/hangar/records/secrets"
)

const (
	profilesCollection = "profiles"
	// namesCollection holds one claim document per name in use by a non-archived profile.
	namesCollection = "profileNames"
	idPrefix        = "prof"
)

// Service implements ProfileService. Every authenticated caller may read every profile; only a
// profile's creator or an admin may change it.
type Service struct {
	db      *firestore.Client
	clock   clock.Clock
	lim     config.Limits
	repos   RepoFinder
	secrets *secrets.Store
}

// RepoFinder looks inside an image for git repositories (a sandbox host pulls and walks it).
type RepoFinder func(ctx context.Context, image string) ([]*hostv1.Repo, error)

// checkSecrets refuses, with permission_denied naming it, a secret rec names that the caller
// may not use through rec. Tasks check again when they resolve the secrets, since a policy
// may narrow after the save.
func (s *Service) checkSecrets(ctx context.Context, rec record) error {
	if s.secrets == nil || len(rec.Secrets) == 0 {
		return nil
	}
	caller, _ := auth.Caller(ctx)
	refs := make([]string, len(rec.Secrets))
	for i, sr := range rec.Secrets {
		refs[i] = sr.Ref
	}
	return s.secrets.Check(ctx, secrets.SubjectOf(caller, rec.ID), refs...)
}

var _ appv1connect.ProfileServiceHandler = (*Service)(nil)

// New returns the service over db. With repos, DiscoverProfileRepos looks inside profiles'
// images too; with nil, it reports the repositories profiles list. With secretStore, saves
// check that the caller may use the org secrets a profile names (each secret's access policy);
// with nil there are no secrets to name.
func New(db *firestore.Client, repos RepoFinder, secretStore *secrets.Store, c clock.Clock, lim config.Limits) *Service {
	return &Service{db: db, repos: repos, secrets: secretStore, clock: c, lim: lim}
}

// ListProfiles lists profiles sorted by name, case-insensitively, then id; archived ones only
// when asked.
func (s *Service) ListProfiles(ctx context.Context, req *connect.Request[appv1.ListProfilesRequest]) (*connect.Response[appv1.ListProfilesResponse], error) {
	recs, err := s.list(ctx, req.Msg.GetIncludeArchived())
	if err != nil {
		return nil, err
	}
	out := make([]*appv1.Profile, len(recs))
	for i, r := range recs {
		out[i] = r.proto()
	}
	return connect.NewResponse(&appv1.ListProfilesResponse{Profiles: out}), nil
}

// list returns the profiles sorted by name, case-insensitively, then id; archived ones only
// when asked.
func (s *Service) list(ctx context.Context, includeArchived bool) ([]record, error) {
	q := s.db.Collection(profilesCollection).Query
	if includeArchived {
		// Ordered in the query so that, past the cap, the cut falls by name.
		q = q.OrderBy("name_key", firestore.Asc)
	} else {
		// CreateProfile keeps non-archived profiles within the cap, so this is all of them. They
		// are sorted below: an equality filter plus an order on another field would need a
		// composite index, and single-field ones are the only kind Firestore builds unasked.
		q = q.Where("archived", "==", false)
	}
	recs, err := s.query(ctx, q.Limit(s.lim.Profiles.Max))
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	slices.SortFunc(recs, func(a, b record) int {
		return cmp.Or(strings.Compare(a.NameKey, b.NameKey), strings.Compare(a.ID, b.ID))
	})
	return recs, nil
}

// KeyOptions answers the choices of an automation input of noun catalog.NounProfile (the
// profiles not archived: id, labelled by name) or catalog.NounRepo (the repositories they check
// out, once each, labelled with the profiles that have them: "owner/name" on github.com, as
// GitHub's events name a repository, else "host/owner/name"); ok is false for any other noun.
func (s *Service) KeyOptions(ctx context.Context, noun string) (options []catalog.KeyOption, ok bool, err error) {
	if noun != catalog.NounProfile && noun != catalog.NounRepo {
		return nil, false, nil
	}
	recs, err := s.list(ctx, false)
	if err != nil {
		return nil, true, err
	}
	if noun == catalog.NounProfile {
		for _, r := range recs {
			options = append(options, catalog.KeyOption{Key: r.ID, Label: r.Name})
		}
		return options, true, nil
	}
	type repo struct{ key, label string }
	var repos []repo
	profilesOf := map[string][]string{}
	for _, r := range recs {
		for _, rp := range r.Repos {
			rr := rp.Remote
			if rr == nil {
				continue // a directory of its own, no repository's checkout
			}
			label := rr.Host + "/" + rr.Owner + "/" + rr.Name
			key := label
			if rr.Host == "github.com" {
				key = rr.Owner + "/" + rr.Name
			}
			if slices.Contains(profilesOf[key], r.Name) {
				continue
			}
			if profilesOf[key] == nil {
				repos = append(repos, repo{key, label})
			}
			profilesOf[key] = append(profilesOf[key], r.Name)
		}
	}
	for _, rp := range repos {
		options = append(options, catalog.KeyOption{Key: rp.key, Label: rp.label + " (" + strings.Join(profilesOf[rp.key], ", ") + ")"})
	}
	return options, true, nil
}

// GetProfile returns one profile, archived or not.
func (s *Service) GetProfile(ctx context.Context, req *connect.Request[appv1.GetProfileRequest]) (*connect.Response[appv1.GetProfileResponse], error) {
	rec, err := s.get(ctx, "id", req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.GetProfileResponse{Profile: rec.proto()}), nil
}

// CreateProfile validates and stores a new profile owned by the caller.
func (s *Service) CreateProfile(ctx context.Context, req *connect.Request[appv1.CreateProfileRequest]) (*connect.Response[appv1.CreateProfileResponse], error) {
	var v apierr.Violations
	rec := parseSpec(&v, req.Msg, s.lim)
	if err := v.Err(); err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	now := s.clock.Now()
	rec.ID, rec.CreatedBy, rec.CreatedAt, rec.UpdatedAt = ids.New(idPrefix), caller.UserID, now, now
	if err := s.checkSecrets(ctx, rec); err != nil {
		return nil, err
	}
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		if err := s.checkRoom(ctx, tx); err != nil {
			return err
		}
		if err := s.claimName(tx, rec); err != nil {
			return err
		}
		return tx.Create(s.doc(rec.ID), rec)
	})
	if err != nil {
		return nil, fmt.Errorf("create profile %s: %w", rec.Name, err)
	}
	return connect.NewResponse(&appv1.CreateProfileResponse{Profile: rec.proto()}), nil
}

// UpdateProfile replaces every field a client sets; id, owner and created_at stay.
func (s *Service) UpdateProfile(ctx context.Context, req *connect.Request[appv1.UpdateProfileRequest]) (*connect.Response[appv1.UpdateProfileResponse], error) {
	id := req.Msg.GetId()
	var v apierr.Violations
	if id == "" {
		v.Add("id", "is required")
	}
	// Why validate before authorising: every caller may read every profile, so an answer about
	// the input reveals nothing, and it saves a read.
	rec := parseSpec(&v, req.Msg, s.lim)
	if err := v.Err(); err != nil {
		return nil, err
	}
	rec.ID = id
	if err := s.checkSecrets(ctx, rec); err != nil {
		return nil, err
	}
	err := s.change(ctx, id, func(tx *firestore.Transaction, cur record) error {
		if cur.Archived {
			return apierr.FailedPrecondition("profile %s is archived; archived profiles cannot be changed", id)
		}
		rec.ID, rec.CreatedBy, rec.CreatedAt, rec.UpdatedAt = cur.ID, cur.CreatedBy, cur.CreatedAt, s.clock.Now()
		if rec.NameKey != cur.NameKey {
			if err := s.claimName(tx, rec); err != nil {
				return err
			}
			if err := tx.Delete(s.nameDoc(cur.NameKey)); err != nil {
				return err
			}
		}
		return tx.Set(s.doc(id), rec)
	})
	if err != nil {
		return nil, fmt.Errorf("update profile %s: %w", id, err)
	}
	return connect.NewResponse(&appv1.UpdateProfileResponse{Profile: rec.proto()}), nil
}

// change runs fn inside a transaction on the profile as it is now, once the caller may change it.
// id is the request's id field.
func (s *Service) change(ctx context.Context, id string, fn func(*firestore.Transaction, record) error) error {
	if err := ids.Lookup("id", "profile", idPrefix, id); err != nil {
		return err
	}
	return s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.read(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := mayChange(ctx, cur); err != nil {
			return err
		}
		return fn(tx, cur)
	})
}

// DiscoverProfileRepos reports the profile's configured repositories and, when a repo finder is
// wired, the git repositories inside its image, each with its remotes. Until ImageService
// resolves image ids, a profile's image_id is looked up as an image reference.
func (s *Service) DiscoverProfileRepos(ctx context.Context, req *connect.Request[appv1.DiscoverProfileReposRequest]) (*connect.Response[appv1.DiscoverProfileReposResponse], error) {
	rec, err := s.get(ctx, "profile_id", req.Msg.GetProfileId())
	if err != nil {
		return nil, err
	}
	out := make([]*appv1.DiscoveredRepo, len(rec.Repos))
	seen := make(map[string]bool, len(rec.Repos))
	for i, r := range rec.Repos {
		out[i] = r.discovered()
		seen[r.Path] = true
	}
	if s.repos == nil || rec.ImageID == "" {
		return connect.NewResponse(&appv1.DiscoverProfileReposResponse{Repos: out}), nil
	}
	found, err := s.repos(ctx, rec.ImageID)
	if err != nil {
		return nil, fmt.Errorf("look inside image %s: %w", rec.ImageID, err)
	}
	for _, r := range found {
		if seen[r.GetPath()] {
			continue
		}
		d := &appv1.DiscoveredRepo{Path: r.GetPath()}
		for _, rm := range r.GetRemotes() {
			parsed, _ := gitremote.ParseRemote(rm.GetUrl())
			d.Remotes = append(d.Remotes, &appv1.DiscoveredRemote{Name: rm.GetName(), Url: rm.GetUrl(), Parsed: parsed})
		}
		out = append(out, d)
	}
	return connect.NewResponse(&appv1.DiscoverProfileReposResponse{Repos: out}), nil
}

// DeleteProfile archives a profile rather than removing it, because tasks and sessions keep
// referring to the profile they started from. Its name becomes free. Deleting an archived
// profile again succeeds, so a retried delete is harmless.
func (s *Service) DeleteProfile(ctx context.Context, req *connect.Request[appv1.DeleteProfileRequest]) (*connect.Response[emptypb.Empty], error) {
	id := req.Msg.GetId()
	if id == "" {
		return nil, apierr.InvalidArgument("id", "is required")
	}
	err := s.change(ctx, id, func(tx *firestore.Transaction, cur record) error {
		if cur.Archived {
			return nil
		}
		if err := tx.Delete(s.nameDoc(cur.NameKey)); err != nil {
			return err
		}
		return tx.Update(s.doc(id), []firestore.Update{
			{Path: "archived", Value: true},
			{Path: "updated_at", Value: s.clock.Now()},
		})
	})
	if err != nil {
		return nil, fmt.Errorf("delete profile %s: %w", id, err)
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// Launch returns the profile as a task's session starts from it: its snapshot, its env vars and
// its secrets (references, never values). An unknown or malformed id is not_found; an archived
// profile is failed_precondition, since no new work may start from it.
func (s *Service) Launch(ctx context.Context, id string) (*appv1.ProfileSnapshot, map[string]string, []*appv1.ProfileSecret, error) {
	rec, err := s.read(ctx, nil, id)
	if err != nil {
		return nil, nil, nil, err
	}
	if rec.Archived {
		return nil, nil, nil, apierr.FailedPrecondition("profile %s is archived", id)
	}
	return rec.snapshot(), rec.EnvVars, rec.proto().GetSecrets(), nil
}

// Egress returns the profile's network section and repos, which the sessions of its tasks may
// reach, and its owner (its creator, who alone with the admins may change that network), whose
// harnesses' egress may open there too.
func (s *Service) Egress(ctx context.Context, id string) (*appv1.ProfileNetwork, []*appv1.ProfileRepo, string, error) {
	rec, err := s.read(ctx, nil, id)
	if err != nil {
		return nil, nil, "", err
	}
	p := rec.proto()
	return p.GetNetwork(), p.GetRepos(), rec.CreatedBy, nil
}

// mayChange says whether the caller may update or delete rec: profiles are shared for reading,
// but only their creator or an admin changes them.
func mayChange(ctx context.Context, rec record) error {
	p, _ := auth.Caller(ctx)
	if p.Admin || (p.UserID != "" && p.UserID == rec.CreatedBy) {
		return nil
	}
	return apierr.PermissionDenied("only the creator of profile %s or an admin may change it", rec.ID)
}

// checkRoom keeps the non-archived profiles within lim.Profiles.Max, the most ListProfiles
// returns, so that the list is never silently cut short. Counting inside the transaction keeps
// concurrent creates at the limit from all passing.
func (s *Service) checkRoom(ctx context.Context, tx *firestore.Transaction) error {
	active := s.db.Collection(profilesCollection).Where("archived", "==", false)
	n, err := store.Count(ctx, active, tx)
	if err != nil {
		return fmt.Errorf("count profiles: %w", err)
	}
	if n >= int64(s.lim.Profiles.Max) {
		return apierr.ResourceExhausted("the organisation has %d profiles, the most allowed; archive one first", n)
	}
	return nil
}

// claimName takes rec's name for it. Why a claim document: Firestore has no unique index, and a
// query for the name would not see a concurrent transaction's new profile; two transactions
// that touch the same document are serialised, so exactly one of them gets the name.
func (s *Service) claimName(tx *firestore.Transaction, rec record) error {
	ref := s.nameDoc(rec.NameKey)
	_, err := tx.Get(ref)
	switch {
	case err == nil:
		return apierr.AlreadyExists("a profile named %q already exists (names are unique regardless of case)", rec.Name)
	case !store.IsNotFound(err):
		return err
	}
	return tx.Create(ref, map[string]any{"profile_id": rec.ID, "name_key": rec.NameKey})
}

func (s *Service) doc(id string) *firestore.DocumentRef {
	return s.db.Collection(profilesCollection).Doc(id)
}

// nameDoc is the claim of a name key. Its id is a hash because a name may hold characters a
// document id may not ("/", or the whole of "." or "__x__").
func (s *Service) nameDoc(key string) *firestore.DocumentRef {
	sum := sha256.Sum256([]byte(key))
	return s.db.Collection(namesCollection).Doc(hex.EncodeToString(sum[:]))
}

// get is a read method's lookup: field names the request's id field.
func (s *Service) get(ctx context.Context, field, id string) (record, error) {
	if err := ids.Lookup(field, "profile", idPrefix, id); err != nil {
		return record{}, err
	}
	return s.read(ctx, nil, id)
}

// read loads one profile, inside tx when it is not nil. A malformed id is not_found without a
// database read.
func (s *Service) read(ctx context.Context, tx *firestore.Transaction, id string) (record, error) {
	if !ids.Valid(idPrefix, id) {
		return record{}, apierr.NotFound("profile", id)
	}
	var snap *firestore.DocumentSnapshot
	var err error
	if tx != nil {
		snap, err = tx.Get(s.doc(id))
	} else {
		snap, err = s.doc(id).Get(ctx)
	}
	if store.IsNotFound(err) {
		return record{}, apierr.NotFound("profile", id)
	}
	if err != nil {
		return record{}, fmt.Errorf("get profile %s: %w", id, err)
	}
	var rec record
	if err := snap.DataTo(&rec); err != nil {
		return record{}, fmt.Errorf("decode profile %s: %w", id, err)
	}
	return rec, nil
}

func (s *Service) query(ctx context.Context, q firestore.Query) ([]record, error) {
	return store.All[record](q.Documents(ctx))
}

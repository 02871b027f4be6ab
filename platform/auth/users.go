package auth

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// User kinds.
const (
	UserHuman          = "human"
	UserServiceAccount = "service_account"
)

// User is a person or a service account; every key belongs to one.
type User struct {
	ID        string    `firestore:"id"`
	Email     string    `firestore:"email"`
	Name      string    `firestore:"name"`
	Kind      string    `firestore:"kind"`
	CreatedAt time.Time `firestore:"created_at"`
}

// Proto is the API's view of the user; nil for the zero User (an unknown id).
func (u User) Proto() *appv1.User {
	if u.ID == "" {
		return nil
	}
	return &appv1.User{Id: u.ID, Email: u.Email, Name: u.Name, Kind: u.Kind}
}

const (
	usersCollection      = "users"
	userEmailsCollection = "userEmails"
)

// Users reads and creates users. Records that list tasks or keys show their owners, so GetMany
// keeps users it has read for a short while: a user's name and email almost never change, and a
// stale one for a minute costs nothing, while a read per request costs a round trip.
type Users struct {
	db *firestore.Client

	mu    sync.Mutex
	cache map[string]cachedUser
}

type cachedUser struct {
	u       User
	expires time.Time
}

// userCacheTTL is how long GetMany trusts a user it has read.
const userCacheTTL = time.Minute

// NewUsers returns the user directory in db.
func NewUsers(db *firestore.Client) *Users {
	return &Users{db: db, cache: make(map[string]cachedUser)}
}

// Get returns one user.
func (u *Users) Get(ctx context.Context, id string) (User, error) {
	snap, err := u.db.Collection(usersCollection).Doc(id).Get(ctx)
	if err != nil {
		return User{}, fmt.Errorf("get user %s: %w", id, err)
	}
	var out User
	if err := snap.DataTo(&out); err != nil {
		return User{}, fmt.Errorf("decode user %s: %w", id, err)
	}
	return out, nil
}

// GetMany returns the users with these ids that exist, by id, reading the ones it does not
// hold in one round trip.
func (u *Users) GetMany(ctx context.Context, userIDs []string) (map[string]User, error) {
	out := make(map[string]User, len(userIDs))
	now := time.Now()
	var refs []*firestore.DocumentRef
	u.mu.Lock()
	for _, id := range userIDs {
		if id == "" {
			continue
		}
		if _, done := out[id]; done {
			continue
		}
		if c, ok := u.cache[id]; ok && now.Before(c.expires) {
			out[id] = c.u
			continue
		}
		out[id] = User{}
		refs = append(refs, u.db.Collection(usersCollection).Doc(id))
	}
	u.mu.Unlock()
	if len(refs) == 0 {
		return out, nil
	}
	snaps, err := u.db.GetAll(ctx, refs)
	if err != nil {
		return nil, fmt.Errorf("get users: %w", err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.cache) >= maxCached {
		u.cache = make(map[string]cachedUser)
	}
	for _, s := range snaps {
		if !s.Exists() {
			delete(out, s.Ref.ID)
			continue
		}
		var usr User
		if err := s.DataTo(&usr); err != nil {
			return nil, fmt.Errorf("decode user %s: %w", s.Ref.ID, err)
		}
		out[usr.ID] = usr
		u.cache[usr.ID] = cachedUser{u: usr, expires: now.Add(userCacheTTL)}
	}
	return out, nil
}

// EnsureHuman returns the person with this email, creating them on first sight. The email index
// document makes two concurrent first sightings agree on one user.
func (u *Users) EnsureHuman(ctx context.Context, email, name string, now time.Time) (User, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	idx := u.db.Collection(userEmailsCollection).Doc(email)
	var out User
	err := u.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(idx)
		if err == nil {
			id, _ := snap.DataAt("user_id")
			userID, _ := id.(string)
			us, err := tx.Get(u.db.Collection(usersCollection).Doc(userID))
			if err != nil {
				return fmt.Errorf("get user %s for %s: %w", userID, email, err)
			}
			return us.DataTo(&out)
		}
		if !store.IsNotFound(err) {
			return err
		}
		if name == "" {
			name = email
		}
		out = User{ID: ids.New("user"), Email: email, Name: name, Kind: UserHuman, CreatedAt: now}
		if err := tx.Create(idx, map[string]any{"user_id": out.ID}); err != nil {
			return err
		}
		return tx.Create(u.db.Collection(usersCollection).Doc(out.ID), out)
	})
	if err != nil {
		return User{}, fmt.Errorf("ensure user %s: %w", email, err)
	}
	return out, nil
}

// CreateServiceAccount makes a new service-account user.
func (u *Users) CreateServiceAccount(ctx context.Context, name string, now time.Time) (User, error) {
	out := User{ID: ids.New("user"), Name: name, Kind: UserServiceAccount, CreatedAt: now}
	if _, err := u.db.Collection(usersCollection).Doc(out.ID).Create(ctx, out); err != nil {
		return User{}, fmt.Errorf("create service account %s: %w", name, err)
	}
	return out, nil
}

// SetName changes a user's display name, as their identity provider now gives it.
func (u *Users) SetName(ctx context.Context, id, name string) error {
	if _, err := u.db.Collection(usersCollection).Doc(id).Update(ctx, []firestore.Update{{Path: "name", Value: name}}); err != nil {
		return fmt.Errorf("rename user %s: %w", id, err)
	}
	u.mu.Lock()
	delete(u.cache, id)
	u.mu.Unlock()
	return nil
}

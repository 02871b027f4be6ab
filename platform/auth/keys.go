package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/store"
)

// Key kinds.
const (
	KindPersonal       = "personal"
	KindServiceAccount = "service_account"
)

// Key format: "hgr_" + 12-character id + "_" + 32-character secret, lowercase base32. The id
// names the record, so verifying a key is one document read; the secret carries 160 random
// bits, so a fast hash (SHA-256) is as strong as a slow one would be for it.
const (
	keyPrefix    = "hgr_"
	keyIDLen     = 12
	keySecretLen = 32
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Key is an API key's record. The secret itself is never stored.
type Key struct {
	ID         string    `firestore:"id"`
	Name       string    `firestore:"name"`
	Kind       string    `firestore:"kind"`
	UserID     string    `firestore:"user_id"`
	Admin      bool      `firestore:"admin"`
	Hash       string    `firestore:"hash"`
	CreatedBy  string    `firestore:"created_by"`
	CreatedAt  time.Time `firestore:"created_at"`
	RevokedAt  time.Time `firestore:"revoked_at"`
	LastUsedAt time.Time `firestore:"last_used_at"`
}

// Prefix is the part of a key that listings show.
func (k Key) Prefix() string { return keyPrefix + k.ID }

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

const keysCollection = "apiKeys"

// ErrKeyNotFound is returned for a key id with no record.
var ErrKeyNotFound = errors.New("api key not found")

// Keys mints, lists and revokes keys.
type Keys struct {
	db    *firestore.Client
	authn *Authenticator
}

// NewKeys returns the key store in db; revocations are also forgotten by authn's cache at once.
func NewKeys(db *firestore.Client, authn *Authenticator) *Keys {
	return &Keys{db: db, authn: authn}
}

// NewKeyInput describes a key to mint.
type NewKeyInput struct {
	Name      string
	Kind      string
	UserID    string
	Admin     bool
	CreatedBy string
}

// Create mints a key and returns its record and the whole key, which exists only in this
// return value from now on.
func (ks *Keys) Create(ctx context.Context, in NewKeyInput, now time.Time) (Key, string, error) {
	k, whole, err := newKey(in, now)
	if err != nil {
		return Key{}, "", err
	}
	if _, err := ks.db.Collection(keysCollection).Doc(k.ID).Create(ctx, k); err != nil {
		return Key{}, "", fmt.Errorf("create api key %s: %w", in.Name, err)
	}
	return k, whole, nil
}

// CreateIn is Create as a write of tx: the key exists only if tx commits, so a caller can mint
// it together with the record that says it was issued (or not at all). A retried transaction
// mints a new key each attempt; only the committed attempt's key exists.
func (ks *Keys) CreateIn(tx *firestore.Transaction, in NewKeyInput, now time.Time) (Key, string, error) {
	k, whole, err := newKey(in, now)
	if err != nil {
		return Key{}, "", err
	}
	if err := tx.Create(ks.db.Collection(keysCollection).Doc(k.ID), k); err != nil {
		return Key{}, "", fmt.Errorf("create api key %s: %w", in.Name, err)
	}
	return k, whole, nil
}

// newKey draws a key of in: its record and the whole key.
func newKey(in NewKeyInput, now time.Time) (Key, string, error) {
	id, err := randomToken(keyIDLen)
	if err != nil {
		return Key{}, "", err
	}
	secret, err := randomToken(keySecretLen)
	if err != nil {
		return Key{}, "", err
	}
	whole := keyPrefix + id + "_" + secret
	return Key{
		ID: id, Name: in.Name, Kind: in.Kind, UserID: in.UserID, Admin: in.Admin,
		Hash: hashKey(whole), CreatedBy: in.CreatedBy, CreatedAt: now,
	}, whole, nil
}

// ErrKeyMismatch is a key whose id names a record of another key.
var ErrKeyMismatch = errors.New("api key does not match its record")

// Restore makes sure the whole key has a record, creating it from in when it has none (a local
// database lost it), and returns the record either way. A key that does not parse, or whose
// id's record holds another key's hash, is an error: nothing is overwritten.
func (ks *Keys) Restore(ctx context.Context, whole string, in NewKeyInput, now time.Time) (Key, error) {
	id, ok := parseKey(whole)
	if !ok {
		return Key{}, fmt.Errorf("restore api key %s: malformed key", in.Name)
	}
	ref := ks.db.Collection(keysCollection).Doc(id)
	var k Key
	err := ks.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := store.Read[Key](ctx, tx, ref)
		if errors.Is(err, store.ErrNotFound) {
			k = Key{
				ID: id, Name: in.Name, Kind: in.Kind, UserID: in.UserID, Admin: in.Admin,
				Hash: hashKey(whole), CreatedBy: in.CreatedBy, CreatedAt: now,
			}
			return tx.Create(ref, k)
		}
		if err != nil {
			return err
		}
		if !hashesEqual(cur.Hash, hashKey(whole)) {
			return ErrKeyMismatch
		}
		k = *cur
		return nil
	})
	if err != nil {
		return Key{}, fmt.Errorf("restore api key %s: %w", in.Name, err)
	}
	return k, nil
}

// Get returns the record of the key with id.
func (ks *Keys) Get(ctx context.Context, id string) (Key, error) {
	snap, err := ks.db.Collection(keysCollection).Doc(id).Get(ctx)
	if store.IsNotFound(err) {
		return Key{}, ErrKeyNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("get api key %s: %w", id, err)
	}
	var k Key
	if err := snap.DataTo(&k); err != nil {
		return Key{}, fmt.Errorf("decode api key %s: %w", id, err)
	}
	return k, nil
}

// List returns keys, newest first.
func (ks *Keys) List(ctx context.Context, includeRevoked bool, limit int) ([]Key, error) {
	q := ks.db.Collection(keysCollection).OrderBy("created_at", firestore.Desc).Limit(limit)
	all, err := store.All[Key](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	if includeRevoked {
		return all, nil
	}
	return slices.DeleteFunc(all, Key.Revoked), nil
}

// Acting is the principal of a user who acts without presenting a key, as an automation acts
// for its owner: an admin while the user holds an unrevoked admin key, since admin standing is
// a key's, and nothing else the user's keys grant. kind names how the user acts.
func (ks *Keys) Acting(ctx context.Context, userID, kind string) (Principal, error) {
	p := Principal{UserID: userID, Kind: kind}
	if userID == "" {
		return p, nil
	}
	q := ks.db.Collection(keysCollection).Where("user_id", "==", userID).Where("admin", "==", true)
	admin, err := store.All[Key](q.Documents(ctx))
	if err != nil {
		return Principal{}, fmt.Errorf("admin keys of user %s: %w", userID, err)
	}
	p.Admin = slices.ContainsFunc(admin, func(k Key) bool { return !k.Revoked() })
	return p, nil
}

// Revoke marks a key revoked (keeping its first revocation time) and returns it.
func (ks *Keys) Revoke(ctx context.Context, id string, now time.Time) (Key, error) {
	ref := ks.db.Collection(keysCollection).Doc(id)
	var k Key
	err := ks.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if store.IsNotFound(err) {
			return ErrKeyNotFound
		}
		if err != nil {
			return err
		}
		if err := snap.DataTo(&k); err != nil {
			return err
		}
		if k.Revoked() {
			return nil
		}
		k.RevokedAt = now
		return tx.Update(ref, []firestore.Update{{Path: "revoked_at", Value: now}})
	})
	if err != nil {
		return Key{}, fmt.Errorf("revoke api key %s: %w", id, err)
	}
	if ks.authn != nil {
		ks.authn.forget(k.Hash)
		ks.authn.forget(keyIDCacheKey(id))
	}
	return k, nil
}

// parseKey splits a presented key into its id, or reports it malformed.
func parseKey(key string) (id string, ok bool) {
	rest, found := strings.CutPrefix(key, keyPrefix)
	if !found || len(rest) != keyIDLen+1+keySecretLen || rest[keyIDLen] != '_' {
		return "", false
	}
	for _, r := range rest[:keyIDLen] + rest[keyIDLen+1:] {
		if !(r >= 'a' && r <= 'z' || r >= '2' && r <= '7') {
			return "", false
		}
	}
	return rest[:keyIDLen], true
}

func hashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func hashesEqual(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func randomToken(n int) (string, error) {
	buf := make([]byte, (n*5+7)/8)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return keyEncoding.EncodeToString(buf)[:n], nil
}

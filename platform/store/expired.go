package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/firestore"
)

// Expiring is a collection whose documents stop mattering once their Field, a time, has
// passed: a Firestore TTL policy on Field may delete them, and DeleteExpired does so in steps
// for deployments without one.
type Expiring struct{ Collection, Field string }

var (
	expiringMu sync.Mutex
	expiring   []Expiring
)

// Expires declares that collection's documents expire at field, so that the deployment's TTL
// policies (deploy/, from ExpiringCollections) cover it; declare each at package level.
func Expires(collection, field string) Expiring {
	e := Expiring{collection, field}
	expiringMu.Lock()
	defer expiringMu.Unlock()
	if !slices.Contains(expiring, e) {
		expiring = append(expiring, e)
	}
	return e
}

// ExpiringCollections are the collections declared by Expires in the packages of this binary,
// sorted by collection.
func ExpiringCollections() []Expiring {
	expiringMu.Lock()
	defer expiringMu.Unlock()
	out := slices.Clone(expiring)
	slices.SortFunc(out, func(a, b Expiring) int {
		return strings.Compare(a.Collection+"\x00"+a.Field, b.Collection+"\x00"+b.Field)
	})
	return out
}

// DeleteExpired deletes up to limit documents of e's collection whose time field is before before,
// and answers how many it deleted: one bounded step of a sweep that runs on every tick, so that
// records Hangar made and no longer reads do not pile up whether or not a deployment set a
// Firestore TTL policy on the field. Each document goes by its own precondition-free delete;
// two sweeps racing delete a document twice, which is no error.
func DeleteExpired(ctx context.Context, db *firestore.Client, e Expiring, before time.Time, limit int) (int, error) {
	collection := e.Collection
	q := db.Collection(collection).Where(e.Field, "<", before).Limit(limit).Select()
	snaps, err := q.Documents(ctx).GetAll()
	if err != nil {
		return 0, fmt.Errorf("find expired %s: %w", collection, err)
	}
	if len(snaps) == 0 {
		return 0, nil
	}
	b := Batch(db)
	for _, s := range snaps {
		b.Delete(s.Ref)
	}
	if _, err := b.Commit(ctx); err != nil {
		return 0, fmt.Errorf("delete %d expired %s: %w", len(snaps), collection, err)
	}
	return len(snaps), nil
}

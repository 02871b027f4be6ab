package store

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
)

// DeleteExpired deletes up to limit documents of collection whose time field is before before,
// and answers how many it deleted: one bounded step of a sweep that runs on every tick, so that
// records Hangar made and no longer reads do not pile up whether or not a deployment set a
// Firestore TTL policy on the field. Each document goes by its own precondition-free delete;
// two sweeps racing delete a document twice, which is no error.
func DeleteExpired(ctx context.Context, db *firestore.Client, collection, field string, before time.Time, limit int) (int, error) {
	q := db.Collection(collection).Where(field, "<", before).Limit(limit).Select()
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

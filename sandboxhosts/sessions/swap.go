package sessions

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxSwapAttempts bounds the re-reads of a contended swap.
const maxSwapAttempts = 10

// swap is a compare-and-swap on one document: it reads ref into a T — or starts from held, read
// or written at version — lets apply check and change it and name the fields to write, and
// writes them on the condition that the document is still at the version it started from. A
// write that lost a race is re-read and re-applied. A missing document is ErrNotFound; an error
// from apply ends the swap, with the value apply saw.
//
// One read and one conditional write cost a third of a Firestore transaction (begin, read,
// commit) and hold no lock: the state moves of sessions and prompts are all swaps.
func swap[T any](ctx context.Context, ref *firestore.DocumentRef, held *T, version time.Time, apply func(*T) ([]firestore.Update, error)) (*T, time.Time, error) {
	for attempt := 1; ; attempt++ {
		var v T
		if attempt == 1 && held != nil && !version.IsZero() {
			v = *held
		} else {
			snap, err := ref.Get(ctx)
			if status.Code(err) == codes.NotFound {
				return nil, time.Time{}, ErrNotFound
			}
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("read %s: %w", ref.ID, err)
			}
			if err := snap.DataTo(&v); err != nil {
				return nil, time.Time{}, fmt.Errorf("decode %s: %w", ref.ID, err)
			}
			version = snap.UpdateTime
		}
		updates, err := apply(&v)
		if err != nil {
			return &v, version, err
		}
		wr, err := ref.Update(ctx, updates, firestore.LastUpdateTime(version))
		if err == nil {
			return &v, wr.UpdateTime, nil
		}
		if code := status.Code(err); (code == codes.FailedPrecondition || code == codes.Aborted) && attempt < maxSwapAttempts {
			continue
		}
		return nil, time.Time{}, err
	}
}

// Package store opens Hangar's Firestore and holds the few helpers every service needs around it:
// not-found detection and timestamp conversion. Each service owns its own collections.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Open connects to the project's default database; FIRESTORE_EMULATOR_HOST, when set, points
// the client at the emulator.
func Open(ctx context.Context, project string) (*firestore.Client, error) {
	var opts []option.ClientOption
	if o, err := recordingOption(); err != nil {
		return nil, err
	} else if o != nil {
		opts = append(opts, o)
	}
	c, err := firestore.NewClient(ctx, project, opts...)
	if err != nil {
		return nil, fmt.Errorf("open firestore for project %s: %w", project, err)
	}
	return c, nil
}

// ErrNotFound is Swap's answer for a missing document.
var ErrNotFound = errors.New("not found")

// IsNotFound reports whether err is Firestore's "no such document".
func IsNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// IsAlreadyExists reports whether err is Firestore's answer to creating an existing document.
func IsAlreadyExists(err error) bool {
	return status.Code(err) == codes.AlreadyExists
}

// All decodes every document of it into a T, in order, and stops the iterator.
func All[T any](it *firestore.DocumentIterator) ([]T, error) {
	defer it.Stop()
	var out []T
	for {
		snap, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var v T
		if err := snap.DataTo(&v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", snap.Ref.Path, err)
		}
		out = append(out, v)
	}
}

// Count counts what q matches with an aggregation, within tx when tx is set (so that a limit
// checked inside a transaction holds against concurrent writers): the server counts index
// entries, no document is read.
func Count(ctx context.Context, q firestore.Query, tx *firestore.Transaction) (int64, error) {
	res, err := q.NewAggregationQuery().WithCount("n").Transaction(tx).Get(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := res["n"].(*firestorepb.Value)
	if !ok {
		return 0, fmt.Errorf("count: unexpected result %v", res)
	}
	return n.GetIntegerValue(), nil
}

// maxSwapAttempts bounds the re-reads of a contended swap.
const maxSwapAttempts = 10

// Swap is a compare-and-swap on one document: it reads ref into a T — or starts from held, read
// or written at version — lets apply check and change it and name the fields to write, and
// writes them on the condition that the document is still at the version it started from. A
// write that lost a race is re-read and re-applied. A missing document is ErrNotFound; an error
// from apply ends the swap, with the value apply saw.
//
// One read and one conditional write cost a third of a Firestore transaction (begin, read,
// commit) and hold no lock: state moves are swaps.
func Swap[T any](ctx context.Context, ref *firestore.DocumentRef, held *T, version time.Time, apply func(*T) ([]firestore.Update, error)) (*T, time.Time, error) {
	for attempt := 1; ; attempt++ {
		var v T
		fromHeld := attempt == 1 && held != nil && !version.IsZero()
		if fromHeld {
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
		// A write from held that failed for any reason goes again from a read, which says
		// what the document is: a version that is not its own (even one the emulator calls
		// invalid, being later than its own) is no more than a stale one.
		if code := status.Code(err); fromHeld || ((code == codes.FailedPrecondition || code == codes.Aborted) && attempt < maxSwapAttempts) {
			continue
		}
		return nil, time.Time{}, err
	}
}

// Read reads ref into a T, within tx when tx is set; a missing document is ErrNotFound.
func Read[T any](ctx context.Context, tx *firestore.Transaction, ref *firestore.DocumentRef) (*T, error) {
	var snap *firestore.DocumentSnapshot
	var err error
	if tx != nil {
		snap, err = tx.Get(ref)
	} else {
		snap, err = ref.Get(ctx)
	}
	if IsNotFound(err) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", ref.Path, err)
	}
	var v T
	if err := snap.DataTo(&v); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ref.Path, err)
	}
	return &v, nil
}

// Ping reads a document that never exists, for readiness probes: "not found" is Firestore
// answering, and any other error is it not being reachable (or this process not allowed in).
func Ping(ctx context.Context, db *firestore.Client) error {
	_, err := db.Collection("hangar-readyz").Doc("probe").Get(ctx)
	if err != nil && !IsNotFound(err) {
		return fmt.Errorf("firestore: %w", err)
	}
	return nil
}

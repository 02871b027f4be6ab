// Package store opens Hangar's Firestore and holds the few helpers every service needs around it:
// not-found detection and timestamp conversion. Each service owns its own collections.
package store

import (
	"context"
	"errors"
	"fmt"

	"cloud.google.com/go/firestore"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Open connects to the project's default database; FIRESTORE_EMULATOR_HOST, when set, points
// the client at the emulator.
func Open(ctx context.Context, project string) (*firestore.Client, error) {
	c, err := firestore.NewClient(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("open firestore for project %s: %w", project, err)
	}
	return c, nil
}

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

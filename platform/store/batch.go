package store

//lint:file-ignore SA1019 WriteBatch is deprecated, but it is Firestore's one atomic single-RPC commit (see Batch).

import "cloud.google.com/go/firestore"

// Batch starts an atomic group of blind writes. Firestore's Go client deprecates WriteBatch in
// favour of transactions and BulkWriter, but it is the only single-RPC atomic commit:
// BulkWriter is not atomic (readers could see half a group) and a transaction costs an extra
// round trip. Every batched write in Hangar goes through here, so the choice is made once.
func Batch(db *firestore.Client) *firestore.WriteBatch {
	return db.Batch()
}

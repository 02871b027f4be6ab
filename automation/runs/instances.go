package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

// Instance states: an instance is open from its first event until an instance block or
// CloseInstance closes it; events routed to a closed instance are dropped.
const (
	InstanceOpen   = "open"
	InstanceClosed = "closed"
)

// Instance is a long-lived group of an automation's events sharing one key (e.g. one pull
// request). Its id is derived from the automation and the key, so one key has one instance.
type Instance struct {
	ID           string    `firestore:"id"`
	AutomationID string    `firestore:"automation_id"`
	Key          string    `firestore:"key"`
	Status       string    `firestore:"status"`
	Inputs       string    `firestore:"inputs"`
	OpenedBy     string    `firestore:"opened_by"`
	OpenedAt     time.Time `firestore:"opened_at"`
	ClosedAt     time.Time `firestore:"closed_at,omitempty"`
	CloseReason  string    `firestore:"close_reason,omitempty"`
}

// Handle is a value an instance keeps for later runs, e.g. the session a first run started.
type Handle struct {
	Name      string    `firestore:"name"`
	Value     string    `firestore:"value"`
	WrittenBy string    `firestore:"written_by"`
	CreatedAt time.Time `firestore:"created_at"`
}

// InstanceID is the id of an automation's instance for key.
func InstanceID(automationID, key string) string {
	return ids.FromKey("inst", automationID+"\x00"+key)
}

func (s *Store) instances() *firestore.CollectionRef { return s.db.Collection(InstancesCollection) }

// OpenInstance returns the instance of key, creating it open when it does not exist; created
// says which. Two events racing for a new key get one instance.
func (s *Store) OpenInstance(ctx context.Context, automationID, key, inputs, openedBy string) (inst *Instance, created bool, err error) {
	id := InstanceID(automationID, key)
	in := &Instance{ID: id, AutomationID: automationID, Key: key, Status: InstanceOpen, Inputs: inputs, OpenedBy: openedBy, OpenedAt: s.now()}
	_, err = s.instances().Doc(id).Create(ctx, in)
	if err == nil {
		return in, true, nil
	}
	if !store.IsAlreadyExists(err) {
		return nil, false, fmt.Errorf("open instance %q of %s: %w", key, automationID, err)
	}
	inst, err = s.Instance(ctx, id)
	return inst, false, err
}

// Instance reads one instance.
func (s *Store) Instance(ctx context.Context, id string) (*Instance, error) {
	return store.Read[Instance](ctx, nil, s.instances().Doc(id))
}

// ErrInstanceClosed is a change to an instance that is closed.
var ErrInstanceClosed = errors.New("instance is closed")

// CloseInstance closes an open instance; closed reports false when it was closed already.
func (s *Store) CloseInstance(ctx context.Context, id, reason string) (closed bool, err error) {
	_, _, err = store.Swap(ctx, s.instances().Doc(id), nil, time.Time{}, func(in *Instance) ([]firestore.Update, error) {
		if in.Status == InstanceClosed {
			return nil, ErrInstanceClosed
		}
		return []firestore.Update{
			{Path: "status", Value: InstanceClosed},
			{Path: "closed_at", Value: s.now()},
			{Path: "close_reason", Value: reason},
		}, nil
	})
	switch {
	case errors.Is(err, ErrInstanceClosed):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("close instance %s: %w", id, err)
	}
	return true, nil
}

// ListInstances returns an automation's instances, newest first.
func (s *Store) ListInstances(ctx context.Context, automationID string, includeClosed bool, limit int) ([]*Instance, error) {
	q := s.instances().Where("automation_id", "==", automationID)
	if !includeClosed {
		q = q.Where("status", "==", InstanceOpen)
	}
	out, err := store.All[*Instance](q.OrderBy("opened_at", firestore.Desc).Limit(limit).Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list instances of %s: %w", automationID, err)
	}
	return out, nil
}

// WriteHandle records a handle on an open instance. Its document id is derived from the
// writer, so a step that runs again writes it once.
func (s *Store) WriteHandle(ctx context.Context, instanceID string, h Handle) error {
	in, err := s.Instance(ctx, instanceID)
	if err != nil {
		return err
	}
	if in.Status == InstanceClosed {
		return fmt.Errorf("write handle %s to instance %s: %w", h.Name, instanceID, ErrInstanceClosed)
	}
	if h.CreatedAt.IsZero() {
		h.CreatedAt = s.now()
	}
	doc := s.instances().Doc(instanceID).Collection("handles").Doc(ids.FromKey("handle", h.WrittenBy+"\x00"+h.Name))
	if _, err := doc.Set(ctx, h); err != nil {
		return fmt.Errorf("write handle %s to instance %s: %w", h.Name, instanceID, err)
	}
	return nil
}

// Handles returns an instance's handles, oldest first.
func (s *Store) Handles(ctx context.Context, instanceID string) ([]Handle, error) {
	q := s.instances().Doc(instanceID).Collection("handles").OrderBy("created_at", firestore.Asc)
	out, err := store.All[Handle](q.Documents(ctx))
	if err != nil {
		return nil, fmt.Errorf("list handles of instance %s: %w", instanceID, err)
	}
	return out, nil
}

// LatestHandles maps each handle name of an instance to its newest value.
func (s *Store) LatestHandles(ctx context.Context, instanceID string) (map[string]string, error) {
	hs, err := s.Handles(ctx, instanceID)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(hs))
	for _, h := range hs {
		out[h.Name] = h.Value
	}
	return out, nil
}

package automations

import (
	"context"
	"fmt"

	"github.com/hangar-dev/hangar/automation/catalog"
	"github.com/hangar-dev/hangar/automation/definition"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/records/secrets"
)

// Access is what every save checks of an automation's owner, the user its runs act as: that
// they may use the org secrets its blocks send (secret_headers) and read the webhook
// registrations its entrypoints subscribe to. Runs check the secrets again when they send them.
type Access struct {
	// Owner is the principal an automation acts as for its owner user (admin while the user
	// holds a live admin key); nil treats every owner as a plain user.
	Owner func(ctx context.Context, userID string) (auth.Principal, error)
	// Secrets holds the org secrets and their policies; nil where none are kept.
	Secrets *secrets.Store
	// Webhook answers not_found unless p may read registration id; nil where none are served.
	Webhook func(ctx context.Context, p auth.Principal, id string) error
}

// checkAccess refuses def, with overrides applied, when the automation's owner (ownerID) may
// not use a secret it names (permission_denied naming the secret) or read a webhook
// registration it subscribes to (not_found naming the registration, as for any record of
// someone else's).
func (s *Service) checkAccess(ctx context.Context, ownerID string, def definition.Definition, overridesJSON string) error {
	a := s.d.Access
	if effective, errs := s.d.Validator.ApplyOverrides(def, []byte(overridesJSON)); len(errs) == 0 {
		def = effective
	}
	names := def.SecretNames()
	var hooks []string
	for _, ep := range def.Entrypoints {
		if id, ok := catalog.WebhookRegistrationID(ep.EventKey); ok && ep.Type == definition.EntrypointEvent {
			hooks = append(hooks, id)
		}
	}
	if len(names) == 0 && len(hooks) == 0 {
		return nil
	}
	owner, err := s.owner(ctx, ownerID)
	if err != nil {
		return err
	}
	if len(names) > 0 && a.Secrets != nil {
		if err := a.Secrets.Check(ctx, secrets.SubjectOf(owner, ""), names...); err != nil {
			return err
		}
	}
	for _, id := range hooks {
		if a.Webhook == nil {
			break
		}
		if err := a.Webhook(ctx, owner, id); err != nil {
			return fmt.Errorf("subscribe to webhook registration %s: %w", id, err)
		}
	}
	return nil
}

// owner is the principal of the automation's owner: the caller's own when the caller is the
// owner (with the admin standing of the key they use), else the owner acting without a key.
func (s *Service) owner(ctx context.Context, ownerID string) (auth.Principal, error) {
	if caller, _ := auth.Caller(ctx); caller.UserID == ownerID {
		return caller, nil
	}
	if s.d.Access.Owner == nil {
		return auth.Principal{UserID: ownerID}, nil
	}
	return s.d.Access.Owner(ctx, ownerID)
}

package tasks

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/hangar-dev/hangar/platform/opt"

	"cloud.google.com/go/firestore"
	"google.golang.org/protobuf/encoding/protojson"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/apierr"
)

// Sessions is what tasks need of SessionService; the api package wires the real one in.
type Sessions interface {
	// Start creates an agent session for a task and sends it prompt ("" sends none).
	Start(ctx context.Context, spec SessionSpec) (string, error)
	// States reads sessions by id; ids it does not find are left out.
	States(ctx context.Context, ids []string) (map[string]SessionState, error)
	// Delete deletes a session; deleting one already gone succeeds.
	Delete(ctx context.Context, id string) error
}

// SessionSpec is the session a task runs in, from the task and its profile.
type SessionSpec struct {
	// Key, when set, makes the start idempotent: the same caller and key find the session
	// the first start made. The session's id derives from them with the deployment's secret.
	Key                                 string
	Image, Harness, HarnessMode, Prompt string
	Model, Effort, ModelRouter          string
	// Env is the profile's env vars, the session's harness_env.
	Env map[string]string
	// SecretRefs are the profile's secrets in mode "env": environment variable → org secret,
	// read into the session's secrets for the task's creator (ctx's caller) and ProfileID, each
	// secret's access policy checked then, whatever it was when the profile was saved.
	SecretRefs map[string]string
	ProfileID  string
	// Apps are the profile's apps, which the session serves.
	Apps []*appv1.SessionApp
}

// secretRefs are the profile's secrets a session gets in its environment. Mode "proxy" (the
// egress proxy adds the secret to requests for its hosts) is not built: such a profile cannot
// start a session yet, rather than start one that silently lacks the secret.
func secretRefs(profileSecrets []*appv1.ProfileSecret) (map[string]string, error) {
	refs := make(map[string]string, len(profileSecrets))
	for _, ps := range profileSecrets {
		if ps.GetMode() == "proxy" {
			return nil, apierr.FailedPrecondition("the profile's secret %q is in mode \"proxy\", which needs the egress proxy, not available yet: use mode \"env\"", ps.GetRef())
		}
		refs[ps.GetEnvVar()] = ps.GetRef()
	}
	return refs, nil
}

// SessionState is a session as a task follows it.
type SessionState struct {
	Session *appv1.Session
	// AgentState is "working" while its harness runs a prompt, "waiting" once its queue is empty.
	AgentState string
}

// statusOf is a task's status from its session: the one table of how tasks follow sessions.
//
//	session failed                                → failed
//	session deleted                               → cancelled
//	harness waiting (queue empty, turn finished)  → waiting
//	anything else (creating, working, resuming…)  → running
func statusOf(st SessionState) string {
	switch {
	case st.Session.GetStatus() == "failed":
		return StateFailed
	case st.Session.GetStatus() == "deleted":
		return StateCancelled
	case st.AgentState == "waiting":
		return StateWaiting
	}
	return StateRunning
}

// follow fills each task's sessions and moves the task's status after its session's, writing
// the move back so that ListTasks' states filter sees it. Without session state (no Sessions,
// or it failed) the stored status stands, and unavailable says so.
func (s *Service) follow(ctx context.Context, recs []record, tasks []*appv1.Task) (unavailable bool) {
	if s.sessions == nil {
		return false
	}
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.SessionIDs...)
	}
	if len(ids) == 0 {
		return false
	}
	states, err := s.sessions.States(ctx, ids)
	if err != nil {
		return true
	}
	for i, r := range recs {
		var src source
		_ = json.Unmarshal([]byte(r.SourceJSON), &src)
		profile := &appv1.ProfileSnapshot{}
		if protojson.Unmarshal(src.Profile, profile) != nil {
			profile = nil
		}
		for j, ref := range tasks[i].Sessions {
			st, ok := states[ref.GetSessionId()]
			if !ok {
				continue
			}
			ref.Session, ref.Profile = st.Session, profile
			if j > 0 {
				continue
			}
			ref.Role = opt.String("primary")
			if to := statusOf(st); to != r.Status && CanMove(r.Status, to) {
				if s.moveStatus(ctx, r.ID, r.Status, to) == nil {
					tasks[i].Status = to
				}
			}
		}
	}
	return false
}

// moveStatus writes a task's new status if it is still from.
func (s *Service) moveStatus(ctx context.Context, id, from, to string) error {
	return s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		cur, err := s.load(ctx, tx, "task", id)
		if err != nil {
			return err
		}
		if cur.Status != from {
			return errors.New("task status changed")
		}
		return tx.Update(s.doc(id), []firestore.Update{{Path: "status", Value: to}, {Path: "updated_at", Value: s.clock.Now()}})
	})
}

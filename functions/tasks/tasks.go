// Package tasks serves TaskService. It owns tasks, the units of agent work that sessions run in:
// their owner-only visibility, their state machine, their trees (a task an agent splits off is a
// child, and a whole tree is one query away), their names unique among siblings, and the token
// index that lets ListTasks search titles and prompts without reading every task.
package tasks

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/emptypb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/platform/store"
)

const (
	tasksCollection = "tasks"
	// namesCollection holds one claim document per local task name in use, keyed by the name's
	// scope and the name.
	namesCollection = "taskNames"
	idPrefix        = "task"
)

// Task types; "" means agent.
var types = []string{"agent", "review", "automation", "draft"}

const (
	// maxShortLen bounds harness, model, effort, model_router, harness_mode and
	// spawning_session_id: names, not prose.
	maxShortLen = 100
	// nameWindow candidate names are read per round trip, up to nameWindows round trips; past
	// that many namesakes a name gets a tag from the task id instead of a number.
	nameWindow  = 10
	nameWindows = 5
	// deleteChunk tasks are deleted per transaction, two writes each (task and name claim).
	deleteChunk = 200
)

// Profiles is what tasks need of ProfileService; the composition wires the real one in.
type Profiles interface {
	// Launch returns the profile's snapshot, env vars and secrets, apierr NotFound for an
	// unknown profile and FailedPrecondition for an archived one.
	Launch(ctx context.Context, id string) (*appv1.ProfileSnapshot, map[string]string, []*appv1.ProfileSecret, error)
	// Egress returns the profile's network section and repos, which its sessions may reach, and
	// its owner, who decides that network (SessionSpec.ProfileOwner).
	Egress(ctx context.Context, id string) (*appv1.ProfileNetwork, []*appv1.ProfileRepo, string, error)
}

// Service implements TaskService. A task is its creator's: other non-admins get not_found for
// it; admins see every task.
type Service struct {
	db       *firestore.Client
	profiles Profiles
	sessions Sessions
	users    *auth.Users
	clock    clock.Clock
	lim      config.Limits
}

var _ appv1connect.TaskServiceHandler = (*Service)(nil)

// New returns the service over db, starting tasks from profiles. With sessions, tasks run in
// sessions: CreateTask starts one, reads follow them, DeleteTask deletes them; with nil, tasks
// are records only.
func New(db *firestore.Client, profiles Profiles, sessions Sessions, users *auth.Users, c clock.Clock, lim config.Limits) *Service {
	return &Service{db: db, profiles: profiles, sessions: sessions, users: users, clock: c, lim: lim}
}

// CreateTask validates a task, snapshots its profile and stores it, pending, with a name unique
// among its siblings.
func (s *Service) CreateTask(ctx context.Context, req *connect.Request[appv1.CreateTaskRequest]) (*connect.Response[appv1.CreateTaskResponse], error) {
	return s.CreateTaskWith(ctx, req, nil)
}

// CreateTaskWith is CreateTask whose session also clones checkouts at its start: how an
// in-process caller (a review) hands its agent a repository at a commit with a credential the
// caller holds and the task's creator may not (see Checkout). A retried request finds the task
// the first made, as CreateTask's does.
func (s *Service) CreateTaskWith(ctx context.Context, req *connect.Request[appv1.CreateTaskRequest], checkouts []Checkout) (*connect.Response[appv1.CreateTaskResponse], error) {
	in, err := parseCreate(req.Msg, s.lim)
	if err != nil {
		return nil, err
	}
	profile, profileEnv, profileSecrets, err := s.profiles.Launch(ctx, in.ProfileID)
	if err != nil {
		return nil, err
	}
	caller, _ := auth.Caller(ctx)
	base, err := newRecord(in, profile, caller.UserID, s.clock.Now())
	if err != nil {
		return nil, err
	}
	sessionKey := ""
	if requestID := req.Msg.GetRequestId(); requestID != "" {
		// A retried request finds the task it made; the task's id derives from the caller and
		// the request id, and its session's from the task's id (SessionSpec.Key), so a retry
		// that overtakes a lost answer makes the same task and session. Nobody else can make a
		// task of this caller's, and the session's id needs the deployment's secret too.
		key := caller.UserID + "\x00" + requestID
		if done, err := s.load(ctx, nil, "task", ids.FromKey(idPrefix, key)); err == nil {
			return s.created(ctx, done)
		} else if connect.CodeOf(err) != connect.CodeNotFound {
			return nil, err
		}
		base.ID = ids.FromKey(idPrefix, key)
		sessionKey = base.ID
	}
	if s.sessions != nil {
		// The session first: a task that cannot run is not created. Until ImageService resolves
		// image ids, the profile's image_id is an image reference.
		prompt := in.Prompt
		if in.DeferInitialPrompt {
			prompt = ""
		}
		refs, proxied := secretRefs(profileSecrets)
		network, repos, profileOwner, err := s.profiles.Egress(ctx, in.ProfileID)
		if err != nil {
			return nil, err
		}
		sid, err := s.sessions.Start(ctx, SessionSpec{
			Key: sessionKey, Image: profile.GetImageId(), Harness: base.Harness, HarnessMode: in.HarnessMode, Prompt: prompt,
			Model: base.Model, Effort: base.Effort, ModelRouter: base.ModelRouter, Env: profileEnv, SecretRefs: refs,
			ProfileID: in.ProfileID, ProfileOwner: profileOwner, Network: networkOf(network, repos, checkouts), Repos: repos, Checkouts: checkouts, ProxySecrets: proxied,
			Apps: profile.GetApps(), IncludeUserTokens: profile.GetIncludeUserTokens(),
		})
		if err != nil {
			return nil, fmt.Errorf("start the task's session: %w", err)
		}
		base.SessionIDs, base.Status = []string{sid}, StateRunning
	}
	var rec record
	err = s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		rec = base
		var parent record
		if in.ParentTaskID != "" {
			var err error
			if parent, err = s.load(ctx, tx, "parent task", in.ParentTaskID); err != nil {
				return err
			}
			if err := rec.placeUnder(parent, s.lim.TaskTreeDepth); err != nil {
				return err
			}
		}
		name, err := s.claimName(tx, rec)
		if err != nil {
			return err
		}
		rec.LocalName, rec.CanonicalName = name, name
		if parent.ID != "" {
			rec.CanonicalName = parent.CanonicalName + "/" + name
		}
		return tx.Create(s.doc(rec.ID), rec)
	})
	if err != nil && sessionKey != "" && store.IsAlreadyExists(err) {
		// A concurrent retry of the same request created it first, with this same session.
		if rec, err = s.load(ctx, nil, "task", base.ID); err != nil {
			return nil, err
		}
		return s.created(ctx, rec)
	}
	if err != nil {
		// The task was not stored: its session would be nobody's.
		for _, sid := range base.SessionIDs {
			_ = s.sessions.Delete(context.WithoutCancel(ctx), sid)
		}
		return nil, fmt.Errorf("create task: %w", err)
	}
	if len(rec.SessionIDs) > 0 {
		// The session's moves before the task was stored (a turn that already ended, a harness
		// that did not launch) had no task to move. A failure to catch up leaves the task
		// running until its session's next move, which is no reason to fail a task that exists.
		if s.sessions.SyncTask(ctx, rec.SessionIDs[0]) == nil {
			if cur, err := s.load(ctx, nil, "task", rec.ID); err == nil {
				rec = cur
			}
		}
	}
	return s.created(ctx, rec)
}

// created answers CreateTask with rec.
func (s *Service) created(ctx context.Context, rec record) (*connect.Response[appv1.CreateTaskResponse], error) {
	out, err := s.protos(ctx, []record{rec})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.CreateTaskResponse{Task: out[0]}), nil
}

// parseCreate validates a CreateTaskRequest, reporting every bad field at once, and returns it
// trimmed, with the type defaulted, as the source it will be recorded as.
func parseCreate(m *appv1.CreateTaskRequest, lim config.Limits) (source, error) {
	var v apierr.Violations
	src := source{
		Type:               cmp.Or(m.GetType(), types[0]),
		Prompt:             m.GetPrompt(),
		Title:              text(&v, "title", m.GetTitle(), maxTitleLen),
		ProfileID:          strings.TrimSpace(m.GetProfileId()),
		Harness:            text(&v, "harness", m.GetHarness(), maxShortLen),
		Model:              text(&v, "model", m.GetModel(), maxShortLen),
		Effort:             text(&v, "effort", m.GetEffort(), maxShortLen),
		ModelRouter:        text(&v, "model_router", m.GetModelRouter(), maxShortLen),
		HarnessMode:        text(&v, "harness_mode", m.GetHarnessMode(), maxShortLen),
		DeferInitialPrompt: m.GetDeferInitialPrompt(),
		ParentTaskID:       strings.TrimSpace(m.GetParentTaskId()),
		SpawningSessionID:  text(&v, "spawning_session_id", m.GetSpawningSessionId(), maxShortLen),
	}
	if !slices.Contains(types, src.Type) {
		v.Addf("type", "must be one of %s (empty means %s)", strings.Join(types, ", "), types[0])
	}
	if src.ProfileID == "" {
		v.Add("profile_id", "is required")
	}
	if n := len(src.Prompt); n > lim.MaxPromptBytes {
		v.Addf("prompt", "must be at most %d bytes (is %d)", lim.MaxPromptBytes, n)
	}
	return src, v.Err()
}

// text trims a one-line field and checks its length and that it has no control characters.
func text(v *apierr.Violations, field, s string, limit int) string {
	s = strings.TrimSpace(s)
	if n := utf8.RuneCountInString(s); n > limit {
		v.Addf(field, "must be at most %d characters (is %d)", limit, n)
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		v.Add(field, "must not contain control characters (it is one line)")
	}
	return s
}

// newRecord is a new root task made from src and its profile, not yet named.
func newRecord(src source, profile *appv1.ProfileSnapshot, owner string, now time.Time) (record, error) {
	snapshot, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(profile)
	if err != nil {
		return record{}, fmt.Errorf("encode profile snapshot: %w", err)
	}
	src.Profile = snapshot
	sourceJSON, err := json.Marshal(src)
	if err != nil {
		return record{}, fmt.Errorf("encode task source: %w", err)
	}
	id := ids.New(idPrefix)
	rec := record{
		ID: id, Type: src.Type, Status: StatePending, CreatedBy: owner, SourceJSON: string(sourceJSON),
		ProfileID: src.ProfileID, RootTaskID: id, SpawningSessionID: src.SpawningSessionID,
		Harness: cmp.Or(src.Harness, profile.GetHarness()), Model: cmp.Or(src.Model, profile.GetModel()),
		Effort: cmp.Or(src.Effort, profile.GetEffort()), ModelRouter: cmp.Or(src.ModelRouter, profile.GetModelRouter()),
		CreatedAt: now, UpdatedAt: now,
	}
	rec.setTitle(src.Title, src.Prompt)
	return rec, nil
}

// setTitle sets a custom title, or with "" the one derived from the prompt, and re-indexes the
// task for search.
func (r *record) setTitle(custom, prompt string) {
	r.Title, r.TitleIsCustom = custom, custom != ""
	if !r.TitleIsCustom {
		r.Title = deriveTitle(prompt)
	}
	r.Search = searchIndex(r.Title, prompt)
}

// placeUnder makes r a child of parent.
func (r *record) placeUnder(parent record, maxDepth int) error {
	if len(parent.AncestorIDs)+1 >= maxDepth {
		return apierr.ResourceExhausted("parent task %s is %d levels deep, the most a task tree may have", parent.ID, maxDepth)
	}
	r.ParentTaskID, r.RootTaskID = parent.ID, parent.RootTaskID
	r.AncestorIDs = append(slices.Clone(parent.AncestorIDs), parent.ID)
	return nil
}

// claimName reserves a name for r in tx and returns it: the first free one of base, base-2,
// base-3, … among r's siblings, base being the slug of its title. Why claim documents: Firestore
// has no unique index, and a query would not see a concurrent transaction's new task; two
// transactions that read the same claim are serialised, so the later one is retried and sees
// the earlier one's claim.
func (s *Service) claimName(tx *firestore.Transaction, r record) (string, error) {
	base, scope := slug(r.Title), r.nameScope()
	name := ""
	for w := 0; w < nameWindows && name == ""; w++ {
		names := make([]string, nameWindow)
		refs := make([]*firestore.DocumentRef, nameWindow)
		for i := range names {
			names[i] = numbered(base, w*nameWindow+i+1)
			refs[i] = s.claimDoc(scope, names[i])
		}
		snaps, err := tx.GetAll(refs)
		if err != nil {
			return "", fmt.Errorf("read name claims of %s: %w", base, err)
		}
		if i := slices.IndexFunc(snaps, func(snap *firestore.DocumentSnapshot) bool { return !snap.Exists() }); i >= 0 {
			name = names[i]
		}
	}
	if name == "" {
		// Counting further would cost more reads per create than a readable number is worth;
		// the random end of the id keeps the name unique.
		name = tagged(base, r.ID[len(r.ID)-6:])
	}
	return name, tx.Create(s.claimDoc(scope, name), map[string]any{"task_id": r.ID})
}

// GetTask returns a task, by task_id or else by one of its session ids, with every descendant.
// When both are given, task_id decides.
func (s *Service) GetTask(ctx context.Context, req *connect.Request[appv1.GetTaskRequest]) (*connect.Response[appv1.GetTaskResponse], error) {
	// The subtree query needs only the task's id, so when the request names it the query runs
	// alongside the read of the task itself: one round trip of latency instead of two.
	var desc []record
	var descErr error
	var wg sync.WaitGroup
	early := ids.Valid(idPrefix, req.Msg.GetTaskId())
	if early {
		wg.Go(func() { desc, descErr = s.descendants(ctx, req.Msg.GetTaskId()) })
	}
	rec, err := s.find(ctx, req.Msg.GetTaskId(), req.Msg.GetSessionId())
	wg.Wait()
	if err != nil {
		return nil, err
	}
	if !early {
		desc, descErr = s.descendants(ctx, rec.ID)
	}
	if descErr != nil {
		return nil, descErr
	}
	out, err := s.protos(ctx, append([]record{rec}, desc...))
	if err != nil {
		return nil, err
	}
	out[0].Descendants = out[1:]
	return connect.NewResponse(&appv1.GetTaskResponse{Task: out[0]}), nil
}

// descendants lists the caller's view of a task's subtree, oldest first. An admin's child under
// another user's task is the admin's; its owner sees the tree without it.
func (s *Service) descendants(ctx context.Context, id string) ([]record, error) {
	q := s.subtree(id).OrderBy("created_at", firestore.Asc).OrderBy(firestore.DocumentID, firestore.Asc).Limit(s.lim.TaskDescendants)
	desc, err := s.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list descendants of task %s: %w", id, err)
	}
	caller, _ := auth.Caller(ctx)
	return slices.DeleteFunc(desc, func(d record) bool { return !d.visibleTo(caller) }), nil
}

// find is GetTask's lookup.
func (s *Service) find(ctx context.Context, taskID, sessionID string) (record, error) {
	switch {
	case taskID != "":
		return s.load(ctx, nil, "task", taskID)
	case sessionID == "":
		return record{}, apierr.InvalidArgument("task_id", "is required (or session_id, to find the task of a session)")
	}
	if err := ids.Check("session_id", sessionID); err != nil {
		return record{}, err
	}
	recs, err := s.query(ctx, s.col().Where("session_ids", "array-contains", sessionID).Select(projected...).Limit(1))
	if err != nil {
		return record{}, fmt.Errorf("find task of session %s: %w", sessionID, err)
	}
	caller, _ := auth.Caller(ctx)
	if len(recs) == 0 || !recs[0].visibleTo(caller) {
		return record{}, apierr.NotFound("task with session", sessionID)
	}
	return recs[0], nil
}

// UpdateTask sets or resets a task's title, and closes it with status "completed". A title the
// client sets is custom; an empty one returns to the title derived from the prompt. Names never
// change: they may already be in paths, branches and other tasks' canonical names. Only a task
// whose agent finished (waiting) can be completed; every other status follows the task's
// sessions.
func (s *Service) UpdateTask(ctx context.Context, req *connect.Request[appv1.UpdateTaskRequest]) (*connect.Response[appv1.UpdateTaskResponse], error) {
	m := req.Msg
	var v apierr.Violations
	if m.GetTaskId() == "" {
		v.Add("task_id", "is required")
	}
	title := text(&v, "title", m.GetTitle(), maxTitleLen)
	if m.Status != nil && m.GetStatus() != StateCompleted {
		v.Addf("status", "can only be %s (closing a task whose agent finished); other statuses follow the task's sessions", StateCompleted)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var rec record
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		rec, err = s.load(ctx, tx, "task", m.GetTaskId())
		if err != nil {
			return err
		}
		var updates []firestore.Update
		if m.Title != nil {
			prompt, err := rec.prompt()
			if err != nil {
				return err
			}
			rec.setTitle(title, prompt)
			updates = append(updates,
				firestore.Update{Path: "title", Value: rec.Title},
				firestore.Update{Path: "title_is_custom", Value: rec.TitleIsCustom},
				firestore.Update{Path: "search", Value: rec.Search})
		}
		if m.Status != nil && rec.Status != m.GetStatus() {
			if !CanMove(rec.Status, m.GetStatus()) {
				return apierr.FailedPrecondition("task %s is %s: only a task whose agent finished (%s) can be %s", rec.ID, rec.Status, StateWaiting, m.GetStatus())
			}
			caller, _ := auth.Caller(ctx)
			rec.Status, rec.StatusReason = m.GetStatus(), "closed by "+caller.UserID
			updates = append(updates,
				firestore.Update{Path: "status", Value: rec.Status},
				firestore.Update{Path: "status_reason", Value: rec.StatusReason})
		}
		if len(updates) == 0 {
			return nil
		}
		rec.UpdatedAt = s.clock.Now()
		return tx.Update(s.doc(rec.ID), append(updates, firestore.Update{Path: "updated_at", Value: rec.UpdatedAt}))
	})
	if err != nil {
		return nil, fmt.Errorf("update task %s: %w", m.GetTaskId(), err)
	}
	out, err := s.protos(ctx, []record{rec})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&appv1.UpdateTaskResponse{Task: out[0]}), nil
}

// DeleteTask deletes a task with all its descendants and frees their names.
func (s *Service) DeleteTask(ctx context.Context, req *connect.Request[appv1.DeleteTaskRequest]) (*connect.Response[emptypb.Empty], error) {
	id := req.Msg.GetTaskId()
	if id == "" {
		return nil, apierr.InvalidArgument("task_id", "is required")
	}
	root, err := s.load(ctx, nil, "task", id)
	if err != nil {
		return nil, err
	}
	if err := s.deleteSessions(ctx, root); err != nil {
		return nil, fmt.Errorf("delete the sessions of task %s: %w", id, err)
	}
	for done := false; !done; {
		if done, err = s.deleteSome(ctx, root); err != nil {
			return nil, fmt.Errorf("delete task %s: %w", id, err)
		}
	}
	return connect.NewResponse(&emptypb.Empty{}), nil
}

// deleteSome deletes up to deleteChunk descendants of root with their name claims or, once none
// are left, root itself, and reports whether root is gone. Why root last, in a transaction that
// saw no descendants: a failure midway leaves a visible task to retry the delete on, and a child
// created concurrently either commits first (and is seen) or finds its parent gone.
func (s *Service) deleteSome(ctx context.Context, root record) (bool, error) {
	var done bool
	err := s.db.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		recs, err := store.All[record](tx.Documents(s.subtree(root.ID).Limit(deleteChunk)))
		if err != nil {
			return err
		}
		done = len(recs) == 0
		if done {
			recs = []record{root}
		}
		for _, r := range recs {
			if err := tx.Delete(s.doc(r.ID)); err != nil {
				return err
			}
			if err := tx.Delete(s.claimDoc(r.nameScope(), r.LocalName)); err != nil {
				return err
			}
		}
		return nil
	})
	return done, err
}

// load reads one task the caller may see, inside tx when it is not nil. Another user's task is
// not_found like a missing one, so that ids do not reveal what exists; so is a malformed id,
// without a database read. kind names the task in the error ("task", "parent task"), and its
// request field with "_id" ("task_id", "parent_task_id").
func (s *Service) load(ctx context.Context, tx *firestore.Transaction, kind, id string) (record, error) {
	if err := ids.Lookup(strings.ReplaceAll(kind, " ", "_")+"_id", kind, idPrefix, id); err != nil {
		return record{}, err
	}
	rec, err := store.Read[record](ctx, tx, s.doc(id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, apierr.NotFound(kind, id)
	}
	if err != nil {
		return record{}, fmt.Errorf("task: %w", err)
	}
	if caller, _ := auth.Caller(ctx); !rec.visibleTo(caller) {
		return record{}, apierr.NotFound(kind, id)
	}
	return *rec, nil
}

// protos renders tasks with their creators, read in one round trip.
func (s *Service) protos(ctx context.Context, recs []record) ([]*appv1.Task, error) {
	out, _, err := s.protosFollowing(ctx, recs)
	return out, err
}

// protosFollowing is protos that also says when session state could not be read.
func (s *Service) protosFollowing(ctx context.Context, recs []record) ([]*appv1.Task, bool, error) {
	owners := make([]string, len(recs))
	for i, r := range recs {
		owners[i] = r.CreatedBy
	}
	users, err := s.users.GetMany(ctx, owners)
	if err != nil {
		return nil, false, err
	}
	out := make([]*appv1.Task, len(recs))
	for i, r := range recs {
		out[i] = r.proto(users)
	}
	return out, s.follow(ctx, recs, out), nil
}

func (s *Service) col() *firestore.CollectionRef { return s.db.Collection(tasksCollection) }

func (s *Service) doc(id string) *firestore.DocumentRef { return s.col().Doc(id) }

// claimDoc is the claim of a name in a scope. Scopes and names are ids and slugs, so they hold
// nothing a document id may not.
func (s *Service) claimDoc(scope, name string) *firestore.DocumentRef {
	return s.db.Collection(namesCollection).Doc(scope + "|" + name)
}

// subtree is the query for every descendant of a task, without the search index.
func (s *Service) subtree(id string) firestore.Query {
	return s.col().Where("ancestor_ids", "array-contains", id).Select(projected...)
}

func (s *Service) query(ctx context.Context, q firestore.Query) ([]record, error) {
	return store.All[record](q.Documents(ctx))
}

// deleteSessions deletes the sessions of a task and of every task below it.
func (s *Service) deleteSessions(ctx context.Context, root record) error {
	if s.sessions == nil {
		return nil
	}
	desc, err := s.query(ctx, s.subtree(root.ID))
	if err != nil {
		return err
	}
	for _, r := range append(desc, root) {
		for _, id := range r.SessionIDs {
			if err := s.sessions.Delete(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

package tasks

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/opt"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
)

// record is a task as Firestore stores it.
type record struct {
	ID   string `firestore:"id"`
	Type string `firestore:"type"`
	// Title is the display title: the client's when TitleIsCustom, else derived from the prompt
	// ("" when there is none).
	Title         string `firestore:"title"`
	TitleIsCustom bool   `firestore:"title_is_custom"`
	Status        string `firestore:"status"`
	// StatusReason says why the task is in Status (a failure's cause and what to do, who closed
	// it); written with every move (records/taskstatus).
	StatusReason string `firestore:"status_reason"`
	// CreatedBy is the owner: only they and admins see the task.
	CreatedBy  string `firestore:"created_by_user_id"`
	SourceJSON string `firestore:"source_json"`
	ProfileID  string `firestore:"profile_id"`
	// Harness, Model, Effort and ModelRouter are the task's own or else its profile's; "" when
	// neither sets one.
	Harness     string `firestore:"harness"`
	Model       string `firestore:"model"`
	Effort      string `firestore:"effort"`
	ModelRouter string `firestore:"model_router"`
	// ParentTaskID is "" for a root; RootTaskID is the task's own id for a root.
	ParentTaskID string `firestore:"parent_task_id"`
	RootTaskID   string `firestore:"root_task_id"`
	// AncestorIDs runs from the root to the parent, so that one array-contains query finds every
	// descendant of a task.
	AncestorIDs       []string `firestore:"ancestor_ids"`
	LocalName         string   `firestore:"local_task_name"`
	CanonicalName     string   `firestore:"canonical_task_name"`
	SpawningSessionID string   `firestore:"spawning_session_id"`
	// SessionIDs lets GetTask find a task by one of its sessions with an array-contains query.
	SessionIDs []string `firestore:"session_ids"`
	// Search maps each index key of the title and prompt to true (see searchIndex): ListTasks
	// asks for one equality per search word.
	Search    map[string]bool `firestore:"search"`
	CreatedAt time.Time       `firestore:"created_at"`
	UpdatedAt time.Time       `firestore:"updated_at"`
}

// source is how a task was made, stored as its source_json: the request as given, with the
// profile snapshot it started from.
type source struct {
	Type               string          `json:"type"`
	Prompt             string          `json:"prompt"`
	Title              string          `json:"title,omitempty"`
	ProfileID          string          `json:"profile_id"`
	Profile            json.RawMessage `json:"profile"`
	Harness            string          `json:"harness,omitempty"`
	Model              string          `json:"model,omitempty"`
	Effort             string          `json:"effort,omitempty"`
	ModelRouter        string          `json:"model_router,omitempty"`
	HarnessMode        string          `json:"harness_mode"`
	DeferInitialPrompt bool            `json:"defer_initial_prompt"`
	ParentTaskID       string          `json:"parent_task_id,omitempty"`
	SpawningSessionID  string          `json:"spawning_session_id,omitempty"`
}

// projected names every stored field but the search index, which only queries use: reads leave
// its hundreds of entries behind.
var projected = func() []string {
	t := reflect.TypeFor[record]()
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("firestore"), ",")
		if name != "search" {
			out = append(out, name)
		}
	}
	return out
}()

// nameScope is the group a task's local name is unique in: its parent's children, or its
// owner's root tasks.
func (r record) nameScope() string {
	if r.ParentTaskID != "" {
		return r.ParentTaskID
	}
	return "root:" + r.CreatedBy
}

// prompt returns the prompt the task was made with.
func (r record) prompt() (string, error) {
	var src source
	if err := json.Unmarshal([]byte(r.SourceJSON), &src); err != nil {
		return "", fmt.Errorf("decode source of task %s: %w", r.ID, err)
	}
	return src.Prompt, nil
}

// visibleTo reports whether p may see the task: its owner and admins may.
func (r record) visibleTo(p auth.Principal) bool {
	return p.Admin || r.CreatedBy == p.UserID
}

func (r record) proto(users map[string]auth.User) *appv1.Task {
	t := &appv1.Task{
		Id: r.ID, Type: r.Type, Title: opt.String(r.Title), Status: r.Status, StatusReason: r.StatusReason,
		CreatedByUserId: opt.String(r.CreatedBy), SourceJson: r.SourceJSON,
		CreatedAt: clock.Format(r.CreatedAt), UpdatedAt: clock.Format(r.UpdatedAt),
		TitleIsCustom: r.TitleIsCustom, CreatedBy: users[r.CreatedBy].Proto(),
		Harness: opt.String(r.Harness), Model: opt.String(r.Model), Effort: opt.String(r.Effort),
		ModelRouter: opt.String(r.ModelRouter), ParentTaskId: opt.String(r.ParentTaskID),
		RootTaskId: opt.String(r.RootTaskID), LocalTaskName: opt.String(r.LocalName),
		CanonicalTaskName: opt.String(r.CanonicalName), SpawningSessionId: opt.String(r.SpawningSessionID),
	}
	for _, id := range r.SessionIDs {
		t.Sessions = append(t.Sessions, &appv1.TaskSessionRef{SessionId: id})
	}
	return t
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/sessiondb"
)

// promptEvent is the part of a prompt's events the tests read.
type promptEvent struct {
	Kind       string
	Idx        int64
	PromptID   string `json:"prompt_id"`
	Text       string `json:"text"`
	Source     string `json:"source"`
	ToolCallID string `json:"tool_call_id"`
	ToolName   string `json:"tool_name"`
	Client     bool   `json:"client"`
}

// waitEvent polls the session's log until an event of kind for prompt appears, and returns the
// prompt's events up to then.
func (s *sandboxStack) waitEvent(t *testing.T, session, kind, prompt string) []promptEvent {
	t.Helper()
	var mine []promptEvent
	testkit.Eventually(t, 30*time.Second, "a "+kind+" event for prompt "+prompt, func() (bool, string) {
		mine = nil
		for _, e := range s.listEvents(t, session) {
			var p promptEvent
			_ = json.Unmarshal([]byte(e.GetPayloadJson()), &p)
			p.Kind, p.Idx = e.GetKind(), e.GetIdx()
			if p.PromptID == prompt {
				mine = append(mine, p)
				if p.Kind == kind {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("its events: %+v", mine)
	})
	return mine
}

func kindsOf(events []promptEvent) string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Kind
	}
	return strings.Join(out, " ")
}

func TestAgentSessionRunsPromptsThroughTheBashHarness(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, &appv1.CreateSessionRequest{Mode: "agent", Prompt: ptr("echo hello; echo world"), PromptId: ptr("p1")})
	events := s.waitEvent(t, id, "turn.done", "p1")
	if got := kindsOf(events); !strings.HasPrefix(got, "prompt.queued prompt.started assistant.message") || !strings.HasSuffix(got, "turn.done") {
		t.Fatalf("first prompt's events: %s", got)
	}
	var said []string
	for _, e := range events {
		if e.Kind == "assistant.message" {
			said = append(said, strings.TrimSuffix(e.Text, "\n"))
		}
	}
	// The bash harness reports each chunk's complete lines as one message.
	if got := strings.Join(said, "\n"); got != "hello\nworld" {
		t.Fatalf("the harness said %q", got)
	}

	send := func(pid, text string) (*connect.Response[appv1.SendPromptResponse], error) {
		return s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: pid, Text: text}))
	}
	for _, p := range []struct{ id, text string }{{"p2", "echo slow-start; sleep 30; echo never"}, {"p3", "echo three"}, {"p4", "echo four"}} {
		if _, err := send(p.id, p.text); err != nil {
			t.Fatal(err)
		}
	}
	s.waitEvent(t, id, "prompt.started", "p2")
	// A queued prompt can change or leave the queue; a running one cannot.
	if _, err := s.svc.EditQueuedPrompt(ctx, connect.NewRequest(&appv1.EditQueuedPromptRequest{SessionId: id, PromptId: "p3", Text: "echo THREE"})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.DequeueQueuedPrompt(ctx, connect.NewRequest(&appv1.DequeueQueuedPromptRequest{SessionId: id, PromptId: "p4"})); err != nil {
		t.Fatal(err)
	}
	_, err := s.svc.EditQueuedPrompt(ctx, connect.NewRequest(&appv1.EditQueuedPromptRequest{SessionId: id, PromptId: "p2", Text: "echo changed"}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = s.svc.DequeueQueuedPrompt(ctx, connect.NewRequest(&appv1.DequeueQueuedPromptRequest{SessionId: id, PromptId: "p1"}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	// The same prompt_id again is the same prompt; with other text it is a mistake.
	if _, err := send("p3", "echo three"); err == nil {
		t.Fatal("resending p3 with its old text after an edit was taken as the same prompt")
	}
	if resp, err := send("p1", "echo hello; echo world"); err != nil || !strings.Contains(resp.Msg.GetNote(), "done") {
		t.Fatalf("resending p1: %v, %v", resp, err)
	}
	_, err = send("p1", "echo other")
	testenv.WantCode(t, err, connect.CodeAlreadyExists)

	if _, err := s.svc.Interrupt(ctx, connect.NewRequest(&appv1.InterruptRequest{SessionId: id, Source: "test"})); err != nil {
		t.Fatal(err)
	}
	slow := s.waitEvent(t, id, "turn.done", "p2")
	interrupted := false
	for _, e := range slow {
		if e.Kind == "interrupted" && e.Source == "test" {
			interrupted = true
		}
		if e.Kind == "assistant.message" && strings.Contains(e.Text, "never") {
			t.Fatalf("the interrupted prompt went on: %+v", slow)
		}
	}
	if !interrupted {
		t.Fatalf("no interrupted event: %s", kindsOf(slow))
	}
	three := s.waitEvent(t, id, "turn.done", "p3")
	if got := kindsOf(three); !strings.Contains(got, "prompt.edited") || !strings.Contains(three[len(three)-2].Text+three[len(three)-3].Text, "THREE") {
		t.Fatalf("the edited prompt: %+v", three)
	}
	for _, e := range s.listEvents(t, id) {
		if strings.Contains(e.GetPayloadJson(), `"four"`) || (e.GetKind() == "prompt.started" && strings.Contains(e.GetPayloadJson(), `"p4"`)) {
			t.Fatalf("the dequeued prompt ran: %v", e)
		}
	}

	log, err := s.svc.GetLog(ctx, connect.NewRequest(&appv1.GetLogRequest{SessionId: id, Kind: ptr("assistant.message")}))
	if err != nil || len(log.Msg.GetEvents()) < 2 {
		t.Fatalf("GetLog of assistant messages: %v, %v", log, err)
	}

	plain := s.create(t, nil)
	_, err = s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: plain, Text: "echo hi"}))
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = s.svc.CreateSession(ctx, connect.NewRequest(&appv1.CreateSessionRequest{Harness: ptr("no-such-harness")}))
	testenv.WantCode(t, err, connect.CodeInvalidArgument)
}

func TestPromptQueueCarriesOnAfterEviction(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	id := s.create(t, &appv1.CreateSessionRequest{Mode: "agent", Prompt: ptr("echo kept > /root/f; sleep 30"), PromptId: ptr("long")})
	s.waitEvent(t, id, "prompt.started", "long")
	// The turn has started; wait until its script has written the file, then checkpoint.
	testkit.Eventually(t, 10*time.Second, "the long prompt writing /root/f", func() (bool, string) {
		res := s.exec(t, &appv1.ExecRequest{SessionId: id, Command: ptr("cat /root/f 2>/dev/null")})
		return res.stdout == "kept\n", fmt.Sprintf("/root/f holds %q", res.stdout)
	})
	if _, err := s.svc.Snapshot(ctx, connect.NewRequest(&appv1.SnapshotRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	// A prompt to an evicted session wakes it; the turn the eviction cut off ends interrupted.
	if _, err := s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: "after", Text: "cat /root/f"})); err != nil {
		t.Fatal(err)
	}
	after := s.waitEvent(t, id, "turn.done", "after")
	if got := after[len(after)-2]; got.Kind != "assistant.message" || strings.TrimSpace(got.Text) != "kept" {
		t.Fatalf("the prompt after resume: %+v", after)
	}
	long := s.waitEvent(t, id, "interrupted", "long")
	if last := long[len(long)-1]; last.Source != "sandbox restarted" {
		t.Fatalf("the cut-off turn ended with %+v", last)
	}
}

func TestTaskRunsInASessionOfItsProfile(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "shell work", ImageId: s.sb.Image, Harness: ptr("bash"), EnvVars: map[string]string{"GREETING": "from-profile"}}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("echo the task ran $GREETING"),
	}))
	if err != nil {
		t.Fatal(err)
	}
	task := created.Msg.GetTask()
	// Running, or already waiting: the task is stored after its session started, and a turn of
	// bash can end before that, which the new task catches up with.
	if (task.GetStatus() != "running" && task.GetStatus() != "waiting") || len(task.GetSessions()) != 1 {
		t.Fatalf("new task: status %s, sessions %v", task.GetStatus(), task.GetSessions())
	}
	sid := task.GetSessions()[0].GetSessionId()
	events := s.waitEvent(t, sid, "turn.done", promptOf(t, s, sid))
	if got := kindsOf(events); !strings.Contains(got, "assistant.message") || !strings.Contains(events[2].Text, "the task ran from-profile") {
		t.Fatalf("the task's prompt (with its profile's env): %+v", events)
	}
	// The task follows its session: the turn is done, so it waits for the user.
	var got *appv1.Task
	testkit.Eventually(t, 10*time.Second, "the task waiting for the user", func() (bool, string) {
		resp, err := tasks.GetTask(ctx, connect.NewRequest(&appv1.GetTaskRequest{TaskId: task.GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		got = resp.Msg.GetTask()
		return got.GetStatus() == "waiting", "the task is " + got.GetStatus()
	})
	ref := got.GetSessions()[0]
	if got.GetStatus() != "waiting" || ref.GetSession().GetId() != sid || ref.GetProfile().GetName() != "shell work" || ref.GetRole() != "primary" {
		t.Fatalf("task after its turn: status %s, session ref %v", got.GetStatus(), ref)
	}
	list, err := tasks.ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{States: []string{"waiting"}}))
	if err != nil || len(list.Msg.GetTasks()) != 1 || list.Msg.GetSessionStateUnavailable() {
		t.Fatalf("waiting tasks: %v, %v", list, err)
	}
	// The user closes the finished task: it is completed, and ListTasks finds it so at once.
	closed, err := tasks.UpdateTask(ctx, connect.NewRequest(&appv1.UpdateTaskRequest{TaskId: task.GetId(), Status: ptr("completed")}))
	if err != nil || closed.Msg.GetTask().GetStatus() != "completed" {
		t.Fatalf("closing the task: %v, %v", closed, err)
	}
	list, err = tasks.ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{States: []string{"completed"}}))
	if err != nil || len(list.Msg.GetTasks()) != 1 || list.Msg.GetTasks()[0].GetId() != task.GetId() {
		t.Fatalf("completed tasks: %v, %v", list, err)
	}

	// A deferred prompt starts the session and sends nothing.
	deferred, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{
		ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("echo later"), DeferInitialPrompt: true,
	}))
	if err != nil {
		t.Fatal(err)
	}
	dsid := deferred.Msg.GetTask().GetSessions()[0].GetSessionId()
	if n := len(s.listEvents(t, dsid, "prompt.queued")); n != 0 {
		t.Fatalf("a deferred task queued %d prompts", n)
	}

	if _, err := tasks.DeleteTask(ctx, connect.NewRequest(&appv1.DeleteTaskRequest{TaskId: task.GetId()})); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.GetSession(ctx, connect.NewRequest(&appv1.GetSessionRequest{SessionId: sid}))
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// A task whose harness cannot launch (the image has no claude) fails, saying why and what to
// do, as ListTasks sees with no read of the task in between; its prompts end failed rather than
// wait behind the dead turn.
func TestATaskWhoseHarnessCannotLaunchFailsWithTheCause(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	profiles := appv1connect.NewProfileServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	p, err := profiles.CreateProfile(ctx, connect.NewRequest(&appv1.CreateProfileRequest{Name: "no claude here", ImageId: s.sb.Image, Harness: ptr("claude-code")}))
	if err != nil {
		t.Fatal(err)
	}
	tasks := appv1connect.NewTaskServiceClient(httpClient, s.rpcURL(), auth.WithKey(s.admin))
	created, err := tasks.CreateTask(ctx, connect.NewRequest(&appv1.CreateTaskRequest{ProfileId: p.Msg.GetProfile().GetId(), Prompt: ptr("fix the bug")}))
	if err != nil {
		t.Fatal(err)
	}
	task := created.Msg.GetTask()
	sid := task.GetSessions()[0].GetSessionId()
	first := promptOf(t, s, sid)
	// A second prompt is queued behind the first, or (once the first failed) runs on its own:
	// either way it must end, not wait.
	if _, err := s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: sid, Text: "then run the tests", PromptId: "follow-up"})); err != nil {
		t.Fatal(err)
	}
	store := sessiondb.NewStore(s.sb.DB, time.Now)
	for _, id := range []string{first, "follow-up"} {
		testkit.Eventually(t, 30*time.Second, "prompt "+id+" failed", func() (bool, string) {
			pr, err := store.Prompt(ctx, sid, id)
			if err != nil {
				t.Fatal(err)
			}
			return pr.Status == sessiondb.PromptFailed, "prompt " + id + " is " + string(pr.Status)
		})
	}
	var failed *appv1.Task
	testkit.Eventually(t, 30*time.Second, "the task failed", func() (bool, string) {
		list, err := tasks.ListTasks(ctx, connect.NewRequest(&appv1.ListTasksRequest{States: []string{"failed"}}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.GetTasks()) != 1 {
			return false, fmt.Sprintf("%d failed tasks", len(list.Msg.GetTasks()))
		}
		failed = list.Msg.GetTasks()[0]
		return true, ""
	})
	if reason := failed.GetStatusReason(); failed.GetId() != task.GetId() || !strings.Contains(reason, "command not found") || !strings.Contains(reason, "install claude") {
		t.Fatalf("failed task %s: status_reason %q, want the cause and what to do", failed.GetId(), reason)
	}
	rec, err := store.Get(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if rec.AgentState != sessiondb.AgentFailed || rec.AgentReason != failed.GetStatusReason() {
		t.Fatalf("the session's agent: %s (%q); want failed, saying why", rec.AgentState, rec.AgentReason)
	}
	errs := s.listEvents(t, sid, "error")
	if len(errs) == 0 || !strings.Contains(errs[0].GetPayloadJson(), "command not found") {
		t.Fatalf("error events: %v; want one naming the cause", errs)
	}
}

// promptOf is the id of the session's first queued prompt.
func promptOf(t *testing.T, s *sandboxStack, session string) string {
	t.Helper()
	var id string
	testkit.Eventually(t, 10*time.Second, "a queued prompt", func() (bool, string) {
		for _, e := range s.listEvents(t, session, "prompt.queued") {
			var p promptEvent
			if json.Unmarshal([]byte(e.GetPayloadJson()), &p) == nil {
				id = p.PromptID
				return true, ""
			}
		}
		return false, "the session queued no prompt"
	})
	return id
}

func TestAgentSessionsReachModelsThroughRouters(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, func(sb *testenv.Sandboxes) {
		sb.Config.ModelRouters = []config.ModelRouter{{
			ID: "lab", Label: "Lab", BaseURL: "http://127.0.0.1:9/v1", Protocols: []string{"anthropic"}, DefaultModel: "claude-test",
		}}
	})
	ctx := context.Background()
	s.routerModel(t, "lab", "claude-test", true, true)
	s.routerModel(t, "lab", "lab/off", false, true)
	s.routerModel(t, "lab", "lab/admins-only", true, false)
	id := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab")})
	if got := s.sh(t, id, `echo "$ANTHROPIC_BASE_URL $ANTHROPIC_MODEL $HANGAR_MODEL_ROUTER"`); got != "http://127.0.0.1:9/v1 claude-test lab\n" {
		t.Fatalf("router env in the sandbox: %q", got)
	}
	lab := func(model string) *appv1.CreateSessionRequest {
		return &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("lab"), Model: ptr(model)}
	}
	for _, tc := range []struct {
		name string
		req  *appv1.CreateSessionRequest
		code connect.Code
		// says is what the error names ("": not checked).
		says string
	}{
		{"a harness that speaks none of the router's protocols", &appv1.CreateSessionRequest{Harness: ptr("bash"), ModelRouter: ptr("lab")}, connect.CodeFailedPrecondition, ""},
		{"an unknown router", &appv1.CreateSessionRequest{Harness: ptr("claude-code"), ModelRouter: ptr("nope")}, connect.CodeInvalidArgument, ""},
		{"an effort the harness does not offer", &appv1.CreateSessionRequest{Harness: ptr("claude-code"), Effort: ptr("ultra")}, connect.CodeInvalidArgument, ""},
		{"a model without a harness", &appv1.CreateSessionRequest{Mode: "sandbox", Model: ptr("m")}, connect.CodeInvalidArgument, ""},
		{"a model the harness does not offer", &appv1.CreateSessionRequest{Harness: ptr("claude-code"), Model: ptr("gpt-9")}, connect.CodeInvalidArgument, `harness claude-code offers no model "gpt-9"`},
		{"a model of a harness that offers none", &appv1.CreateSessionRequest{Harness: ptr("bash"), Model: ptr("claude-test")}, connect.CodeInvalidArgument, "harness bash offers no model"},
		{"a model the router's catalog does not have", lab("nope-model"), connect.CodeInvalidArgument, `model router lab has no model "nope-model"`},
		{"a model the router's policy disables", lab("lab/off"), connect.CodeFailedPrecondition, `"lab/off" of model router lab is disabled`},
		{"a model the router's policy keeps from users", lab("lab/admins-only"), connect.CodeFailedPrecondition, "user_enabled is off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.svc.CreateSession(ctx, connect.NewRequest(tc.req))
			testenv.WantCode(t, err, tc.code)
			if err != nil && !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q, want it to say %q", err, tc.says)
			}
		})
	}
	t.Run("a model the router's policy enables", func(t *testing.T) {
		if _, err := s.svc.CreateSession(ctx, connect.NewRequest(lab("claude-test"))); err != nil {
			t.Fatal(err)
		}
	})
}

// waitAgentState polls the session's record until its agent state is want.
func (s *sandboxStack) waitAgentState(t *testing.T, session, want string) {
	t.Helper()
	store := sessiondb.NewStore(s.sb.DB, time.Now)
	testkit.Eventually(t, 30*time.Second, "agent state "+want, func() (bool, string) {
		rec, err := store.Get(context.Background(), session)
		if err != nil {
			t.Fatal(err)
		}
		return rec.AgentState == want, "agent state " + rec.AgentState
	})
}

func TestClientToolCallsOfTheBashHarness(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	complete := func(session, call, result string) (*connect.Response[appv1.CompleteToolCallResponse], error) {
		return s.svc.CompleteToolCall(ctx, connect.NewRequest(&appv1.CompleteToolCallRequest{SessionId: session, ToolCallId: call, ResultJson: result}))
	}
	id := s.create(t, &appv1.CreateSessionRequest{Mode: "agent", PromptId: ptr("ask"),
		Prompt: ptr(`echo start; r=$(hangar_tool weather '{"city":"Paris"}'); echo "result $r"`)})
	// Queued behind a turn that waits on a tool.
	if _, err := s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: "next", Text: "echo next"})); err != nil {
		t.Fatal(err)
	}
	asked := s.waitEvent(t, id, "tool.call", "ask")
	call := asked[len(asked)-1]
	if !call.Client || call.ToolName != "weather" || call.ToolCallID == "" {
		t.Fatalf("the tool call: %+v", call)
	}
	s.waitAgentState(t, id, sessiondb.AgentWaitingForTool)

	for _, tc := range []struct {
		name, call, result string
		code               connect.Code
	}{
		{"an unknown call", "no-such-call", `{}`, connect.CodeNotFound},
		{"a result that is not JSON", call.ToolCallID, `{"temp":`, connect.CodeInvalidArgument},
		{"no result", call.ToolCallID, "", connect.CodeInvalidArgument},
		{"no call id", "", `{}`, connect.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := complete(id, tc.call, tc.result)
			testenv.WantCode(t, err, tc.code)
			if tc.code == connect.CodeInvalidArgument && tc.call != "" {
				if got := testenv.ViolatedFields(t, err); len(got) != 1 || got[0] != "result_json" {
					t.Fatalf("violated fields %v, want result_json", got)
				}
			}
		})
	}

	resp, err := complete(id, call.ToolCallID, `{"temp": 21}`)
	if err != nil || resp.Msg.GetNote() != "delivered" {
		t.Fatalf("CompleteToolCall: %v, %v", resp, err)
	}
	done := s.waitEvent(t, id, "turn.done", "ask")
	// Once written, a retry writes nothing more, even after the turn.
	if resp, err := complete(id, call.ToolCallID, `{"temp": 21}`); err != nil || resp.Msg.GetNote() != "already completed" {
		t.Fatalf("CompleteToolCall again: %v, %v", resp, err)
	}
	var order []string
	for _, e := range done {
		switch e.Kind {
		case "tool.call", "tool.result", "turn.done":
			order = append(order, e.Kind)
		case "assistant.message":
			order = append(order, strings.TrimSpace(e.Text))
		}
		if e.Kind == "tool.result" && (e.Source != "client" || e.Text != `{"temp": 21}` || e.ToolCallID != call.ToolCallID || e.ToolName != "weather") {
			t.Fatalf("the tool result: %+v", e)
		}
	}
	if got := strings.Join(order, " | "); got != `start | tool.call | tool.result | result {"temp":21} | turn.done` {
		t.Fatalf("the turn's events: %s", got)
	}
	next := s.waitEvent(t, id, "turn.done", "next")
	if next[1].Kind != "prompt.started" || next[1].Idx < done[len(done)-1].Idx {
		t.Fatalf("the queued prompt started at %+v, before the turn waiting on the tool ended at %+v", next[1], done[len(done)-1])
	}
	s.waitAgentState(t, id, sessiondb.AgentWaiting)

	// An interrupted turn takes no result.
	if _, err := s.svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: "cut", Text: "hangar_tool slow; echo never"})); err != nil {
		t.Fatal(err)
	}
	cut := s.waitEvent(t, id, "tool.call", "cut")
	if _, err := s.svc.Interrupt(ctx, connect.NewRequest(&appv1.InterruptRequest{SessionId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = complete(id, cut[len(cut)-1].ToolCallID, `"late"`)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	for _, e := range s.waitEvent(t, id, "turn.done", "cut") {
		if e.Kind == "tool.result" || e.Kind == "assistant.message" && strings.Contains(e.Text, "never") {
			t.Fatalf("the interrupted turn went on: %+v", e)
		}
	}

	// A harness whose plugin lacks hangar_tool_result takes none.
	claude := s.create(t, &appv1.CreateSessionRequest{Harness: ptr("claude-code")})
	_, err = complete(claude, "toolu_1", `{}`)
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	_, err = complete("no-such-session", "toolu_1", `{}`)
	testenv.WantCode(t, err, connect.CodeNotFound)
}

// An interrupt ends the whole turn: a command the turn put in a session of its own and a
// background job whose shell already exited die with it, as tools' commands run (Claude Code's
// Bash tool, Codex's commands); the turn ends interrupted, with no error for the kill.
func TestInterruptedTurnLeavesNoProcessBehind(t *testing.T) {
	testenv.RequirePlugins(t)
	s := newSandboxStack(t, 1, nil)
	ctx := context.Background()
	prompt := "busybox setsid sleep 301 & busybox setsid sh -c 'sleep 302 &'; echo started; sleep 600"
	id := s.create(t, &appv1.CreateSessionRequest{Mode: "agent", Prompt: ptr(prompt), PromptId: ptr("long")})
	testkit.Eventually(t, 30*time.Second, "the turn's background jobs started", func() (bool, string) {
		out := s.sh(t, id, "ps -o args")
		return strings.Contains(out, "sleep 301") && strings.Contains(out, "sleep 302") && strings.Contains(out, "sleep 600"), out
	})
	if _, err := s.svc.Interrupt(ctx, connect.NewRequest(&appv1.InterruptRequest{SessionId: id, Source: "test"})); err != nil {
		t.Fatal(err)
	}
	events := s.waitEvent(t, id, "turn.done", "long")
	if got := kindsOf(events); !strings.Contains(got, "interrupted") || strings.Contains(got, "error") {
		t.Errorf("the interrupted turn's events are %s, want interrupted and no error: %+v", got, events)
	}
	testkit.Eventually(t, 30*time.Second, "no process of the turn left", func() (bool, string) {
		out := s.sh(t, id, "ps -o args")
		return !strings.Contains(out, "sleep 30") && !strings.Contains(out, "sleep 600"), out
	})
}

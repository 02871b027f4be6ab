package host

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"sync"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/harness"
	"github.com/hangar-dev/hangar/platform/apierr"
	"github.com/hangar-dev/hangar/platform/ids"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/records/sessiondb"
	"github.com/hangar-dev/hangar/runtimes/wasm"
	"github.com/hangar-dev/hangar/sandboxhosts/sandboxfs"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor"
)

// agent is the prompt side of an agent session's box: its harness and the turn in progress.
type agent struct {
	mu      sync.Mutex
	harness string
	mode    string
	model   string
	effort  string
	resume  string
	envMap  map[string]string
	loaded  bool
	wake    chan struct{}
	running *turn
	// pending are prompts this host queued, in order, handed to the runner in memory so it
	// needs no query to find them; the queue in Firestore stays the truth.
	pending []*sessiondb.Prompt
	// credential is the session's OAuth credential bundle for its harness's plans ("": none).
	credential string
	// toolCalls are the client tool calls of this sandbox's turns by tool_call_id, the oldest
	// first in toolCallOrder, at most maxKnownToolCalls of them.
	toolCalls     map[string]*toolCall
	toolCallOrder []string

	// stateMu orders the writes of the agent state, which the runner and CompleteToolCall both
	// make; state is the one last recorded.
	stateMu sync.Mutex
	state   string
}

// turn is the prompt running now.
type turn struct {
	promptID, execID string
	interrupted      bool
	// ps parses the turn's output; set before its process starts.
	ps *parser
}

// toolCall is a tool call a turn's harness waits for the client to answer. answered is guarded
// by its turn's parser lock.
type toolCall struct {
	turn     *turn
	name     string
	answered bool
}

// maxKnownToolCalls bounds the client tool calls a session's host remembers, so that a
// CompleteToolCall of an old one says it is over rather than not found.
const maxKnownToolCalls = 1000

// agentOf returns the session's harness settings, read from its record once.
func (h *Host) agentOf(ctx context.Context, b *box) (*agent, error) {
	if h.opts.Harnesses == nil {
		return nil, apierr.FailedPrecondition("host %s runs no harnesses", h.id)
	}
	a := &b.agent
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		rec, err := h.store.Get(ctx, b.session)
		if err != nil {
			return nil, err
		}
		if rec.Harness == "" {
			return nil, apierr.FailedPrecondition("session %s runs no harness: create it with harness (mode agent) to send it prompts", b.session)
		}
		env, err := h.opts.Sealer.OpenEnv(rec.SealedEnv, sessiondb.EnvOwner(rec.ID))
		if err != nil {
			return nil, fmt.Errorf("open the environment of %s: %w", rec.ID, err)
		}
		var cred []byte
		if len(rec.SealedCredential) > 0 {
			if cred, err = h.opts.Sealer.Open(rec.SealedCredential, sessiondb.CredentialOwner(rec.ID)); err != nil {
				return nil, fmt.Errorf("open the OAuth credential of %s: %w", rec.ID, err)
			}
		}
		a.harness, a.mode, a.resume, a.envMap, a.loaded = rec.Harness, rec.HarnessMode, rec.HarnessResume, env, true
		a.model, a.effort = rec.Model, rec.Effort
		// What the agent did last, so that a new sandbox of the session (after an eviction)
		// knows whether a turn ended before it and writes no move that is not one.
		a.state = rec.AgentState
		a.credential = string(cred)
		a.wake = make(chan struct{}, 1)
		go h.runPrompts(b)
	}
	return a, nil
}

// SendPrompt queues a prompt (idempotent on prompt_id) and has the session's runner take it.
func (h *Host) SendPrompt(ctx context.Context, req *connect.Request[appv1.SendPromptRequest]) (*connect.Response[appv1.SendPromptResponse], error) {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return nil, err
	}
	var v apierr.Violations
	if m.GetText() == "" {
		v.Add("text", "is required")
	}
	if len(m.GetText()) > h.opts.Limits.MaxPromptBytes {
		v.Addf("text", "at most %d bytes", h.opts.Limits.MaxPromptBytes)
	}
	if m.GetPromptId() != "" && !clientID.MatchString(m.GetPromptId()) {
		v.Add("prompt_id", "must be 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	a, err := h.agentOf(ctx, b)
	if err != nil {
		return nil, err
	}
	id := m.GetPromptId()
	if id == "" {
		id = ids.New("prompt")
	}
	h.touch(ctx, b)
	p, created, err := h.store.AddPrompt(ctx, b.session, sessiondb.Prompt{ID: id, Text: m.GetText(), HarnessMode: m.GetHarnessMode()})
	if err != nil {
		return nil, err
	}
	if !created {
		if p.Text != m.GetText() {
			return nil, apierr.AlreadyExists("prompt_id %q names another prompt of this session", id)
		}
		return connect.NewResponse(&appv1.SendPromptResponse{SessionId: b.session, Note: fmt.Sprintf("prompt %s is %s", id, p.Status)}), nil
	}
	b.emit(eventlog.KindPromptQueued, map[string]any{"prompt_id": id, "text": p.Text, "harness_mode": p.HarnessMode})
	a.mu.Lock()
	busy := a.running != nil
	a.pending = append(a.pending, p)
	a.mu.Unlock()
	kick(a)
	note := "prompt " + id + " queued; it runs now"
	if busy {
		note = "prompt " + id + " queued behind the running one"
	}
	return connect.NewResponse(&appv1.SendPromptResponse{SessionId: b.session, Note: note}), nil
}

func kick(a *agent) {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// EditQueuedPrompt changes the text of a prompt that has not started.
func (h *Host) EditQueuedPrompt(ctx context.Context, req *connect.Request[appv1.EditQueuedPromptRequest]) (*connect.Response[appv1.EditQueuedPromptResponse], error) {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return nil, err
	}
	if m.GetText() == "" || len(m.GetText()) > h.opts.Limits.MaxPromptBytes {
		return nil, apierr.InvalidArgument("text", fmt.Sprintf("must be 1 to %d bytes", h.opts.Limits.MaxPromptBytes))
	}
	if _, err := h.changeQueued(ctx, b, m.GetPromptId(), func(p *sessiondb.Prompt) { p.Text = m.GetText() }); err != nil {
		return nil, err
	}
	b.emit(eventlog.KindPromptEdited, map[string]any{"prompt_id": m.GetPromptId(), "text": m.GetText()})
	return connect.NewResponse(&appv1.EditQueuedPromptResponse{SessionId: b.session, Note: "prompt " + m.GetPromptId() + " edited"}), nil
}

// DequeueQueuedPrompt removes a prompt that has not started from the queue.
func (h *Host) DequeueQueuedPrompt(ctx context.Context, req *connect.Request[appv1.DequeueQueuedPromptRequest]) (*connect.Response[appv1.DequeueQueuedPromptResponse], error) {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return nil, err
	}
	if _, err := h.changeQueued(ctx, b, m.GetPromptId(), func(p *sessiondb.Prompt) {
		p.Status, p.EndedAt = sessiondb.PromptDequeued, h.clock.Now()
	}); err != nil {
		return nil, err
	}
	b.emit(eventlog.KindPromptDequeued, map[string]any{"prompt_id": m.GetPromptId()})
	return connect.NewResponse(&appv1.DequeueQueuedPromptResponse{SessionId: b.session, Note: "prompt " + m.GetPromptId() + " dequeued"}), nil
}

// changeQueued changes a queued prompt; one that started (or ended) is failed_precondition.
func (h *Host) changeQueued(ctx context.Context, b *box, id string, change func(*sessiondb.Prompt)) (*sessiondb.Prompt, error) {
	if err := ids.Check("prompt_id", id); err != nil {
		return nil, err
	}
	p, err := h.store.ChangePrompt(ctx, b.session, id, sessiondb.PromptQueued, change)
	switch {
	case errors.Is(err, sessiondb.ErrNotFound):
		return nil, apierr.NotFound("prompt", id)
	case errors.Is(err, sessiondb.ErrPromptMoved):
		return nil, apierr.FailedPrecondition("prompt %s is %s: only a queued prompt can change", id, p.Status)
	}
	return p, err
}

// Interrupt stops the running turn: its whole process tree is killed (the supervisor's cancel:
// a tool's command in a session of its own and a background job too) and the prompt ends
// interrupted. The queue goes on with the next prompt.
func (h *Host) Interrupt(ctx context.Context, req *connect.Request[appv1.InterruptRequest]) (*connect.Response[appv1.InterruptResponse], error) {
	b, err := h.live(req.Msg.GetSessionId())
	if err != nil {
		return nil, err
	}
	a, err := h.agentOf(ctx, b)
	if err != nil {
		return nil, err
	}
	source := req.Msg.GetSource()
	if source == "" {
		source = "user"
	}
	a.mu.Lock()
	t := a.running
	if t != nil {
		t.interrupted = true
	}
	a.mu.Unlock()
	if t == nil {
		return connect.NewResponse(&appv1.InterruptResponse{SessionId: b.session, Note: "nothing is running"}), nil
	}
	b.emit(eventlog.KindInterrupted, map[string]any{"prompt_id": t.promptID, "source": source})
	var se *supervisor.Error
	if err := b.sup.Cancel(ctx, t.execID); err != nil && !(errors.As(err, &se) && se.Code == supervisor.CodeNotFound) {
		return nil, fmt.Errorf("interrupt %s: %w", t.promptID, err)
	}
	return connect.NewResponse(&appv1.InterruptResponse{SessionId: b.session, Note: "prompt " + t.promptID + " interrupted"}), nil
}

// CompleteToolCall hands a client's tool result to the harness waiting on the call: the
// plugin says what to write to the harness's stdin, the supervisor writes it, and a tool.result
// event (source "client") is logged. A call already answered is answered again with no second
// write; one whose turn is over is failed_precondition.
func (h *Host) CompleteToolCall(ctx context.Context, req *connect.Request[appv1.CompleteToolCallRequest]) (*connect.Response[appv1.CompleteToolCallResponse], error) {
	m := req.Msg
	b, err := h.live(m.GetSessionId())
	if err != nil {
		return nil, err
	}
	if err := h.checkToolResult(m); err != nil {
		return nil, err
	}
	a, err := h.agentOf(ctx, b)
	if err != nil {
		return nil, err
	}
	plugin, err := h.opts.Harnesses.Plugin(ctx, a.harness)
	if err != nil {
		return nil, fmt.Errorf("harness %s: %w", a.harness, err)
	}
	if !plugin.TakesToolResults() {
		return nil, apierr.FailedPrecondition("harness %s takes no client tool results", a.harness)
	}
	id := m.GetToolCallId()
	a.mu.Lock()
	c := a.toolCalls[id]
	a.mu.Unlock()
	if c == nil {
		return nil, apierr.NotFound("tool call", id)
	}
	t := c.turn
	// The parser's lock keeps the turn's output, whose next lines may well be the harness's
	// answer to this result, from being logged before the tool.result.
	t.ps.mu.Lock()
	defer t.ps.mu.Unlock()
	reply := func(note string) (*connect.Response[appv1.CompleteToolCallResponse], error) {
		return connect.NewResponse(&appv1.CompleteToolCallResponse{SessionId: b.session, Note: note}), nil
	}
	if c.answered {
		return reply("already completed")
	}
	a.mu.Lock()
	over, interrupted := a.running != t, t.interrupted
	a.mu.Unlock()
	if over || interrupted {
		how := "is over"
		if interrupted {
			how = "was interrupted"
		}
		return nil, apierr.FailedPrecondition("tool call %s belongs to prompt %s, which %s", id, t.promptID, how)
	}
	res, err := plugin.ToolResult(ctx, abi.ToolResultRequest{ToolCallID: id, ResultJSON: m.GetResultJson(), State: t.ps.state})
	if errors.Is(err, wasm.ErrRefused) {
		return nil, apierr.FailedPrecondition("%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("tool result for %s: %w", id, err)
	}
	var se *supervisor.Error
	if err := b.sup.WriteStdin(ctx, supervisor.StdinRequest{ExecID: t.execID, Data: []byte(res.Stdin)}); errors.As(err, &se) && se.Code != supervisor.CodeBadRequest {
		return nil, apierr.FailedPrecondition("the harness of prompt %s takes no more input: %s", t.promptID, se.Message)
	} else if err != nil {
		return nil, fmt.Errorf("deliver the result of %s: %w", id, err)
	}
	if res.State != "" {
		t.ps.state = res.State
	}
	c.answered = true
	t.ps.pending--
	t.ps.record(abi.Event{Kind: abi.KindToolResult, ToolCallID: id, ToolName: c.name, Text: m.GetResultJson()}, "client")
	if t.ps.pending == 0 {
		h.setTurnState(b, a, t, sessiondb.AgentWorking)
	}
	return reply("delivered")
}

// checkToolResult validates a CompleteToolCall's tool call id and result.
func (h *Host) checkToolResult(m *appv1.CompleteToolCallRequest) error {
	var v apierr.Violations
	switch id := m.GetToolCallId(); {
	case id == "":
		v.Add("tool_call_id", "is required")
	case len(id) > maxToolCallIDBytes:
		v.Addf("tool_call_id", "at most %d bytes", maxToolCallIDBytes)
	}
	switch r := m.GetResultJson(); {
	case r == "":
		v.Add("result_json", "is required")
	case len(r) > h.opts.Limits.MaxToolResultBytes:
		v.Addf("result_json", "at most %d bytes", h.opts.Limits.MaxToolResultBytes)
	case !json.Valid([]byte(r)):
		v.Add("result_json", "must be valid JSON")
	}
	return v.Err()
}

// maxToolCallIDBytes bounds a tool call id: harnesses make them (Claude Code's are ~30 bytes).
const maxToolCallIDBytes = 256

// runPrompts runs the session's queued prompts one at a time, for as long as its sandbox lives.
func (h *Host) runPrompts(b *box) {
	a := &b.agent
	h.endOrphanedTurns(b)
	scanned := false
	kick(a) // prompts queued before this sandbox (e.g. before an eviction) run too
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-a.wake:
		}
		for b.ctx.Err() == nil {
			p, err := h.nextPrompt(b, a, &scanned)
			if err != nil {
				h.log.Error("next prompt", "session", b.session, "err", err)
				break
			}
			if p == nil {
				h.settle(b, a)
				break
			}
			h.setAgentState(b, a, sessiondb.AgentWorking, "")
			if err := h.runPrompt(b, a, p); err != nil {
				// The harness did not run: neither will the prompts queued behind it, so they end
				// now rather than wait behind a dead turn, and the agent says why it stopped. A
				// prompt sent later (once the image is fixed, say) runs and reopens the task.
				h.failQueue(b, a, err)
				h.setAgentState(b, a, sessiondb.AgentFailed, err.Error())
				break
			}
		}
	}
}

// setAgentState records what the harness is doing, and why, when it changed; the session's
// task follows it (sessiondb.Store.SetAgentState).
func (h *Host) setAgentState(b *box, a *agent, state, reason string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	h.setAgentStateLocked(b, a, state, reason)
}

// settle records that the agent waits for input, once a turn ended and the queue is empty. Not
// before the session's first turn (the runner finds the queue empty as it starts, before the
// prompt that woke it is queued), nor over a failure, which says why the agent stopped; and only
// once the turn's events are stored, so that whoever sees the task waiting reads the agent's
// answer.
func (h *Host) settle(b *box, a *agent) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	if a.state == "" || a.state == sessiondb.AgentFailed || a.state == sessiondb.AgentWaiting {
		return
	}
	if err := b.flush(); err != nil {
		h.log.Warn("store the turn's events", "session", b.session, "err", err)
	}
	h.setAgentStateLocked(b, a, sessiondb.AgentWaiting, "")
}

// failQueue ends every prompt still queued as failed, with an error event saying why: cause is
// why the turn before them could not run.
func (h *Host) failQueue(b *box, a *agent, cause error) {
	a.mu.Lock()
	a.pending = nil
	a.mu.Unlock()
	queued, err := h.store.PromptsIn(b.ctx, b.session, sessiondb.PromptQueued)
	if err != nil {
		h.log.Error("find the prompts queued behind a failed turn", "session", b.session, "err", err)
		return
	}
	for _, p := range queued {
		if _, err := h.store.ChangePrompt(b.ctx, b.session, p.ID, sessiondb.PromptQueued, func(p *sessiondb.Prompt) {
			p.Status, p.EndedAt = sessiondb.PromptFailed, h.clock.Now()
		}); err == nil {
			b.emit(eventlog.KindError, map[string]any{"prompt_id": p.ID, "text": "not run, since the turn before it could not: " + cause.Error()})
		}
	}
}

// setTurnState is setAgentState for what turn t does, unless t is over: the runner has said
// (or is about to say) what the agent does next.
func (h *Host) setTurnState(b *box, a *agent, t *turn, state string) {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	a.mu.Lock()
	running := a.running == t
	a.mu.Unlock()
	if running {
		h.setAgentStateLocked(b, a, state, "")
	}
}

func (h *Host) setAgentStateLocked(b *box, a *agent, state, reason string) {
	if a.state == state || b.ctx.Err() != nil {
		return
	}
	if err := h.store.SetAgentState(b.ctx, b.session, state, reason); err != nil {
		h.log.Warn("agent state", "session", b.session, "err", err)
		return
	}
	a.state = state
}

// nextPrompt is the next prompt to try: one this host queued, else — the first time, for
// prompts queued before this sandbox — the oldest queued in Firestore.
func (h *Host) nextPrompt(b *box, a *agent, scanned *bool) (*sessiondb.Prompt, error) {
	a.mu.Lock()
	if len(a.pending) > 0 {
		p := a.pending[0]
		a.pending = a.pending[1:]
		a.mu.Unlock()
		return p, nil
	}
	a.mu.Unlock()
	if *scanned {
		return nil, nil
	}
	p, err := h.store.NextQueued(b.ctx, b.session)
	if p == nil && err == nil {
		*scanned = true
	}
	return p, err
}

// endOrphanedTurns ends the prompts an earlier sandbox of the session was running when it went
// (evicted, or its host lost): their processes went with it.
func (h *Host) endOrphanedTurns(b *box) {
	running, err := h.store.PromptsIn(b.ctx, b.session, sessiondb.PromptRunning)
	if err != nil {
		h.log.Error("find orphaned prompts", "session", b.session, "err", err)
		return
	}
	for _, p := range running {
		if _, err := h.store.ChangePrompt(b.ctx, b.session, p.ID, sessiondb.PromptRunning, func(p *sessiondb.Prompt) {
			p.Status, p.EndedAt = sessiondb.PromptInterrupted, h.clock.Now()
		}); err == nil {
			b.emit(eventlog.KindInterrupted, map[string]any{"prompt_id": p.ID, "source": "sandbox restarted"})
		}
	}
}

// runPrompt takes a queued prompt through the harness: plan, launch, parse, log. It returns why
// the turn could not run (its harness did not plan or launch), nil when it ran, whatever it
// ended with.
func (h *Host) runPrompt(b *box, a *agent, p *sessiondb.Prompt) error {
	ctx := b.ctx
	started, err := h.store.ChangeHeldPrompt(ctx, b.session, p, sessiondb.PromptQueued, func(p *sessiondb.Prompt) {
		p.Status, p.StartedAt = sessiondb.PromptRunning, h.clock.Now()
	})
	if err != nil {
		return nil // dequeued meanwhile, or gone
	}
	b.emit(eventlog.KindPromptStarted, map[string]any{"prompt_id": p.ID})
	t := &turn{promptID: p.ID, execID: "prompt-" + p.ID}
	a.mu.Lock()
	a.running = t
	mode, resume, env := a.mode, a.resume, maps.Clone(a.envMap)
	a.mu.Unlock()
	if started.HarnessMode != "" {
		mode = started.HarnessMode
	}
	final := sessiondb.PromptDone
	err = h.turn(ctx, b, a, t, started, mode, resume, env)
	if ctx.Err() != nil {
		// The sandbox went (evicted, deleted, host stopping) mid-turn: the prompt stays running
		// for the session's next sandbox to end as interrupted.
		return nil
	}
	if err != nil {
		b.emit(eventlog.KindError, map[string]any{"prompt_id": p.ID, "text": err.Error()})
		final = sessiondb.PromptFailed
	}
	a.mu.Lock()
	a.running = nil
	if t.interrupted {
		final = sessiondb.PromptInterrupted
	}
	a.mu.Unlock()
	if _, err := h.store.ChangeHeldPrompt(context.WithoutCancel(ctx), b.session, started, sessiondb.PromptRunning, func(p *sessiondb.Prompt) {
		p.Status, p.EndedAt = final, h.clock.Now()
	}); err != nil {
		h.log.Error("end prompt", "session", b.session, "prompt", p.ID, "err", err)
	}
	return err
}

// turn plans the prompt with the harness plugin, runs the plan through the supervisor and
// parses what it prints into events.
func (h *Host) turn(ctx context.Context, b *box, a *agent, t *turn, p *sessiondb.Prompt, mode, resume string, env map[string]string) error {
	plugin, err := h.opts.Harnesses.Plugin(ctx, a.harness)
	if err != nil {
		return fmt.Errorf("harness %s: %w", a.harness, err)
	}
	plan, err := plugin.Plan(ctx, abi.PlanRequest{Prompt: p.Text, Model: a.model, Effort: a.effort, Mode: mode, Env: env, Resume: resume, Credential: a.credential})
	if err != nil {
		return fmt.Errorf("harness %s could not plan the turn: %w; check the session's harness settings (mode, model, credentials) and send the prompt again", a.harness, err)
	}
	for _, f := range plan.Files {
		if err := placeFile(b, f); err != nil {
			return fmt.Errorf("place %s: %w", f.Path, err)
		}
	}
	ps := &parser{h: h, b: b, a: a, t: t, plugin: plugin, resume: resume}
	a.mu.Lock()
	t.ps = ps
	a.mu.Unlock()
	exit, err := b.sup.Exec(ctx, supervisor.ExecRequest{
		ExecID: t.execID, Argv: plan.Argv, Env: append(slices.Clone(b.env), envEntries(plan.Env)...),
		Workdir: cmp.Or(plan.Workdir, b.workdir), Stdin: []byte(plan.Stdin), KeepStdin: plan.KeepStdin, Timeout: h.opts.Limits.ExecTimeout.Max,
		User: b.user.identity(),
	}, supervisor.Events{Output: ps.output})
	if err != nil {
		return launchError(a.harness, plan.Argv[0], err)
	}
	ps.flush()
	ps.parse(ctx, abi.ParseRequest{Final: true, ExitStatus: exit.ShellExitStatus()})
	return nil
}

// launchError says why a harness's command did not start, and what to do about it.
func launchError(harness, command string, err error) error {
	var se *supervisor.Error
	if errors.As(err, &se) && se.Code == supervisor.CodeSpawnFailed {
		switch se.Spawn {
		case supervisor.SpawnNotFound, supervisor.SpawnNotExecutable:
			return fmt.Errorf("harness %s could not start: %s; install %s in the session's image (or give its profile an image that has it) and send the prompt again", harness, se.Message, command)
		case supervisor.SpawnBadWorkdir:
			return fmt.Errorf("harness %s could not start: %s; check the session's repos and working directory and send the prompt again", harness, se.Message)
		}
	}
	return fmt.Errorf("harness %s could not start %s: %w", harness, command, err)
}

// parser feeds a turn's output to the plugin and logs the events it reports.
type parser struct {
	h      *Host
	b      *box
	a      *agent
	t      *turn
	plugin interface {
		Parse(context.Context, abi.ParseRequest) (abi.ParseResult, error)
	}
	carry [2]harness.Carry // each stream's unfinished last line
	// resume is the turn's PlanRequest.Resume, handed to every parse (abi's "Usage").
	resume string

	// mu orders parsing against CompleteToolCall, which reads and may replace the state and
	// logs in the same log; it guards what follows, and the answered of the turn's tool calls.
	mu    sync.Mutex
	state string
	// pending counts the turn's client tool calls not answered yet.
	pending int
}

func (ps *parser) output(o supervisor.Output) error {
	i, stream := 0, "stdout"
	if o.Stream == supervisor.Stderr {
		i, stream = 1, "stderr"
	}
	if chunk := ps.carry[i].Next(o.Data); len(chunk) > 0 {
		ps.parse(ps.b.ctx, abi.ParseRequest{Stream: stream, Chunk: string(chunk)})
	}
	return nil
}

// flush hands over whatever each stream ended with.
func (ps *parser) flush() {
	for i, stream := range []string{"stdout", "stderr"} {
		if rest := ps.carry[i].Rest(); len(rest) > 0 {
			ps.parse(ps.b.ctx, abi.ParseRequest{Stream: stream, Chunk: string(rest)})
		}
	}
}

func (ps *parser) parse(ctx context.Context, req abi.ParseRequest) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	req.State, req.Resume = ps.state, ps.resume
	res, err := ps.plugin.Parse(ctx, req)
	if err != nil {
		ps.b.emit(eventlog.KindError, map[string]any{"prompt_id": ps.t.promptID, "text": "harness output not understood: " + err.Error()})
		return
	}
	ps.state = res.State
	ps.a.mu.Lock()
	interrupted := ps.t.interrupted
	ps.a.mu.Unlock()
	for _, e := range res.Events {
		if interrupted && e.Kind == abi.KindError {
			// The interrupt killed the turn, as its interrupted event says: the plugin's
			// account of the death (exit status 137, the harness's last stderr) is no error.
			continue
		}
		ps.record(e, "")
		if e.Kind == abi.KindToolCall && e.Client && e.ToolCallID != "" {
			ps.await(e)
		}
	}
}

// await keeps a client tool call the turn now waits on, for CompleteToolCall. Callers hold
// ps.mu.
func (ps *parser) await(e abi.Event) {
	a := ps.a
	a.mu.Lock()
	if a.toolCalls == nil {
		a.toolCalls = make(map[string]*toolCall)
	}
	prev, known := a.toolCalls[e.ToolCallID]
	if known && prev.turn == ps.t {
		a.mu.Unlock()
		return // reported again: it is the same call
	}
	if !known {
		a.toolCallOrder = append(a.toolCallOrder, e.ToolCallID)
		if len(a.toolCallOrder) > maxKnownToolCalls {
			delete(a.toolCalls, a.toolCallOrder[0])
			a.toolCallOrder = a.toolCallOrder[1:]
		}
	}
	a.toolCalls[e.ToolCallID] = &toolCall{turn: ps.t, name: e.ToolName}
	a.mu.Unlock()
	ps.pending++
	ps.h.setTurnState(ps.b, a, ps.t, sessiondb.AgentWaitingForTool)
}

// record appends one event of the turn, with the source of a tool result that did not come
// from the harness; a turn's resume token is kept for the next turn.
func (ps *parser) record(e abi.Event, source string) {
	js, err := json.Marshal(struct {
		PromptID string `json:"prompt_id"`
		abi.Event
		Source string `json:"source,omitempty"`
	}{ps.t.promptID, e, source})
	if err != nil {
		return
	}
	ps.b.append(eventlog.Event{Kind: e.Kind, PayloadJSON: string(js), ToolName: e.ToolName, Durable: true})
	if u := e.Usage; e.Kind == abi.KindUsage && u != nil {
		if err := ps.h.store.AddUsage(ps.b.ctx, ps.b.session, sessiondb.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, CacheReadTokens: u.CacheReadTokens,
			CacheWriteTokens: u.CacheWriteTokens, CostUSD: u.CostUSD,
		}); err != nil {
			ps.h.log.Warn("record session usage", "session", ps.b.session, "err", err)
		}
	}
	if e.Resume != "" {
		ps.a.mu.Lock()
		ps.a.resume = e.Resume
		ps.a.mu.Unlock()
		if err := ps.h.store.SetHarnessResume(ps.b.ctx, ps.b.session, e.Resume); err != nil {
			ps.h.log.Warn("record harness resume", "session", ps.b.session, "err", err)
		}
	}
}

// placeFile writes a file a plan asks for into the sandbox.
func placeFile(b *box, f abi.File) error {
	if f.Secret {
		return placeSecretFile(b, f)
	}
	if err := b.root.MkdirAll(path.Dir(f.Path), 0o755); err != nil {
		return err
	}
	if err := writeFile(b.root, f.Path, fileMode(f, 0o644), f.Content); err != nil {
		return err
	}
	// Commands run as the image's user, who must own what the harness reads and writes.
	return errors.Join(b.user.chownDirs(b.root, path.Dir(f.Path)), b.user.chown(b.root, f.Path))
}

// fileMode is the permission bits a plan's file asks for, or def when it names none.
func fileMode(f abi.File, def os.FileMode) os.FileMode {
	if f.Mode == 0 {
		return def
	}
	return os.FileMode(f.Mode & 0o777)
}

// writeFile replaces the file p of root with content in one step.
func writeFile(root *sandboxfs.Root, p string, mode os.FileMode, content string) error {
	up, err := root.Create(p, mode)
	if err != nil {
		return err
	}
	if _, err := up.WriteString(content); err != nil {
		up.Abort()
		return err
	}
	return up.Commit()
}

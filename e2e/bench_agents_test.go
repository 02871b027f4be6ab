package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/harnesses/abi"
	claudecode "github.com/hangar-dev/hangar/harnesses/plugins/claude-code"
	"github.com/hangar-dev/hangar/internal/modelfake"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/eventlog"
)

// The real Claude Code's tool turn (modelfake.ClaudeCodeToolTurn: Read, its result, the answer)
// against the loopback fake of the Messages API, in a session and on the host: issue 13's
// "Hangar's overhead (everything but the CLI and the fake) ≤ 10 %". It needs `make agent-clis`
// and `make agent-image`, so `make bench` leaves its rows out without them.

// benchAgentKey is the Anthropic key of the benchmarks; the session holds only its placeholder.
const benchAgentKey = "sk-ant-api03-bench-key"

// benchAgentModel is the model both turns ask for: the router's default in the session.
const benchAgentModel = "claude-sonnet-4-6"

// BenchmarkClaudeCodeToolTurnInSession times a tool turn of the real claude-code CLI of the agent
// image, run by a session through the built-in harness plugin, from SendPrompt until turn.done
// arrives on a StreamEvents stream opened beforehand: the prompt queue, the plugin's plan, the
// exec in the sandbox, the CLI reaching api.anthropic.com through the egress proxy (intercepted,
// the key injected) and the fake behind it, the plugin's parse of the output, the log and the
// event's delivery. Each turn runs in a new session (made and deleted off the clock), as the
// baseline's CLI starts afresh. The sandbox gets the production default of 2 CPUs, the
// machine's, which the baseline's CLI has too.
//
// The baseline is measured in the same loop, one turn before each session's, off the clock
// (reported as host-ns/op): the same CLI (`make agent-clis` installs the version the image
// holds) with the argv and environment the plugin plans, run directly on the host against the
// same fake at its loopback address, in a fresh HOME. Interleaved, the two see the same load of
// this shared machine.
func BenchmarkClaudeCodeToolTurnInSession(b *testing.B) {
	testenv.RequirePlugins(b)
	img := modelfake.AgentImage(b)
	fake := modelfake.StartTLS(claudeHosts, modelfake.ClaudeCodeToolTurn())
	defer fake.Close()
	host := hostTurn(b, fake)
	var image string
	s := newSandboxStack(b, 1, func(sb *testenv.Sandboxes) {
		image = agentImage(b, sb, img)
		productionPace(sb)
		forRealAgents(sb)
		sb.Config.ModelRouters = []config.ModelRouter{anthropicRouter}
		sb.Config.Host.SandboxCPUs = 2
		reachFake(sb, fake, claudeHosts...)
	})
	s.putOrgSecret(b, anthropicRouter.CredentialSecret, benchAgentKey)
	s.routerModel(b, anthropicRouter.ID, anthropicRouter.DefaultModel, true, true)
	var inSession, onHost turnSplit
	// A client of its own: the shared one's timeout would cut a long stream.
	svc := appv1connect.NewSessionServiceClient(&http.Client{}, s.rpcURL(), auth.WithKey(s.admin))
	turn := func(i int) {
		b.StopTimer()
		host(&onHost)
		created, err := svc.CreateSession(context.Background(), connect.NewRequest(&appv1.CreateSessionRequest{
			ImageUri: image, Mode: "agent", Harness: ptr("claude-code"), ModelRouter: ptr(anthropicRouter.ID),
		}))
		if err != nil {
			b.Fatalf("create session: %v", err)
		}
		id := created.Msg.GetSessionId()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stream, err := svc.StreamEvents(ctx, connect.NewRequest(&appv1.StreamEventsRequest{SessionId: id}))
		if err != nil {
			b.Fatal(err)
		}
		defer stream.Close()
		prompt := fmt.Sprintf("p-%d", i)
		seen := len(fake.Requests())
		b.StartTimer()
		start := time.Now()
		if _, err := svc.SendPrompt(ctx, connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: prompt, Text: modelfake.ToolTurnPrompt})); err != nil {
			b.Fatal(err)
		}
		var events []turnEvent
		for stream.Receive() {
			var ev turnEvent
			_ = json.Unmarshal([]byte(stream.Msg().GetPayloadJson()), &ev)
			ev.Kind = stream.Msg().GetKind()
			if ev.PromptID != prompt {
				continue
			}
			events = append(events, ev)
			if ev.Kind == eventlog.KindTurnDone {
				break
			}
		}
		b.StopTimer()
		inSession.add(start, time.Now(), fake.Requests()[seen:])
		checkToolTurn(b, events)
		if _, err := svc.DeleteSession(context.Background(), connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
			b.Fatalf("delete session: %v", err)
		}
		b.StartTimer()
	}
	// The first turns also compile the plugin and read the CLIs from disk.
	turn(-1)
	inSession, onHost = turnSplit{}, turnSplit{}
	for i := 0; b.Loop(); i++ {
		turn(i)
	}
	inSession.report(b, "")
	onHost.report(b, "host-")
	if creds := fake.Credentials(); !slices.Equal(creds, []string{benchAgentKey}) {
		b.Fatalf("the fake was sent credentials %q, want only the key", creds)
	}
}

// hostTurn returns a function that runs the baseline's turn on the host and adds it to a split.
func hostTurn(b *testing.B, fake *modelfake.Server) func(*turnSplit) {
	bin := modelfake.CLI(b, "claude")
	// The fake's certificate, which the CLI trusts as the sandbox's trusts the proxy's CA.
	ca := filepath.Join(b.TempDir(), "fake.pem")
	if err := os.WriteFile(ca, fake.CertificatePEM(), 0o644); err != nil {
		b.Fatal(err)
	}
	plan, err := claudecode.Harness{}.Plan(abi.PlanRequest{Prompt: modelfake.ToolTurnPrompt, Model: benchAgentModel, Env: map[string]string{
		"ANTHROPIC_BASE_URL": fake.URL, "ANTHROPIC_AUTH_TOKEN": benchAgentKey, "ANTHROPIC_API_KEY": "",
		"ANTHROPIC_MODEL": benchAgentModel, "NODE_EXTRA_CA_CERTS": ca,
	}})
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	return func(split *turnSplit) {
		seen := len(fake.Requests())
		start := time.Now()
		run := modelfake.RunCLI(b, bin, plan.Argv, plan.Env, plan.Stdin, dir, "")
		split.add(start, time.Now(), fake.Requests()[seen:])
		if run.ExitStatus != 0 {
			b.Fatalf("claude exited %d: %s", run.ExitStatus, run.Stderr)
		}
	}
}

// checkToolTurn checks that a benchmark's turn did what ClaudeCodeToolTurn scripts: Read, its
// result, the answer, no error, turn.done last.
func checkToolTurn(b *testing.B, events []turnEvent) {
	b.Helper()
	var called, said []string
	for _, e := range events {
		switch e.Kind {
		case eventlog.KindToolCall:
			called = append(called, e.ToolName)
		case eventlog.KindAssistantMessage:
			said = append(said, e.Text)
		case eventlog.KindError:
			b.Fatalf("the turn logged an error: %q", e.Text)
		}
	}
	if !slices.Equal(called, []string{"Read"}) || !slices.Contains(said, modelfake.ToolTurnAnswer) || len(events) == 0 || events[len(events)-1].Kind != eventlog.KindTurnDone {
		b.Fatalf("the turn's events are %+v, want Read, the answer %q and turn.done", events, modelfake.ToolTurnAnswer)
	}
}

// turnSplit adds up turns, split at the CLI's requests to the fake: until the first (in a
// session: the queue, the plugin's plan, the exec, the CLI's start and the proxy's connection;
// on the host: the CLI's start), and after the last (the last answer's stream, then in a session
// the parse, the log and the event's delivery, which come before the CLI's exit, and on the
// host the CLI's exit). What lies between is the CLI's and the fake's conversation, the proxy's
// hops included.
type turnSplit struct {
	n                           int
	total, untilFirst, fromLast time.Duration
}

func (s *turnSplit) add(start, end time.Time, reqs []modelfake.Request) {
	if len(reqs) == 0 {
		return
	}
	s.n++
	s.total += end.Sub(start)
	s.untilFirst += reqs[0].At.Sub(start)
	s.fromLast += end.Sub(reqs[len(reqs)-1].At)
}

// report adds the means as <prefix>first-request-ns/op and <prefix>after-last-request-ns/op,
// and, with a prefix, the whole turn's as <prefix>ns/op.
func (s *turnSplit) report(b *testing.B, prefix string) {
	if s.n == 0 {
		return
	}
	mean := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(s.n) }
	if prefix != "" {
		b.ReportMetric(mean(s.total), prefix+"ns/op")
	}
	b.ReportMetric(mean(s.untilFirst), prefix+"first-request-ns/op")
	b.ReportMetric(mean(s.fromLast), prefix+"after-last-request-ns/op")
}

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// TestSessionsCommandsOnARealHost runs the sessions commands against the whole stack: the API
// on a loopback server, a sandbox host on runc, the Firestore emulator.
func TestSessionsCommandsOnARealHost(t *testing.T) {
	db, _ := testenv.Firestore(t)
	sb := testenv.NewSandboxes(t, db)
	sb.StartHost(t, "cli-host")
	serveCLI(t, composition.Deps{DB: db, Config: sb.Config, Bucket: sb.Bucket, Sealer: sb.Sealer, DefaultImage: sb.Image}, "cli@example.com")
	run := func(args ...string) result { return runHangar(t, "", append([]string{"sessions"}, args...)...) }
	must := func(args ...string) string {
		t.Helper()
		r := run(args...)
		if r.err != nil {
			t.Fatalf("hangar sessions %s: exit %d: %v %s", strings.Join(args, " "), r.code, r.err, r.errOut)
		}
		return r.out
	}

	var created struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal([]byte(must("create", "--json", "--secret", "TOKEN=t0p")), &created); err != nil || created.SessionID == "" {
		t.Fatalf("create --json: %v", err)
	}
	id := created.SessionID

	for _, tc := range []struct {
		name string
		args []string
		out  string
		code int
	}{
		{"exit status mirrored", []string{"exec", id, "-c", `echo "$TOKEN"; exit 5`}, "t0p\n", 5},
		{"argv after --", []string{"exec", id, "--", "echo", "a b"}, "a b\n", 0},
		{"timeout exits 124", []string{"exec", id, "--timeout", "1s", "--", "sleep", "10"}, "", 124},
		{"missing program exits 127", []string{"exec", id, "--", "/no/such"}, "", 127},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.args...)
			if r.code != tc.code || r.out != tc.out {
				t.Fatalf("exit %d out %q (stderr %q), want %d %q", r.code, r.out, r.errOut, tc.code, tc.out)
			}
		})
	}

	var usage struct {
		SessionID          string `json:"session_id"`
		ConnectionsAllowed *int64 `json:"connections_allowed"`
	}
	if err := json.Unmarshal([]byte(must("net-usage", "--json", id)), &usage); err != nil || usage.SessionID != id || usage.ConnectionsAllowed == nil || *usage.ConnectionsAllowed != 0 {
		t.Fatalf("net-usage --json of a session without traffic: %+v %v", usage, err)
	}
	if r := run("net-usage", "sess_nope"); r.code != exitNotFound || !strings.Contains(r.msg(), "not_found") {
		t.Fatalf("net-usage of no session: exit %d, %q; want not_found", r.code, r.msg())
	}

	local := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(local, []byte("round trip\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	must("cp", local, id+":/root/in.txt")
	back := filepath.Join(t.TempDir(), "out.txt")
	must("cp", id+":/root/in.txt", back)
	if b, _ := os.ReadFile(back); string(b) != "round trip\n" {
		t.Fatalf("cp out brought back %q", b)
	}
	must("snapshot", id)
	must("evict", id)
	if out := must("get", id); !strings.Contains(out, "status:") || !strings.Contains(out, "evicted") {
		t.Fatalf("get after evict: %q", out)
	}
	must("resume", id)
	if out := must("exec", id, "--", "cat", "/root/in.txt"); out != "round trip\n" {
		t.Fatalf("after resume: %q", out)
	}
	if out := must("checkpoints", id); !strings.Contains(out, "yes") {
		t.Fatalf("checkpoints: %q", out)
	}
	if out := must("events", id, "--kind", "file.written"); !strings.Contains(out, "/root/in.txt") {
		t.Fatalf("events: %q", out)
	}
	must("delete", id)
	if r := run("get", id); r.code == 0 {
		t.Fatalf("get after delete succeeded: %q", r.out)
	}

	testenv.RequirePlugins(t)
	var agent struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal([]byte(must("create", "--json", "--prompt", "echo first", "--prompt-id", "one")), &agent); err != nil {
		t.Fatal(err)
	}
	if out := must("prompt", agent.SessionID, "echo second", "--id", "two"); !strings.Contains(out, "two") {
		t.Fatalf("prompt: %q", out)
	}
	testkit.Eventually(t, 30*time.Second, "the prompts' messages", func() (bool, string) {
		out := must("events", agent.SessionID, "--kind", "assistant.message")
		return strings.Contains(out, "first") && strings.Contains(out, "second"), out
	})
	// The second turn may still be ending: either answer is right, an error is not.
	if out := must("interrupt", agent.SessionID); !strings.Contains(out, "nothing is running") && !strings.Contains(out, "interrupted") {
		t.Fatalf("interrupt: %q", out)
	}

	// A client-side tool: the bash harness's hangar_tool waits until complete-tool answers it.
	must("prompt", agent.SessionID, `echo "answer $(hangar_tool ask)"`, "--id", "three")
	payloads := func(kind string) []promptPayload {
		var page struct {
			Events []struct {
				PayloadJSON string `json:"payload_json"`
			} `json:"events"`
		}
		if err := json.Unmarshal([]byte(must("events", agent.SessionID, "--json", "--kind", kind)), &page); err != nil {
			t.Fatal(err)
		}
		out := make([]promptPayload, len(page.Events))
		for i, e := range page.Events {
			if err := json.Unmarshal([]byte(e.PayloadJSON), &out[i]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	var call string
	testkit.Eventually(t, 30*time.Second, "the tool call", func() (bool, string) {
		if calls := payloads("tool.call"); len(calls) > 0 {
			call = calls[0].ToolCallID
		}
		return call != "", "no tool.call event"
	})
	if out := must("complete-tool", agent.SessionID, call, `{"ok": true}`); !strings.Contains(out, "delivered") {
		t.Fatalf("complete-tool: %q", out)
	}
	testkit.Eventually(t, 30*time.Second, "the script printing the tool's result", func() (bool, string) {
		msgs := payloads("assistant.message")
		return slices.ContainsFunc(msgs, func(p promptPayload) bool { return p.Text == `answer {"ok":true}` }), fmt.Sprintf("%+v", msgs)
	})
}

// promptPayload is the part of an agent turn's event payload the test reads.
type promptPayload struct {
	Text       string `json:"text"`
	ToolCallID string `json:"tool_call_id"`
}

package modelfake

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/hangar-dev/hangar/harnesses/abi"
	"github.com/hangar-dev/hangar/harnesses/sdk"
	"github.com/hangar-dev/hangar/internal/testkit"
)

// CLIDir is where `make agent-clis` installs the pinned real CLIs (relative to the module root).
const CLIDir = ".data/agent-clis/node_modules/.bin"

// CLI is the path of a real agent CLI (claude, codex): the one `make agent-clis` installed, else
// the one on PATH; a test stops (testkit.Missing) when there is neither.
func CLI(tb testing.TB, name string) string {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if p := filepath.Join(root, CLIDir, name); isFile(p) {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	testkit.Missing(tb, "the real "+name+" CLI is needed: run `make agent-clis` (npm install of the pinned versions)")
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Repo is a git repository for a scenario: Dir, a clone holding EditedFile as Before, and
// Remote, the bare repository it pushes to.
type Repo struct{ Dir, Remote string }

// NewRepo makes a Repo in temporary directories.
func NewRepo(tb testing.TB) Repo {
	tb.Helper()
	testkit.RequireTool(tb, "git", "apt-get install git")
	base := tb.TempDir()
	r := Repo{Dir: filepath.Join(base, "work"), Remote: filepath.Join(base, "remote.git")}
	git(tb, base, "init", "-q", "--bare", "-b", "main", r.Remote)
	git(tb, base, "clone", "-q", r.Remote, r.Dir)
	if err := os.WriteFile(filepath.Join(r.Dir, EditedFile), []byte(Before), 0o644); err != nil {
		tb.Fatal(err)
	}
	git(tb, r.Dir, "add", EditedFile)
	git(tb, r.Dir, "commit", "-qm", "Add the greeting")
	git(tb, r.Dir, "push", "-q", "origin", "HEAD")
	return r
}

// GitEnv is the environment git needs to commit in a test: an author, and no system or global
// configuration.
func GitEnv() []string {
	return []string{
		"GIT_AUTHOR_NAME=Hangar Test", "GIT_AUTHOR_EMAIL=test@hangar.invalid",
		"GIT_COMMITTER_NAME=Hangar Test", "GIT_COMMITTER_EMAIL=test@hangar.invalid",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	}
}

// Pushed is the subject of the remote's last commit and the content of EditedFile in it.
func (r Repo) Pushed(tb testing.TB) (subject, content string) {
	tb.Helper()
	return git(tb, r.Remote, "log", "-1", "--format=%s", "main"), git(tb, r.Remote, "show", "main:"+EditedFile) + "\n"
}

func git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), GitEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Run is one run of a real CLI.
type Run struct {
	Stdout, Stderr string
	ExitStatus     int
}

// RunCLI runs argv (argv[0] replaced by bin) in dir with env (on top of a minimal one: PATH, a
// fresh HOME, GitEnv) and stdin, as a sandbox would, and returns what it printed. When killOn is
// not "", the CLI is killed (SIGKILL, as the kernel's OOM killer does) once its stdout holds
// killOn, and its ExitStatus is then 137, as a shell would say. It gives up after two minutes,
// which no scripted conversation comes near.
func RunCLI(tb testing.TB, bin string, argv []string, env map[string]string, stdin, dir, killOn string) Run {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	// Its own process group, killed whole: the npm packages' commands are Node.js wrappers of
	// native binaries.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + tb.TempDir(), "TMPDIR=" + tb.TempDir()}, GitEnv()...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stderr bytes.Buffer
	stdout := &watcher{want: killOn, seen: make(chan struct{})}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), stdout, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	if killOn != "" {
		go func() {
			select {
			case <-stdout.seen:
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			case <-ctx.Done():
			}
		}()
	}
	err := cmd.Wait()
	run := Run{Stdout: stdout.String(), Stderr: stderr.String()}
	if ctx.Err() != nil {
		tb.Fatalf("%s ran past two minutes; stderr:\n%s", bin, run.Stderr)
	}
	if exit, ok := err.(*exec.ExitError); ok {
		run.ExitStatus = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			run.ExitStatus = 128 + int(ws.Signal())
		}
	} else if err != nil {
		tb.Fatalf("run %s: %v", bin, err)
	}
	return run
}

// watcher is a stdout that closes seen once what was written holds want.
type watcher struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *watcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && bytes.Contains(w.buf.Bytes(), []byte(w.want)) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *watcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// UpdateCaptures makes CheckRun rewrite the recordings of the real CLIs' output.
var UpdateCaptures = flag.Bool("update-captures", false, "rewrite testdata/real-*.jsonl from the real CLI's output")

// CheckRun checks a real CLI's run of a scenario: it exited 0, pushed the edit, sent the fake
// the key and nothing else, and its output, parsed by h, reports the tools called in order,
// no error and a turn.done with a conversation to resume. It returns the events, and keeps the
// run's stdout as testdata/capture with -update-captures.
func CheckRun(t *testing.T, h sdk.Harness, run Run, repo Repo, fake *Server, key string, tools []string, capture string) []abi.Event {
	t.Helper()
	if run.ExitStatus != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", run.ExitStatus, run.Stderr)
	}
	if subject, content := repo.Pushed(t); subject != CommitMessage || content != After {
		t.Errorf("pushed %q with %q, want %q with %q", subject, content, CommitMessage, After)
	}
	if creds := fake.Credentials(); !slices.Equal(creds, []string{key}) {
		t.Errorf("the fake was sent credentials %q, want only the key", creds)
	}
	events, err := sdk.Replay(h, append(sdk.Chunked("stdout", run.Stdout, 4096), sdk.Exited(run.ExitStatus))...)
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	for _, e := range events {
		switch {
		case e.Kind == abi.KindError:
			t.Errorf("error event %q", e.Text)
		case e.Kind == abi.KindToolCall:
			called = append(called, e.ToolName)
		}
	}
	if !slices.Equal(called, tools) {
		t.Errorf("tools called %q, want %q", called, tools)
	}
	if last := events[len(events)-1]; last.Kind != abi.KindTurnDone || last.Resume == "" {
		t.Errorf("the last event is %+v, want turn.done with a conversation to resume", last)
	}
	if *UpdateCaptures {
		if err := os.WriteFile(filepath.Join("testdata", capture), []byte(run.Stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return events
}

// AgentImageDir is where `make agent-image` writes the agent image's OCI layout (relative to the
// module root).
const AgentImageDir = ".data/image/images/agent"

// AgentImage is the agent image `make agent-image` built; a test stops (testkit.Missing)
// without it.
func AgentImage(tb testing.TB) v1.Image {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Join(filepath.Dir(file), "..", "..", AgentImageDir)
	p, err := layout.FromPath(dir)
	if err == nil {
		var idx v1.ImageIndex
		if idx, err = p.ImageIndex(); err == nil {
			var im *v1.IndexManifest
			if im, err = idx.IndexManifest(); err == nil && len(im.Manifests) == 1 {
				img, err := p.Image(im.Manifests[0].Digest)
				if err == nil {
					return img
				}
			}
		}
	}
	testkit.Missing(tb, fmt.Sprintf("the agent image is needed in %s: run `make agent-image` (%v)", AgentImageDir, err))
	return nil
}

// RunResumed runs each of prompts as one turn of one conversation in dir, with the same HOME
// (where the CLIs keep their conversations), planning each with the previous turn's resume
// hint through plan, and returns the runs. The parse of each turn is handed that hint too.
func RunResumed(t *testing.T, h sdk.Harness, bin string, prompts []string, plan func(prompt, resume string) abi.Plan, dir string) (runs []Run, events [][]abi.Event) {
	t.Helper()
	home, resume := t.TempDir(), ""
	for i, p := range prompts {
		pl := plan(p, resume)
		env := map[string]string{"HOME": home}
		for k, v := range pl.Env {
			env[k] = v
		}
		run := RunCLI(t, bin, pl.Argv, env, pl.Stdin, dir, "")
		if run.ExitStatus != 0 {
			t.Fatalf("turn %d: exit status %d; stderr:\n%s", i+1, run.ExitStatus, run.Stderr)
		}
		evs, err := sdk.ReplayResumed(h, resume, append(sdk.Chunked("stdout", run.Stdout, 4096), sdk.Exited(0))...)
		if err != nil {
			t.Fatal(err)
		}
		last := evs[len(evs)-1]
		if last.Kind != abi.KindTurnDone || last.Resume == "" {
			t.Fatalf("turn %d ended with %+v, want turn.done with a conversation to resume", i+1, last)
		}
		resume = last.Resume
		runs, events = append(runs, run), append(events, evs)
	}
	return runs, events
}

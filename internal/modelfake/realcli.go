package modelfake

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// CLIDir is where `make agent-clis` installs the pinned real CLIs (relative to the module root).
const CLIDir = ".tools/agent-clis/node_modules/.bin"

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
// fresh HOME, GitEnv) and stdin, as a sandbox would, and returns what it printed. It gives up
// after two minutes, which no scripted conversation comes near.
func RunCLI(tb testing.TB, bin string, argv []string, env map[string]string, stdin, dir string) Run {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + tb.TempDir(), "TMPDIR=" + tb.TempDir()}, GitEnv()...)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &stdout, &stderr
	err := cmd.Run()
	run := Run{Stdout: stdout.String(), Stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		run.ExitStatus = exit.ExitCode()
	} else if err != nil {
		tb.Fatalf("run %s: %v", bin, err)
	}
	if ctx.Err() != nil {
		tb.Fatalf("%s ran past two minutes; stderr:\n%s", bin, run.Stderr)
	}
	return run
}

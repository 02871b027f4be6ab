package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/composition"
	"github.com/hangar-dev/hangar/emulators"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/sandboxhosts/supervisor/supervisortest"
)

// buildHangar builds this command and the supervisor beside it, as `make dev` lays them out.
func buildHangar(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hangar")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	sup, err := os.ReadFile(supervisortest.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hangar-supervisor"), sup, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// devProcess is `hangar dev` running as a process of its own, with emulators of its own.
type devProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
}

// startDev runs bin dev over dataDir and waits until it serves.
func startDev(t *testing.T, bin, dataDir string) *devProcess {
	t.Helper()
	cmd := exec.Command(bin, "dev", "--addr", "127.0.0.1:0", "--data-dir", dataDir, "--save-every", "200ms")
	var env []string
	for _, kv := range os.Environ() {
		// Its own emulators, saved to its data dir, not the test run's pair.
		if !strings.HasPrefix(kv, "FIRESTORE_EMULATOR_HOST=") && !strings.HasPrefix(kv, "PUBSUB_EMULATOR_HOST=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HANGAR_WARM_SANDBOXES=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProcess{cmd: cmd, done: make(chan struct{})}
	served := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if rest, ok := strings.CutPrefix(sc.Text(), "Hangar is serving on "); ok {
				served <- strings.Fields(rest)[0]
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
		}
	})
	select {
	case p.url = <-served:
		return p
	case <-p.done:
		t.Fatalf("hangar dev exited before serving:\n%s", log.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("hangar dev not serving after 3 minutes")
	}
	return nil
}

// emulatorGroups are the process groups of p's emulators: its gcloud children lead them.
func (p *devProcess) emulatorGroups(t *testing.T) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var groups []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(path), "cmdline"))
		if string(f[1]) == strconv.Itoa(p.cmd.Process.Pid) && string(f[2]) == strconv.Itoa(pid) && bytes.Contains(cmdline, []byte("emulators")) {
			groups = append(groups, pid)
		}
	}
	if len(groups) != 2 {
		t.Fatalf("hangar dev runs %d emulator process groups (%v), want 2", len(groups), groups)
	}
	return groups
}

// cli runs a client command of bin against url with key.
func cli(t *testing.T, bin, url, key, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "HANGAR_URL="+url, "HANGAR_API_KEY="+key)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hangar %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// savedSince waits for a Firestore save in dataDir that began after t0 (exports are named by
// the time they began).
func savedSince(t *testing.T, dataDir string, t0 time.Time) {
	t.Helper()
	after := fmt.Sprintf("export-%019d", t0.UnixNano())
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		dirs, _ := filepath.Glob(filepath.Join(dataDir, "firestore", "export-*"))
		for _, d := range dirs {
			if filepath.Base(d) > after {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Firestore save in %s a minute after the writes (saves: %v)", dataDir, dirs)
		}
	}
}

func TestSecurityAKilledHangarDevKeepsItsDataAndAdminKeyAndLeavesNoEmulator(t *testing.T) {
	testenv.RequireSandboxes(t)
	testenv.RequireEmulators(t)
	bin := buildHangar(t)
	// Short: the host's sockets live under it.
	dataDir, err := os.MkdirTemp("", "hd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })

	dev := startDev(t, bin, dataDir)
	adminKey, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	admin := strings.TrimSpace(string(adminKey))
	cli(t, bin, dev.url, admin, "", "keys", "create", "--name", "made-before-the-crash")
	cli(t, bin, dev.url, admin, "kept-value", "secrets", "put", "KEPT_SECRET", "--from-file", "-")
	// A save that began once both writes were answered holds them.
	savedSince(t, dataDir, time.Now())
	groups := dev.emulatorGroups(t)

	if err := dev.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-dev.done
	for _, g := range groups {
		for deadline := time.Now().Add(time.Minute); emulators.GroupAlive(g); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(-g, syscall.SIGKILL)
				t.Fatalf("emulator process group %d outlived the killed hangar dev by a minute", g)
			}
		}
	}

	again := startDev(t, bin, dataDir)
	if b, _ := os.ReadFile(filepath.Join(dataDir, "admin.key")); string(b) != string(adminKey) {
		t.Fatalf("admin.key changed across the crash: %q, was %q", b, adminKey)
	}
	if out := cli(t, bin, again.url, admin, "", "keys", "list"); !strings.Contains(out, "made-before-the-crash") {
		t.Fatalf("the key made before the crash is gone:\n%s", out)
	}
	if out := cli(t, bin, again.url, admin, "", "secrets", "list"); !strings.Contains(out, "KEPT_SECRET") {
		t.Fatalf("the secret put before the crash is gone:\n%s", out)
	}
}

func TestTheDevAdminKeyIsNeverOverwritten(t *testing.T) {
	db, _ := testenv.Firestore(t)
	ctx := t.Context()
	a := composition.New(composition.Deps{DB: db, Config: config.Default()})
	path := filepath.Join(t.TempDir(), "admin.key")
	key, created, err := ensureAdminKey(ctx, a, path)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	id := strings.Split(key, "_")[1]
	for _, tc := range []struct {
		name string
		// lose changes the database as a crash or a user would, before the next start.
		lose    func(t *testing.T)
		wantErr bool
	}{
		{"a restart", func(*testing.T) {}, false},
		{"a crash lost the key's record", func(t *testing.T) {
			if _, err := db.Collection("apiKeys").Doc(id).Delete(ctx); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"the key was revoked", func(t *testing.T) {
			if _, err := a.Keys().Revoke(ctx, id, time.Now()); err != nil {
				t.Fatal(err)
			}
		}, true},
	} {
		tc.lose(t)
		got, created, err := ensureAdminKey(ctx, a, path)
		if b, _ := os.ReadFile(path); string(b) != key+"\n" {
			t.Fatalf("%s: admin.key holds %q, want the first key", tc.name, b)
		}
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "delete the file") {
				t.Fatalf("%s: err %v, want advice to delete the file", tc.name, err)
			}
			continue
		}
		if err != nil || created || got != key {
			t.Fatalf("%s: key %q created %v (%v), want the first key kept", tc.name, got, created, err)
		}
		if p, err := a.Authenticator().Authenticate(ctx, key, ""); err != nil || !p.Admin {
			t.Fatalf("%s: the kept key authenticates as %+v (%v), want an admin", tc.name, p, err)
		}
	}
}

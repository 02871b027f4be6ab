package emulators

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hangar-dev/hangar/internal/testkit"
)

// requireGcloud skips without gcloud, except on CI where a missing emulator must not turn
// the suite silently green.
func requireGcloud(t *testing.T) {
	t.Helper()
	testkit.RequireTool(t, "gcloud", installHint)
}

func start(t *testing.T, opts Options) *Set {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*DefaultStartTimeout)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func assertNotListening(t *testing.T, hosts ...string) {
	t.Helper()
	for _, h := range hosts {
		if c, err := net.DialTimeout("tcp", h, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after Stop", h)
		}
	}
}

// assertStopped checks that each emulator's whole process group is gone. (Its port is no proof
// either way: tests running in parallel start emulators of their own on freed ports.)
func assertStopped(t *testing.T, es ...*emulator) {
	t.Helper()
	for _, e := range es {
		if GroupAlive(e.cmd.Process.Pid) {
			t.Errorf("%s: process group %d still running after Stop", e.kind, e.cmd.Process.Pid)
		}
	}
}

func firestoreClient(t *testing.T, s *Set, project string) *firestore.Client {
	t.Helper()
	t.Setenv(FirestoreHostEnv, s.FirestoreHost())
	c, err := firestore.NewClient(context.Background(), project)
	if err != nil {
		t.Fatalf("firestore.NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestEmulators(t *testing.T) {
	requireGcloud(t)
	began := time.Now()
	s := start(t, Options{})
	t.Logf("both emulators ready in %s", time.Since(began).Round(time.Millisecond))
	ctx := context.Background()

	for _, h := range []string{s.FirestoreHost(), s.PubSubHost()} {
		if !strings.HasPrefix(h, "127.0.0.1:") {
			t.Fatalf("host %q is not on loopback", h)
		}
	}
	wantEnv := []string{FirestoreHostEnv + "=" + s.FirestoreHost(), PubSubHostEnv + "=" + s.PubSubHost()}
	if got := s.Env(); strings.Join(got, " ") != strings.Join(wantEnv, " ") {
		t.Errorf("Env() = %q, want %q", got, wantEnv)
	}

	t.Run("firestore document round trip and reset", func(t *testing.T) {
		c := firestoreClient(t, s, "roundtrip")
		doc := c.Collection("things").Doc("one")
		if _, err := doc.Create(ctx, map[string]any{"name": "one", "n": 1}); err != nil {
			t.Fatalf("Create: %v", err)
		}
		snap, err := doc.Get(ctx)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got := snap.Data()["name"]; got != "one" {
			t.Fatalf("name = %v, want one", got)
		}

		if err := s.ResetFirestore(ctx, "roundtrip"); err != nil {
			t.Fatalf("ResetFirestore: %v", err)
		}
		if _, err := doc.Get(ctx); status.Code(err) != codes.NotFound {
			t.Fatalf("Get after reset: err = %v, want NotFound", err)
		}
	})

	t.Run("pubsub topic over REST", func(t *testing.T) {
		tests := []struct {
			name string
			want int
		}{
			{"first create", http.StatusOK},
			{"second create", http.StatusConflict},
		}
		for _, tc := range tests {
			req, _ := http.NewRequest(http.MethodPut, "http://"+s.PubSubHost()+"/v1/projects/p/topics/topic-1", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
			}
		}
	})

	t.Run("reuse from env", func(t *testing.T) {
		t.Setenv(FirestoreHostEnv, s.FirestoreHost())
		t.Setenv(PubSubHostEnv, s.PubSubHost())
		reused := start(t, Options{ReuseFromEnv: true})
		if reused.FirestoreHost() != s.FirestoreHost() || reused.PubSubHost() != s.PubSubHost() {
			t.Fatalf("reused hosts %q %q, want %q %q", reused.FirestoreHost(), reused.PubSubHost(), s.FirestoreHost(), s.PubSubHost())
		}
		for _, e := range []*emulator{reused.firestore, reused.pubsub} {
			if e.cmd != nil {
				t.Errorf("%s: started a process instead of reusing the one from the environment", e.kind)
			}
		}
		if err := reused.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		for _, e := range []*emulator{s.firestore, s.pubsub} {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := e.waitReady(ctx); err != nil {
				t.Errorf("%s stopped by a set that only reused it: %v", e.kind, err)
			}
			cancel()
		}
	})

	t.Run("exec reuses the pair and forwards signals", func(t *testing.T) {
		t.Setenv(FirestoreHostEnv, s.FirestoreHost())
		t.Setenv(PubSubHostEnv, s.PubSubHost())
		tests := []struct {
			name   string
			script string
			want   int
		}{
			{"sees both hosts", fmt.Sprintf(`[ "$%s" = %s ] && [ "$%s" = %s ] && exit 7`,
				FirestoreHostEnv, s.FirestoreHost(), PubSubHostEnv, s.PubSubHost()), 7},
			// The child signals Exec (its parent), which must hand the signal back to it.
			{"forwards SIGINT", `trap 'exit 42' INT; kill -INT $PPID; i=0; while [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; exit 1`, 42},
			{"reports death by signal", `kill -KILL $$`, 128 + 9},
		}
		for _, tc := range tests {
			code, err := Exec(ctx, Options{}, "sh", "-c", tc.script)
			if err != nil || code != tc.want {
				t.Errorf("%s: Exec = %d, %v; want %d, nil", tc.name, code, err, tc.want)
			}
		}
		for _, e := range []*emulator{s.firestore, s.pubsub} {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			if err := e.waitReady(ctx); err != nil {
				t.Errorf("%s stopped by Exec that only reused it: %v", e.kind, err)
			}
			cancel()
		}
	})

	began = time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("both emulators stopped in %s", time.Since(began).Round(time.Millisecond))
	assertStopped(t, s.firestore, s.pubsub)
}

func TestExecStartsAndStopsItsOwnSet(t *testing.T) {
	requireGcloud(t)
	t.Setenv(PubSubHostEnv, "")
	out := filepath.Join(t.TempDir(), "host")
	code, err := Exec(context.Background(), Options{Kinds: []Kind{PubSub}}, "sh", "-c",
		`printf %s "$`+PubSubHostEnv+`" > `+out+`; exit 3`)
	if err != nil || code != 3 {
		t.Fatalf("Exec = %d, %v; want 3, nil", code, err)
	}
	host, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(host), "127.0.0.1:") {
		t.Fatalf("command saw %s=%q (%v)", PubSubHostEnv, host, err)
	}
	assertNotListening(t, string(host))
}

func TestDataDirKeepsFirestoreData(t *testing.T) {
	requireGcloud(t)
	ctx := context.Background()
	opts := Options{Kinds: []Kind{Firestore}, DataDir: t.TempDir(), Project: "keep"}

	first := start(t, opts)
	c := firestoreClient(t, first, "keep")
	if _, err := c.Collection("things").Doc("kept").Set(ctx, map[string]any{"v": "kept"}); err != nil {
		t.Fatalf("Set: %v", err)
	}
	if err := first.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertStopped(t, first.firestore)

	second := start(t, opts)
	c = firestoreClient(t, second, "keep")
	snap, err := c.Collection("things").Doc("kept").Get(ctx)
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if got := snap.Data()["v"]; got != "kept" {
		t.Fatalf("v = %v, want kept", got)
	}
	if err := second.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	exports, _ := filepath.Glob(filepath.Join(opts.DataDir, "firestore", exportPrefix+"*"))
	if len(exports) != 1 {
		t.Errorf("exports after two stops = %q, want exactly one", exports)
	}
}

// TestStartFailures needs no real gcloud: a fake one on PATH stands in for each broken setup.
func TestStartFailures(t *testing.T) {
	tests := []struct {
		name       string
		script     string   // fake gcloud; "" leaves it out
		components []string // platform/ entries of the fake SDK
		want       []string
		notInstall bool
	}{
		{name: "no gcloud", want: []string{"gcloud not installed on PATH", "apt-get install google-cloud-cli"}, notInstall: true},
		{
			name:       "no component",
			script:     "exit 0",
			components: []string{"pubsub-emulator"},
			want:       []string{"firestore emulator component", "google-cloud-cli-firestore-emulator"},
			notInstall: true,
		},
		{
			name:       "exits before ready",
			script:     `echo "first line"; echo "ERROR: boom" >&2; exit 3`,
			components: []string{"cloud-firestore-emulator"},
			want:       []string{"exited before it was ready", "exit status 3", "ERROR: boom"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sdk := t.TempDir()
			if err := os.MkdirAll(filepath.Join(sdk, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.script != "" {
				if err := os.WriteFile(filepath.Join(sdk, "bin", "gcloud"), []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range tc.components {
				if err := os.MkdirAll(filepath.Join(sdk, "platform", c), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", filepath.Join(sdk, "bin"))

			_, err := Start(context.Background(), Options{Kinds: []Kind{Firestore}, StartTimeout: 10 * time.Second})
			if err == nil {
				t.Fatal("Start succeeded")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if errors.Is(err, ErrNotInstalled) != tc.notInstall {
				t.Errorf("errors.Is(err, ErrNotInstalled) = %v, want %v", !tc.notInstall, tc.notInstall)
			}
		})
	}
}

func TestStartRejects(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"unknown kind", Options{Kinds: []Kind{"spanner"}}, `unknown emulator kind "spanner"`},
		{"data dir without project", Options{Kinds: []Kind{Firestore}, DataDir: t.TempDir()}, "Options.Project is required"},
	}
	for _, tc := range tests {
		if _, err := Start(context.Background(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to mention %q", tc.name, err, tc.want)
		}
	}
}

// crashChildEnv names the data dir of TestSecurityAKilledParentLeavesNoEmulatorAndKeepsItsSavedData
// when the test binary runs as the parent to be killed.
const crashChildEnv = "HANGAR_EMULATORS_CRASH_CHILD"

// crashChild starts a saving Firestore emulator over dir, writes a document, waits for a save
// made after the write, reports the emulator's process group and blocks until it is killed.
func crashChild(dir string) {
	ctx := context.Background()
	s, err := Start(ctx, Options{Kinds: []Kind{Firestore}, DataDir: dir, Project: "crash", SaveEvery: 100 * time.Millisecond})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	os.Setenv(FirestoreHostEnv, s.FirestoreHost())
	c, err := firestore.NewClient(ctx, "crash")
	if err == nil {
		_, err = c.Collection("things").Doc("written").Set(ctx, map[string]any{"v": "before the crash"})
	}
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	written := fmt.Sprintf("%s%019d", exportPrefix, time.Now().UnixNano())
	for {
		latest, _ := latestExport(filepath.Join(dir, "firestore"))
		if filepath.Base(filepath.Dir(latest)) > written {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("PGID", s.firestore.cmd.Process.Pid)
	select {}
}

func TestSecurityAKilledParentLeavesNoEmulatorAndKeepsItsSavedData(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	requireGcloud(t)
	dir := t.TempDir()
	child := exec.Command(os.Args[0], "-test.run=^TestSecurityAKilledParentLeavesNoEmulatorAndKeepsItsSavedData$")
	child.Env = append(os.Environ(), crashChildEnv+"="+dir)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var pgid int
	if _, err := fmt.Fscanf(out, "PGID %d\n", &pgid); err != nil {
		_ = child.Process.Kill()
		t.Fatalf("the child reported no emulator: %v", err)
	}
	if err := child.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	// The watchdog interrupts the group at once and kills it 10 s later if it lingers.
	for deadline := time.Now().Add(time.Minute); GroupAlive(pgid); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = signalGroup(pgid, os.Kill.(syscall.Signal))
			t.Fatalf("the emulator's process group %d outlived its killed parent by a minute", pgid)
		}
	}

	s := start(t, Options{Kinds: []Kind{Firestore}, DataDir: dir, Project: "crash"})
	snap, err := firestoreClient(t, s, "crash").Collection("things").Doc("written").Get(context.Background())
	if err != nil || snap.Data()["v"] != "before the crash" {
		t.Fatalf("after the crash the document is %v (%v), want the one saved before it", snap.Data(), err)
	}
}

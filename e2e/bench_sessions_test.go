package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/records/eventlog"
	"github.com/hangar-dev/hangar/sandboxhosts/container/containertest"
	"github.com/hangar-dev/hangar/sandboxhosts/images"
	"github.com/hangar-dev/hangar/sandboxhosts/images/imagestest"
)

// Session benchmarks, each paired with the bare operation it competes with, measured in the same
// run so that `make bench` can print their ratio. The raw ones use the same machine, the same
// file system as the host's data dir (both under os.TempDir) and, for runc, the same image
// layers as the sessions, with nothing of Hangar in between.

const (
	// benchFileBytes is the file WriteFile, ReadFile and cp move.
	benchFileBytes = 64 << 20
	// benchTreeBytes is what a snapshot or resume carries, as benchTreeFiles random files: the
	// same shape in the session and in the tar baselines, since per-file costs differ.
	benchTreeBytes = 100 << 20
	benchTreeFiles = 4
)

// fillTreeCmd is the shell command that writes the benchmark tree's fresh random files into dir.
func fillTreeCmd(dir string) string {
	return fmt.Sprintf("mkdir -p %[1]s && for f in $(seq %[2]d); do dd if=/dev/urandom of=%[1]s/f$f bs=1M count=%[3]d 2>/dev/null; done",
		dir, benchTreeFiles, benchTreeBytes/benchTreeFiles>>20)
}

func randomBytes(n int) []byte {
	p := make([]byte, n)
	_, _ = rand.Read(p) // never fails: crypto/rand panics instead
	return p
}

// BenchmarkSessionCreateToFirstExec is what a user waits for between asking for a session and
// seeing a command's first output, with the host's warm pool holding a sandbox of the image, as
// it does between sessions of a busy image. Deleting the session and waiting for the pool to
// refill are not timed: nobody waits for them.
func BenchmarkSessionCreateToFirstExec(b *testing.B) {
	benchCreateToFirstExec(b, productionPace)
}

// BenchmarkSessionCreateToFirstExecTraced is BenchmarkSessionCreateToFirstExec with every span
// sampled and kept, as BenchmarkSessionExecTrueTraced.
func BenchmarkSessionCreateToFirstExecTraced(b *testing.B) {
	recordSpans(b)
	benchCreateToFirstExec(b, productionPace)
}

// BenchmarkSessionCreateToFirstExecCold is the same with no warm pool: every session boots its
// sandbox (overlay mount, runc start, supervisor start) while the user waits.
func BenchmarkSessionCreateToFirstExecCold(b *testing.B) {
	benchCreateToFirstExec(b, func(sb *testenv.Sandboxes) {
		productionPace(sb)
		sb.Config.Host.WarmSandboxes = 0
	})
}

func benchCreateToFirstExec(b *testing.B, tune func(*testenv.Sandboxes)) {
	s := newSandboxStack(b, 1, tune)
	loopCreateToFirstExec(b, s, s.sb.Image)
}

// warmupRounds are the sessions created, used and deleted before the timed ones: the stack's
// set-up (for an enabled image, a whole enable: pull, chunk, prestage, dozens of Firestore
// writes) leaves the emulator and the disk busy for a moment, and with a few dozen timed
// sessions in a run, two or three slowed ones moved the mean by 10–25 ms.
const warmupRounds = 3

// loopCreateToFirstExec times sessions of the stack's default image, whose sandboxes the host
// keeps warm under pooled (the reference the host starts them by).
func loopCreateToFirstExec(b *testing.B, s *sandboxStack, pooled string) {
	warmed := func() {
		want := s.sb.Config.Host.WarmSandboxes
		testkit.Eventually(b, time.Minute, "the host's warm pool refilled", func() (bool, string) {
			warm, _ := s.hosts[0].Warm(pooled)
			return warm >= want, fmt.Sprintf("%d of %d warm", warm, want)
		})
	}
	// The host's first session pulls and unpacks the image; the raw baseline pulls before its
	// loop too, so neither loop pays for it.
	for range warmupRounds {
		firstOutput(b, s)()
		warmed()
	}
	for b.Loop() {
		rest := firstOutput(b, s)
		b.StopTimer()
		rest()
		warmed()
		b.StartTimer()
	}
}

// firstOutput creates a session and runs `echo hi` in it up to its first output; it returns
// what nobody waits for: reading the rest, checking it and deleting the session.
func firstOutput(b *testing.B, s *sandboxStack) (rest func()) {
	ctx := context.Background()
	id := s.create(b, nil)
	stream, err := s.svc.Exec(ctx, connect.NewRequest(&appv1.ExecRequest{SessionId: id, Argv: []string{"echo", "hi"}}))
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	for out.Len() == 0 && stream.Receive() {
		out.Write(stream.Msg().GetStdout())
	}
	return func() {
		var exit *appv1.ExecExit
		for stream.Receive() {
			out.Write(stream.Msg().GetStdout())
			if e := stream.Msg().GetExit(); e != nil {
				exit = e
			}
		}
		if err := stream.Err(); err != nil || out.String() != "hi\n" || exit.GetExitStatus() != 0 {
			b.Fatalf("echo hi: stdout %q, exit %v, %v", out.String(), exit, err)
		}
		_ = stream.Close()
		deleteSession(b, s, id)
	}
}

func deleteSession(b *testing.B, s *sandboxStack, id string) {
	b.Helper()
	if _, err := s.svc.DeleteSession(context.Background(), connect.NewRequest(&appv1.DeleteSessionRequest{SessionId: id})); err != nil {
		b.Fatalf("delete session: %v", err)
	}
}

// BenchmarkRawRuncRun runs `echo hi` as a container's init and stops the clock at its output, as
// BenchmarkSessionCreateToFirstExec does; runc's teardown after that is not timed either.
func BenchmarkRawRuncRun(b *testing.B) {
	containertest.TimeRuncRunEcho(b, containertest.Bundle(b, imageRootfs(b), "/bin/echo", "hi"), containerPrefix())
}

// BenchmarkSessionExecTrue is one command's round trip through the API, up to its exit frame.
func BenchmarkSessionExecTrue(b *testing.B) { benchExecTrue(b, false) }

// BenchmarkSessionExecTrueTraced is BenchmarkSessionExecTrue with every span sampled and kept
// (in memory, standing in for an exporter): the API's and host's Connect spans, the Firestore
// calls', the HTTP middleware's.
func BenchmarkSessionExecTrueTraced(b *testing.B) { benchExecTrue(b, true) }

func benchExecTrue(b *testing.B, traced bool) {
	if traced {
		recordSpans(b)
	}
	s := newSandboxStack(b, 1, productionPace)
	ctx := context.Background()
	id := s.create(b, nil)
	req := &appv1.ExecRequest{SessionId: id, Argv: []string{"true"}}
	for b.Loop() {
		stream, err := s.svc.Exec(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		var exit *appv1.ExecExit
		for exit == nil && stream.Receive() {
			exit = stream.Msg().GetExit()
		}
		b.StopTimer()
		for stream.Receive() {
		}
		if err := stream.Err(); err != nil || exit == nil || exit.GetExitStatus() != 0 {
			b.Fatalf("true: exit %v, %v", exit, err)
		}
		_ = stream.Close()
		b.StartTimer()
	}
}

// BenchmarkRawRuncExec is `runc exec` of /bin/true into a running container of the same image.
func BenchmarkRawRuncExec(b *testing.B) {
	bundle := containertest.Bundle(b, imageRootfs(b), "/bin/sleep", "1000000")
	root := b.TempDir()
	id := containerPrefix() + "exec"
	// A detached init is reparented when runc exits; as the subreaper, this process can reap it
	// after the delete rather than leave a zombie behind (a host started by another benchmark
	// has already made it one).
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	logs := b.TempDir()
	pidFile := filepath.Join(logs, "init.pid")
	log, err := os.Create(filepath.Join(logs, "runc.log"))
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	b.Cleanup(func() {
		if err := exec.Command("runc", "--root", root, "delete", "--force", id).Run(); err != nil {
			b.Errorf("runc delete: %v", err)
			return
		}
		if raw, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
				_, _ = unix.Wait4(pid, nil, 0, nil)
			}
		}
	})
	// The init inherits runc's stdio: a file, since a pipe would stay open and Run would never
	// return.
	run := exec.Command("runc", "--root", root, "run", "-d", "--pid-file", pidFile, "--bundle", bundle, id)
	run.Stdout, run.Stderr = log, log
	if err := run.Run(); err != nil {
		msg, _ := os.ReadFile(log.Name())
		b.Fatalf("runc run -d: %v: %s", err, msg)
	}
	for b.Loop() {
		if out, err := exec.Command("runc", "--root", root, "exec", id, "/bin/true").CombinedOutput(); err != nil {
			b.Fatalf("runc exec: %v: %s", err, out)
		}
	}
}

// imageRootfs is the sessions' test image pulled into an image cache of its own and mounted as
// a read-only overlay of its layers: a sandbox's root without the per-sandbox upper dir.
func imageRootfs(b *testing.B) string {
	b.Helper()
	db, _ := testenv.Firestore(b)
	sb := testenv.NewSandboxes(b, db)
	cache, err := images.New(b.TempDir(), images.WithRegistries(imagestest.Allow))
	if err != nil {
		b.Fatal(err)
	}
	img, err := cache.Pull(context.Background(), sb.Image)
	if err != nil {
		b.Fatal(err)
	}
	if len(img.LowerDirs) == 1 {
		return img.LowerDirs[0]
	}
	dir := b.TempDir()
	if err := unix.Mount("overlay", dir, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(img.LowerDirs, ":")); err != nil {
		b.Fatalf("mount the image's layers: %v", err)
	}
	b.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// containerPrefix starts container ids unique to this run: runc names each container's cgroups
// after its id, and a crashed run may have left some behind.
func containerPrefix() string {
	return "hangar-bench-" + hex.EncodeToString(randomBytes(4)) + "-"
}

// BenchmarkSessionWriteFile uploads a 64 MiB file. The client's sha256 is computed once, outside
// the clock: a client can hash while it reads the file, and the host's check stays timed.
func BenchmarkSessionWriteFile(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	ctx := context.Background()
	id := s.create(b, nil)
	body := randomBytes(benchFileBytes)
	digest := sum(body)
	b.SetBytes(benchFileBytes)
	for b.Loop() {
		resp, err := upload(ctx, s.svc, id, "/root/big", body, digest, nil)
		if err != nil || resp.GetSizeBytes() != benchFileBytes {
			b.Fatalf("write: %v, %v", resp, err)
		}
	}
}

// BenchmarkSessionReadFile downloads a 64 MiB file and drops the bytes as they come, so that the
// client's buffering is not part of the number.
func BenchmarkSessionReadFile(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	ctx := context.Background()
	id := s.create(b, nil)
	body := randomBytes(benchFileBytes)
	digest := sum(body)
	if _, err := upload(ctx, s.svc, id, "/root/big", body, digest, nil); err != nil {
		b.Fatal(err)
	}
	req := &appv1.ReadFileRequest{SessionId: id, Path: "/root/big"}
	b.SetBytes(benchFileBytes)
	for b.Loop() {
		stream, err := s.svc.ReadFile(ctx, connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		n, got := 0, ""
		for stream.Receive() {
			if m := stream.Msg().GetMetadata(); m != nil {
				got = m.GetSha256()
			}
			n += len(stream.Msg().GetChunk())
		}
		if err := stream.Err(); err != nil || n != benchFileBytes || got != digest {
			b.Fatalf("read %d bytes, sha256 %s: %v", n, got, err)
		}
		_ = stream.Close()
	}
}

// BenchmarkRawCp copies a 64 MiB file (hot in the page cache, as the sessions' files are) to a
// new name on the file system that holds the host's data dir.
func BenchmarkRawCp(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.WriteFile(src, randomBytes(benchFileBytes), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchFileBytes)
	for i := 0; b.Loop(); i++ {
		dst := filepath.Join(dir, strconv.Itoa(i))
		if out, err := exec.Command("cp", src, dst).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v: %s", err, out)
		}
		b.StopTimer()
		if err := os.Remove(dst); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkSessionSnapshot100MiB checkpoints a session holding 100 MiB written since its last
// checkpoint, all of it new chunks to upload.
func BenchmarkSessionSnapshot100MiB(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	id := s.create(b, nil)
	// A session's first checkpoint takes its whole upper dir; taking it here leaves each timed
	// one exactly the fresh files (and the removal of the previous ones).
	snapshot(b, s, id)
	b.SetBytes(benchTreeBytes)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s.sh(b, id, fmt.Sprintf("rm -rf /work/dirty-%d && ", i-1)+fillTreeCmd(fmt.Sprintf("/work/dirty-%d", i)))
		b.StartTimer()
		snapshot(b, s, id)
	}
}

func snapshot(b *testing.B, s *sandboxStack, id string) {
	b.Helper()
	resp, err := s.svc.Snapshot(context.Background(), connect.NewRequest(&appv1.SnapshotRequest{SessionId: id}))
	if err != nil || resp.Msg.GetSnapshotId() == "" {
		b.Fatalf("snapshot: %v, %v", resp, err)
	}
}

// BenchmarkSessionResume100MiB brings back an evicted session whose checkpoint holds 100 MiB.
// The chunks are in the host's cache from the snapshot, as they are when a session is resumed
// on the host that evicted it.
func BenchmarkSessionResume100MiB(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	ctx := context.Background()
	id := s.create(b, nil)
	s.sh(b, id, fillTreeCmd("/work/tree"))
	snapshot(b, s, id)
	b.SetBytes(benchTreeBytes)
	for b.Loop() {
		b.StopTimer()
		if _, err := s.svc.EvictLocal(ctx, connect.NewRequest(&appv1.EvictLocalRequest{SessionId: id})); err != nil {
			b.Fatalf("evict: %v", err)
		}
		b.StartTimer()
		resp, err := s.svc.Resume(ctx, connect.NewRequest(&appv1.ResumeRequest{SessionId: id}))
		if err != nil || resp.Msg.GetSizeBytes() < benchTreeBytes {
			b.Fatalf("resume: %v, %v", resp, err)
		}
	}
}

// benchTree is a dir holding the benchmark tree, written from Go: the kernel's random source is
// the same as dd's in the session.
func benchTree(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	for i := range benchTreeFiles {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i+1)), randomBytes(benchTreeBytes/benchTreeFiles), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkRawTarCreate100MiB archives the tree into a file: GNU tar reads nothing when it sees
// its archive is /dev/null.
func BenchmarkRawTarCreate100MiB(b *testing.B) {
	tree := benchTree(b)
	work := b.TempDir()
	b.SetBytes(benchTreeBytes)
	for i := 0; b.Loop(); i++ {
		archive := filepath.Join(work, strconv.Itoa(i)+".tar")
		if out, err := exec.Command("tar", "-cf", archive, "-C", tree, ".").CombinedOutput(); err != nil {
			b.Fatalf("tar -c: %v: %s", err, out)
		}
		b.StopTimer()
		if err := os.Remove(archive); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkRawTarExtract100MiB(b *testing.B) {
	work := b.TempDir()
	archive := filepath.Join(work, "tree.tar")
	if out, err := exec.Command("tar", "-cf", archive, "-C", benchTree(b), ".").CombinedOutput(); err != nil {
		b.Fatalf("tar -c: %v: %s", err, out)
	}
	b.SetBytes(benchTreeBytes)
	for i := 0; b.Loop(); i++ {
		target := filepath.Join(work, strconv.Itoa(i))
		if err := os.Mkdir(target, 0o755); err != nil {
			b.Fatal(err)
		}
		if out, err := exec.Command("tar", "-xf", archive, "-C", target).CombinedOutput(); err != nil {
			b.Fatalf("tar -x: %v: %s", err, out)
		}
		b.StopTimer()
		if err := os.RemoveAll(target); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkSessionWriteTinyFile is the operation BenchmarkSessionEventDelivery watches for,
// alone: the difference between the two is what delivering its event adds.
func BenchmarkSessionWriteTinyFile(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	ctx := context.Background()
	id := s.create(b, nil)
	tiny := []byte("hi\n")
	digest := sum(tiny)
	for i := 0; b.Loop(); i++ {
		if _, err := upload(ctx, s.svc, id, fmt.Sprintf("/root/tiny-%d", i), tiny, digest, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionEventDelivery times a tiny WriteFile from its call until its file.written event
// arrives on a StreamEvents stream opened beforehand. The clock starts at the call, not at the
// append, because the host appends inside the call and queues the write to Firestore: "when the
// append happened" is not observable from a client, while "I did something, when do watchers
// see it" is the latency users feel. WriteTinyFile times the call alone.
func BenchmarkSessionEventDelivery(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	id := s.create(b, nil)
	tiny := []byte("hi\n")
	digest := sum(tiny)
	untilEvent(b, s, id, eventlog.KindFileWritten, "path", func(key string) string {
		path := "/root/" + key
		if _, err := upload(context.Background(), s.svc, id, path, tiny, digest, nil); err != nil {
			b.Fatal(err)
		}
		return path
	})
}

// untilEvent times an operation until the event it causes arrives on a StreamEvents stream
// opened once: do runs the operation for a key and returns the value the event's payload field
// carries. One round before the clock starts takes the stream's backlog and first listen.
func untilEvent(b *testing.B, s *sandboxStack, session, kind, field string, do func(key string) string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A client of its own: the shared one's timeout would cut a long-lived stream.
	follower := appv1connect.NewSessionServiceClient(&http.Client{}, s.rpcURL(), auth.WithKey(s.admin))
	stream, err := follower.StreamEvents(ctx, connect.NewRequest(&appv1.StreamEventsRequest{SessionId: session}))
	if err != nil {
		b.Fatal(err)
	}
	defer stream.Close()
	round := func(key string) {
		want := do(key)
		for stream.Receive() {
			var p map[string]any
			ev := stream.Msg()
			if ev.GetKind() == kind && json.Unmarshal([]byte(ev.GetPayloadJson()), &p) == nil && p[field] == want {
				return
			}
		}
		b.Fatalf("event stream ended before %s %s: %v", kind, want, stream.Err())
	}
	round("warm")
	for i := 0; b.Loop(); i++ {
		round(fmt.Sprintf("k-%d", i))
	}
}

// productionPace gives a benchmark's host the production heartbeat and housekeeping periods:
// tests quicken them to see hosts die fast, which would load the emulator under measurement.
func productionPace(sb *testenv.Sandboxes) {
	d := config.Default().Host
	sb.Config.Host.HeartbeatInterval, sb.Config.Host.HostTimeout = d.HeartbeatInterval, d.HostTimeout
}

// BenchmarkSessionPromptFirstEvent is a prompt's latency on the bash harness: from SendPrompt to
// its first assistant message on an open StreamEvents stream — the queue, the plugin's plan and
// parse, and the log on top of running `echo hi` in the sandbox. Its baseline is Exec of the same
// command through the API, output included.
func BenchmarkSessionPromptFirstEvent(b *testing.B) {
	testenv.RequirePlugins(b)
	s := newSandboxStack(b, 1, productionPace)
	id := s.create(b, &appv1.CreateSessionRequest{Mode: "agent"})
	// The first round also compiles the plugin and starts the queue's runner.
	untilEvent(b, s, id, eventlog.KindAssistantMessage, "prompt_id", func(prompt string) string {
		if _, err := s.svc.SendPrompt(context.Background(), connect.NewRequest(&appv1.SendPromptRequest{SessionId: id, PromptId: prompt, Text: "echo hi"})); err != nil {
			b.Fatal(err)
		}
		return prompt
	})
}

// BenchmarkSessionExecEcho is Exec of `echo hi` through the API to its exit: the prompt
// benchmark's baseline.
func BenchmarkSessionExecEcho(b *testing.B) {
	s := newSandboxStack(b, 1, productionPace)
	id := s.create(b, nil)
	for b.Loop() {
		if res := s.exec(b, &appv1.ExecRequest{SessionId: id, Argv: []string{"echo", "hi"}}); res.stdout != "hi\n" {
			b.Fatalf("echo hi: %+v", res)
		}
	}
}

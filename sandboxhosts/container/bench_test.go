package container

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hangar-dev/hangar/sandboxhosts/container/containertest"

	"golang.org/x/sys/unix"
)

// Baselines: what runc alone costs on this machine, next to what a
// sandbox costs through the driver. Each reports the median of its
// iterations as median-ms.

// rawBundle is a raw runc bundle over a plain busybox rootfs dir: no overlay, no driver.
func rawBundle(b *testing.B, args ...string) string {
	b.Helper()
	rootfs := filepath.Join(b.TempDir(), "rootfs")
	busyboxRootfs(b, rootfs)
	return containertest.Bundle(b, rootfs, args...)
}

// timeEach runs op b.N times and reports the median duration.
func timeEach(b *testing.B, op func(i int)) {
	b.Helper()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		op(i)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(median(took), "median-ms")
}

// median returns the median of ds in milliseconds.
func median(ds []time.Duration) float64 {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Millisecond)
}

// runcCmd runs runc with its output in a file, not a pipe: a detached
// container's init inherits runc's stdio and would hold a pipe open forever.
func runcCmd(b *testing.B, root string, args ...string) {
	b.Helper()
	out, err := os.CreateTemp(b.TempDir(), "runc-out")
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("runc", append([]string{"--root", root}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(out.Name())
		b.Fatalf("runc %v: %v: %s", args, err, msg)
	}
}

func BenchmarkRawRuncRunTrue(b *testing.B) {
	requirements(b)
	bundle := rawBundle(b, "/bin/true")
	root := b.TempDir()
	id := uniqueID(b)
	timeEach(b, func(i int) {
		runcCmd(b, root, "run", "--bundle", bundle, fmt.Sprintf("%s-%d", id, i))
	})
}

func BenchmarkRawRuncExecTrue(b *testing.B) {
	requirements(b)
	bundle := rawBundle(b, "/bin/sleep", "100000")
	root := b.TempDir()
	id := uniqueID(b)
	// Subreaper, so the detached init becomes this process's child and is
	// reaped after the delete instead of lingering as a zombie.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		b.Fatal(err)
	}
	pidFile := filepath.Join(b.TempDir(), "pid")
	b.Cleanup(func() {
		_ = exec.Command("runc", "--root", root, "delete", "--force", id).Run()
		if pid, err := os.ReadFile(pidFile); err == nil {
			n, _ := strconv.Atoi(string(pid))
			_, _ = unix.Wait4(n, nil, 0, nil)
		}
	})
	runcCmd(b, root, "run", "-d", "--pid-file", pidFile, "--bundle", bundle, id)
	timeEach(b, func(int) {
		runcCmd(b, root, "exec", id, "/bin/true")
	})
}

func BenchmarkCreateStopSandbox(b *testing.B) {
	d := newTestDriver(b, "")
	lower := testImage(b)
	dirs := b.TempDir()
	id := uniqueID(b)
	ctx := context.Background()
	var creates []time.Duration
	timeEach(b, func(i int) {
		spec := Spec{
			ID:        fmt.Sprintf("%s-%d", id, i),
			Dir:       filepath.Join(dirs, fmt.Sprint(i)),
			LowerDirs: []string{lower},
			Init:      []string{"/bin/sh", "-c", "sleep 100000"},
		}
		b.Cleanup(func() { forceCleanup(b, d, spec.ID, spec.Dir) })
		start := time.Now()
		sb, err := d.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		creates = append(creates, time.Since(start))
		if err := sb.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	})
	b.ReportMetric(median(creates), "create-median-ms")
}

// The floor of a cold boot: `runc run` of `echo hi` up to its output, bare (runc's own default
// config) and with the config every sandbox gets (its seccomp filter, cgroup limits, masked
// paths, capabilities), over the same rootfs dir and nothing else of the driver. A cold session
// boots through the second and does more besides (disk, network, supervisor, records).

func BenchmarkRuncRunEchoBare(b *testing.B) {
	requirements(b)
	containertest.TimeRuncRunEcho(b, rawBundle(b, "/bin/echo", "hi"), uniqueID(b)+"-")
}

func BenchmarkRuncRunEchoSandboxConfig(b *testing.B) {
	requirements(b)
	rootfs := filepath.Join(b.TempDir(), "rootfs")
	busyboxRootfs(b, rootfs)
	bundle := b.TempDir()
	spec := Spec{ID: "floor", Dir: b.TempDir(), Init: []string{"/bin/echo", "hi"}}
	cgroup := "/" + testCgroupParent + "/" + uniqueID(b)
	if err := newTestDriver(b, "").writeBundle(spec, rootfs, bundle, cgroup); err != nil {
		b.Fatal(err)
	}
	containertest.TimeRuncRunEcho(b, bundle, uniqueID(b)+"-")
}

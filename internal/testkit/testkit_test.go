package testkit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records how a helper stopped the test instead of stopping it.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	panic(r)
}
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }
func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	panic(r)
}

// run calls f with a recorder and returns it once f returned or stopped the test.
func run(f func(tb testing.TB)) (r *recorder) {
	r = &recorder{}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
	}()
	f(r)
	return r
}

func TestMissingFailsUnderCIAndSkipsElsewhere(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		fail, skip bool
	}{{"true", true, false}, {"", false, true}, {"false", false, true}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := run(func(tb testing.TB) { Missing(tb, "a tool") })
			if (r.failed != "") != tc.fail || (r.skipped != "") != tc.skip {
				t.Fatalf("failed %q, skipped %q; want fail %v, skip %v", r.failed, r.skipped, tc.fail, tc.skip)
			}
		})
	}
}

func TestRequireToolAndFileStopOnlyWhenMissing(t *testing.T) {
	t.Setenv("CI", "true")
	if r := run(func(tb testing.TB) { RequireTool(tb, "go", "") }); r.failed != "" {
		t.Errorf("go is on PATH, yet: %s", r.failed)
	}
	if r := run(func(tb testing.TB) { RequireTool(tb, "no-such-tool-here", "apt-get install it") }); r.failed == "" {
		t.Error("a missing tool did not fail under CI")
	}
	if r := run(func(tb testing.TB) { RequireFile(tb, t.TempDir(), "") }); r.failed != "" {
		t.Errorf("an existing file: %s", r.failed)
	}
	if r := run(func(tb testing.TB) { RequireFile(tb, "/no/such/file", "make it") }); r.failed == "" {
		t.Error("a missing file did not fail under CI")
	}
}

func TestEventuallyWaitsForTheConditionAndFailsAtTheDeadline(t *testing.T) {
	calls := 0
	r := run(func(tb testing.TB) {
		Eventually(tb, time.Minute, "the third call", func() (bool, string) { calls++; return calls == 3, "" })
	})
	if r.failed != "" || calls != 3 {
		t.Fatalf("Eventually returned after %d calls (failed %q), want 3", calls, r.failed)
	}
	r = run(func(tb testing.TB) {
		Eventually(tb, 10*time.Millisecond, "never", func() (bool, string) { return false, "still not" })
	})
	if r.failed == "" || !strings.Contains(r.failed, "never did not happen") || !strings.Contains(r.failed, "still not") {
		t.Fatalf("a condition that never holds: failed %q", r.failed)
	}
}

package automations

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/automation/expr"
	"github.com/hangar-dev/hangar/automation/jsbox"
	"github.com/hangar-dev/hangar/automation/runs"
	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/internal/testkit"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/platform/config"
)

// newJSBox is a JavaScript sandbox closed when t ends, its compiled guest cached where the
// server keeps it. Without the built guest the test fails under CI and skips elsewhere.
func newJSBox(t *testing.T, opts jsbox.Options) *jsbox.Box {
	t.Helper()
	if dir, err := os.UserCacheDir(); err == nil {
		opts.CacheDir = filepath.Join(dir, "hangar", "jsbox")
	}
	box, err := jsbox.New(context.Background(), opts)
	if errors.Is(err, jsbox.ErrNotBuilt) {
		testkit.Missing(t, "automation/jsbox/wasm/jsbox.wasm is not built: run `make plugins` first (make test does)")
	}
	if err != nil {
		t.Fatalf("jsbox.New: %v", err)
	}
	t.Cleanup(func() { box.Close(context.Background()) })
	return box
}

// TestSecurityOneCallersEndlessLoopsDoNotHoldAnotherCallersEvalCode replays issue 23 (item 12):
// eight EvalCode calls of one user, each an endless loop, took every instance of the JavaScript
// sandbox until their deadlines, and everyone's evaluations waited behind them (8.4 s). Now a
// caller runs a bounded number at once, the rest are refused at once, and another caller's
// evaluation answers while the first caller's loops still spin. The loops' deadline is an hour
// here, so "still spinning" is a fact of the test rather than a race against the clock; they end
// when their caller goes away, as a cancelled request's would.
func TestSecurityOneCallersEndlessLoopsDoNotHoldAnotherCallersEvalCode(t *testing.T) {
	lim := config.Default().Limits
	perUser := lim.Automations.EvalsPerUser
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	box := newJSBox(t, jsbox.Options{Timeout: time.Hour, PoolSize: lim.Automations.Evals + jsbox.DefaultPoolSize})
	db, _ := testenv.Firestore(t)
	svc := New(Deps{DB: db, Clock: clock.NewFake(t0), Limits: lim, Validator: testValidator(t),
		Engine: &Engine{Env: env, JS: func() (*jsbox.Box, error) { return box, nil }}})
	eval := func(ctx context.Context, source, input string) (*appv1.EvalCodeResponse, error) {
		resp, err := svc.EvalCode(ctx, connect.NewRequest(&appv1.EvalCodeRequest{Source: source, InputJson: input}))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}

	aliceCtx, stopAlice := context.WithCancel(as(t, alice))
	defer stopAlice()
	const loops = 8
	done := make(chan error, loops)
	for range loops {
		go func() {
			_, err := eval(aliceCtx, "while (true) {}", "")
			done <- err
		}()
	}
	// The loops past alice's bound are refused without waiting; those within it spin and hold
	// their slots, so they cannot be among the first answers.
	for range loops - perUser {
		if err := <-done; connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Fatalf("alice's extra loop answered %v, want resource_exhausted", err)
		}
	}

	// Bob's call is bounded only so that a regression fails here instead of hanging the run:
	// waiting behind alice's loops, it would spin for their hour.
	bobCtx, stopBob := context.WithTimeout(as(t, bob), 2*time.Minute)
	defer stopBob()
	out, err := eval(bobCtx, "return input.n + 1", `{"n": 41}`)
	if err != nil {
		t.Fatalf("bob's EvalCode while alice's loops spin: %v (waiting behind them?)", err)
	}
	if out.GetValueJson() != "42" {
		t.Fatalf("bob's EvalCode = %v, want the value 42", out)
	}
	select {
	case err := <-done:
		t.Fatalf("one of alice's loops ended (%v) before she went away", err)
	default:
	}
	if _, err := eval(as(t, alice), "return 1", ""); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("alice's next EvalCode while %d of her loops spin: %v, want resource_exhausted", perUser, err)
	}

	// Her going away interrupts the loops, which free their instances and slots.
	stopAlice()
	for range perUser {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("alice's loop ended with %v once she went away, want context.Canceled", err)
		}
	}
	if out, err := eval(as(t, alice), "return 1", ""); err != nil || out.GetValueJson() != "1" {
		t.Fatalf("alice's EvalCode after her loops ended = %v, %v; want the value 1", out, err)
	}
}

// Without Pub/Sub the engine has no runner: RunNow and DryRun answer unavailable, saying why,
// rather than panicking into internal.
func TestRunNowAndDryRunWithoutPubSubAnswerUnavailable(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	c := clock.NewFake(t0)
	env, err := expr.NewEnv(expr.Options{})
	if err != nil {
		t.Fatal(err)
	}
	svc := New(Deps{DB: db, Clock: c, Limits: config.Default().Limits, Validator: testValidator(t),
		Engine: &Engine{Env: env, Runs: runs.NewStore(db, c.Now)}})
	f := fixture{svc: svc, clock: c}
	a := f.createSchedule(t, "nightly", false)
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"RunNow", func() error {
			_, err := svc.RunNow(as(t, alice), connect.NewRequest(&appv1.RunNowRequest{AutomationId: a.GetId()}))
			return err
		}},
		{"DryRun", func() error {
			_, err := svc.DryRun(as(t, alice), connect.NewRequest(&appv1.DryRunRequest{AutomationId: a.GetId()}))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.WantCode(t, tc.call(), connect.CodeUnavailable)
		})
	}
}

package secrets

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/clock"
)

var t0 = time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)

func newStore(t *testing.T, lim Limits) (*Store, *clock.Fake) {
	t.Helper()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	c := clock.NewFake(t0)
	return New(db, sealer, c.Now, lim), c
}

var lim = Limits{MaxValueBytes: 64, MaxSecrets: 3}

func version(v int64) *int64 { return &v }

func TestPutVersionsAndExpectedVersion(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, lim)
	ctx := t.Context()
	desc := "OpenRouter"
	m, created, err := s.Put(ctx, Put{Name: "org/router-key", Value: "v1", Description: &desc, ExpectedVersion: version(0), By: "user_a"})
	if err != nil || !created || m.Version != 1 || m.Description != desc || m.CreatedBy != "user_a" || !m.CreatedAt.Equal(t0) {
		t.Fatalf("create: %+v created=%v err=%v", m, created, err)
	}
	c.Advance(time.Minute)
	m, created, err = s.Put(ctx, Put{Name: "org/router-key", Value: "v2", ExpectedVersion: version(1), By: "user_b"})
	if err != nil || created || m.Version != 2 || m.Description != desc || m.CreatedBy != "user_a" || m.UpdatedBy != "user_b" ||
		!m.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("replace: %+v created=%v err=%v", m, created, err)
	}
	if v, ok, err := s.Lookup(ctx, "org/router-key"); err != nil || !ok || v != "v2" {
		t.Fatalf("value %q, %v, %v", v, ok, err)
	}
	cases := []struct {
		name     string
		expected int64
	}{
		{"a stale version", 1},
		{"a version from the future", 7},
		{"create-only over an existing secret", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Put(ctx, Put{Name: "org/router-key", Value: "lost", ExpectedVersion: version(tc.expected)})
			testenv.WantCode(t, err, connect.CodeAborted)
		})
	}
	if v, _, _ := s.Lookup(ctx, "org/router-key"); v != "v2" {
		t.Fatalf("a refused put changed the value to %q", v)
	}
}

func TestPutRefusesBadInput(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	long := strings.Repeat("d", 2000)
	cases := []struct {
		name string
		put  Put
		want []string
	}{
		{"bad name and no value", Put{Name: "has space"}, []string{"name", "value"}},
		{"name too long", Put{Name: strings.Repeat("n", 129), Value: "v"}, []string{"name"}},
		{"value too big", Put{Name: "n", Value: strings.Repeat("v", 65)}, []string{"value"}},
		{"description too long", Put{Name: "n", Value: "v", Description: &long}, []string{"description"}},
		{"negative version", Put{Name: "n", Value: "v", ExpectedVersion: version(-1)}, []string{"expected_version"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Put(t.Context(), tc.put)
			testenv.WantCode(t, err, connect.CodeInvalidArgument)
			if got := testenv.ViolatedFields(t, err); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("violations %v, want %v", got, tc.want)
			}
		})
	}
}

func TestListExistsDeleteAndTheLimit(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	ctx := t.Context()
	for _, n := range []string{"b", "a/x", "c.d"} {
		if _, _, err := s.Put(ctx, Put{Name: n, Value: "value-of-" + n}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.Put(ctx, Put{Name: "one-too-many", Value: "v"})
	testenv.WantCode(t, err, connect.CodeResourceExhausted)
	if _, _, err := s.Put(ctx, Put{Name: "b", Value: "replacing is not creating"}); err != nil {
		t.Fatalf("replacing at the limit: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list {
		names = append(names, m.Name)
	}
	if strings.Join(names, " ") != "a/x b c.d" {
		t.Fatalf("list %v", names)
	}
	for name, want := range map[string]bool{"a/x": true, "a": false, "bad name": false} {
		if got, err := s.Exists(ctx, name); err != nil || got != want {
			t.Errorf("Exists(%q) = %v, %v", name, got, err)
		}
	}
	_, err = s.Delete(ctx, "a/x", version(2))
	testenv.WantCode(t, err, connect.CodeAborted)
	m, err := s.Delete(ctx, "a/x", version(1))
	if err != nil || m.Name != "a/x" || m.Version != 1 {
		t.Fatalf("delete: %+v %v", m, err)
	}
	_, err = s.Delete(ctx, "a/x", nil)
	testenv.WantCode(t, err, connect.CodeNotFound)
	if _, ok, err := s.Lookup(ctx, "a/x"); ok || err != nil {
		t.Fatalf("a deleted secret looked up: ok=%v err=%v", ok, err)
	}
}

func TestResolveNamesTheMissingSecret(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	ctx := t.Context()
	if _, _, err := s.Put(ctx, Put{Name: "gh/token", Value: "ghp_1"}); err != nil {
		t.Fatal(err)
	}
	admin := Subject{UserID: "user_admin", Admin: true}
	env, err := s.Resolve(ctx, admin, map[string]string{"GITHUB_TOKEN": "gh/token"})
	if err != nil || env["GITHUB_TOKEN"] != "ghp_1" || len(env) != 1 {
		t.Fatalf("resolve: %v %v", env, err)
	}
	_, err = s.Resolve(ctx, admin, map[string]string{"GITHUB_TOKEN": "gh/token", "NPM_TOKEN": "npm/missing"})
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), `"npm/missing"`) || !strings.Contains(err.Error(), "NPM_TOKEN") {
		t.Fatalf("error does not name the secret: %v", err)
	}
}

// The value is stored only sealed, and sealed for its own name: a database read shows no
// plaintext, and a sealed value copied onto another secret does not open.
func TestValuesAreSealedAndBoundToTheirName(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	ctx := context.Background()
	for _, n := range []string{"one", "two"} {
		if _, _, err := s.Put(ctx, Put{Name: n, Value: "plaintext-of-" + n}); err != nil {
			t.Fatal(err)
		}
	}
	one, err := s.doc("one").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := one.DataTo(&rec); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec.Sealed, []byte("plaintext")) || len(rec.Sealed) == 0 {
		t.Fatalf("sealed value holds the plaintext: %q", rec.Sealed)
	}
	for k, v := range one.Data() {
		if s, ok := v.(string); ok && strings.Contains(s, "plaintext") {
			t.Fatalf("field %s holds the plaintext", k)
		}
	}
	if _, err := s.doc("two").Update(ctx, []firestore.Update{{Path: "sealed", Value: rec.Sealed}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Lookup(ctx, "two"); err == nil {
		t.Fatal("a value sealed for one secret opened as another")
	}
}

package secrets

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/internal/testenv"
)

func TestAccessAllows(t *testing.T) {
	t.Parallel()
	selected := Access{Visibility: Selected, UserIDs: []string{"user_bob"}, ServiceKeyIDs: []string{"key_ci"}, ProfileIDs: []string{"prof_build"}}
	cases := []struct {
		name   string
		access Access
		sub    Subject
		want   bool
	}{
		{"an admin uses an admins-only secret", Access{Visibility: AdminsOnly}, Subject{UserID: "user_a", Admin: true}, true},
		{"a user may not use an admins-only secret", Access{Visibility: AdminsOnly}, Subject{UserID: "user_a"}, false},
		{"a record without a policy is admins only", Access{}, Subject{UserID: "user_a"}, false},
		{"any user uses an all-users secret", Access{Visibility: AllUsers}, Subject{UserID: "user_a"}, true},
		{"a selected user", selected, Subject{UserID: "user_bob"}, true},
		{"a selected service key", selected, Subject{UserID: "user_svc", KeyID: "key_ci"}, true},
		{"anyone through a selected profile", selected, Subject{UserID: "user_a", ProfileID: "prof_build"}, true},
		{"a user nobody selected", selected, Subject{UserID: "user_a", KeyID: "key_other", ProfileID: "prof_other"}, false},
		{"empty ids never match an empty list entry", Access{Visibility: Selected, UserIDs: []string{""}}, Subject{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.access.Allows(tc.sub); got != tc.want {
				t.Fatalf("Allows(%+v) = %v, want %v", tc.sub, got, tc.want)
			}
		})
	}
}

func TestNewSecretsAreAdminsOnlyAndOnlyTheirPolicyOpensThem(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	ctx := t.Context()
	m, _, err := s.Put(ctx, Put{Name: "org/deploy", Value: "hunter2"})
	if err != nil || m.Access.Visibility != AdminsOnly {
		t.Fatalf("put: %+v %v", m.Access, err)
	}
	alice := Subject{UserID: "user_alice"}
	for name, err := range map[string]error{
		"check":   s.Check(ctx, alice, "org/deploy"),
		"use":     func() error { _, err := s.Use(ctx, alice, "org/deploy"); return err }(),
		"resolve": func() error { _, err := s.Resolve(ctx, alice, map[string]string{"DEPLOY": "org/deploy"}); return err }(),
		// A missing secret answers as a kept one, so names cannot be probed.
		"check a missing secret": s.Check(ctx, alice, "org/missing"),
	} {
		t.Run(name, func(t *testing.T) {
			testenv.WantCode(t, err, connect.CodePermissionDenied)
			if !strings.Contains(err.Error(), `"org/`) {
				t.Fatalf("error does not name the secret: %v", err)
			}
		})
	}
	if err := s.Check(ctx, Subject{UserID: "user_admin", Admin: true}, "org/deploy", "org/not-yet"); err != nil {
		t.Fatalf("an admin may name any secret, put or not: %v", err)
	}

	if _, err := s.SetAccess(ctx, "org/deploy", Access{Visibility: Selected, UserIDs: []string{"user_alice", "user_alice"}}, "user_admin"); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Use(ctx, alice, "org/deploy"); err != nil || v != "hunter2" {
		t.Fatalf("selected user: %q %v", v, err)
	}
	// Putting a new value keeps the policy; narrowing it takes effect at the next use.
	if _, _, err := s.Put(ctx, Put{Name: "org/deploy", Value: "hunter3"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx, alice, "org/deploy"); err != nil {
		t.Fatalf("policy lost on put: %v", err)
	}
	m, err = s.SetAccess(ctx, "org/deploy", Access{}, "user_admin")
	if err != nil || m.Access.Visibility != AdminsOnly || m.Version != 2 {
		t.Fatalf("narrow: %+v %v", m, err)
	}
	_, err = s.Use(ctx, alice, "org/deploy")
	testenv.WantCode(t, err, connect.CodePermissionDenied)
}

func TestAccessIsValidated(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, lim)
	ctx := t.Context()
	if _, _, err := s.Put(ctx, Put{Name: "x", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		access Access
		field  string
	}{
		{"an unknown visibility", Access{Visibility: "friends"}, "access.visibility"},
		{"a list without selected", Access{Visibility: AllUsers, UserIDs: []string{"user_a"}}, "access.user_ids"},
		{"an empty id", Access{Visibility: Selected, ProfileIDs: []string{""}}, "access.profile_ids[0]"},
		{"too many ids", Access{Visibility: Selected, ServiceKeyIDs: make([]string, maxSelected+1)}, "access.service_key_ids"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.SetAccess(ctx, "x", tc.access, "user_admin")
			if got := testenv.ViolatedFields(t, err); len(got) == 0 || got[0] != tc.field {
				t.Fatalf("violations %v, want %s first", got, tc.field)
			}
		})
	}
	_, err := s.SetAccess(ctx, "nope", Access{}, "user_admin")
	testenv.WantCode(t, err, connect.CodeNotFound)
}

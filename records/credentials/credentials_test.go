package credentials_test

import (
	"bytes"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"connectrpc.com/connect"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/clock"
	"github.com/hangar-dev/hangar/records/credentials"
)

func TestSubjectOfAppliesTheSubjectRules(t *testing.T) {
	t.Parallel()
	alice := auth.Principal{UserID: "user_alice"}
	root := auth.Principal{UserID: "user_root", Admin: true}
	user := appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER
	cases := []struct {
		name   string
		caller auth.Principal
		sub    *appv1.OAuthSubject
		want   credentials.Subject
		code   connect.Code
	}{
		{"a user's own", alice, &appv1.OAuthSubject{Kind: user, Id: "user_alice"}, credentials.Subject{credentials.KindUser, "user_alice"}, 0},
		{"no id is the caller", alice, &appv1.OAuthSubject{Kind: user}, credentials.Subject{credentials.KindUser, "user_alice"}, 0},
		{"another user's, for a user", alice, &appv1.OAuthSubject{Kind: user, Id: "user_bob"}, credentials.Subject{}, connect.CodeNotFound},
		{"another user's, for an admin", root, &appv1.OAuthSubject{Kind: user, Id: "user_bob"}, credentials.Subject{credentials.KindUser, "user_bob"}, 0},
		{"a connector, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR, Id: "github"}, credentials.Subject{}, connect.CodePermissionDenied},
		{"an MCP server, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_MCP, Id: "linear"}, credentials.Subject{}, connect.CodePermissionDenied},
		{"a user connector, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER_CONNECTOR, Id: "user_alice"}, credentials.Subject{}, connect.CodePermissionDenied},
		{"a connector, for an admin", root, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR, Id: "github"}, credentials.Subject{credentials.KindConnector, "github"}, 0},
		{"no kind", alice, &appv1.OAuthSubject{Id: "user_alice"}, credentials.Subject{}, connect.CodeInvalidArgument},
		{"no subject at all", alice, nil, credentials.Subject{}, connect.CodeInvalidArgument},
		{"a connector without id", root, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR}, credentials.Subject{}, connect.CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := credentials.SubjectOf(tc.caller, tc.sub)
			if tc.code != 0 {
				testenv.WantCode(t, err, tc.code)
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// A bundle is stored only sealed, bound to its subject and provider: copied onto another
// subject's record it does not open.
func TestBundlesAreSealedAndBoundToSubjectAndProvider(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	s := credentials.New(db, sealer, clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)).Now, 1024)
	ctx := t.Context()
	alice, bob := credentials.Subject{credentials.KindUser, "user_alice"}, credentials.Subject{credentials.KindUser, "user_bob"}
	for _, sub := range []credentials.Subject{alice, bob} {
		if _, err := s.Put(ctx, sub, "anthropic", "bundle-of-"+sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := credentials.DocOf(s, alice, "anthropic").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := snap.Data()["sealed"].([]byte)
	if len(sealed) == 0 || bytes.Contains(sealed, []byte("bundle-of")) {
		t.Fatal("the stored bundle is plaintext")
	}
	if got, _, err := s.Bundle(ctx, alice, "anthropic"); err != nil || got != "bundle-of-user_alice" {
		t.Fatalf("bundle %q, %v", got, err)
	}
	if _, err := credentials.DocOf(s, bob, "anthropic").Update(ctx, []firestore.Update{{Path: "sealed", Value: sealed}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Bundle(ctx, bob, "anthropic"); err == nil {
		t.Fatal("alice's bundle opened as bob's")
	}
	_, _, err = s.Bundle(ctx, alice, "openai")
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
	if _, err := s.Disconnect(ctx, alice, "anthropic", 0); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Bundle(ctx, alice, "anthropic")
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
}

// A refreshable credential comes due a margin before it expires; one claim takes it for a lease
// (without changing its version), so a second sweep finds nothing to do until the lease ends.
// Save over a stale version is aborted naming the current one; Mark drops the bundle.
func TestRefreshScheduleClaimsAndVersions(t *testing.T) {
	t.Parallel()
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	clk := clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	s := credentials.New(db, sealer, clk.Now, 1024)
	ctx := t.Context()
	alice := credentials.Subject{credentials.KindUser, "user_alice"}
	m, err := s.Save(ctx, alice, "acme", credentials.Grant{Bundle: "b1", ExpiresAt: clk.Now().Add(time.Hour), Refreshable: true}, 0, "token")
	if err != nil || m.Version != 1 || m.ExpiresAt == nil {
		t.Fatalf("save: %+v, %v", m, err)
	}
	if due, _ := s.Due(ctx, 10); len(due) != 0 {
		t.Fatalf("due an hour early: %v", due)
	}
	clk.Advance(55 * time.Minute)
	due, err := s.Due(ctx, 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("due: %v, %v", due, err)
	}
	bundle, claimed, ok, err := s.Claim(ctx, alice, "acme", time.Minute)
	if err != nil || !ok || bundle != "b1" || claimed.Version != 1 {
		t.Fatalf("claim: %q %+v %v %v", bundle, claimed, ok, err)
	}
	if _, _, ok, _ := s.Claim(ctx, alice, "acme", time.Minute); ok {
		t.Fatal("claimed twice within the lease")
	}
	if due, _ := s.Due(ctx, 10); len(due) != 0 {
		t.Fatal("due within the lease")
	}
	if _, err := s.Save(ctx, alice, "acme", credentials.Grant{Bundle: "b2"}, 1, "token"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Save(ctx, alice, "acme", credentials.Grant{Bundle: "b3"}, 1, "token")
	testenv.WantCode(t, err, connect.CodeAborted)
	if _, ok, _ := s.Mark(ctx, alice, "acme", 1, credentials.StatusExpired); ok {
		t.Fatal("marked a credential that changed since")
	}
	m, ok, err = s.Mark(ctx, alice, "acme", 2, credentials.StatusRevoked)
	if err != nil || !ok || m.Status != credentials.StatusRevoked || m.Version != 3 {
		t.Fatalf("mark: %+v %v %v", m, ok, err)
	}
	_, _, err = s.Bundle(ctx, alice, "acme")
	testenv.WantCode(t, err, connect.CodeFailedPrecondition)
}

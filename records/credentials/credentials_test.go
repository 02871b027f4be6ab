package credentials

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
		want   Subject
		code   connect.Code
	}{
		{"a user's own", alice, &appv1.OAuthSubject{Kind: user, Id: "user_alice"}, Subject{KindUser, "user_alice"}, 0},
		{"no id is the caller", alice, &appv1.OAuthSubject{Kind: user}, Subject{KindUser, "user_alice"}, 0},
		{"another user's, for a user", alice, &appv1.OAuthSubject{Kind: user, Id: "user_bob"}, Subject{}, connect.CodeNotFound},
		{"another user's, for an admin", root, &appv1.OAuthSubject{Kind: user, Id: "user_bob"}, Subject{KindUser, "user_bob"}, 0},
		{"a connector, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR, Id: "github"}, Subject{}, connect.CodePermissionDenied},
		{"an MCP server, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_MCP, Id: "linear"}, Subject{}, connect.CodePermissionDenied},
		{"a user connector, for a user", alice, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_USER_CONNECTOR, Id: "user_alice"}, Subject{}, connect.CodePermissionDenied},
		{"a connector, for an admin", root, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR, Id: "github"}, Subject{KindConnector, "github"}, 0},
		{"no kind", alice, &appv1.OAuthSubject{Id: "user_alice"}, Subject{}, connect.CodeInvalidArgument},
		{"no subject at all", alice, nil, Subject{}, connect.CodeInvalidArgument},
		{"a connector without id", root, &appv1.OAuthSubject{Kind: appv1.OauthSubjectKind_OAUTH_SUBJECT_KIND_CONNECTOR}, Subject{}, connect.CodeInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SubjectOf(tc.caller, tc.sub)
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
	s := New(db, sealer, clock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)).Now, 1024)
	ctx := t.Context()
	alice, bob := Subject{KindUser, "user_alice"}, Subject{KindUser, "user_bob"}
	for _, sub := range []Subject{alice, bob} {
		if _, err := s.Put(ctx, sub, "anthropic", "bundle-of-"+sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.doc(alice, "anthropic").Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := snap.DataTo(&rec); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(rec.Sealed, []byte("bundle-of")) {
		t.Fatal("the stored bundle is plaintext")
	}
	if got, _, err := s.Bundle(ctx, alice, "anthropic"); err != nil || got != "bundle-of-user_alice" {
		t.Fatalf("bundle %q, %v", got, err)
	}
	if _, err := s.doc(bob, "anthropic").Update(ctx, []firestore.Update{{Path: "sealed", Value: rec.Sealed}}); err != nil {
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

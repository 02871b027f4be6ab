package sessions

import (
	"slices"
	"testing"

	"github.com/hangar-dev/hangar/platform/auth"
	"github.com/hangar-dev/hangar/platform/ids"
)

func TestCandidatesPutTheCallersOwnRequestedIDBeforeAnyRecord(t *testing.T) {
	s := &Service{keyer: ids.NewKeyer([]byte("deployment secret"))}
	alice, bob := auth.Principal{UserID: "user_alice"}, auth.Principal{UserID: "user_bob"}
	minted := ids.New("sess")
	for _, tc := range []struct {
		name   string
		caller auth.Principal
		id     string
		want   []string
	}{
		{"a requested id: hers first, then a record of that id (made before ids were scoped)", alice, "nightly",
			[]string{s.derivedID("user_alice", spaceRequested, "nightly"), "nightly"}},
		{"the same id for bob is another record", bob, "nightly",
			[]string{s.derivedID("user_bob", spaceRequested, "nightly"), "nightly"}},
		{"a minted-looking id: the record first", alice, minted,
			[]string{minted, s.derivedID("user_alice", spaceRequested, minted)}},
		{"an id no request could have used: only the record", alice, "Upper.Case",
			[]string{"Upper.Case"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.candidates(tc.caller, tc.id); !slices.Equal(got, tc.want) {
				t.Fatalf("candidates = %v, want %v", got, tc.want)
			}
		})
	}
	if s.derivedID("user_alice", spaceRequested, "k") == s.derivedID("user_alice", spaceTask, "k") {
		t.Fatal("a requested id and a task key of the same text share a record id")
	}
}

package ids_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/hangar-dev/hangar/platform/ids"
)

func TestFromKeyIsStableValidAndDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, key := range []string{"", "a", "auto_1|delivery-1", "auto_1|delivery-2", "auto_2|delivery-1"} {
		id := ids.FromKey("run", key)
		if id != ids.FromKey("run", key) {
			t.Fatalf("FromKey(%q) changed between calls", key)
		}
		if !ids.Valid("run", id) {
			t.Fatalf("FromKey(%q) = %q, not a valid run id", key, id)
		}
		if other, dup := seen[id]; dup {
			t.Fatalf("keys %q and %q share id %s", key, other, id)
		}
		seen[id] = key
	}
}

func TestNewIsValidForItsPrefixOnly(t *testing.T) {
	id := ids.New("task")
	if !ids.Valid("task", id) || ids.Valid("run", id) {
		t.Fatalf("Valid disagrees with New for %q", id)
	}
}

func TestCheckRefusesWhatCannotNameADocument(t *testing.T) {
	for _, tc := range []struct {
		name, id string
		ok       bool
	}{
		{"a minted id", ids.New("sess"), true},
		{"a slug", "life-1", true},
		{"empty", "", false},
		{"parent path", "../x", false},
		{"slash", "a/b", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"reserved", "__x__", false},
		{"too long", strings.Repeat("a", ids.MaxLen+1), false},
		{"control character", "a\nb", false},
		{"invalid utf-8", "a\xffb", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ids.Check("session_id", tc.id)
			if tc.ok {
				if err != nil {
					t.Fatalf("Check(%q) = %v", tc.id, err)
				}
				return
			}
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "session_id") {
				t.Fatalf("Check(%q) = %v, want invalid_argument naming session_id", tc.id, err)
			}
		})
	}
}

func TestLookupIsInvalidArgumentForUnsafeAndNotFoundForMisshapenIds(t *testing.T) {
	if err := ids.Lookup("task_id", "task", "task", "../x"); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("../x: %v", err)
	}
	if err := ids.Lookup("task_id", "task", "task", "task_nope"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("task_nope: %v", err)
	}
	if err := ids.Lookup("task_id", "task", "task", ids.New("task")); err != nil {
		t.Fatalf("a minted id: %v", err)
	}
}

func TestKeyerIdsDependOnTheSecret(t *testing.T) {
	a, b := ids.NewKeyer([]byte("secret a")), ids.NewKeyer([]byte("secret b"))
	id := a.FromKey("sess", "user_1\x00life-1")
	if id != a.FromKey("sess", "user_1\x00life-1") || !ids.Valid("sess", id) {
		t.Fatalf("Keyer.FromKey = %q: not stable or not a valid id", id)
	}
	if id == b.FromKey("sess", "user_1\x00life-1") || id == ids.FromKey("sess", "user_1\x00life-1") {
		t.Fatal("the id can be computed without the secret")
	}
}

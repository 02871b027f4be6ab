package ids_test

import (
	"testing"

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

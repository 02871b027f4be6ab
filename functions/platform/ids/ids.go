// Package ids mints record ids: a short type prefix and a lowercase ULID, so ids say what they
// name, sort by creation time and never collide across processes.
package ids

import (
	"regexp"
	"strings"

	"github.com/oklog/ulid/v2"
)

// New returns "<prefix>_<ulid>", e.g. "task_01jd3…".
func New(prefix string) string {
	return prefix + "_" + strings.ToLower(ulid.Make().String())
}

var shape = regexp.MustCompile(`^[a-z]+_[0-9a-hjkmnp-tv-z]{26}$`)

// Valid reports whether id has the shape New produces with the given prefix. Services check it
// before a lookup so that a malformed id is a clear not_found without a database read.
func Valid(prefix, id string) bool {
	return strings.HasPrefix(id, prefix+"_") && shape.MatchString(id)
}

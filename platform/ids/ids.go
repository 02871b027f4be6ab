// Package ids mints record ids: a short type prefix and a lowercase ULID, so ids say what they
// name, sort by creation time and never collide across processes.
package ids

import (
	"crypto/sha256"
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

// crockford is the alphabet New's ULIDs use, lowercase.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// FromKey returns "<prefix>_<26 chars>" derived from key alone, in New's shape: the id of a
// record that must exist at most once per key (e.g. one run per automation and delivery), so
// that creating it is also the duplicate check.
func FromKey(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('_')
	// 26 characters of 5 bits: 130 bits of the hash, the first character kept below 8 as a
	// ULID's is.
	var acc uint64
	bits := 0
	for i := 0; b.Len() < len(prefix)+1+26; {
		if bits < 5 {
			acc = acc<<8 | uint64(sum[i])
			i++
			bits += 8
		}
		bits -= 5
		c := (acc >> bits) & 31
		if b.Len() == len(prefix)+1 {
			c &= 7
		}
		b.WriteByte(crockford[c])
	}
	return b.String()
}

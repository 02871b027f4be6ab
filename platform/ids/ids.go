// Package ids mints record ids: a short type prefix and a lowercase ULID, so ids say what they
// name, sort by creation time and never collide across processes.
package ids

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/hangar-dev/hangar/platform/apierr"
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
// that creating it is also the duplicate check. Anyone who knows key can compute the id: use it
// only where nobody but Hangar creates records in the collection, and a Keyer where users
// choose ids in it too.
func FromKey(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return encode(prefix, sum[:])
}

// Keyer derives ids like FromKey, but with a deployment secret (HMAC-SHA256), so that knowing
// the key is not enough to compute the id: a user cannot make a record whose id another
// user's record will need, nor predict one from what they can read.
type Keyer struct{ secret []byte }

// NewKeyer returns a Keyer over secret, which must stay the same for ids to stay the same.
func NewKeyer(secret []byte) Keyer { return Keyer{secret: secret} }

// FromKey is the id of key under k's secret, in New's shape.
func (k Keyer) FromKey(prefix, key string) string {
	mac := hmac.New(sha256.New, k.secret)
	mac.Write([]byte(key))
	return encode(prefix, mac.Sum(nil))
}

// encode writes "<prefix>_" and 26 characters of 5 bits: 130 bits of sum, the first character
// kept below 8 as a ULID's is.
func encode(prefix string, sum []byte) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('_')
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

// MaxLen bounds any id a request may name. Hangar's own ids are under 40 characters and the ids
// clients choose (requested session ids, exec and prompt ids) at most 128; Firestore would take
// 1,500 bytes, but nothing needs them.
const MaxLen = 128

// Check answers invalid_argument naming field when id cannot safely name a Firestore document:
// empty, longer than MaxLen, "." or "..", holding a '/' (which would reach into another
// collection, as "../x" does) or a control character, or a "__…__" name, which Firestore
// reserves. Every id a request names passes here before it is used in a document path.
func Check(field, id string) error {
	switch {
	case id == "":
		return apierr.InvalidArgument(field, "is required")
	case len(id) > MaxLen:
		return apierr.InvalidArgument(field, fmt.Sprintf("must be at most %d bytes (is %d)", MaxLen, len(id)))
	case id == "." || id == "..":
		return apierr.InvalidArgument(field, "must not be . or ..")
	case strings.ContainsRune(id, '/'):
		return apierr.InvalidArgument(field, "must not contain '/'")
	case strings.ContainsFunc(id, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }):
		return apierr.InvalidArgument(field, "must be printable UTF-8")
	case strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"):
		return apierr.InvalidArgument(field, "must not be a __reserved__ name")
	}
	return nil
}

// Lookup checks the id of a record a request names before it is read: Check's
// invalid_argument for one that cannot name a document, and not_found (naming the record as
// kind) for one without the shape New gives prefix, so that a malformed id costs no read and
// says nothing about what exists.
func Lookup(field, kind, prefix, id string) error {
	if err := Check(field, id); err != nil {
		return err
	}
	if !Valid(prefix, id) {
		return apierr.NotFound(kind, id)
	}
	return nil
}

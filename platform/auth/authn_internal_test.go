package auth

import (
	"testing"
	"time"

	"github.com/hangar-dev/hangar/platform/clock"
)

// touch logs its failures from a goroutine of its own, where a nil logger would panic the
// process: NewAuthenticator without one logs to slog's default.
func TestAuthenticatorWithoutALoggerStillHasOne(t *testing.T) {
	if a := NewAuthenticator(nil, clock.Real{}, time.Second, nil); a.log == nil {
		t.Fatal("NewAuthenticator(…, nil) keeps a nil logger, which touch would call")
	}
}

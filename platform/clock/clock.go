// Package clock gives services the current time through an interface so tests can fix it, and
// formats timestamps the one way the API shows them: RFC 3339 in UTC with milliseconds.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock.
type Real struct{}

// Now returns the current UTC time.
func (Real) Now() time.Time { return time.Now().UTC() }

// Fake is a clock that moves only when told to.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a clock stopped at t.
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

// Now returns the fake's time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake forward by d.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

// Layout is the API's timestamp layout: RFC 3339, UTC, milliseconds, always the same width so
// strings sort like the instants they name.
const Layout = "2006-01-02T15:04:05.000Z07:00"

// Format renders t in Layout; the zero time renders as "".
func Format(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(Layout)
}

// FormatPtr is Format for optional fields: nil for the zero time.
func FormatPtr(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := Format(t)
	return &s
}

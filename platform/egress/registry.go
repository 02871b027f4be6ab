package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry returns the go-containerregistry options every registry client of Hangar uses: the
// guarded transport. go-containerregistry re-checks every redirect's URL itself (a literal
// private address is refused) and the transport checks the address each hop connects to.
func (p Policy) Registry() []remote.Option {
	return []remote.Option{remote.WithTransport(p.Transport())}
}

// diagnosticCode is the shape of a registry error code (MANIFEST_UNKNOWN, UNAUTHORIZED...);
// anything else a registry sends in that field is not repeated.
var diagnosticCode = regexp.MustCompile(`^[A-Z][A-Z_]{0,39}$`)

// RegistryError describes a registry client's failure in words Hangar chose: the HTTP status and
// the registry's error codes, a refused destination, a name that did not resolve, a connection
// that failed, a deadline. A registry's body, its error messages and the text of a token
// server's answer are never repeated, so a pull cannot read or probe what lies behind an
// address. Errors of Hangar's own checks (not wrapped registry answers) keep their first line.
func RegistryError(err error) error {
	if err == nil {
		return nil
	}
	var refused *RefusedError
	var terr *transport.Error
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &refused):
		return refused
	case errors.As(err, &terr):
		msg := fmt.Sprintf("the registry answered %d %s", terr.StatusCode, http.StatusText(terr.StatusCode))
		var codes []string
		for _, d := range terr.Errors {
			if c := string(d.Code); diagnosticCode.MatchString(c) {
				codes = append(codes, c)
			}
		}
		if len(codes) > 0 {
			msg += " (" + strings.Join(codes, ", ") + ")"
		}
		return &RegistryFailure{msg: msg, err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &RegistryFailure{msg: "the registry did not answer in time", err: err}
	case errors.Is(err, context.Canceled):
		return &RegistryFailure{msg: "the pull was cancelled", err: err}
	case errors.As(err, &dns):
		return &RegistryFailure{msg: fmt.Sprintf("cannot resolve %s", dns.Name), err: err}
	case errors.As(err, &op):
		return &RegistryFailure{msg: fmt.Sprintf("cannot connect to the registry (%s %v)", op.Op, op.Addr), err: err}
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return &RegistryFailure{msg: first, err: err}
}

// RegistryFailure is a registry client's failure described by RegistryError: Error says what
// happened without remote text; Unwrap gives the original, for logs and errors.Is.
type RegistryFailure struct {
	msg string
	err error
}

func (e *RegistryFailure) Error() string { return e.msg }
func (e *RegistryFailure) Unwrap() error { return e.err }

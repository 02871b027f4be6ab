package egress

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// Registry returns the go-containerregistry options every registry client of Hangar uses: the
// guarded transport, with redirects pinned (RegistryTransport). go-containerregistry also
// refuses a redirect to a literal private address of another host itself.
func (p Policy) Registry() []remote.Option {
	return []remote.Option{remote.WithTransport(p.RegistryTransport())}
}

// RegistryTransport is the transport of registry clients: a request goes through the policy,
// but a redirect hop to another host:port than the request the client first sent goes through
// the zero Policy, public addresses only. The allow entries open a registry, not whatever it
// redirects to: a registry on an opened loopback port cannot send a pull on to another port
// (as an emulator's REST API) or host. A public registry's redirects to its CDN still work.
func (p Policy) RegistryTransport() http.RoundTripper {
	return &pinnedRedirects{opened: p.Transport(), public: Policy{host: p.host}.Transport()}
}

type pinnedRedirects struct{ opened, public *http.Transport }

func (t *pinnedRedirects) RoundTrip(req *http.Request) (*http.Response, error) {
	first := req
	for first.Response != nil && first.Response.Request != nil {
		first = first.Response.Request
	}
	if first != req && hostPort(first.URL) != hostPort(req.URL) {
		return t.public.RoundTrip(req)
	}
	return t.opened.RoundTrip(req)
}

// hostPort is u's host and the port a request to it connects to.
func hostPort(u *url.URL) string {
	return net.JoinHostPort(strings.ToLower(u.Hostname()), strconv.Itoa(int(urlPort(u))))
}

// diagnosticCode is the shape of a registry error code (MANIFEST_UNKNOWN, UNAUTHORIZED...);
// anything else a registry sends in that field is not repeated.
var diagnosticCode = regexp.MustCompile(`^[A-Z][A-Z_]{0,39}$`)

// RegistryError describes a registry client's failure in words Hangar chose: the HTTP status and
// the registry's error codes, a refused destination, a name that did not resolve, a connection
// that failed, a deadline, an answer that is not JSON or not a registry's. A registry's body, its
// error messages, the text of a token server's answer and anything a library quotes from them
// (such as the character a JSON decoder choked on) are never repeated, so a pull cannot read or
// probe what lies behind an address. Only errors matching one of own, the caller's own checks of
// what it pulled, keep their first line; anything else is a sentence that says nothing remote.
func RegistryError(err error, own ...error) error {
	if err == nil {
		return nil
	}
	var (
		failure *RegistryFailure
		refused *RefusedError
		terr    *transport.Error
		dns     *net.DNSError
		syntax  *json.SyntaxError
		shape   *json.UnmarshalTypeError
		cert    *tls.CertificateVerificationError
		record  tls.RecordHeaderError
		op      *net.OpError
	)
	var signIn *SignInError
	if errors.As(err, &signIn) {
		first, _, _ := strings.Cut(signIn.Error(), "\n")
		return &RegistryFailure{msg: first, err: err}
	}
	for _, o := range own {
		if errors.Is(err, o) {
			first, _, _ := strings.Cut(err.Error(), "\n")
			return &RegistryFailure{msg: first, err: err}
		}
	}
	msg := "the registry's answer is not an image or artifact Hangar can use"
	switch {
	case errors.As(err, &failure):
		return failure
	case errors.As(err, &refused):
		return refused
	case errors.As(err, &terr):
		msg = fmt.Sprintf("the registry answered %d %s", terr.StatusCode, http.StatusText(terr.StatusCode))
		var codes []string
		for _, d := range terr.Errors {
			if c := string(d.Code); diagnosticCode.MatchString(c) {
				codes = append(codes, c)
			}
		}
		if len(codes) > 0 {
			msg += " (" + strings.Join(codes, ", ") + ")"
		}
	case errors.Is(err, context.DeadlineExceeded):
		msg = "the registry did not answer in time"
	case errors.Is(err, context.Canceled):
		msg = "the pull was cancelled"
	case errors.As(err, &dns):
		msg = fmt.Sprintf("cannot resolve %s", dns.Name)
	case errors.As(err, &syntax):
		msg = "the registry's answer is not valid JSON"
	case errors.As(err, &shape):
		msg = "the registry's answer is JSON of another shape than a registry's"
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the registry's answer ended early"
	case errors.As(err, &cert):
		msg = "the registry's TLS certificate is not trusted"
	case errors.As(err, &record):
		msg = "the registry does not speak TLS"
	case errors.As(err, &op):
		msg = fmt.Sprintf("cannot connect to the registry (%s %v)", op.Op, op.Addr)
	case refusedURL(err) != nil:
		// go-containerregistry's own redirect check refused a hop before the dialer saw it.
		return refusedURL(err)
	case strings.Contains(err.Error(), "error verifying"):
		// go-containerregistry's digest and size checks (internal/verify) have no type of their
		// own; their text carries digests and sizes only, but is not repeated either.
		msg = "the registry's content fails verifying against its digest"
	}
	return &RegistryFailure{msg: msg, err: err}
}

// refusedURL is the refusal, by the public-only dialer that registry redirects off the first
// host:port go through, of a redirect hop whose check failed, or nil.
func refusedURL(err error) *RefusedError {
	var u *url.Error
	if !errors.As(err, &u) || u.Err == nil || !strings.Contains(u.Err.Error(), "redirect") {
		return nil
	}
	target, perr := url.Parse(u.URL)
	if perr != nil {
		return nil
	}
	var refused *RefusedError
	if errors.As(Policy{}.CheckHost(target.Hostname(), urlPort(target)), &refused) {
		return refused
	}
	return nil
}

// SignInError is a registry keychain's failure to get credentials (an identity provider's
// refusal, a credential record it cannot read): its words are Hangar's and the operator's
// identity provider's, never the registry's, so RegistryError reports it as it is.
type SignInError struct{ Err error }

func (e *SignInError) Error() string { return e.Err.Error() }
func (e *SignInError) Unwrap() error { return e.Err }

// RegistryFailure is a registry client's failure described by RegistryError: Error says what
// happened without remote text; Unwrap gives the original, for logs and errors.Is.
type RegistryFailure struct {
	msg string
	err error
}

func (e *RegistryFailure) Error() string { return e.msg }
func (e *RegistryFailure) Unwrap() error { return e.err }

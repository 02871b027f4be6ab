package main

import (
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Exit codes of the client commands, so that scripts can tell failures apart:
//
//	0  success
//	1  any other failure: unavailable, deadline_exceeded, internal, already_exists, ...
//	2  invalid_argument, or a usage error caught before sending (bad flag, argument or value)
//	3  unauthenticated, or no API key to send
//	4  permission_denied
//	5  not_found
const (
	exitInvalidArgument  = 2
	exitUnauthenticated  = 3
	exitPermissionDenied = 4
	exitNotFound         = 5
)

var exitCodes = map[connect.Code]int{
	connect.CodeInvalidArgument:  exitInvalidArgument,
	connect.CodeUnauthenticated:  exitUnauthenticated,
	connect.CodePermissionDenied: exitPermissionDenied,
	connect.CodeNotFound:         exitNotFound,
}

// cliError turns a Connect error into the error main prints after "hangar: " and the exit code
// it exits with: "invalid_argument: name: is required", then one indented line per field
// violation of a google.rpc.BadRequest detail, unless a lone violation is the whole message.
// Other errors pass through unchanged.
func cliError(err error, url string) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	code, ok := exitCodes[ce.Code()]
	if !ok {
		code = 1
	}
	var extra strings.Builder
	if lines := fieldViolations(ce); !(len(lines) == 1 && lines[0] == ce.Message()) {
		for _, l := range lines {
			extra.WriteString("\n  " + l)
		}
	}
	if ce.Code() == connect.CodeUnavailable {
		fmt.Fprintf(&extra, "\n  is Hangar running at %s? (set --url or HANGAR_URL)", url)
	}
	return &exitStatus{code: code, err: fmt.Errorf("%w%s", err, extra.String())}
}

// fieldViolations is "field: description" for each field violation in ce's BadRequest details.
func fieldViolations(ce *connect.Error) []string {
	var lines []string
	for _, d := range ce.Details() {
		v, err := d.Value()
		br, ok := v.(*errdetails.BadRequest)
		if err != nil || !ok {
			continue
		}
		for _, fv := range br.GetFieldViolations() {
			lines = append(lines, fv.GetField()+": "+fv.GetDescription())
		}
	}
	return lines
}

// Package apierr is Hangar's error model: every failure leaves a service as a Connect error with
// the code docs/api.md's "Errors" section names, invalid input names its field in a
// google.rpc.BadRequest detail, and anything unexpected becomes an opaque internal error whose
// cause is logged, never sent.
package apierr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Violations collects invalid fields so a request hears about all of them at once.
type Violations struct {
	list []*errdetails.BadRequest_FieldViolation
}

// Add records that field is invalid, saying why.
func (v *Violations) Add(field, description string) {
	v.list = append(v.list, &errdetails.BadRequest_FieldViolation{Field: field, Description: description})
}

// Addf is Add with a format.
func (v *Violations) Addf(field, format string, args ...any) {
	v.Add(field, fmt.Sprintf(format, args...))
}

// Err returns nil when nothing was added, otherwise an invalid_argument error whose message
// names every field and whose BadRequest detail lists them one by one.
func (v *Violations) Err() error {
	if len(v.list) == 0 {
		return nil
	}
	parts := make([]string, len(v.list))
	for i, fv := range v.list {
		parts[i] = fv.Field + ": " + fv.Description
	}
	err := connect.NewError(connect.CodeInvalidArgument, errors.New(strings.Join(parts, "; ")))
	if d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: v.list}); derr == nil {
		err.AddDetail(d)
	}
	return err
}

// InvalidArgument is a one-field Violations.
func InvalidArgument(field, description string) error {
	var v Violations
	v.Add(field, description)
	return v.Err()
}

// Violation is why err, an invalid_argument error, says field is invalid: the description in its
// BadRequest detail. A caller that set field for its own caller (a task's session gets the
// profile's image as image_uri) reports it under the name that caller knows.
func Violation(err error, field string) (string, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument {
		return "", false
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		br, ok := v.(*errdetails.BadRequest)
		if derr != nil || !ok {
			continue
		}
		for _, fv := range br.GetFieldViolations() {
			if fv.GetField() == field {
				return fv.GetDescription(), true
			}
		}
	}
	return "", false
}

// NotFound says that the kind of record with id does not exist, or is not the caller's to see.
func NotFound(kind, id string) error {
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("%s %q not found", kind, id))
}

// AlreadyExists says a record clashes with an existing one.
func AlreadyExists(format string, args ...any) error {
	return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf(format, args...))
}

// FailedPrecondition says a state move or operation is not allowed in the record's state.
func FailedPrecondition(format string, args ...any) error {
	return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf(format, args...))
}

// Aborted says an expected_version did not match.
func Aborted(format string, args ...any) error {
	return connect.NewError(connect.CodeAborted, fmt.Errorf(format, args...))
}

// ResourceExhausted says a limit was reached.
func ResourceExhausted(format string, args ...any) error {
	return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(format, args...))
}

// PermissionDenied says the caller may not do this.
func PermissionDenied(format string, args ...any) error {
	return connect.NewError(connect.CodePermissionDenied, fmt.Errorf(format, args...))
}

// Unauthenticated is the one answer to a missing, malformed, unknown or revoked key: it says no
// more than that, so a caller cannot probe which keys exist.
func Unauthenticated() error {
	return connect.NewError(connect.CodeUnauthenticated, errors.New("missing or invalid API key"))
}

// Normalize turns any error a handler returns into a Connect error fit to send: Connect errors
// pass through, context and gRPC status errors (from Firestore) keep their meaning, and the rest
// become "internal error", logged with the procedure.
func Normalize(ctx context.Context, log *slog.Logger, procedure string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		// Send the Connect error itself: the context a service wrapped around it is for logs.
		return ce
	}
	switch {
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, errors.New("request canceled"))
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable:
			log.WarnContext(ctx, "backend unavailable", "procedure", procedure, "err", err)
			return connect.NewError(connect.CodeUnavailable, errors.New("backend unavailable, retry later"))
		case codes.DeadlineExceeded:
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded"))
		case codes.Aborted:
			return connect.NewError(connect.CodeAborted, errors.New("concurrent change, retry"))
		}
	}
	log.ErrorContext(ctx, "internal error", "procedure", procedure, "err", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

// Interceptor applies Normalize to every unary and streaming handler, and turns a panic into an
// internal error so that no request can crash the process.
func Interceptor(log *slog.Logger) connect.Interceptor {
	return &interceptor{log: log}
}

type interceptor struct{ log *slog.Logger }

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (resp connect.AnyResponse, err error) {
		defer i.recoverInto(ctx, req.Spec().Procedure, &err)
		resp, err = next(ctx, req)
		return resp, Normalize(ctx, i.log, req.Spec().Procedure, err)
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) (err error) {
		defer i.recoverInto(ctx, conn.Spec().Procedure, &err)
		return Normalize(ctx, i.log, conn.Spec().Procedure, next(ctx, conn))
	}
}

func (i *interceptor) recoverInto(ctx context.Context, procedure string, err *error) {
	if r := recover(); r != nil {
		// The stack is what finds the bug; the caller hears only "internal error".
		i.log.ErrorContext(ctx, "panic in handler", "procedure", procedure, "panic", r, "stack", string(debug.Stack()))
		*err = connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}

// Refusal reports whether err is the API refusing the call for a reason that trying again
// cannot fix: bad input, missing records, states that forbid the call, permissions, clashes,
// methods not built. In-process callers that retry (automation runs, review passes) fail at
// once on these and retry the rest.
func Refusal(err error) bool {
	if err == nil {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition,
		connect.CodePermissionDenied, connect.CodeUnauthenticated, connect.CodeAlreadyExists, connect.CodeUnimplemented:
		return true
	}
	return false
}

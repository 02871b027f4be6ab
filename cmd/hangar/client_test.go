package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	appv1 "github.com/hangar-dev/hangar/gen/svc/app/v1"
	"github.com/hangar-dev/hangar/gen/svc/app/v1/appv1connect"
)

const testKey = "hgr_test_secret"

// fakeAPI serves the task, profile, API key and session services on 127.0.0.1. It records every
// request (each message of a stream) and answers a unary call with the reply set for the
// procedure, or else with an empty response, and a streaming call with its stream handler.
type fakeAPI struct {
	url     string
	mu      sync.Mutex
	calls   []fakeCall
	replies map[string]connect.AnyResponse
	streams map[string]fakeStream
	errs    map[string]error
	hang    bool // wait for the caller to give up instead of answering
}

// fakeStream answers one streaming call: it receives the requests and sends the responses.
type fakeStream func(ctx context.Context, conn connect.StreamingHandlerConn) error

type fakeCall struct {
	procedure string
	header    http.Header
	msg       proto.Message
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	t.Setenv("HANGAR_URL", "")
	t.Setenv("HANGAR_API_KEY", "")
	f := &fakeAPI{replies: map[string]connect.AnyResponse{}, streams: map[string]fakeStream{}, errs: map[string]error{}}
	opt := connect.WithInterceptors(fakeInterceptor{f})
	mux := http.NewServeMux()
	for _, mount := range []func() (string, http.Handler){
		func() (string, http.Handler) {
			return appv1connect.NewTaskServiceHandler(appv1connect.UnimplementedTaskServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewProfileServiceHandler(appv1connect.UnimplementedProfileServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewApiKeyServiceHandler(appv1connect.UnimplementedApiKeyServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewSessionServiceHandler(appv1connect.UnimplementedSessionServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewAutomationServiceHandler(appv1connect.UnimplementedAutomationServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewAutomationRunServiceHandler(appv1connect.UnimplementedAutomationRunServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewOrgSecretServiceHandler(appv1connect.UnimplementedOrgSecretServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewWebhookRegistrationServiceHandler(appv1connect.UnimplementedWebhookRegistrationServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewImageServiceHandler(appv1connect.UnimplementedImageServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewReviewServiceHandler(appv1connect.UnimplementedReviewServiceHandler{}, opt)
		},
		func() (string, http.Handler) {
			return appv1connect.NewFleetServiceHandler(appv1connect.UnimplementedFleetServiceHandler{}, opt)
		},
	} {
		path, h := mount()
		mux.Handle("/rpc"+path, http.StripPrefix("/rpc", h))
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

func (f *fakeAPI) intercept(_ connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		proc := req.Spec().Procedure
		f.mu.Lock()
		f.calls = append(f.calls, fakeCall{proc, req.Header().Clone(), proto.Clone(req.Any().(proto.Message))})
		resp, err, hang := f.replies[proc], f.errs[proc], f.hang
		f.mu.Unlock()
		if hang {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		if resp == nil {
			out := req.Spec().Schema.(protoreflect.MethodDescriptor).Output()
			return connect.NewResponse(dynamicpb.NewMessage(out)), nil
		}
		return resp, nil
	}
}

// fakeInterceptor records and answers the calls to f, unary (see intercept) and streaming.
type fakeInterceptor struct{ f *fakeAPI }

func (i fakeInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return i.f.intercept(next)
}

func (fakeInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler answers with the error or the stream handler set for the procedure, or
// else as the unimplemented service does.
func (i fakeInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		proc := conn.Spec().Procedure
		i.f.mu.Lock()
		handle, err := i.f.streams[proc], i.f.errs[proc]
		i.f.mu.Unlock()
		conn = recordingConn{conn, i.f}
		if err != nil {
			return err
		}
		if handle == nil {
			return next(ctx, conn)
		}
		return handle(ctx, conn)
	}
}

// recordingConn records each message the fake receives on a stream as a call.
type recordingConn struct {
	connect.StreamingHandlerConn
	f *fakeAPI
}

func (c recordingConn) Receive(msg any) error {
	if err := c.StreamingHandlerConn.Receive(msg); err != nil {
		return err
	}
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.calls = append(c.f.calls, fakeCall{c.Spec().Procedure, c.RequestHeader().Clone(), proto.Clone(msg.(proto.Message))})
	return nil
}

// serve makes the fake answer each call of the streaming procedure with handle.
func (f *fakeAPI) serve(procedure string, handle fakeStream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.streams[procedure] = handle
}

// serveStream makes the fake answer each call of the server-streaming procedure with handle,
// which gets the call's request and sends responses with send.
func serveStream[Req, Res any](f *fakeAPI, procedure string, handle func(ctx context.Context, req *Req, send func(*Res) error) error) {
	f.serve(procedure, func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		req := new(Req)
		if err := conn.Receive(req); err != nil {
			return err
		}
		return handle(ctx, req, func(res *Res) error { return conn.Send(res) })
	})
}

// reply makes the fake answer procedure with msg.
func reply[T any](f *fakeAPI, procedure string, msg *T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replies[procedure] = connect.NewResponse(msg)
}

// requests is every request the fake got for procedure, in order: one per unary call, one per
// message of a stream.
func (f *fakeAPI) requests(procedure string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var found []fakeCall
	for _, c := range f.calls {
		if c.procedure == procedure {
			found = append(found, c)
		}
	}
	return found
}

// request is the one request the fake got for procedure.
func (f *fakeAPI) request(t *testing.T, procedure string) fakeCall {
	t.Helper()
	found := f.requests(procedure)
	if len(found) != 1 {
		t.Fatalf("%s was called %d times, want once (calls: %v)", procedure, len(found), f.calls)
	}
	return found[0]
}

// assertRequest checks that procedure got exactly want.
func (f *fakeAPI) assertRequest(t *testing.T, procedure string, want proto.Message) {
	t.Helper()
	if got := f.request(t, procedure).msg; !proto.Equal(got, want) {
		t.Errorf("%s request:\n got: %v\nwant: %v", procedure, prototext.Format(got), prototext.Format(want))
	}
}

type result struct {
	out, errOut string
	code        int
	err         error
}

// msg is what main prints after "hangar: ".
func (r result) msg() string {
	if r.err == nil {
		return ""
	}
	return r.err.Error()
}

// runHangar runs the hangar command line with args as main does, and returns what it printed
// and the exit code main would exit with.
func runHangar(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	r := result{out: out.String(), errOut: errOut.String(), err: err}
	if err != nil {
		r.code = exitCode(err)
	}
	return r
}

// run runs a client command against the fake, with its URL and a key.
func (f *fakeAPI) run(t *testing.T, args ...string) result {
	t.Helper()
	return f.runWithInput(t, "", args...)
}

// runWithInput is run with stdin as standard input.
func (f *fakeAPI) runWithInput(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	// Before any "--": what follows it are arguments, such as the command exec runs.
	dash := slices.Index(args, "--")
	if dash < 0 {
		dash = len(args)
	}
	return runHangar(t, stdin, slices.Concat(args[:dash], []string{"--url", f.url, "--api-key", testKey}, args[dash:])...)
}

// mustRun is run for a command that has to succeed.
func (f *fakeAPI) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := f.run(t, args...)
	if r.err != nil {
		t.Fatalf("hangar %s: exit %d: %v", strings.Join(args, " "), r.code, r.err)
	}
	return r.out
}

// writeTemp writes content to a new file and returns its path.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var spaces = regexp.MustCompile(` {2,}`)

// squash collapses the padding of aligned columns to one space, so "id:     t1" reads "id: t1".
func squash(s string) string { return spaces.ReplaceAllString(s, " ") }

func assertContains(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(squash(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestClientConnection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		wantKey string
	}{
		{name: "flags", args: []string{"--url", "URL", "--api-key", "from-flag"}, wantKey: "from-flag"},
		{name: "env", env: map[string]string{"HANGAR_URL": "URL", "HANGAR_API_KEY": "from-env"}, wantKey: "from-env"},
		{name: "flag beats env", env: map[string]string{"HANGAR_URL": "URL", "HANGAR_API_KEY": "from-env"},
			args: []string{"--api-key", "from-flag"}, wantKey: "from-flag"},
		{name: "trailing slash", args: []string{"--url", "URL/", "--api-key", "k"}, wantKey: "k"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "URL", f.url))
			}
			args := []string{"tasks", "get", "t1"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "URL", f.url))
			}
			if r := runHangar(t, "", args...); r.err != nil {
				t.Fatalf("exit %d: %v", r.code, r.err)
			}
			if got := f.request(t, appv1connect.TaskServiceGetTaskProcedure).header.Get("x-api-key"); got != tc.wantKey {
				t.Errorf("x-api-key = %q, want %q", got, tc.wantKey)
			}
		})
	}
}

func TestClientWithoutKey(t *testing.T) {
	f := newFakeAPI(t)
	r := runHangar(t, "", "tasks", "list", "--url", f.url)
	if r.code != 3 || !strings.Contains(r.msg(), "HANGAR_API_KEY") || !strings.Contains(r.msg(), ".data/admin.key") {
		t.Errorf("exit %d, %q; want 3 and a hint to set HANGAR_API_KEY from .data/admin.key", r.code, r.msg())
	}
	if len(f.calls) != 0 {
		t.Errorf("sent %d requests without a key", len(f.calls))
	}
}

func badRequest(msg string, violations ...string) error {
	err := connect.NewError(connect.CodeInvalidArgument, errors.New(msg))
	br := &errdetails.BadRequest{}
	for _, v := range violations {
		field, desc, _ := strings.Cut(v, ": ")
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{Field: field, Description: desc})
	}
	d, _ := connect.NewErrorDetail(br)
	err.AddDetail(d)
	return err
}

func TestClientServerErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		wantCode int
		wantMsg  string
	}{
		{"invalid argument with violations", badRequest("name: is required; image_id: is required", "name: is required", "image_id: is required"),
			2, "invalid_argument: name: is required; image_id: is required\n  name: is required\n  image_id: is required"},
		{"one violation, said once", badRequest("name: is required", "name: is required"), 2, "invalid_argument: name: is required"},
		{"violation the message does not name", badRequest("bad profile", "env_vars: too many"), 2, "invalid_argument: bad profile\n  env_vars: too many"},
		{"unauthenticated", connect.NewError(connect.CodeUnauthenticated, errors.New("missing or invalid API key")), 3, "unauthenticated: missing or invalid API key"},
		{"permission denied", connect.NewError(connect.CodePermissionDenied, errors.New("admin only")), 4, "permission_denied: admin only"},
		{"not found", connect.NewError(connect.CodeNotFound, errors.New(`profile "p9" not found`)), 5, `not_found: profile "p9" not found`},
		{"already exists", connect.NewError(connect.CodeAlreadyExists, errors.New("taken")), 1, "already_exists: taken"},
		{"internal", connect.NewError(connect.CodeInternal, errors.New("internal error")), 1, "internal: internal error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.errs[appv1connect.ProfileServiceCreateProfileProcedure] = tc.err
			r := f.run(t, "profiles", "create", "--name", "n")
			if r.code != tc.wantCode || r.msg() != tc.wantMsg {
				t.Errorf("got exit %d and\n%s\nwant exit %d and\n%s", r.code, r.msg(), tc.wantCode, tc.wantMsg)
			}
			if r.out != "" {
				t.Errorf("printed %q on failure", r.out)
			}
		})
	}
}

func TestClientTransportErrors(t *testing.T) {
	f := newFakeAPI(t)
	f.hang = true
	r := f.run(t, "tasks", "list", "--timeout", "100ms")
	if r.code != 1 || !strings.HasPrefix(r.msg(), "deadline_exceeded") {
		t.Errorf("timeout: exit %d, %q; want 1, deadline_exceeded", r.code, r.msg())
	}

	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // nothing listens there now
	r = runHangar(t, "", "keys", "list", "--url", srv.URL, "--api-key", "k", "--timeout", "5s")
	if r.code != 1 || !strings.HasPrefix(r.msg(), "unavailable: ") || !strings.Contains(r.msg(), "is Hangar running at "+srv.URL) {
		t.Errorf("server down: exit %d, %q; want 1, unavailable and a hint", r.code, r.msg())
	}
}

func TestClientUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantMsg string
	}{
		{"unknown flag", []string{"tasks", "list", "--bogus"}, "unknown flag: --bogus"},
		{"missing argument", []string{"tasks", "delete"}, "accepts 1 arg(s), received 0"},
		{"extra argument", []string{"profiles", "list", "x"}, `unknown command "x"`},
		{"unknown subcommand", []string{"keys", "mint"}, `unknown command "mint" for "hangar keys"`},
		{"required flag", []string{"tasks", "create"}, `required flag(s) "profile" not set`},
		{"exclusive flags", []string{"tasks", "create", "--profile", "p", "--prompt", "a", "--prompt-file", "-"}, "[prompt prompt-file] were all set"},
		{"task ID and session", []string{"tasks", "get", "t1", "--session", "s1"}, "give a task ID or --session, not both"},
		{"neither task ID nor session", []string{"tasks", "get"}, "give a task ID or --session, not both"},
		{"bad scope", []string{"tasks", "list", "--scope", "everyone"}, `--scope must be one of mine, all, not "everyone"`},
		{"bad order", []string{"tasks", "list", "--order", "random"}, "--order must be one of newest, oldest, updated"},
		{"bad kind", []string{"keys", "create", "--name", "k", "--kind", "robot"}, "--kind must be one of personal, service_account"},
		{"bad network default", []string{"profiles", "create", "--network-default", "maybe"}, "--network-default must be one of allow, deny"},
		{"env without =", []string{"profiles", "create", "--env", "FOO"}, `--env "FOO": want K=V`},
		{"bad app port", []string{"profiles", "create", "--app", "web=http"}, "--app web=http: the port must be a number from 1 to 65535"},
		{"missing file", []string{"profiles", "create", "--from-file", "/nonexistent.json"}, "/nonexistent.json"},
		{"bad JSON", []string{"profiles", "create", "--from-file", "-"}, "--from-file -:"},
		{"bad duration", []string{"tasks", "list", "--timeout", "soon"}, `invalid argument "soon"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t)
			r := f.runWithInput(t, "{not json", tc.args...)
			if r.code != 2 || !strings.Contains(r.msg(), tc.wantMsg) {
				t.Errorf("exit %d, %q; want 2 and %q", r.code, r.msg(), tc.wantMsg)
			}
			if len(f.calls) != 0 {
				t.Errorf("sent %d requests for a bad command line", len(f.calls))
			}
		})
	}
}

// TestClientJSON checks that --json prints the whole response as protojson with snake_case
// names, for a record, a list and a deletion.
func TestClientJSON(t *testing.T) {
	f := newFakeAPI(t)
	reply(f, appv1connect.TaskServiceGetTaskProcedure, &appv1.GetTaskResponse{Task: &appv1.Task{
		Id: "t1", Status: "running", CreatedAt: "2026-01-02T03:04:05Z", ParentTaskId: proto.String("t0"),
	}})
	reply(f, appv1connect.ProfileServiceListProfilesProcedure, &appv1.ListProfilesResponse{Profiles: []*appv1.Profile{
		{Id: "p1", ImageId: "img", EnvVars: map[string]string{"A": "1"}},
	}})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"tasks", "get", "t1"}, `{"task":{"id":"t1","status":"running","created_at":"2026-01-02T03:04:05Z","parent_task_id":"t0"}}`},
		{[]string{"profiles", "list"}, `{"profiles":[{"id":"p1","image_id":"img","env_vars":{"A":"1"}}]}`},
		{[]string{"tasks", "delete", "t1"}, `{}`},
	} {
		out := f.mustRun(t, append(tc.args, "--json")...)
		var got, want any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", tc.args, err, out)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		if !bytes.Equal(gb, wb) {
			t.Errorf("%v --json:\n got: %s\nwant: %s", tc.args, gb, wb)
		}
		if tc.want != "{}" && !strings.Contains(out, "\n  ") {
			t.Errorf("%v --json is not multi-line:\n%s", tc.args, out)
		}
	}
}

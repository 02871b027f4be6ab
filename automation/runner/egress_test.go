package runner_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hangar-dev/hangar/automation/runner"
	"github.com/hangar-dev/hangar/automation/runs"
	"github.com/hangar-dev/hangar/platform/egress"
)

// recorder is a loopback server that remembers the headers of every request reaching it.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newRecorder(t *testing.T, h http.HandlerFunc) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Clone())
		r.mu.Unlock()
		h(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.seen...)
}

func hostPort(t *testing.T, raw string) (string, string) {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), u.Port()
}

// The attack: an http block calls an allow-listed host whose answer redirects elsewhere; the
// client used to follow it anywhere with the block's secret headers and store the answer.
func TestHTTPBlockRedirectsAreCheckedAgainstTheAllowListAndDropSecretsAcrossHosts(t *testing.T) {
	t.Parallel()
	second := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	_, secondPort := hostPort(t, second.URL)
	first := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	for _, tc := range []struct {
		name, to string
		want     runs.Status
		reached  bool
	}{
		// localhost is the same machine as 127.0.0.1 but not on the allow-list.
		{"a host off the allow-list", "http://localhost:" + secondPort + "/", runs.Failed, false},
		{"the metadata server", "http://169.254.169.254/computeMetadata/v1/", runs.Failed, false},
		{"a metadata name", "http://metadata.google.internal/computeMetadata/v1/", runs.Failed, false},
		// Same listed name, other port: another origin, so the secret stays behind.
		{"another port of a listed host", "http://127.0.0.1:" + secondPort + "/", runs.Completed, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rn := f.runner(t, "worker-a")
			before := len(second.requests())
			target := first.URL + "/?to=" + url.QueryEscape(tc.to)
			run := f.start(t, rn, def(t, `[{"id":"call","type":"http","url":"`+target+`",
				"headers":{"X-Custom":"visible"},"secret_headers":{"Authorization":"api_token","X-Api-Key":"api_token"}}]`), `{}`, false)
			if err := rn.Advance(t.Context(), run.ID); err != nil {
				t.Fatal(err)
			}
			got := f.get(t, run.ID)
			if got.Status != tc.want {
				t.Fatalf("run %s (%s), want %s", statuses(got), got.Error, tc.want)
			}
			if tc.want == runs.Failed && !strings.Contains(got.Error, "redirect") {
				t.Fatalf("the error does not say the redirect was refused: %s", got.Error)
			}
			if got.Status == runs.Failed && got.Steps[0].Attempt != 1 {
				t.Fatalf("a refused redirect was retried: %s", statuses(got))
			}
			reqs := second.requests()[before:]
			if reached := len(reqs) > 0; reached != tc.reached {
				t.Fatalf("second server reached = %v, want %v", reached, tc.reached)
			}
			for _, h := range reqs {
				if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" || h.Get("X-Custom") != "" {
					t.Fatalf("the second host got the block's headers: %v", h)
				}
			}
		})
	}
	for _, h := range first.requests() {
		if h.Get("Authorization") != "s3cret" {
			t.Fatalf("the listed host did not get its secret header: %v", h)
		}
	}
}

// Without an operator's egress entry, an allow-listed name or literal that is (or resolves to)
// loopback is refused at connect: no request reaches the server, and the step is not retried.
func TestHTTPBlockCannotReachLoopbackWithoutAnEgressEntry(t *testing.T) {
	t.Parallel()
	srv := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {})
	_, port := hostPort(t, srv.URL)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			f := newFixture(t)
			f.opts.Allow = runner.HostPolicy{Hosts: []string{host}}
			f.opts.Egress = egress.Policy{}
			rn := f.runner(t, "worker-a")
			run := f.start(t, rn, def(t, `[{"id":"call","type":"http","url":"http://`+host+`:`+port+`/"}]`), `{}`, false)
			if err := rn.Advance(t.Context(), run.ID); err != nil {
				t.Fatal(err)
			}
			got := f.get(t, run.ID)
			if statuses(got) != "failed call:failed/1" || !strings.Contains(got.Error, "loopback") {
				t.Fatalf("run %s (%s), want one refused attempt", statuses(got), got.Error)
			}
			if n := len(srv.requests()); n != 0 {
				t.Fatalf("%d requests reached the loopback server", n)
			}
		})
	}
}

package modelrouters

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/egress"
)

// A router's own (operator-configured) loopback host is reachable without an egress entry;
// where its answers redirect is checked again at connect.
func TestRouterFetchReachesItsOwnHostButNoRedirectToMetadata(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved/models" {
			http.Redirect(w, r, "http://169.254.169.254/computeMetadata/v1/", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, `{"data":[{"id":"acme/model-1"}]}`)
	}))
	t.Cleanup(upstream.Close)
	cfg := config.Default()
	cfg.ModelRouters = []config.ModelRouter{{ID: "local", BaseURL: upstream.URL}}
	f := newFetcher(cfg)
	tests := []struct {
		name    string
		base    string
		refused bool
	}{
		{"the configured host", upstream.URL, false},
		{"a redirect to the metadata server", upstream.URL + "/moved", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.fetch(context.Background(), config.ModelRouter{ID: "local", BaseURL: tt.base}, "")
			if got := errors.Is(err, egress.ErrRefused); got != tt.refused {
				t.Fatalf("fetch = %v, want refused %v", err, tt.refused)
			}
			if !tt.refused && err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRouterFetchRefusesLoopbackNoRouterNames(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request reached a loopback server no router names")
	}))
	t.Cleanup(upstream.Close)
	f := newFetcher(config.Default())
	if _, err := f.fetch(context.Background(), config.ModelRouter{ID: "x", BaseURL: upstream.URL}, ""); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("fetch = %v, want refused", err)
	}
}

package composition

import (
	"regexp"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/hangar-dev/hangar/internal/testenv"
	"github.com/hangar-dev/hangar/platform/config"
	"github.com/hangar-dev/hangar/platform/httpapi"
)

// Every route the fully configured API registers, and every service's RPCs, reach the function
// that serves them through the load balancer's path rules (the longest match, as a URL map
// picks), and every push endpoint and the tick are routes of the worker function.
func TestPlainRoutesReachTheirFunctionThroughTheLoadBalancer(t *testing.T) {
	db, _ := testenv.Firestore(t)
	_, sealer := testenv.Keyset(t)
	bucket := memblob.OpenBucket(nil)
	t.Cleanup(func() { _ = bucket.Close() })
	a := New(Deps{DB: db, Config: config.Default(), Sealer: sealer, Bucket: bucket, PubSub: testenv.PubSub(t)})
	d, err := Deploy()
	if err != nil {
		t.Fatal(err)
	}
	fnOf := map[string]string{}
	for _, fn := range Functions() {
		fnOf[fn.Service] = fn.Name()
	}
	wildcard := regexp.MustCompile(`\{[^}]*\}`)
	for pattern, r := range a.routes {
		path := pattern[strings.Index(pattern, "/"):] // "GET /p" or "/p"
		path = wildcard.ReplaceAllString(path, "x")
		if got, want := lbFunction(d, path), fnOf[r.service]; got != want {
			t.Errorf("route %q: the load balancer sends %s to %s, but %s serves it", pattern, path, got, want)
		}
	}
	for name := range a.services {
		path := httpapi.RPCPrefix + "/" + name + "/AnyMethod"
		if got, want := lbFunction(d, path), fnOf[name]; got != want {
			t.Errorf("the load balancer sends %s to %s, want %s", path, got, want)
		}
	}
	worker := map[string]bool{}
	for pattern := range a.worker.Routes() {
		worker[pattern] = true
	}
	for pattern := range a.imageWorker.Routes() {
		worker[pattern] = true
	}
	for name, s := range d.Subscriptions {
		if s.PushPath != "" && !worker["POST "+s.PushPath] {
			t.Errorf("subscription %s pushes to %s, which the worker function does not serve", name, s.PushPath)
		}
	}
	if !worker["POST "+d.TickPath] {
		t.Errorf("the scheduler ticks %s, which the worker function does not serve", d.TickPath)
	}
}

// lbFunction is the function a URL map of d sends path to: the longest matching path rule's,
// or the default's.
func lbFunction(d Deployment, path string) string {
	best, bestLen := d.DefaultFunction, -1
	for _, r := range d.PathRules {
		for _, p := range r.Paths {
			prefix, wild := strings.CutSuffix(p, "*")
			if (wild && strings.HasPrefix(path, prefix) || !wild && path == p) && len(p) > bestLen {
				best, bestLen = r.Function, len(p)
			}
		}
	}
	return best
}

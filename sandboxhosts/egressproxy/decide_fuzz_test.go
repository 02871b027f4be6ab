package egressproxy

import (
	"bufio"
	"bytes"
	"cmp"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hangar-dev/hangar/platform/egress"
)

// Seed corpora are in testdata/fuzz/<target>; `go test` runs them, `make fuzz` looks further.

// FuzzForwarderRequestHead feeds the forwarder's head reader any bytes: it never panics, and a
// head it accepts is one it writes again (framed from what it parsed) as a single head that it
// reads back the same and accepts again, so what the upstream reads is what the proxy decided.
func FuzzForwarderRequestHead(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, code, _ := readHeadOf(raw)
		if code != 0 {
			return
		}
		out := writtenHead(t, req)
		if i := bytes.Index(out, []byte("\r\n\r\n")); i != len(out)-4 {
			t.Fatalf("the head written for %q is not one head: %q", raw, out)
		}
		again, code, msg := readHeadOf(out)
		if code != 0 {
			t.Fatalf("the head written for %q, %q, is refused: %d %s", raw, out, code, msg)
		}
		same := func(what string, a, b any) {
			t.Helper()
			if a != b {
				t.Fatalf("%s: read %v, read back %v (from %q, written %q)", what, a, b, raw, out)
			}
		}
		same("method", req.Method, again.Method)
		same("target", req.URL.RequestURI(), again.URL.RequestURI())
		same("host", cmp.Or(req.Host, "api.example.com"), again.Host)
		same("chunked", chunked(req.TransferEncoding), chunked(again.TransferEncoding))
		same("length", req.ContentLength, again.ContentLength)
		same("trailer", strings.Join(slices.Sorted(maps.Keys(req.Trailer)), ","), strings.Join(slices.Sorted(maps.Keys(again.Trailer)), ","))
		for k, v := range req.Header {
			if framingHeaders[k] {
				continue
			}
			same("header "+k, strings.Join(v, "\x00"), strings.Join(again.Header[k], "\x00"))
		}
		if len(req.Trailer) == 0 {
			if twice := writtenHead(t, again); !bytes.Equal(twice, out) {
				t.Fatalf("written again the head changes: %q, then %q", out, twice)
			}
		}
	})
}

// readHeadOf is readHead over raw, as the forwarder reads a connection.
func readHeadOf(raw []byte) (*http.Request, int, string) {
	lim := &headLimit{r: bytes.NewReader(raw), n: math.MaxInt64}
	return readHead(bufio.NewReaderSize(lim, 16<<10), lim)
}

func writtenHead(t *testing.T, req *http.Request) []byte {
	t.Helper()
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	if err := writeRequestHead(bw, req, "api.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// decisionRules list some names, an address of each family, a pattern, and entries no host
// name may match however they are listed (decide refuses those hosts before the rules).
var decisionRules = Rules{
	AllowHosts:        []string{"api.example.com", "plain.example.com:80", "93.184.216.34", "[2606:2800:220:1::1]:443", "a!b.example.com", "2130706433", "::1"},
	AllowHostPatterns: []string{"*.cdn.example.com"},
}

// listed is the policy above, written apart from matchHost: whether the normal host h on port
// is one it allows.
func listed(h string, port int) bool {
	switch h {
	case "api.example.com", "93.184.216.34":
		return true
	case "plain.example.com":
		return port == 80
	case "2606:2800:220:1::1":
		return port == 443
	}
	label, ok := strings.CutSuffix(h, ".cdn.example.com")
	return ok && label != "" && !strings.Contains(label, ".")
}

// FuzzDecisionOnHostileHostNames decides any host and port as every entry path does: it never
// panics, never allows what the policy does not list (nor a special address it does, such as
// ::1), and decides every spelling of one host (case, a trailing dot, brackets around IPv6,
// its normal form) the same.
func FuzzDecisionOnHostileHostNames(f *testing.F) {
	sb := &Sandbox{p: mustNew(f, Options{}), sess: Session{Rules: decisionRules}}
	f.Fuzz(func(t *testing.T, host string, port int) {
		d := sb.decide(host, port)
		h, err := egress.DestinationHost(host)
		if err != nil {
			if d.allowed || !strings.HasPrefix(d.rule, "bad host ") {
				t.Fatalf("%q is no host, yet decided %+v", host, d)
			}
			return
		}
		if again, err := egress.DestinationHost(h); err != nil || again != h {
			t.Fatalf("%q's normal form %q normalizes to %q, %v", host, h, again, err)
		}
		if strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789.-_:") != "" {
			t.Fatalf("%q's normal form %q holds more than a host name or an address", host, h)
		}
		if d.allowed && (d.host != h || !listed(h, port)) {
			t.Fatalf("%q:%d allowed as %q (%s), which the policy does not list", host, port, d.host, d.rule)
		}
		spellings := []string{h, strings.ToUpper(host)}
		if strings.Contains(h, ":") {
			spellings = append(spellings, "["+h+"]")
		} else if !strings.HasSuffix(host, ".") && strings.Trim(h, "0123456789.") != "" {
			spellings = append(spellings, host+".")
		}
		for _, s := range spellings {
			if other := sb.decide(s, port); other != d {
				t.Fatalf("%q decided %+v, its spelling %q %+v", host, d, s, other)
			}
		}
	})
}

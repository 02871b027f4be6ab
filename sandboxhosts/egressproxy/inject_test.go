package egressproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// slotSandbox is a sandbox (not served) whose session has the secret key (for
// api.example.com, in the API-key slots and the query parameter "key").
func slotSandbox() *Sandbox {
	return &Sandbox{context: context.Background(), sess: Session{ID: "s", Secrets: []Secret{{
		Name: "key", Placeholder: placeholder, Value: realKey, AllowHosts: []string{"api.example.com"},
		Slots: append([]Slot{{Query: "key"}}, APIKeySlots...),
	}}}}
}

var apiTarget = &target{host: "api.example.com", port: 443, scheme: "https", mode: "intercepted"}

func basic(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

func TestInjectPutsAValueOnlyInItsSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		url    string
		header http.Header
		t      *target
		// wantRefused is a word the refusal's rule has ("" : the request goes out); want is a
		// header or the query as the upstream gets it.
		wantRefused string
		wantHeader  string
		want        string
	}{
		{"bearer", "/v1", http.Header{"Authorization": {"Bearer " + placeholder}}, apiTarget, "", "Authorization", "Bearer " + realKey},
		{"x-api-key", "/v1", http.Header{"X-Api-Key": {placeholder}}, apiTarget, "", "X-Api-Key", realKey},
		{"basic password", "/v1", http.Header{"Authorization": {basic("x-access-token", placeholder)}}, apiTarget, "", "Authorization", basic("x-access-token", realKey)},
		{"the declared query parameter", "/v1?a=1&key=" + placeholder, nil, apiTarget, "", "", "a=1&key=" + url.QueryEscape(realKey)},
		{"no placeholder", "/v1", http.Header{"X-Other": {"x"}}, apiTarget, "", "X-Other", "x"},
		{"an undeclared header", "/v1", http.Header{"X-Debug": {placeholder}}, apiTarget, "outside its slot", "", ""},
		{"the slot's header and an undeclared one", "/v1", http.Header{"Authorization": {"Bearer " + placeholder}, "X-Debug": {"echo " + placeholder}}, apiTarget, "outside its slot", "", ""},
		{"the slot's header with more than the placeholder", "/v1", http.Header{"Authorization": {"Bearer " + placeholder + " tail"}}, apiTarget, "outside its slot", "", ""},
		{"an undeclared query parameter", "/v1?q=" + placeholder, nil, apiTarget, "outside its slot (query)", "", ""},
		{"the path", "/v1/" + placeholder, nil, apiTarget, "outside its slot (path)", "", ""},
		{"basic credentials in an undeclared header", "/v1", http.Header{"X-Auth": {basic("u", placeholder)}}, apiTarget, "outside its slot", "", ""},
		{"plain http", "/v1", http.Header{"Authorization": {"Bearer " + placeholder}}, &target{host: "api.example.com", port: 443, scheme: "http"}, "over plain http", "", ""},
		{"another host", "/v1", http.Header{"Authorization": {"Bearer " + placeholder}}, &target{host: "evil.example.com", port: 443, scheme: "https"}, "may not go to", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "https://api.example.com"+tc.url, nil)
			r.Header = tc.header.Clone()
			if r.Header == nil {
				r.Header = http.Header{}
			}
			before := r.Header.Clone()
			inj, ref := slotSandbox().inject(r, tc.t)
			if tc.wantRefused != "" {
				if ref == nil || !strings.Contains(ref.rule, tc.wantRefused) || ref.secret != "key" {
					t.Fatalf("refusal %+v, want one for secret key saying %q", ref, tc.wantRefused)
				}
				for k := range before {
					if r.Header.Get(k) != before.Get(k) {
						t.Fatalf("a refused request was changed: %s: %q", k, r.Header.Get(k))
					}
				}
				return
			}
			if ref != nil {
				t.Fatalf("refused: %+v", ref)
			}
			got := r.URL.RawQuery
			if tc.wantHeader != "" {
				got = r.Header.Get(tc.wantHeader)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if inj.scrub == nil || r.Header.Get("Accept-Encoding") != "identity" {
				t.Fatal("a request to a secret's host must have its answer scrubbed, unencoded")
			}
		})
	}
}

func TestScrubReplacesEveryFormOfAValue(t *testing.T) {
	s := newScrubber([]form{{real: "sk-real", placeholder: "PH"}, {real: "c2stcmVhbA==", placeholder: "UEg="}}, []string{"a", "a"})
	for _, tc := range []struct{ in, want string }{
		{"no secret", "no secret"},
		{"key sk-real!", "key PH!"},
		{"sk-realsk-real", "PHPH"},
		{"Basic c2stcmVhbA==", "Basic UEg="},
		{"sk-rea", "sk-rea"},
	} {
		if got := scrubAll(t, s, tc.in, 1); got != tc.want {
			t.Errorf("scrub(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := s.scrubbed(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("scrubbed %v, want [a]", got)
	}
}

// scrubAll reads in through a scrubReader that gets it step bytes at a time.
func scrubAll(t testing.TB, s *scrubber, in string, step int) string {
	r := &scrubReader{s: s, src: io.NopCloser(&stepReader{b: []byte(in), step: step})}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// stepReader hands out at most step bytes a read.
type stepReader struct {
	b    []byte
	step int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// A held tail is only what could still become a value: the end of an event goes on at once.
func TestScrubHoldsOnlyWhatCouldBeAValue(t *testing.T) {
	s := newScrubber([]form{{real: "sk-real", placeholder: "PH"}}, []string{"a"})
	out, rest := s.replace(nil, []byte("data: x\n\n"), false)
	if string(out) != "data: x\n\n" || len(rest) != 0 {
		t.Fatalf("out %q, held %q", out, rest)
	}
	out, rest = s.replace(nil, []byte("data: sk-re"), false)
	if string(out) != "data: " || string(rest) != "sk-re" {
		t.Fatalf("out %q, held %q", out, rest)
	}
}

func TestRewriteKeepsTheBracketsOfIPv6Literals(t *testing.T) {
	for _, tc := range []struct {
		t    target
		want string
	}{
		{target{host: "2001:db8::1", port: 443, scheme: "https"}, "[2001:db8::1]"},
		{target{host: "2001:db8::1", port: 80, scheme: "http"}, "[2001:db8::1]"},
		{target{host: "2001:db8::1", port: 8080, scheme: "http"}, "[2001:db8::1]:8080"},
		{target{host: "example.com", port: 443, scheme: "https"}, "example.com"},
	} {
		in := httptest.NewRequest("GET", "http://x/", nil)
		in = in.WithContext(context.WithValue(in.Context(), targetKey{}, &exchange{t: &tc.t}))
		pr := &httputil.ProxyRequest{In: in, Out: in.Clone(in.Context())}
		rewrite(pr)
		if pr.Out.URL.Host != tc.want {
			t.Errorf("%+v: URL host %q, want %q", tc.t, pr.Out.URL.Host, tc.want)
		}
	}
}

// FuzzScrub: however a body containing values is cut into reads, what the sandbox reads never
// holds a value and is what one whole replace makes of it.
func FuzzScrub(f *testing.F) {
	f.Add([]byte("abc sk-live-123 def sk-live-123sk-live-12"), "sk-live-123", uint8(3))
	f.Add([]byte("sk-sk-sk-live"), "sk-live", uint8(1))
	f.Fuzz(func(t *testing.T, body []byte, value string, step uint8) {
		const ph = "hangar-placeholder-0123456789abcdef"
		if value == "" || strings.ContainsAny(value, ph) || len(value) > 256 {
			t.Skip() // a value sharing bytes with its placeholder can be remade from them
		}
		enc := base64.StdEncoding.EncodeToString([]byte("x:" + value))
		encPH := base64.StdEncoding.EncodeToString([]byte("x:" + ph))
		forms := []form{{real: value, placeholder: ph}, {real: enc, placeholder: encPH}}
		s := newScrubber(forms, []string{"v", "v"})
		var pairs []string
		for _, fm := range s.forms {
			pairs = append(pairs, fm.real, fm.placeholder)
		}
		in := string(body) + value + string(body)
		got := scrubAll(t, s, in, int(step%64)+1)
		if want := strings.NewReplacer(pairs...).Replace(in); got != want {
			t.Fatalf("scrubbed %q to %q, want %q", in, got, want)
		}
		if strings.Contains(got, value) {
			t.Fatalf("%q still holds the value %q", got, value)
		}
	})
}

// FuzzInject: whatever a request carries, the value goes nowhere but the declared slot, and a
// request that carries the placeholder elsewhere is refused unchanged.
func FuzzInject(f *testing.F) {
	f.Add("/v1", "X-Debug", "echo "+placeholder, "Bearer "+placeholder, "a=1")
	f.Add("/v1/"+placeholder, "X-Api-Key", placeholder, "", "key="+placeholder)
	f.Fuzz(func(t *testing.T, path, name, value, auth, query string) {
		r, err := http.NewRequest("GET", "https://api.example.com/", nil)
		if err != nil || !strings.HasPrefix(path, "/") {
			t.Skip()
		}
		r.URL.Path, r.URL.RawQuery = path, query
		if name = http.CanonicalHeaderKey(name); name != "" && name != "Authorization" && name != "X-Api-Key" {
			r.Header.Set(name, value)
		}
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		sb := &Sandbox{context: context.Background(), sess: Session{Secrets: []Secret{{
			Name: "key", Placeholder: placeholder, Value: realKey, AllowHosts: []string{"api.example.com"}, Slots: []Slot{BearerSlot},
		}}}}
		if strings.Contains(path+name+value+auth+query, realKey) {
			t.Skip()
		}
		before := r.Clone(context.Background())
		_, ref := sb.inject(r, apiTarget)
		var dump bytes.Buffer
		_ = r.Header.Write(&dump)
		dump.WriteString(r.URL.String())
		if ref != nil {
			if r.URL.String() != before.URL.String() || strings.Contains(dump.String(), realKey) {
				t.Fatalf("a refused request was changed: %s", dump.String())
			}
			return
		}
		r.Header.Del("Authorization")
		dump.Reset()
		_ = r.Header.Write(&dump)
		dump.WriteString(r.URL.String())
		if strings.Contains(dump.String(), realKey) {
			t.Fatalf("the value went outside Authorization: %s", dump.String())
		}
	})
}

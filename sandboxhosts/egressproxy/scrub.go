package egressproxy

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// What a host a secret may go to answers is scrubbed before the sandbox reads it: every value
// of the host's secrets (and the forms a value took in a request: a Basic credential's
// encoding, an escaped query value) is replaced by its placeholder, in the status line, the
// headers (Location too), the body and its trailer. A host that echoes a credential it got,
// now or from an earlier request, echoes the placeholder.
//
// A body is scrubbed as it streams: bytes that could begin a value are held until the next
// read tells (at most the longest value's length less one), all others go on at once, so an
// event stream is not delayed. Bodies are scrubbed only unencoded: requests to these hosts ask
// for identity encoding, and an answer encoded all the same is refused (502), since a value in
// a compressed body cannot be seen. A scrubbed body changes length, so it goes chunked (or, to
// an HTTP/1.0 client, to the connection's close) rather than with its Content-Length.

// form is one shape a secret's value takes, beside the shape its placeholder takes there.
type form struct {
	real, placeholder string
}

// maxFormsPerSecret bounds the forms a sandbox keeps of one secret (the newest are kept): a
// refreshed OAuth token is a new value, and a new Basic user a new encoding.
const maxFormsPerSecret = 8

// seenForms are the forms secrets' values took in a sandbox's requests, by secret name.
type seenForms struct {
	mu sync.Mutex
	m  map[string][]form
}

func (f *seenForms) add(s Secret, fm form) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string][]form{}
	}
	list := f.m[s.Name]
	if slices.Contains(list, fm) {
		return
	}
	if len(list) >= maxFormsPerSecret {
		list = list[1:]
	}
	f.m[s.Name] = append(slices.Clip(list), fm)
}

func (f *seenForms) of(name string) []form {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.m[name])
}

// scrubberFor is the scrubber of answers from host:port, or nil when no secret may go there.
func (sb *Sandbox) scrubberFor(host string, port int) *scrubber {
	var forms []form
	var names []string
	for _, s := range sb.sess.Secrets {
		if s.Placeholder == "" || !s.Allows(host, port) {
			continue
		}
		if s.Current == nil && s.Value != "" {
			forms, names = append(forms, form{real: s.Value, placeholder: s.Placeholder}), append(names, s.Name)
		}
		for _, f := range sb.forms.of(s.Name) {
			forms, names = append(forms, f), append(names, s.Name)
		}
	}
	if len(forms) == 0 {
		return nil
	}
	return newScrubber(forms, names)
}

// scrubber replaces secrets' values by their placeholders in one answer.
type scrubber struct {
	// forms are longest first, so that a value inside another's encoding loses to it; names[i]
	// is the secret of forms[i].
	forms  []form
	names  []string
	maxLen int
	mu     sync.Mutex
	hits   map[string]bool
}

func newScrubber(forms []form, names []string) *scrubber {
	s := &scrubber{hits: map[string]bool{}}
	idx := make([]int, 0, len(forms))
	for i, f := range forms {
		if f.real != "" && !slices.ContainsFunc(idx, func(j int) bool { return forms[j].real == f.real }) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return len(forms[b].real) - len(forms[a].real) })
	for _, i := range idx {
		s.forms, s.names = append(s.forms, forms[i]), append(s.names, names[i])
		s.maxLen = max(s.maxLen, len(forms[i].real))
	}
	return s
}

// scrubbed names the secrets whose values were replaced so far.
func (s *scrubber) scrubbed() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.hits {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// replace scrubs buf, appending to dst: all of it when final, else all but the bytes from the
// first position whose rest could still become a value, which it returns as rest. Matches are
// taken leftmost, and at one position in forms' order, as strings.Replacer takes them.
func (s *scrubber) replace(dst, buf []byte, final bool) (out, rest []byte) {
	// next[k] is where forms[k] next occurs at or after cur (-1: nowhere), found once.
	next := make([]int, len(s.forms))
	for k := range next {
		next[k] = -2
	}
	cur := 0
	for {
		hold := len(buf)
		if !final {
			hold = s.pending(buf, cur)
		}
		best, at := -1, hold
		for k, f := range s.forms {
			if next[k] == -2 || (next[k] >= 0 && next[k] < cur) {
				next[k] = -1
				if i := bytes.Index(buf[cur:], []byte(f.real)); i >= 0 {
					next[k] = cur + i
				}
			}
			if next[k] >= 0 && next[k] < at {
				best, at = k, next[k]
			}
		}
		if best < 0 {
			return append(dst, buf[cur:hold]...), buf[hold:]
		}
		dst = append(append(dst, buf[cur:at]...), s.forms[best].placeholder...)
		cur = at + len(s.forms[best].real)
		s.mu.Lock()
		s.hits[s.names[best]] = true
		s.mu.Unlock()
	}
}

// pending is the first position at or after cur from which buf's rest is a proper prefix of
// some form (len(buf) when none is).
func (s *scrubber) pending(buf []byte, cur int) int {
	for p := max(cur, len(buf)-(s.maxLen-1)); p < len(buf); p++ {
		for _, f := range s.forms {
			if len(f.real) > len(buf)-p && strings.HasPrefix(f.real, string(buf[p:])) {
				return p
			}
		}
	}
	return len(buf)
}

// string is v scrubbed.
func (s *scrubber) string(v string) string {
	out, _ := s.replace(nil, []byte(v), true)
	return string(out)
}

// header scrubs h's names and values in place.
func (s *scrubber) header(h http.Header) {
	for k, vs := range h {
		for i, v := range vs {
			vs[i] = s.string(v)
		}
		if nk := s.string(k); nk != k {
			delete(h, k)
			h[nk] = append(h[nk], vs...)
		}
	}
}

// answer scrubs an answer's status and headers, and its body as it is read (its trailer once
// the body is done).
func (s *scrubber) answer(resp *http.Response) {
	resp.Status = s.string(resp.Status)
	s.header(resp.Header)
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &scrubReader{s: s, src: resp.Body, trailer: resp}
	}
}

// encoded reports whether resp's body is in an encoding a value could hide in.
func encoded(resp *http.Response) bool {
	ce := strings.TrimSpace(resp.Header.Get("Content-Encoding"))
	return ce != "" && !strings.EqualFold(ce, "identity")
}

// scrubReader is a body with every value of its scrubber replaced.
type scrubReader struct {
	s       *scrubber
	src     io.ReadCloser
	trailer *http.Response
	buf     []byte
	// held are bytes read but not yet decided; out are decided bytes not yet handed out.
	held, out []byte
	err       error
}

// scrubReadSize is how much of the source one read asks for.
const scrubReadSize = 32 << 10

func (r *scrubReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.buf == nil {
			r.buf = make([]byte, scrubReadSize)
		}
		n, err := r.src.Read(r.buf)
		r.held = append(r.held, r.buf[:n]...)
		var rest []byte
		r.out, rest = r.s.replace(r.out[:0], r.held, err != nil)
		r.held = append(r.held[:0], rest...)
		if err != nil {
			r.err = err
			if err == io.EOF && r.trailer != nil {
				r.s.header(r.trailer.Trailer)
			}
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

func (r *scrubReader) Close() error { return r.src.Close() }

package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hangar-dev/hangar/platform/egress"
)

// HostPolicy is the allow-list of hosts http blocks may call: exact names or "*.suffix"
// patterns. Cloud metadata servers and link-local addresses are refused whatever the list says;
// where a listed name resolves is the egress policy's to check, at connect.
type HostPolicy struct {
	Hosts []string
}

// Allows reports whether a request to host (no port) may go out, on the first URL and on every
// redirect. Its errors match egress.ErrRefused, so a refused host fails the step at once.
func (p HostPolicy) Allows(host string) error {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if egress.IsMetadataHost(host) {
		return &refusedHost{host, "is a link-local or cloud metadata address"}
	}
	for _, h := range p.Hosts {
		h = strings.ToLower(h)
		if suffix, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+suffix) || h == host {
			return nil
		}
	}
	return &refusedHost{host, "is not on the deployment's allow-list for http blocks (HANGAR_AUTOMATION_HTTP_HOSTS)"}
}

// refusedHost is a host an http block may not call.
type refusedHost struct{ host, why string }

func (e *refusedHost) Error() string        { return "host " + e.host + " " + e.why }
func (e *refusedHost) Is(target error) bool { return target == egress.ErrRefused }

// maxHTTPResponse caps the body an http block reads.
const maxHTTPResponse = 1 << 20

// httpBlock sends the block's request, with the secret headers actor may use. A network error, a 429 or a 5xx is retried; any other
// unexpected status fails the step.
func (r *Runner) httpBlock(ctx context.Context, actor string, f map[string]any) (result, error) {
	method := strings.ToUpper(str(f, "method"))
	if method == "" {
		method = http.MethodGet
	}
	u, err := url.Parse(str(f, "url"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return result{}, permanent("url: %q is not an http(s) URL", str(f, "url"))
	}
	if err := r.opts.Allow.Allows(u.Hostname()); err != nil {
		return result{}, permanent("url: %v", err)
	}
	if q, ok := f["query"].(map[string]any); ok {
		v := u.Query()
		for k, x := range q {
			v.Set(k, fmt.Sprint(x))
		}
		u.RawQuery = v.Encode()
	}
	var body io.Reader
	contentType := ""
	switch b := f["body"].(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return result{}, permanent("body: %v", err)
		}
		body, contentType = bytes.NewReader(js), "application/json"
	}
	timeout := 30 * time.Second
	if d, ok := durationField(f, "timeout"); ok {
		timeout = min(d, 60*time.Second)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return result{}, permanent("request: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if hs, ok := f["headers"].(map[string]any); ok {
		for k, v := range hs {
			req.Header.Set(k, fmt.Sprint(v))
		}
	}
	// redact takes the secrets' values out of what the run record keeps of the answer: a host
	// that echoes a header it got (an error page, an echo API) would put one there in clear.
	var redact []string
	if secrets, ok := f["secret_headers"].(map[string]any); ok {
		for header, name := range secrets {
			if r.effects == nil {
				return result{}, permanent("secret_headers: no secret store is configured here")
			}
			value, err := r.effects.Secret(ctx, actor, fmt.Sprint(name))
			if err != nil {
				return result{}, effectError("secret_headers."+header, err)
			}
			req.Header.Set(header, value)
			if value != "" {
				redact = append(redact, value, "[secret "+fmt.Sprint(name)+"]")
			}
		}
	}
	resp, err := r.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if errors.Is(err, egress.ErrRefused) {
			return result{}, permanent("%s %s: %v", method, u.Redacted(), err)
		}
		return result{}, transient("%s %s: %v", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPResponse+1))
	if err != nil {
		return result{}, transient("%s %s: read answer: %v", method, u.Redacted(), err)
	}
	if len(raw) > maxHTTPResponse {
		return result{}, permanent("%s %s: the answer is over %d bytes", method, u.Redacted(), maxHTTPResponse)
	}
	headers := flatHeaders(resp.Header)
	if len(redact) > 0 {
		rp := strings.NewReplacer(redact...)
		raw = []byte(rp.Replace(string(raw)))
		for k, v := range headers {
			delete(headers, k)
			headers[rp.Replace(k)] = rp.Replace(v.(string))
		}
	}
	out := map[string]any{"status": resp.StatusCode, "headers": headers, "body": answerBody(raw, resp.Header)}
	if !expected(resp.StatusCode, f["expect_status"]) {
		msg := fmt.Sprintf("%s %s answered %d", method, u.Redacted(), resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
			return result{}, transient("%s", msg)
		}
		return result{}, permanent("%s", msg)
	}
	return result{outputs: out}, nil
}

// expected reports whether status is one the block accepts: expect_status when given, else 2xx.
func expected(status int, want any) bool {
	list, ok := want.([]any)
	if !ok || len(list) == 0 {
		return status >= 200 && status < 300
	}
	return slices.ContainsFunc(list, func(v any) bool {
		n, err := strconv.Atoi(fmt.Sprint(v))
		return err == nil && n == status
	})
}

func flatHeaders(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return out
}

// answerBody is a JSON answer decoded, anything else as text.
func answerBody(raw []byte, h http.Header) any {
	if strings.Contains(h.Get("Content-Type"), "json") {
		if v := decodeJSON(string(raw)); v != nil {
			return v
		}
	}
	return string(raw)
}

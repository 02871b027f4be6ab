package egressproxy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// A secret's value goes only where its credential is read: one of its Slots, of a request over
// TLS to one of its hosts. Anywhere else a placeholder would be an echo waiting to happen (an
// error page that quotes a header, a redirect that keeps the query, an API that echoes what it
// got), so a request that carries a placeholder anywhere but a slot, or over plain HTTP, is
// refused rather than sent with the placeholder: the refusal is audited and says why, where a
// request sent on would fail upstream for a reason the agent cannot see. Whatever a host answers
// still has every secret's value of that host replaced by its placeholder (scrub.go).

// Slot is one place of a request a secret's credential is read from.
type Slot struct {
	// Header is the header whose value is the placeholder; with Scheme, the credentials after
	// the scheme ("Authorization: Bearer <placeholder>"). Scheme "Basic" takes the placeholder as
	// the user or the password of the decoded credentials (git sends its token there).
	Header string
	Scheme string
	// Query is the query parameter whose value is the placeholder (Header is then empty).
	Query string
}

// Slots of the usual kinds of credential.
var (
	// BearerSlot is an OAuth access token's or a model router's key's.
	BearerSlot = Slot{Header: "Authorization", Scheme: "Bearer"}
	// BasicSlot is a git host's token, as git sends it.
	BasicSlot = Slot{Header: "Authorization", Scheme: "Basic"}
	// APIKeySlots are where an API key a profile holds is read by the APIs agents use: a bearer
	// token, GitHub's "token" scheme, Basic credentials (git), or x-api-key (Anthropic).
	APIKeySlots = []Slot{BearerSlot, {Header: "Authorization", Scheme: "token"}, BasicSlot, {Header: "X-Api-Key"}}
)

func (s Slot) String() string {
	switch {
	case s.Query != "":
		return "query parameter " + s.Query
	case s.Scheme != "":
		return "header " + s.Header + ": " + s.Scheme
	}
	return "header " + s.Header
}

// refusal is why a request is not sent on: what the sandbox is answered and what is audited.
type refusal struct {
	// secret names the secret whose placeholder the request carries ("" for a secret that
	// could not be had).
	secret, rule, msg, err string
}

// injection is what inject did to a request.
type injection struct {
	// injected names the secrets whose values went in.
	injected []string
	// scrub replaces, in the answer, the values of the secrets of the request's host.
	scrub *scrubber
}

// inject decides a request bound for t as both entry paths (serveRequest and the intercepted
// connection's forwarder) do: each secret whose placeholder it carries must be allowed to t's
// host, the request must go over TLS, and the placeholder must be only in the secret's slots,
// where its value is then put; any failure refuses the request and changes nothing. Answers
// from a host some secret may go to are asked for unencoded, so that they can be scrubbed.
func (sb *Sandbox) inject(r *http.Request, t *target) (injection, *refusal) {
	var carried []Secret
	for _, s := range sb.sess.Secrets {
		if s.Placeholder == "" {
			continue
		}
		where := outsideSlots(r, s)
		inSlot := slotted(r, s)
		if where == "" && !inSlot {
			continue
		}
		switch {
		case !s.Allows(t.host, t.port):
			return injection{}, &refusal{secret: s.Name, rule: "placeholder of secret " + s.Name + " sent to a host it may not go to",
				msg: fmt.Sprintf("the request to %s carries the placeholder of secret %q, which may not go to this host", t.host, s.Name)}
		case t.scheme != "https":
			return injection{}, &refusal{secret: s.Name, rule: "placeholder of secret " + s.Name + " sent over plain http",
				msg: fmt.Sprintf("the request to %s carries the placeholder of secret %q over plain http: secrets go only over https", t.host, s.Name)}
		case where != "":
			return injection{}, &refusal{secret: s.Name, rule: "placeholder of secret " + s.Name + " outside its slot (" + where + ")",
				msg: fmt.Sprintf("the request to %s carries the placeholder of secret %q in its %s; it goes only in %s", t.host, s.Name, where, slotList(s.Slots))}
		}
		carried = append(carried, s)
	}
	var inj injection
	if len(carried) > 0 {
		values, ref := sb.values(carried)
		if ref != nil {
			return injection{}, ref
		}
		for i, s := range carried {
			for _, f := range fill(r, s, values[i]) {
				sb.forms.add(s, f)
			}
			inj.injected = append(inj.injected, s.Name)
		}
	}
	if inj.scrub = sb.scrubberFor(t.host, t.port); inj.scrub != nil {
		r.Header.Set("Accept-Encoding", "identity")
	}
	return inj, nil
}

// values are the current values of secrets, or why one cannot be had.
func (sb *Sandbox) values(secrets []Secret) ([]string, *refusal) {
	// Not the request's context: clients such as busybox wget shut their write side after the
	// request, which cancels it. Only a value asked for (Current) waits.
	ctx := sb.ctx()
	for _, s := range secrets {
		if s.Current != nil {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, secretValueTimeout)
			defer cancel()
			break
		}
	}
	values := make([]string, len(secrets))
	for i, s := range secrets {
		v, err := s.value(ctx)
		if err != nil {
			msg := fmt.Sprintf("secret %q is not available: %v", s.Name, err)
			return nil, &refusal{rule: "secret unavailable", msg: msg, err: msg}
		}
		values[i] = v
	}
	return values, nil
}

func slotList(slots []Slot) string {
	if len(slots) == 0 {
		return "no slot: it is declared nowhere"
	}
	var b strings.Builder
	for i, s := range slots {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// slotValue reports whether v, a value of a header that is slot's, holds exactly the placeholder
// where slot says; for Basic it returns the decoded credentials.
func slotValue(slot Slot, v, placeholder string) (creds string, ok bool) {
	v = strings.TrimSpace(v)
	if slot.Scheme == "" {
		return "", v == placeholder
	}
	scheme, rest, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, slot.Scheme) {
		return "", false
	}
	rest = strings.TrimSpace(rest)
	if !strings.EqualFold(slot.Scheme, "Basic") {
		return "", rest == placeholder
	}
	dec, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return "", false
	}
	user, pass, _ := strings.Cut(string(dec), ":")
	return string(dec), user == placeholder || pass == placeholder
}

// headerSlot is the slot of s that header value v of name fills, if any.
func headerSlot(s Secret, name, v string) (Slot, string, bool) {
	for _, slot := range s.Slots {
		if slot.Header == "" || http.CanonicalHeaderKey(slot.Header) != name {
			continue
		}
		if creds, ok := slotValue(slot, v, s.Placeholder); ok {
			return slot, creds, true
		}
	}
	return Slot{}, "", false
}

// queryParams splits a raw query into its parameters as they are on the wire.
func queryParams(raw string) []string {
	if raw == "" {
		return nil
	}
	return strings.Split(raw, "&")
}

// querySlot reports whether the raw parameter p ("name=value") is one of s's query slots
// holding the placeholder.
func querySlot(s Secret, p string) bool {
	k, v, ok := strings.Cut(p, "=")
	if !ok || v != s.Placeholder {
		return false
	}
	name, err := url.QueryUnescape(k)
	if err != nil {
		return false
	}
	for _, slot := range s.Slots {
		if slot.Query != "" && slot.Query == name {
			return true
		}
	}
	return false
}

// slotted reports whether r carries s's placeholder in one of its slots.
func slotted(r *http.Request, s Secret) bool {
	for name, vs := range r.Header {
		for _, v := range vs {
			if _, _, ok := headerSlot(s, name, v); ok {
				return true
			}
		}
	}
	for _, p := range queryParams(r.URL.RawQuery) {
		if querySlot(s, p) {
			return true
		}
	}
	return false
}

// outsideSlots names a part of r that carries s's placeholder and is none of its slots, or "".
// Basic credentials are looked into, so a placeholder encoded in one counts too.
func outsideSlots(r *http.Request, s Secret) string {
	ph := s.Placeholder
	for name, vs := range r.Header {
		if strings.Contains(strings.ToLower(name), ph) {
			return "header names"
		}
		for _, v := range vs {
			if _, _, ok := headerSlot(s, name, v); ok {
				continue
			}
			if strings.Contains(v, ph) || strings.Contains(decodedBasic(v), ph) {
				return "header " + name
			}
		}
	}
	if strings.Contains(r.Host, ph) {
		return "host"
	}
	if strings.Contains(r.URL.EscapedPath(), ph) || strings.Contains(r.URL.Path, ph) || strings.Contains(r.URL.Fragment, ph) || strings.Contains(r.URL.Opaque, ph) || strings.Contains(r.URL.User.String(), ph) {
		return "path"
	}
	for _, p := range queryParams(r.URL.RawQuery) {
		if querySlot(s, p) {
			continue
		}
		dec, _ := url.QueryUnescape(p)
		if strings.Contains(p, ph) || strings.Contains(dec, ph) {
			return "query"
		}
	}
	return ""
}

// decodedBasic is the decoded credentials of a "Basic" header value, or "".
func decodedBasic(v string) string {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
	if err != nil {
		return ""
	}
	return string(dec)
}

// fill puts value in place of s's placeholder in each of r's slots that holds it, and returns
// the forms the value took there that are not the value itself (a Basic credential's encoding,
// an escaped query value), each beside its placeholder form, for answers to be scrubbed of.
func fill(r *http.Request, s Secret, value string) []form {
	var forms []form
	for name, vs := range r.Header {
		for j, v := range vs {
			slot, creds, ok := headerSlot(s, name, v)
			if !ok {
				continue
			}
			scheme, _, _ := strings.Cut(strings.TrimSpace(v), " ")
			switch {
			case slot.Scheme == "":
				r.Header[name][j] = value
			case strings.EqualFold(slot.Scheme, "Basic"):
				user, pass, _ := strings.Cut(creds, ":")
				if user == s.Placeholder {
					user = value
				}
				if pass == s.Placeholder {
					pass = value
				}
				enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
				forms = append(forms, form{real: enc, placeholder: base64.StdEncoding.EncodeToString([]byte(creds))})
				r.Header[name][j] = scheme + " " + enc
			default:
				r.Header[name][j] = scheme + " " + value
			}
		}
	}
	if params := queryParams(r.URL.RawQuery); len(params) > 0 {
		changed := false
		for i, p := range params {
			if querySlot(s, p) {
				k, _, _ := strings.Cut(p, "=")
				params[i] = k + "=" + url.QueryEscape(value)
				changed = true
			}
		}
		if changed {
			r.URL.RawQuery = strings.Join(params, "&")
			if esc := url.QueryEscape(value); esc != value {
				forms = append(forms, form{real: esc, placeholder: s.Placeholder})
			}
		}
	}
	return forms
}

// value is the secret's value now.
func (s Secret) value(ctx context.Context) (string, error) {
	if s.Current == nil {
		return s.Value, nil
	}
	v, err := s.Current(ctx)
	if err == nil && v == "" {
		err = errors.New("it has no value now")
	}
	return v, err
}

// secretValueTimeout bounds the wait for a secret's current value (Secret.Current).
const secretValueTimeout = 10 * time.Second

package testkit

import (
	"io"
	"net/http"
	"testing"
)

// GetWithCookie GETs url as a browser holding cookie name=value would (no cookie when value is
// empty), and answers the status and the body.
func GetWithCookie(tb testing.TB, url, name, value string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if value != "" {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// NoRedirects is a client that stops at each redirect, as a test reading what a browser was
// sent there needs; jar may be nil.
func NoRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

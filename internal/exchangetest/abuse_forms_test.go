package exchangetest

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// formClient is a browser as far as the settings forms need one: a cookie jar, the CSRF token
// from each form's page, the headers a browser sends with a form. Unlike the settings tests'
// browser it returns errors rather than failing the test, so that abusers can run in goroutines.
type formClient struct {
	base string
	http *http.Client
}

func newFormClient(base string, transport http.RoundTripper) *formClient {
	jar, _ := cookiejar.New(nil)
	return &formClient{base: base, http: &http.Client{Transport: transport, Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var formToken = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// submit loads the form page at path and posts it back with fields; it returns the answer's status
// and its Retry-After header.
func (f *formClient) submit(path string, fields url.Values) (int, string, error) {
	resp, err := f.http.Get(f.base + path)
	if err != nil {
		return 0, "", err
	}
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, "", err
	}
	m := formToken.FindSubmatch(page)
	if m == nil {
		return 0, "", fmt.Errorf("GET %s: %d, no form token", path, resp.StatusCode)
	}
	form := url.Values{"csrf": {html.UnescapeString(string(m[1]))}}
	for k, v := range fields {
		form[k] = v
	}
	req, _ := http.NewRequest("POST", f.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err = f.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After"), nil
}

func (f *formClient) signUp(name, password string) (int, string, error) {
	return f.submit("/settings/sign-up", url.Values{"name": {name}, "password": {password}})
}

func (f *formClient) signIn(name, password string) (int, string, error) {
	return f.submit("/settings/sign-in", url.Values{"name": {name}, "password": {password}})
}

package settings_test

import (
	"crypto/sha256"
	"encoding/base64"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/pages/settings"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

func TestMain(m *testing.M) {
	// The parallel tests share the process's two hashing slots on a machine that may be busy: a
	// request there must not be refused for want of one. TestSettingsHashSlotsBusy tests the wait.
	settings.SetHashWait(time.Minute)
	pgtest.Main(m)
}

// browser is a cookie-keeping HTTP client that does not follow redirects, so that tests see them.
type browser struct {
	t    *testing.T
	base string
	http *http.Client
	// header is added to every request; a name without values removes that header.
	header http.Header
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, header: http.Header{}, http: &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// from makes b connect from another loopback address (Linux answers on all of 127/8), so that the
// server sees another client.
func (b *browser) from(ip string) *browser {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	b.http.Transport = &http.Transport{DialContext: d.DialContext}
	return b
}

// answer is a response with its body read.
type answer struct {
	status int
	header http.Header
	body   string
}

func (a answer) location() string { return a.header.Get("Location") }

func (b *browser) do(method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	// What a browser sends with a form from the page itself.
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range b.header {
		if len(v) == 0 {
			req.Header.Del(k)
		} else {
			req.Header[k] = v
		}
	}
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

func (b *browser) get(path string) answer {
	b.t.Helper()
	return b.do("GET", path, nil)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// submit loads the page at from, and posts its form (the first with a CSRF token) to action with
// the given fields and the page's token.
func (b *browser) submit(from, action string, fields url.Values) answer {
	b.t.Helper()
	page := b.get(from)
	if page.status != http.StatusOK {
		b.t.Fatalf("GET %s: status %d: %s", from, page.status, page.body)
	}
	m := csrfField.FindStringSubmatch(page.body)
	if m == nil {
		b.t.Fatalf("GET %s: no CSRF token in the page", from)
	}
	form := url.Values{"csrf": {html.UnescapeString(m[1])}}
	for k, v := range fields {
		form[k] = v
	}
	return b.do("POST", action, form)
}

func (b *browser) signUp(name, password string) answer {
	b.t.Helper()
	return b.submit("/settings/sign-up", "/settings/sign-up", url.Values{"name": {name}, "password": {password}})
}

// signedUpAndOut opens an account with the test password through the sign-up form, then signs out.
func (b *browser) signedUpAndOut(name string) {
	b.t.Helper()
	expectRedirect(b.t, "sign up "+name, b.signUp(name, password), "/settings?done=welcome")
	expectRedirect(b.t, "sign out", b.submit("/settings", "/settings/sign-out", nil), "/settings/sign-in?m=signedout")
}

func (b *browser) signIn(name, password string) answer {
	b.t.Helper()
	return b.submit("/settings/sign-in", "/settings/sign-in", url.Values{"name": {name}, "password": {password}})
}

// createKey creates a key from the settings page and returns it.
func (b *browser) createKey(label string) string {
	b.t.Helper()
	a := b.submit("/settings", "/settings/keys", url.Values{"label": {label}})
	if a.status != http.StatusCreated {
		b.t.Fatalf("create key: status %d: %s", a.status, a.body)
	}
	m := regexp.MustCompile(`id="new-key" class="mono" readonly value="([^"]+)"`).FindStringSubmatch(a.body)
	if m == nil {
		b.t.Fatalf("create key: no key shown: %s", a.body)
	}
	return m[1]
}

func (b *browser) cookie(name string) *http.Cookie {
	u, _ := url.Parse(b.base)
	for _, c := range b.http.Jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func expect(t *testing.T, what string, a answer, status int, fragments ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, a.status, status, a.body)
	}
	for _, f := range fragments {
		if !strings.Contains(html.UnescapeString(a.body), f) {
			t.Fatalf("%s: the page does not say %q: %s", what, f, a.body)
		}
	}
}

func expectRedirect(t *testing.T, what string, a answer, to string) {
	t.Helper()
	if a.status != http.StatusSeeOther || a.location() != to {
		t.Fatalf("%s: status %d to %q, want 303 to %q: %s", what, a.status, a.location(), to, a.body)
	}
}

func apiStatus(t *testing.T, tg *exchangetest.Target, key string) int {
	t.Helper()
	status, _ := (&exchangetest.Client{T: tg, Key: key}).Do(t, "GET", "/markets", nil)
	return status
}

func count(t *testing.T, tg *exchangetest.Target, query string, args ...any) int {
	t.Helper()
	var n int
	if err := tg.Store.Pool.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const password = "correct horse battery"

// TestSettingsFlow walks the whole page: sign up, balance, key created and used, revoked and
// refused, signed out and back in.
func TestSettingsFlow(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)

	expectRedirect(t, "settings signed out", b.get("/settings"), "/settings/sign-in?m=signin")
	expect(t, "sign-in page", b.get("/settings/sign-in?m=signin"), http.StatusOK, "Sign in to see your developer settings.")

	expectRedirect(t, "sign up", b.signUp("ada", password), "/settings?done=welcome")
	expect(t, "settings after sign-up", b.get("/settings?done=welcome"), http.StatusOK,
		"Your account is open", "ada", "$10,000.00", "$0.00", "No keys yet", "No open orders")
	var hash string
	if err := tg.Store.Pool.QueryRow(t.Context(), `select password_hash from accounts where name = 'ada'`).Scan(&hash); err != nil ||
		!strings.HasPrefix(hash, "$argon2id$v=19$m=65536,t=3,p=4$") {
		t.Fatalf("stored password hash %q (%v), want an argon2id PHC string", hash, err)
	}

	key := b.createKey("<b>bot</b> one")
	if apiStatus(t, tg, key) != http.StatusOK {
		t.Fatal("the new key is refused by the API")
	}
	// The account gets the grant exactly as the admin API's accounts do.
	var acct struct{ Available, Locked int64 }
	(&exchangetest.Client{T: tg, Key: key}).Expect(t, "GET", "/account", nil, http.StatusOK, &acct)
	if acct.Available != 1_000_000 || acct.Locked != 0 {
		t.Fatalf("account %+v, want the 1,000,000-cent grant", acct)
	}
	listed := b.get("/settings")
	expect(t, "key listed", listed, http.StatusOK, "<b>bot</b> one", key[:len("pmx_")+16]+"_…")
	if strings.Contains(listed.body, "<b>bot</b>") || strings.Contains(listed.body, key) {
		t.Fatal("the page shows the label unescaped, or the whole key after it was first shown")
	}
	// The front writes a key's first use off the request's path, at once (apiserver's keyUse).
	poll.Wait(t, 10*time.Second, "the key's last use recorded", func() bool {
		return count(t, tg, `select count(*) from api_keys where label = '<b>bot</b> one' and last_used_at is not null`) == 1
	})

	// Revoke it: the form's action names the key.
	revoke := regexp.MustCompile(`action="(/settings/keys/[0-9a-f-]+/revoke)"`).FindStringSubmatch(listed.body)
	if revoke == nil {
		t.Fatal("no revoke form")
	}
	expectRedirect(t, "revoke", b.submit("/settings", revoke[1], nil), "/settings?done=revoked")
	if apiStatus(t, tg, key) != http.StatusUnauthorized {
		t.Fatal("a revoked key is still accepted")
	}
	expect(t, "after revoking", b.get("/settings?done=revoked"), http.StatusOK, "The key is revoked", "Revoked ")
	expect(t, "revoke again", b.submit("/settings", revoke[1], nil), http.StatusNotFound, "Nothing was changed")

	expectRedirect(t, "sign out", b.submit("/settings", "/settings/sign-out", nil), "/settings/sign-in?m=signedout")
	if n := count(t, tg, `select count(*) from sessions`); n != 0 {
		t.Fatalf("%d sessions after signing out, want 0", n)
	}
	expectRedirect(t, "settings after sign-out", b.get("/settings"), "/settings/sign-in?m=signin")
	expectRedirect(t, "sign in", b.signIn("ada", password), "/settings")
	expect(t, "settings after sign-in", b.get("/settings"), http.StatusOK, "Revoked ")
	expectRedirect(t, "sign-in page when signed in", b.get("/settings/sign-in"), "/settings")
}

func TestSettingsSignUpErrors(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	tg.NewAccount(t, "taken") // taken-1, through the admin API
	b := newBrowser(t, tg.URL)
	for _, tc := range []struct {
		name, password string
		status         int
		message        string
	}{
		{"", password, http.StatusBadRequest, "Choose an account name."},
		{"  ", password, http.StatusBadRequest, "Choose an account name."},
		{"bob", "", http.StatusBadRequest, "Choose a password."},
		{"bob", "short", http.StatusBadRequest, "The password is too short"},
		{"-bob", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"bob smith", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{strings.Repeat("b", 65), password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"taken-1", password, http.StatusConflict, "This name is taken; choose another."},
		{"TAKEN-1", password, http.StatusConflict, "This name is taken; choose another."}, // names are unique in any case
		{"bob\x00", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"bob\xff", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
	} {
		a := b.signUp(tc.name, tc.password)
		expect(t, "sign up "+tc.name, a, tc.status, tc.message)
		if b.cookie("pmx_session") != nil {
			t.Fatalf("sign up %q: a session cookie was set", tc.name)
		}
	}
	if n := count(t, tg, `select count(*) from accounts where name <> 'pmx:exchange'`); n != 1 {
		t.Fatalf("%d accounts, want only the admin's", n)
	}
}

func TestSettingsSignInErrors(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	admin := tg.NewAccount(t, "admin-made") // no password: no web sign-in
	b := newBrowser(t, tg.URL)
	b.signedUpAndOut("carol")

	for _, tc := range []struct {
		name, password string
		status         int
		message        string
	}{
		{"", password, http.StatusBadRequest, "Enter your account name."},
		{"carol", "", http.StatusBadRequest, "Enter your password."},
		{"carol", password + "!", http.StatusUnauthorized, "Wrong account name or password."},
		{"nobody", password, http.StatusUnauthorized, "Wrong account name or password."},
		{admin.Name, password, http.StatusUnauthorized, "Wrong account name or password."},
		{admin.Name, "", http.StatusBadRequest, "Enter your password."},
		// No account has a name outside the rule, and Postgres refuses NUL and invalid UTF-8 in
		// text: such a name is the form's mistake, not a 500.
		{"carol\x00", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"carol\xff", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"car\nol", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
		{"car ol", password, http.StatusBadRequest, "Name must be 1 to 64 letters"},
	} {
		a := b.signIn(tc.name, tc.password)
		expect(t, "sign in "+tc.name, a, tc.status, tc.message)
		if strings.Contains(a.body, password) {
			t.Fatal("the page shows the password typed")
		}
	}
	if n := count(t, tg, `select count(*) from sessions`); n != 0 {
		t.Fatalf("%d sessions, want 0", n)
	}
	// Empty fields are not attempts; the three wrong ones are recorded.
	if n := count(t, tg, `select count(*) from sign_in_failures`); n != 3 {
		t.Fatalf("%d recorded failures, want 3", n)
	}
	expectRedirect(t, "sign in", b.signIn("carol", password), "/settings")
	if n := count(t, tg, `select count(*) from sign_in_failures where name = 'carol'`); n != 0 {
		t.Fatalf("%d failures on carol after signing in, want 0", n)
	}
}

// TestSettingsNamesAnyCase checks that names are unique whatever their case, through the admin API
// as through sign-up, and that a name signs in typed in any case, sharing one count of failures.
func TestSettingsNamesAnyCase(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	b.signedUpAndOut("Sybil")
	expect(t, "sign up in another case", newBrowser(t, tg.URL).signUp("sybil", password), http.StatusConflict,
		"This name is taken; choose another.")
	tg.Admin(t, "POST", "/admin/v1/accounts", map[string]any{"name": "SYBIL"}, http.StatusConflict, nil)
	if n := count(t, tg, `select count(*) from accounts where name <> 'pmx:exchange'`); n != 1 {
		t.Fatalf("%d accounts, want 1", n)
	}

	expect(t, "wrong password", b.signIn("SYBIL", "not the password"), http.StatusUnauthorized, "Wrong account name or password.")
	if n := count(t, tg, `select count(*) from sign_in_failures where name = 'sybil'`); n != 1 {
		t.Fatalf("%d failures counted on sybil, want the one on SYBIL", n)
	}
	expectRedirect(t, "sign in in another case", b.signIn("sYBIL", password), "/settings")
	expect(t, "signed in", b.get("/settings"), http.StatusOK, "Sybil")
}

// TestSettingsRateLimit checks both limits, and that a limited attempt changes nothing, not even
// with the right password. The failures are counted in Postgres, so a second replica sharing the
// database refuses too.
func TestSettingsRateLimit(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	replica := httptest.NewServer(replicaOf(t, tg.Store))
	t.Cleanup(replica.Close)
	b := newBrowser(t, tg.URL)
	b.signedUpAndOut("dave")

	for range 2 {
		expect(t, "wrong password", b.signIn("dave", "not the password"), http.StatusUnauthorized, "Wrong account name or password.")
	}
	// Three more from elsewhere, as if from other clients through other replicas.
	if _, err := tg.Store.Pool.Exec(t.Context(), `insert into sign_in_failures (name, client, at)
		select 'dave', '192.0.2.' || i, now() - interval '1 minute' from generate_series(1, 3) i`); err != nil {
		t.Fatal(err)
	}
	before := count(t, tg, `select count(*) from sign_in_failures`)
	r := newBrowser(t, replica.URL)
	for _, c := range []*browser{b, r} {
		a := c.signIn("dave", password)
		expect(t, "sign in over the limit", a, http.StatusTooManyRequests,
			"Too many failed sign-in attempts on this account. Nothing was checked or changed; try again in 14 minutes.")
		if a.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
	}
	if n := count(t, tg, `select count(*) from sign_in_failures`); n != before {
		t.Fatalf("limited attempts changed the failures: %d, want %d", n, before)
	}
	if n := count(t, tg, `select count(*) from sessions`); n != 0 {
		t.Fatalf("%d sessions, want 0", n)
	}
	// Once the failures leave the window, the right password works again.
	if _, err := tg.Store.Pool.Exec(t.Context(), `update sign_in_failures set at = at - interval '15 minutes'`); err != nil {
		t.Fatal(err)
	}
	expectRedirect(t, "sign in after the window", b.signIn("dave", password), "/settings")

	// The client limit: 30 failures from this address, on any names.
	if _, err := tg.Store.Pool.Exec(t.Context(), `insert into sign_in_failures (name, client, at)
		select 'someone-' || i, '127.0.0.1', now() from generate_series(1, 30) i`); err != nil {
		t.Fatal(err)
	}
	expect(t, "sign in from a busy client", newBrowser(t, tg.URL).signIn("dave", password), http.StatusTooManyRequests,
		"Too many failed sign-in attempts from your network.")
}

// TestSettingsSignUpLimit checks the per-client sign-up limit: counted in Postgres (so a replica
// refuses too), refused with a page that says how long to wait, and lifted as the window moves.
func TestSettingsSignUpLimit(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	replica := httptest.NewServer(replicaOf(t, tg.Store))
	t.Cleanup(replica.Close)
	b := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", b.signUp("quentin", password), "/settings?done=welcome")
	// Nine more from this address ten minutes ago, as if through other replicas: ten in the hour.
	if _, err := tg.Store.Pool.Exec(t.Context(), `insert into sign_ups (client, at)
		select '127.0.0.1', now() - interval '10 minutes' from generate_series(1, 9)`); err != nil {
		t.Fatal(err)
	}
	// And some from elsewhere, which do not count against this client.
	if _, err := tg.Store.Pool.Exec(t.Context(), `insert into sign_ups (client, at)
		select '192.0.2.' || i, now() from generate_series(1, 20) i`); err != nil {
		t.Fatal(err)
	}
	before := count(t, tg, `select count(*) from sign_ups`)
	for what, c := range map[string]*browser{"here": newBrowser(t, tg.URL), "on a replica": newBrowser(t, replica.URL)} {
		a := c.signUp("rupert", password)
		expect(t, "sign up over the limit "+what, a, http.StatusTooManyRequests,
			"Too many accounts were opened from your network. Nothing was created; try again in 50 minutes.")
		if a.header.Get("Retry-After") == "" {
			t.Fatal("no Retry-After")
		}
	}
	if n := count(t, tg, `select count(*) from accounts where name = 'rupert'`); n != 0 {
		t.Fatal("a sign-up over the limit opened an account")
	}
	if n := count(t, tg, `select count(*) from sign_ups`); n != before {
		t.Fatalf("refused sign-ups were counted: %d, want %d", n, before)
	}
	// A form with a mistake is not counted, nor refused for the limit.
	expect(t, "sign up with a short password", newBrowser(t, tg.URL).signUp("rupert", "short"), http.StatusBadRequest,
		"The password is too short")
	// When the window has moved past the oldest, the next sign-up works.
	if _, err := tg.Store.Pool.Exec(t.Context(), `update sign_ups set at = at - interval '1 hour'
		where at < now() - interval '5 minutes'`); err != nil {
		t.Fatal(err)
	}
	expectRedirect(t, "sign up after the window", newBrowser(t, tg.URL).signUp("rupert", password), "/settings?done=welcome")
}

// TestSettingsHashSlotsBusy checks that a sign-up or sign-in that cannot get a hashing slot within
// the wait is told to try again (503) instead of queueing without bound, and changes nothing. Not
// parallel: it holds the process's slots.
func TestSettingsHashSlotsBusy(t *testing.T) {
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	b.signedUpAndOut("olivia")

	settings.HoldHashSlots(t, time.Millisecond)
	const busy = "pmx is busy checking other passwords. Nothing was changed; try again in a moment."
	for what, a := range map[string]answer{"sign up": b.signUp("peggy", password), "sign in": b.signIn("olivia", password)} {
		expect(t, what+" while busy", a, http.StatusServiceUnavailable, busy)
		if a.header.Get("Retry-After") == "" {
			t.Fatalf("%s while busy: no Retry-After", what)
		}
	}
	if n := count(t, tg, `select count(*) from accounts where name = 'peggy'`); n != 0 {
		t.Fatal("a sign-up refused for want of a slot opened an account")
	}
	if n := count(t, tg, `select count(*) from sessions`); n != 0 {
		t.Fatalf("%d sessions, want 0", n)
	}
	if n := count(t, tg, `select count(*) from sign_in_failures`); n != 0 {
		t.Fatalf("a sign-in refused for want of a slot was counted as a failure (%d)", n)
	}
}

// TestSettingsNoLockout checks that failures on a name from one client do not lock the owner out
// from another, and that the owner signing in does not lift the guessing client's limit.
func TestSettingsNoLockout(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	owner := newBrowser(t, tg.URL)
	owner.signedUpAndOut("trent")

	attacker := newBrowser(t, tg.URL).from("127.0.0.2")
	for i := range 5 {
		expect(t, "guess "+strconv.Itoa(i), attacker.signIn("trent", "guess number "+strconv.Itoa(i)), http.StatusUnauthorized,
			"Wrong account name or password.")
	}
	expect(t, "sixth guess", attacker.signIn("trent", "guess number 5"), http.StatusTooManyRequests,
		"Too many failed sign-in attempts on this account.")
	if n := count(t, tg, `select count(*) from sign_in_failures where client = '127.0.0.2'`); n != 5 {
		t.Fatalf("%d failures from the attacker, want 5", n)
	}

	// The owner, from a client that has not failed on the name, gets in...
	expectRedirect(t, "owner signs in", owner.signIn("trent", password), "/settings")
	// ...and the attacker stays limited, even with the right password.
	expect(t, "guess after the owner signed in", attacker.signIn("trent", password), http.StatusTooManyRequests,
		"Too many failed sign-in attempts on this account.")
	// A third client that has failed on the name is limited too, the name being over its limit.
	third := newBrowser(t, tg.URL).from("127.0.0.3")
	expect(t, "third client's guess", third.signIn("trent", "another guess"), http.StatusUnauthorized, "Wrong account name or password.")
	expect(t, "third client's next try", third.signIn("trent", password), http.StatusTooManyRequests,
		"Too many failed sign-in attempts on this account.")
	if n := count(t, tg, `select count(*) from sessions`); n != 1 {
		t.Fatalf("%d sessions, want only the owner's", n)
	}
}

// TestSettingsRateLimitConcurrent races more wrong guesses than the limit allows: however they
// interleave, no more than the limit are checked.
func TestSettingsRateLimitConcurrent(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", b.signUp("judy", password), "/settings?done=welcome")

	const guesses = 12
	forms := make([]url.Values, guesses)
	browsers := make([]*browser, guesses)
	for i := range browsers {
		browsers[i] = newBrowser(t, tg.URL)
		token := csrfField.FindStringSubmatch(browsers[i].get("/settings/sign-in").body)[1]
		forms[i] = url.Values{"csrf": {html.UnescapeString(token)}, "name": {"judy"}, "password": {"guess number " + strconv.Itoa(i)}}
	}
	statuses := make([]int, guesses)
	var wg sync.WaitGroup
	for i := range browsers {
		wg.Go(func() {
			// Not b.do: it may call t.Fatal, which only the test's goroutine may.
			resp, err := browsers[i].http.PostForm(tg.URL+"/settings/sign-in", forms[i])
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			statuses[i] = resp.StatusCode
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	checked := 0
	for _, s := range statuses {
		switch s {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("statuses %v: want only 401 and 429", statuses)
		}
	}
	if checked > 5 || count(t, tg, `select count(*) from sign_in_failures where name = 'judy'`) != checked {
		t.Fatalf("statuses %v: %d guesses checked, at most 5 allowed, and each recorded", statuses, checked)
	}
}

func TestSettingsSessions(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	a := b.signUp("erin", password)
	expectRedirect(t, "sign up", a, "/settings?done=welcome")

	var set *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "pmx_session" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteLaxMode || set.Secure || set.Path != "/" ||
		set.MaxAge != int((12*time.Hour).Seconds()) {
		t.Fatalf("session cookie %+v, want HttpOnly, SameSite=Lax, Path=/, 12h, not Secure over plain HTTP", set)
	}
	// Postgres holds the token's SHA-256, never the token.
	token, err := base64.RawURLEncoding.DecodeString(set.Value)
	if err != nil || len(token) != 32 {
		t.Fatalf("session token %q: %v", set.Value, err)
	}
	h := sha256.Sum256(token)
	if n := count(t, tg, `select count(*) from sessions where token_hash = $1 and expires_at > now()`, h[:]); n != 1 {
		t.Fatal("the session is not stored under its token's hash")
	}

	// An expired session sends a page to sign-in and a form there too, changing nothing.
	page := b.get("/settings")
	if _, err := tg.Store.Pool.Exec(t.Context(), `update sessions set expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	csrf := html.UnescapeString(csrfField.FindStringSubmatch(page.body)[1])
	expectRedirect(t, "create a key when expired", b.do("POST", "/settings/keys", url.Values{"csrf": {csrf}}),
		"/settings/sign-in?m=expired")
	if n := count(t, tg, `select count(*) from api_keys`); n != 0 {
		t.Fatalf("%d keys after an expired POST, want 0", n)
	}
	b.http.Jar.SetCookies(mustURL(t, tg.URL), []*http.Cookie{set}) // the browser still has it
	expectRedirect(t, "settings when expired", b.get("/settings"), "/settings/sign-in?m=expired")
	expect(t, "sign-in page", b.get("/settings/sign-in?m=expired"), http.StatusOK, "Your session has expired. Sign in again.")
	if b.cookie("pmx_session") != nil {
		t.Fatal("the expired session's cookie was not removed")
	}

	// Over TLS the cookie is Secure and __Host- prefixed.
	tlsServer := httptest.NewTLSServer(replicaOf(t, tg.Store))
	t.Cleanup(tlsServer.Close)
	tls := newBrowser(t, tlsServer.URL)
	tls.http.Transport = tlsServer.Client().Transport
	a = tls.signIn("erin", password)
	expectRedirect(t, "sign in over TLS", a, "/settings")
	var secure *http.Cookie
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == "__Host-pmx_session" {
			secure = c
		}
	}
	if secure == nil || !secure.Secure || !secure.HttpOnly || secure.Path != "/" || secure.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie over TLS %+v, want __Host-pmx_session, Secure, HttpOnly, SameSite=Lax, Path=/", secure)
	}
	expect(t, "settings over TLS", tls.get("/settings"), http.StatusOK, "erin")

	// Sessions are shared by every replica: the cookie works on another server on the same database.
	c := newBrowser(t, tg.URL)
	expectRedirect(t, "sign in", c.signIn("erin", password), "/settings")
	replica := httptest.NewServer(replicaOf(t, tg.Store))
	t.Cleanup(replica.Close)
	c.base = replica.URL // the jar ignores ports
	expect(t, "settings on a replica", c.get("/settings"), http.StatusOK, "erin")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSettingsCSRF(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", b.signUp("frank", password), "/settings?done=welcome")
	keys := func() int { return count(t, tg, `select count(*) from api_keys`) }

	// Signed in: a form without the session's token, or with another session's.
	expect(t, "no token", b.do("POST", "/settings/keys", url.Values{"label": {"x"}}), http.StatusForbidden, "Nothing was changed")
	other := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", other.signUp("grace", password), "/settings?done=welcome")
	otherToken := html.UnescapeString(csrfField.FindStringSubmatch(other.get("/settings").body)[1])
	expect(t, "another session's token", b.do("POST", "/settings/keys", url.Values{"csrf": {otherToken}}),
		http.StatusForbidden, "Nothing was changed")
	expect(t, "sign out without a token", b.do("POST", "/settings/sign-out", nil), http.StatusForbidden, "still signed in")

	// A cross-site POST is refused before anything else, even with the right token.
	token := html.UnescapeString(csrfField.FindStringSubmatch(b.get("/settings").body)[1])
	cross := *b
	cross.header = http.Header{"Sec-Fetch-Site": {"cross-site"}}
	expect(t, "cross-site", cross.do("POST", "/settings/keys", url.Values{"csrf": {token}}), http.StatusForbidden,
		"sent from another site")
	cross.header = http.Header{"Sec-Fetch-Site": {}, "Origin": {"https://evil.example"}}
	expect(t, "other origin", cross.do("POST", "/settings/keys", url.Values{"csrf": {token}}), http.StatusForbidden,
		"sent from another site")
	if keys() != 0 {
		t.Fatalf("%d keys created by refused forms", keys())
	}
	// The right token from the page itself works.
	expect(t, "right token", b.do("POST", "/settings/keys", url.Values{"csrf": {token}}), http.StatusCreated, "Your new key")

	// Anonymous forms: the token must match this browser's form cookie.
	anon := newBrowser(t, tg.URL)
	expect(t, "sign in without a token", anon.do("POST", "/settings/sign-in",
		url.Values{"name": {"frank"}, "password": {password}}), http.StatusForbidden, "This form has expired")
	foreign := html.UnescapeString(csrfField.FindStringSubmatch(newBrowser(t, tg.URL).get("/settings/sign-in").body)[1])
	anon.get("/settings/sign-in") // has its own form cookie now
	expect(t, "sign in with another browser's token", anon.do("POST", "/settings/sign-in",
		url.Values{"name": {"frank"}, "password": {password}, "csrf": {foreign}}), http.StatusForbidden, "This form has expired")
	expect(t, "sign up with another browser's token", anon.do("POST", "/settings/sign-up",
		url.Values{"name": {"mallory"}, "password": {password}, "csrf": {foreign}}), http.StatusForbidden, "This form has expired")
	if n := count(t, tg, `select count(*) from accounts where name = 'mallory'`); n != 0 {
		t.Fatal("a forged sign-up opened an account")
	}
	expectRedirect(t, "sign in with its own token", anon.signIn("frank", password), "/settings")
}

func TestSettingsKeys(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", b.signUp("heidi", password), "/settings?done=welcome")

	expect(t, "long label", b.submit("/settings", "/settings/keys", url.Values{"label": {strings.Repeat("x", 65)}}),
		http.StatusBadRequest, "The label is too long")
	expect(t, "control characters", b.submit("/settings", "/settings/keys", url.Values{"label": {"a\nb"}}),
		http.StatusBadRequest, "plain text on one line")
	key := b.createKey("")

	// The key's scope, expiry and allowlist: refused choices make no key and keep what was typed.
	for _, bad := range []struct {
		name   string
		fields url.Values
		says   string
		kept   string // what was typed and is shown again, beside the label
	}{
		{"unknown scope", url.Values{"scope": {"admin"}}, "Choose what the key may do", ""},
		{"expiry off the list", url.Values{"expires": {"400"}}, "Choose when the key expires", ""},
		{"malformed range", url.Values{"allowlist": {"office, 10.0.0.0/8"}}, `"office" is not an address`, ""},
		{"too many ranges", url.Values{"allowlist": {strings.Repeat("10.0.0.0/8 ", 33)}}, "takes 32 at most", ""},
		{"malformed public key", url.Values{"publickey": {"c2hvcnQ="}}, "must be an Ed25519 public key", "c2hvcnQ="},
	} {
		bad.fields.Set("label", "kept "+bad.name)
		expect(t, bad.name, b.submit("/settings", "/settings/keys", bad.fields), http.StatusBadRequest, bad.says, "kept "+bad.name, bad.kept)
	}
	if n := count(t, tg, `select count(*) from api_keys`); n != 1 {
		t.Fatalf("%d keys after refused choices, want heidi's first one", n)
	}
	scoped := b.submit("/settings", "/settings/keys", url.Values{"label": {"watcher"}, "scope": {"read"}, "expires": {"30"},
		"allowlist": {"203.0.113.0/24\n2001:db8::/48"}})
	expect(t, "a scoped key", scoped, http.StatusCreated, "watcher")
	expect(t, "the scoped key listed", b.get("/settings"), http.StatusOK, ">read<", "203.0.113.0/24, 2001:db8::/48",
		time.Now().UTC().AddDate(0, 0, 30).Format("2 Jan 2006"))
	// A signing key, its public key given as openssl pkey -pubout writes it, listed by its start.
	signing := b.submit("/settings", "/settings/keys", url.Values{"label": {"signer"},
		"publickey": {"-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEATQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehvk=\n-----END PUBLIC KEY-----\n"}})
	expect(t, "a signing key", signing, http.StatusCreated, "signer")
	expect(t, "the signing key listed", b.get("/settings"), http.StatusOK, "Ed25519 TQ4mJ/zK…", `title="TQ4mJ/zK8sowTT0QsToI5+29PhsclIQW4Y8WSdDehvk="`)

	// Another account cannot revoke heidi's key: the ownership check is in the SQL.
	var id string
	if err := tg.Store.Pool.QueryRow(t.Context(), `select id from api_keys where label = ''`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	other := newBrowser(t, tg.URL)
	expectRedirect(t, "sign up", other.signUp("ivan", password), "/settings?done=welcome")
	expect(t, "revoke another's key", other.submit("/settings", "/settings/keys/"+id+"/revoke", nil),
		http.StatusNotFound, "Nothing was changed")
	expect(t, "revoke a malformed id", other.submit("/settings", "/settings/keys/nope/revoke", nil),
		http.StatusNotFound, "Nothing was changed")
	if apiStatus(t, tg, key) != http.StatusOK {
		t.Fatal("another account revoked the key")
	}

	// Open orders and locked cash show on the page.
	m := tg.NewMarket(t, map[string]any{"question": "Will the settings page show this order?"})
	(&exchangetest.Client{T: tg, Key: key}).Place(t, m.ID, "BUY", "YES", 40, 25)
	expect(t, "open orders", b.get("/settings"), http.StatusOK, "Will the settings page show this order?",
		"BUY YES", "40¢", "0 of 25", "$9,990.00", "$10.00")
}

func TestSettingsHeaders(t *testing.T) {
	t.Parallel()
	tg := exchangetest.StartDev(t)
	b := newBrowser(t, tg.URL)
	a := b.get("/settings/sign-in")
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; script-src 'self'",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if !strings.Contains(a.header.Get(k), want) {
			t.Errorf("%s: %q, want %q", k, a.header.Get(k), want)
		}
	}
	if !strings.Contains(a.body, `<meta name="viewport" content="width=device-width, initial-scale=1">`) {
		t.Error("no viewport meta")
	}
	css := regexp.MustCompile(`href="(/settings/static/style\.css\?v=[0-9a-f]+)"`).FindStringSubmatch(a.body)
	if css == nil {
		t.Fatal("no stylesheet link")
	}
	s := b.get(css[1])
	if s.status != http.StatusOK || !strings.HasPrefix(s.header.Get("Content-Type"), "text/css") || !strings.Contains(s.body, "@media") {
		t.Fatalf("stylesheet: %d %s", s.status, s.header.Get("Content-Type"))
	}
}

// replicaOf is another API replica on the same database, closed when t ends.
func replicaOf(t *testing.T, st *store.Store) http.Handler {
	api := apiserver.New(apiserver.Config{Store: st})
	t.Cleanup(api.Close)
	return api.Handler()
}

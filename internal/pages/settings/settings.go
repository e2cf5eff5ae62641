// Package settings serves the developer settings pages (/settings): sign up, sign in and out, the
// account's balance and open orders, and its API keys (create, list, revoke). Server-rendered HTML
// from embedded templates, one stylesheet and a few lines of script for the copy button; no build
// step. What it needs of the front API (opening accounts, making keys) comes through Accounts, so
// that neither package imports the other.
//
// Security, in the order a request meets it:
//   - Every answer carries a strict Content-Security-Policy (only this origin's stylesheet and
//     script, no framing) and is not cached.
//   - Unsafe methods from another origin are refused by http.CrossOriginProtection
//     (Sec-Fetch-Site, or Origin against Host), before any handler runs.
//   - Every form also carries a token: the session's synchronizer token once signed in
//     (session.go), and for the anonymous sign-in and sign-up forms a token that is an
//     HMAC of a random cookie under a deployment-wide key kept in Postgres (signed double submit).
//   - Sessions are random 256-bit tokens in an HttpOnly, SameSite=Lax cookie (Secure and
//     __Host- prefixed over TLS); Postgres keeps only their SHA-256, with a sliding expiry.
//   - Passwords are argon2id hashes (package auth); at most concurrentHashes are computed at once
//     in a process, and a request that waits longer than hashWait for its turn is answered 503
//     ("try again") rather than queued without bound behind a flood.
//   - Sign-in attempts are rate limited per client address, and per account name for the clients
//     that have failed on it (so that no one can lock an owner out); sign-ups per client address.
//     All are counted in Postgres so that every replica sees the same counts (auth.go).
package settings

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/pages/pagekit"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

//go:embed templates/*.html static/*
var files embed.FS

// Settings limits and lifetimes.
const (
	sessionIdle     = 2 * time.Hour  // a session unused this long expires
	sessionAbsolute = 12 * time.Hour // and none lasts longer than this, used or not
	signInWindow    = 15 * time.Minute
	signInPerName   = 5  // failed attempts on one account name per window
	signInPerClient = 30 // failed attempts from one client address per window, any names
	signUpWindow    = time.Hour
	signUpPerClient = 10 // sign-ups from one client address per window
	// concurrentHashes is how many argon2id hashes one process computes at once, 64 MiB each: 128
	// MiB of the api pod's 512 MiB, which leaves room for the heap GOGC=400 lets grow (and the Go
	// memory limit, internal/cmd/process/memlimit.go). Four took RSS to 1.2 GB under a sign-up flood.
	concurrentHashes = 2
	openOrdersShown  = 100
)

// Accounts is what the pages need of the front API: its one way to open an account and to make
// an API key, and to hear of a revoked key (the front caches keys).
type Accounts interface {
	// OpenAccount opens an account with the configured grant; passwordHash (auth.HashPassword)
	// lets it sign in here. A name that is malformed or taken is an *httpkit.Error on the field
	// "name".
	OpenAccount(ctx context.Context, name, passwordHash string) (records.Account, error)
	// NewAPIKey creates an API key for an account as spec says and returns it; only its hash is
	// kept. A spec the key rules refuse (package auth) is an *httpkit.Error on the field at fault
	// ("scope", "expiresAt" or "ipAllowlist").
	NewAPIKey(ctx context.Context, account int64, spec auth.KeySpec) (string, error)
	// KeyRevoked tells the front that the key with this prefix was just revoked.
	KeyRevoked(prefix string)
}

// Config configures the pages.
type Config struct {
	// Store is what the pages ask of the database (storage.go).
	Store    Store
	Accounts Accounts
	// Grant is the play money, in cents, a new account starts with, as the sign-up page says.
	Grant int64
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// settings holds what the settings pages need: their configuration, templates and static files,
// the cross-origin check and the form key.
type settings struct {
	cfg     Config
	kit     *pagekit.Pages
	cop     *http.CrossOriginProtection
	formKey formKeyCache
}

// Register adds the settings pages to r, under /settings.
func Register(r gin.IRouter, cfg Config) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	st := newSettings(cfg)
	g := r.Group("/settings", st.headers, st.crossOrigin)
	g.GET("", st.signedIn(st.home))
	g.GET("/sign-in", st.signInPage)
	g.POST("/sign-in", st.signIn)
	g.GET("/sign-up", st.signUpPage)
	g.POST("/sign-up", st.signUp)
	g.POST("/sign-out", st.signOut)
	g.POST("/keys", st.signedIn(st.createKey))
	g.POST("/keys/:id/revoke", st.signedIn(st.revokeKey))
	g.GET("/static/:file", st.kit.ServeStatic)
}

func newSettings(cfg Config) *settings {
	kit, err := pagekit.New(files, "/settings/static/", template.FuncMap{"dollars": dollars})
	if err != nil {
		panic(err) // the files are embedded: only a broken build gets here
	}
	return &settings{cfg: cfg, kit: kit, cop: http.NewCrossOriginProtection()}
}

// now is the pages' clock at the database's precision.
func (st *settings) now() time.Time { return st.cfg.Now().UTC().Truncate(time.Microsecond) }

// page is what every template is given.
type page struct {
	Title   string
	Heading string            // the page's h1, above its notices
	CSRF    string            // the token every form sends back
	Flash   string            // a notice that something worked
	Error   string            // what went wrong, for the whole page
	Fields  map[string]string // what is wrong with each field, by its name
	Name    string            // the account name typed, shown again

	// The signed-in page.
	Account     *records.Account
	NewKey      string // a key just created: shown this once
	NewKeyLabel string
	Form        keyForm // the key form's choices, shown again when refused
	Scopes      []auth.Scope
	Lifetimes   []keyLifetime
	Keys        []keyRow
	ActiveKeys  int
	Orders      []accounts.OpenOrder
	BaseURL     string
	Grant       int64
}

// render writes a page (whole, or none of it and a 500), and ends the request.
func (st *settings) render(c *gin.Context, status int, name string, p *page) {
	if err := st.kit.Render(c, status, name, p); err != nil {
		httpkit.Logger(c).Error("could not render a settings page", "page", name, "err", err)
		c.String(http.StatusInternalServerError, "pmx could not show this page; try again later\n")
	}
	c.Abort()
}

// fail answers an unexpected error with a page that says so, and logs it.
func (st *settings) fail(c *gin.Context, err error) {
	httpkit.Logger(c).Error("settings request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	st.render(c, http.StatusInternalServerError, "message.html", &page{Title: "Something went wrong",
		Error: "pmx could not complete this request. Try again in a moment."})
}

// headers sets what every settings answer carries: no caching (pages show keys and balances), and
// a Content-Security-Policy that allows only this origin's stylesheet and script, so that even an
// injected tag could neither run script nor send a form elsewhere.
func (st *settings) headers(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	c.Next()
}

// crossOrigin refuses unsafe requests that a browser says come from another origin.
func (st *settings) crossOrigin(c *gin.Context) {
	if err := st.cop.Check(c.Request); err != nil {
		st.render(c, http.StatusForbidden, "message.html", &page{Title: "Request refused",
			Error: "This form was sent from another site, so pmx refused it. Nothing was changed."})
		return
	}
	c.Next()
}

// dollars shows cents as dollars: 123456789 is "$1,234,567.89".
func dollars(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	whole := fmt.Sprint(cents / 100)
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return fmt.Sprintf("%s$%s.%02d", sign, b.String(), cents%100)
}

// sentence turns an API error message ("name must be ...") into a sentence for a page.
func sentence(msg string) string {
	r, n := utf8.DecodeRuneInString(msg)
	msg = string(unicode.ToUpper(r)) + msg[n:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

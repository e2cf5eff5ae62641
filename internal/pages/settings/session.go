package settings

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// Sessions and CSRF tokens of the settings pages.
//
// A session is named by a random 256-bit token held only in the browser's cookie; Postgres keeps
// its SHA-256 (a stolen copy of the table signs no one in), the account, a random synchronizer
// token for the session's forms, and an expiry that slides by sessionIdle with each use but never
// past sessionAbsolute after sign-in. Every replica reads the same table.
//
// The cookie is HttpOnly (no script reads it) and SameSite=Lax (not sent on cross-site POSTs).
// It is Secure when the request came over TLS: r.TLS is set, or a TLS-terminating proxy says
// X-Forwarded-Proto: https. Trusting that header is safe here because it can only make the cookie
// stricter: a client that lies gets a Secure cookie its own plain-HTTP browser will not send back,
// and a browser cannot be made to add the header to a cross-site request. A Secure cookie also
// takes the __Host- prefix, which makes browsers refuse one set by a sibling subdomain or for
// another path, so that no neighbour can plant a session (or a form cookie) on pmx's origin.

const (
	sessionCookie = "pmx_session"
	formCookie    = "pmx_form"
	tokenBytes    = 32
)

// isSecure reports whether the browser reached pmx over TLS.
func isSecure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

func cookieName(r *http.Request, name string) string {
	if isSecure(r) {
		return "__Host-" + name
	}
	return name
}

// setCookie sets (maxAge > 0 or 0 for the browser session) or removes (maxAge < 0) a cookie.
func setCookie(c *gin.Context, name, value string, maxAge int) {
	http.SetCookie(c.Writer, &http.Cookie{Name: cookieName(c.Request, name), Value: value, Path: "/",
		MaxAge: maxAge, HttpOnly: true, Secure: isSecure(c.Request), SameSite: http.SameSiteLaxMode})
}

func cookie(c *gin.Context, name string) string {
	v, err := c.Cookie(cookieName(c.Request, name))
	if err != nil {
		return ""
	}
	return v
}

func newToken() (string, []byte) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		panic("settings: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b), b
}

// decodeToken decodes a token from a cookie or a form, or returns nil.
func decodeToken(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != tokenBytes {
		return nil
	}
	return b
}

func hashToken(token []byte) []byte {
	h := sha256.Sum256(token)
	return h[:]
}

// user is a signed-in browser.
type user struct {
	account   int64
	tokenHash []byte
	csrf      string
}

// sessionState is what a request's cookie says.
type sessionState int

const (
	noSession      sessionState = iota // no cookie
	expiredSession                     // a cookie naming no live session
	liveSession
)

// session finds the request's session and extends it.
func (st *settings) session(c *gin.Context) (*user, sessionState, error) {
	raw := cookie(c, sessionCookie)
	if raw == "" {
		return nil, noSession, nil
	}
	token := decodeToken(raw)
	if token == nil {
		return nil, expiredSession, nil
	}
	h := hashToken(token)
	sess, err := st.cfg.Store.UseSession(c.Request.Context(), h, st.now(), sessionIdle, sessionAbsolute)
	if errors.Is(err, store.ErrNotFound) {
		return nil, expiredSession, nil
	}
	if err != nil {
		return nil, noSession, err
	}
	return &user{account: sess.AccountID, tokenHash: h, csrf: base64.RawURLEncoding.EncodeToString(sess.CSRFToken)}, liveSession, nil
}

// startSession signs the browser in as account: a new session (never one the browser brought, so
// that a planted session cannot be promoted), and its cookie.
func (st *settings) startSession(c *gin.Context, account int64) error {
	ctx := c.Request.Context()
	now := st.now()
	if err := st.cfg.Store.DeleteExpiredSessions(ctx, now); err != nil {
		httpkit.Logger(c).Warn("could not delete expired sessions", "err", err)
	}
	if raw := decodeToken(cookie(c, sessionCookie)); raw != nil {
		if err := st.cfg.Store.DeleteSession(ctx, hashToken(raw)); err != nil {
			return err
		}
	}
	token, raw := newToken()
	_, csrf := newToken()
	err := st.cfg.Store.CreateSession(ctx, hashToken(raw), accounts.Session{AccountID: account, CSRFToken: csrf,
		CreatedAt: now, ExpiresAt: now.Add(sessionIdle)})
	if err != nil {
		return err
	}
	setCookie(c, sessionCookie, token, int(sessionAbsolute.Seconds()))
	return nil
}

// signedIn wraps a handler of the signed-in pages: without a live session the browser goes to the
// sign-in page with a message; an unsafe request must also carry the session's token.
func (st *settings) signedIn(h func(*gin.Context, *user)) gin.HandlerFunc {
	return func(c *gin.Context) {
		u, state, err := st.session(c)
		if err != nil {
			st.fail(c, err)
			return
		}
		switch state {
		case noSession:
			redirect(c, signInURL("signin"))
			return
		case expiredSession:
			setCookie(c, sessionCookie, "", -1)
			redirect(c, signInURL("expired"))
			return
		}
		if c.Request.Method != http.MethodGet && c.Request.Method != http.MethodHead && !u.checkCSRF(c.PostForm("csrf")) {
			st.render(c, http.StatusForbidden, "message.html", &page{Title: "Request refused",
				Error: "This form is out of date (it was opened before you last signed in, or did not come from this page). Nothing was changed; reload the page and try again."})
			return
		}
		h(c, u)
	}
}

func (u *user) checkCSRF(sent string) bool {
	return sent != "" && subtle.ConstantTimeCompare([]byte(sent), []byte(u.csrf)) == 1
}

// redirect answers 303 See Other, so that the browser follows with a GET.
func redirect(c *gin.Context, to string) {
	c.Redirect(http.StatusSeeOther, to)
	c.Abort()
}

// Anonymous forms (sign in, sign up) have no session to hold a token, so they use a signed double
// submit: the form cookie holds a random nonce, and the form's token is HMAC-SHA256(form key,
// nonce). A cross-site page can neither read the cookie nor, without the key, compute a token for
// a nonce it planted, and the key is shared by every replica through Postgres.

// formToken returns the token for this browser's anonymous forms, setting its cookie if needed.
func (st *settings) formToken(c *gin.Context) (string, error) {
	nonce := decodeToken(cookie(c, formCookie))
	if nonce == nil {
		var s string
		s, nonce = newToken()
		setCookie(c, formCookie, s, 0)
	}
	return st.signNonce(c.Request.Context(), nonce)
}

// checkFormToken reports whether an anonymous form came back with the token of this browser's
// form cookie.
func (st *settings) checkFormToken(c *gin.Context) (bool, error) {
	nonce := decodeToken(cookie(c, formCookie))
	sent := c.PostForm("csrf")
	if nonce == nil || sent == "" {
		return false, nil
	}
	want, err := st.signNonce(c.Request.Context(), nonce)
	if err != nil {
		return false, err
	}
	return hmac.Equal([]byte(sent), []byte(want)), nil
}

func (st *settings) signNonce(ctx context.Context, nonce []byte) (string, error) {
	key, err := st.formKey.get(ctx, st.cfg.Store)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("pmx anonymous form\x00"))
	mac.Write(nonce)
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// formKeyCache reads the form key from Postgres once.
type formKeyCache struct {
	mu  sync.Mutex
	key []byte
}

func (f *formKeyCache) get(ctx context.Context, s Sessions) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.key == nil {
		key, err := s.FormKey(ctx)
		if err != nil {
			return nil, err
		}
		f.key = key
	}
	return f.key, nil
}

// signInURL is the sign-in page with one of its messages.
func signInURL(message string) string {
	return "/settings/sign-in?m=" + url.QueryEscape(message)
}

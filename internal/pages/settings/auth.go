package settings

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/addrlimit"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// Signing up, in and out.
//
// Account names are unique whatever their case (migration 008), and signing in as "ALICE" signs
// in to "alice": what is typed is matched in any case, as an email address would be.
//
// Sign-in attempts are rate limited by client address (signInPerClient failures per signInWindow,
// all names together, so that one client cannot try one password on many accounts) and by account
// name (signInPerName failures per window, from all clients together). The name's limit stops only
// clients that have themselves failed on that name in the window: a client with no recent failure
// on it (the owner's browser, typically) is still let in by the right password. A hard per-name
// lockout let anyone keep an account's owner out with six wrong guesses every 15 minutes. So one
// client gets at most signInPerName guesses at a name per window (then it is refused until its
// failures leave the window or the name falls back under its limit), and a name under attack from
// many addresses gives each new address one guess per window, within that address's own limit. What
// is left: an owner who has mistyped on an account under attack is refused like the attacker until
// the window moves on. A success forgets only its own client's failures on the name, so the owner
// signing in does not lift an attacker's limits.
//
// The counts live in Postgres, so they hold however many API replicas share the load. An attempt
// is recorded before its password is checked, and forgotten if it succeeds, so that concurrent
// guesses count too. An attempt over a limit is refused before the password is looked at, its
// record is removed, and it changes nothing: not even a right password gets in.
//
// Sign-ups are limited per client address (signUpPerClient per signUpWindow, counted in Postgres
// in the same way): each costs a 64 MiB hash and opens an account with play money, and a flood of
// them once took a process past 1 GB. A sign-up is counted whether or not its name turns out taken.
//
// The client address is addrlimit.Key's (package clientaddr): the TCP peer's, or the address a
// configured trusted proxy forwarded; never an X-Forwarded-For the client wrote. (Behind a proxy
// that is not configured as trusted every client shares the proxy's address, hence the higher
// per-client limit.)

// signInMessages are the notes the sign-in page shows, chosen by the m query parameter (a fixed
// set, so that a link cannot put words on the page).
var signInMessages = map[string]string{
	"signin":    "Sign in to see your developer settings.",
	"expired":   "Your session has expired. Sign in again.",
	"signedout": "You are signed out.",
}

const errFormExpired = "This form has expired (or your browser did not keep its cookie). Nothing was sent; try again."

func (st *settings) signInPage(c *gin.Context) {
	if _, state, err := st.session(c); err == nil && state == liveSession {
		redirect(c, "/settings")
		return
	}
	p := &page{Title: "Sign in", Flash: signInMessages[c.Query("m")]}
	st.anonymous(c, http.StatusOK, "sign-in.html", p)
}

func (st *settings) signUpPage(c *gin.Context) {
	if _, state, err := st.session(c); err == nil && state == liveSession {
		redirect(c, "/settings")
		return
	}
	st.anonymous(c, http.StatusOK, "sign-up.html", &page{Title: "Create an account", Grant: st.cfg.Grant})
}

// anonymous renders a sign-in or sign-up page with its form token.
func (st *settings) anonymous(c *gin.Context, status int, name string, p *page) {
	token, err := st.formToken(c)
	if err != nil {
		st.fail(c, err)
		return
	}
	p.CSRF = token
	st.render(c, status, name, p)
}

// checkAnonymousForm checks an anonymous form's token and, if it is wrong, shows the form again.
func (st *settings) checkAnonymousForm(c *gin.Context, name string, p *page) bool {
	ok, err := st.checkFormToken(c)
	if err != nil {
		st.fail(c, err)
		return false
	}
	if !ok {
		p.Error = errFormExpired
		st.anonymous(c, http.StatusForbidden, name, p)
	}
	return ok
}

func (st *settings) signUp(c *gin.Context) {
	name, password := strings.TrimSpace(c.PostForm("name")), c.PostForm("password")
	p := &page{Title: "Create an account", Name: name, Grant: st.cfg.Grant, Fields: map[string]string{}}
	if !st.checkAnonymousForm(c, "sign-up.html", p) {
		return
	}
	if name == "" {
		p.Fields["name"] = "Choose an account name."
	} else if err := auth.CheckAccountName(name); err != nil {
		p.Fields["name"] = sentence(err.Error())
	}
	if problem := auth.PasswordProblem(password); problem != "" {
		p.Fields["password"] = problem
	}
	if len(p.Fields) > 0 {
		st.anonymous(c, http.StatusBadRequest, "sign-up.html", p)
		return
	}
	// Counted once the form is valid (a typo costs nothing) and before the hash, the expensive part.
	ctx, now := c.Request.Context(), st.now()
	signUp, err := st.cfg.Store.RecordSignUp(ctx, addrlimit.Key(c.Request), now, now.Add(-signUpWindow))
	if err != nil {
		st.fail(c, err)
		return
	}
	if signUp.ByClient > signUpPerClient {
		if err := st.cfg.Store.DeleteSignUp(ctx, signUp.ID); err != nil {
			st.fail(c, err)
			return
		}
		retry := signUp.OldestByClient.Add(signUpWindow).Sub(now)
		minutes := int(math.Ceil(retry.Minutes()))
		p.Error = fmt.Sprintf("Too many accounts were opened from your network. Nothing was created; try again in %d minute%s.",
			minutes, plural(minutes))
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		st.anonymous(c, http.StatusTooManyRequests, "sign-up.html", p)
		return
	}
	var hashed string
	err = hash(ctx, func() { hashed = auth.HashPassword(password) })
	if errors.Is(err, errBusy) {
		st.busy(c, "sign-up.html", p)
		return
	}
	if err != nil {
		st.fail(c, err)
		return
	}
	a, err := st.cfg.Accounts.OpenAccount(ctx, name, hashed)
	var e *httpkit.Error
	if errors.As(err, &e) && e.Field == "name" {
		p.Fields["name"] = sentence(e.Message)
		st.anonymous(c, e.Status, "sign-up.html", p)
		return
	}
	if err != nil {
		st.fail(c, err)
		return
	}
	if err := st.startSession(c, a.ID); err != nil {
		st.fail(c, err)
		return
	}
	redirect(c, "/settings?done=welcome")
}

func (st *settings) signIn(c *gin.Context) {
	name, password := strings.TrimSpace(c.PostForm("name")), c.PostForm("password")
	p := &page{Title: "Sign in", Name: name, Fields: map[string]string{}}
	if !st.checkAnonymousForm(c, "sign-in.html", p) {
		return
	}
	if name == "" {
		p.Fields["name"] = "Enter your account name."
	} else if err := auth.CheckAccountName(name); err != nil {
		// No account can have such a name: say so, before a query that Postgres could refuse
		// (NUL, invalid UTF-8).
		p.Fields["name"] = sentence(err.Error())
	}
	if password == "" {
		p.Fields["password"] = "Enter your password."
	}
	if len(p.Fields) > 0 {
		st.anonymous(c, http.StatusBadRequest, "sign-in.html", p)
		return
	}

	ctx := c.Request.Context()
	cfg := st.cfg
	now := st.now()
	attempt, err := cfg.Store.RecordSignInAttempt(ctx, nameKey(name), addrlimit.Key(c.Request), now, now.Add(-signInWindow))
	if err != nil {
		st.fail(c, err)
		return
	}
	if limited, retry := signInLimited(attempt, now); limited != "" {
		if err := cfg.Store.DeleteSignInAttempt(ctx, attempt.ID); err != nil {
			st.fail(c, err)
			return
		}
		minutes := int(math.Ceil(retry.Minutes()))
		p.Error = fmt.Sprintf("Too many failed sign-in attempts %s. Nothing was checked or changed; try again in %d minute%s.",
			limited, minutes, plural(minutes))
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(retry.Seconds()))))
		st.anonymous(c, http.StatusTooManyRequests, "sign-in.html", p)
		return
	}

	account, stored, err := cfg.Store.PasswordHash(ctx, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		st.fail(c, err)
		return
	}
	var ok bool
	var checkErr error
	err = hash(ctx, func() {
		switch {
		case stored == "" || len(password) > auth.MaxPasswordLen:
			// No such account, or one opened by the admin API without a password: take the time a
			// check takes, so that timing does not tell which names exist.
			auth.CheckNoPassword(password)
		default:
			ok, checkErr = auth.CheckPassword(password, stored)
		}
	})
	if errors.Is(err, errBusy) {
		// Nothing was checked: the attempt is not a failure.
		if err := cfg.Store.DeleteSignInAttempt(ctx, attempt.ID); err != nil {
			st.fail(c, err)
			return
		}
		st.busy(c, "sign-in.html", p)
		return
	}
	if err = errors.Join(err, checkErr); err != nil {
		st.fail(c, err)
		return
	}
	if !ok {
		p.Error = "Wrong account name or password."
		st.anonymous(c, http.StatusUnauthorized, "sign-in.html", p)
		return
	}
	if err := cfg.Store.ClearSignInFailures(ctx, nameKey(name), addrlimit.Key(c.Request)); err != nil {
		st.fail(c, err)
		return
	}
	if err := st.startSession(c, account); err != nil {
		st.fail(c, err)
		return
	}
	redirect(c, "/settings")
}

// signInLimited says which limit an attempt is over ("" for none) and when it lifts. The name's
// limit stops only a client that has itself failed on the name in the window; it lifts when the
// name falls back to its limit or when the client's own failures on it leave the window.
func signInLimited(a accounts.SignInAttempt, now time.Time) (string, time.Duration) {
	switch {
	case a.ByName > signInPerName && a.EarlierByNameAndClient > 0:
		lifts := a.OldestByName
		if a.NewestByNameAndClient.Before(lifts) {
			lifts = a.NewestByNameAndClient
		}
		return "on this account", lifts.Add(signInWindow).Sub(now)
	case a.ByClient > signInPerClient:
		return "from your network", a.OldestByClient.Add(signInWindow).Sub(now)
	}
	return "", 0
}

func (st *settings) signOut(c *gin.Context) {
	u, state, err := st.session(c)
	if err != nil {
		st.fail(c, err)
		return
	}
	if state == liveSession {
		if !u.checkCSRF(c.PostForm("csrf")) {
			st.render(c, http.StatusForbidden, "message.html", &page{Title: "Request refused",
				Error: "This form is out of date. You are still signed in; reload the page and try again."})
			return
		}
		if err := st.cfg.Store.DeleteSession(c.Request.Context(), u.tokenHash); err != nil {
			st.fail(c, err)
			return
		}
	}
	setCookie(c, sessionCookie, "", -1)
	redirect(c, signInURL("signedout"))
}

// hashSlots are the process's argon2id slots: each hash takes 64 MiB, and a burst of sign-ins and
// sign-ups must not exhaust memory. They are per process, not per Register, because memory is.
var hashSlots = make(chan struct{}, concurrentHashes)

// hashWait is how long a request waits for a hashing slot before it is told to try again: a flood
// then costs its victims a quick 503, not a queue that grows without bound (a 20-request flood made
// a sign-up take 17 s). A variable so that tests can change it.
var hashWait = 5 * time.Second

// errBusy is hash's answer when no slot came free within hashWait.
var errBusy = errors.New("settings: no password-hashing slot came free")

// hash runs f, an argon2id computation, once one of the hashSlots is free, or returns errBusy if
// none is within hashWait (or the request's error if it ends first).
func hash(ctx context.Context, f func()) error {
	select {
	case hashSlots <- struct{}{}:
	default:
		wait := time.NewTimer(hashWait)
		defer wait.Stop()
		select {
		case hashSlots <- struct{}{}:
		case <-wait.C:
			return errBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-hashSlots }()
	f()
	return nil
}

// busy answers a form whose password could not be hashed in time with the form again, a 503 and
// a Retry-After.
func (st *settings) busy(c *gin.Context, name string, p *page) {
	p.Error = "pmx is busy checking other passwords. Nothing was changed; try again in a moment."
	c.Header("Retry-After", strconv.Itoa(int(math.Ceil(hashWait.Seconds()))))
	st.anonymous(c, http.StatusServiceUnavailable, name, p)
}

// nameKey is the name a sign-in attempt is counted against: a valid account name (at most 64
// ASCII characters), in lower case (names are unique whatever their case, so "ALICE" and "alice"
// are one account and share one count).
func nameKey(name string) string { return strings.ToLower(name) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

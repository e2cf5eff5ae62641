package settings

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/store"
)

// The signed-in page: balance, open orders and API keys.

// homeNotices are the notes the page shows after a redirect, chosen by the done query parameter.
var homeNotices = map[string]string{
	"welcome": "Your account is open. Create an API key below to start trading.",
	"revoked": "The key is revoked. Requests that use it are refused from now on.",
}

func (st *settings) home(c *gin.Context, u *user) {
	st.dashboard(c, u, http.StatusOK, &page{Flash: homeNotices[c.Query("done")]})
}

// dashboard fills in and renders the signed-in page.
func (st *settings) dashboard(c *gin.Context, u *user, status int, p *page) {
	ctx := c.Request.Context()
	a, err := st.cfg.Store.Account(ctx, u.account)
	if err != nil {
		st.fail(c, err)
		return
	}
	if p.Keys, err = st.cfg.Store.APIKeys(ctx, u.account); err != nil {
		st.fail(c, err)
		return
	}
	for _, k := range p.Keys {
		if k.RevokedAt == nil {
			p.ActiveKeys++
		}
	}
	if p.Orders, err = st.cfg.Store.OpenOrders(ctx, u.account, openOrdersShown); err != nil {
		st.fail(c, err)
		return
	}
	scheme := "http"
	if isSecure(c.Request) {
		scheme = "https"
	}
	p.Title, p.Heading = "Developer settings", "Developer settings"
	p.Account, p.CSRF, p.Grant = &a, u.csrf, st.cfg.Grant
	p.BaseURL = scheme + "://" + c.Request.Host
	st.render(c, status, "settings.html", p)
}

// createKey creates a key and shows it, this once: it is never stored, so the page that shows it is
// the answer to the POST itself (not cached, not a redirect to a URL that would hold it).
func (st *settings) createKey(c *gin.Context, u *user) {
	label := strings.TrimSpace(c.PostForm("label"))
	if problem := labelProblem(label); problem != "" {
		st.dashboard(c, u, http.StatusBadRequest, &page{Fields: map[string]string{"label": problem}, Label: label})
		return
	}
	key, err := st.cfg.Accounts.NewAPIKey(c.Request.Context(), u.account, label)
	if err != nil {
		st.fail(c, err)
		return
	}
	st.dashboard(c, u, http.StatusCreated, &page{NewKey: key, NewKeyLabel: label,
		Flash: "Key created. Copy it now: pmx keeps only its hash, so it cannot show it again."})
}

func labelProblem(label string) string {
	if !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0 {
		return "The label must be plain text on one line."
	}
	if utf8.RuneCountInString(label) > maxLabelLen {
		return fmt.Sprintf("The label is too long: keep it to %d characters or fewer.", maxLabelLen)
	}
	return ""
}

func (st *settings) revokeKey(c *gin.Context, u *user) {
	err := store.ErrNotFound
	if id, perr := uuid.Parse(c.Param("id")); perr == nil {
		// The account is in the statement's WHERE: another account's key is simply not found.
		var prefix string
		if prefix, err = st.cfg.Store.RevokeAPIKey(c.Request.Context(), u.account, id, st.now()); err == nil {
			// Other replicas hear of it from Postgres within milliseconds; this one forgets it now.
			st.cfg.Accounts.KeyRevoked(prefix)
		}
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		st.fail(c, err)
		return
	}
	if err != nil {
		st.dashboard(c, u, http.StatusNotFound, &page{
			Error: "That key is not an active key of this account (it may already be revoked). Nothing was changed."})
		return
	}
	redirect(c, "/settings?done=revoked")
}

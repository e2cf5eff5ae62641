package settings

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// The signed-in page: balance, open orders and API keys.

// homeNotices are the notes the page shows after a redirect, chosen by the done query parameter.
var homeNotices = map[string]string{
	"welcome": "Your account is open. Create an API key below to start trading.",
	"revoked": "The key is revoked. Requests that use it are refused from now on, and its live-feed connections are closed.",
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
	keys, err := st.cfg.Store.APIKeys(ctx, u.account)
	if err != nil {
		st.fail(c, err)
		return
	}
	now := st.now()
	for _, k := range keys {
		row := keyRow{APIKey: k, Expired: auth.Expired(k.ExpiresAt, now), Allowlist: strings.Join(auth.FormatAllowlist(k.Allowlist), ", "),
			PublicKey: auth.FormatPublicKey(k.PublicKey)}
		if k.RevokedAt == nil && !row.Expired {
			p.ActiveKeys++
		}
		p.Keys = append(p.Keys, row)
	}
	p.Scopes, p.Lifetimes = auth.Scopes, keyLifetimes
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

// keyRow is a key as the page lists it.
type keyRow struct {
	accounts.APIKey
	Expired   bool
	Allowlist string // its ranges, comma-separated; "" for any address
	PublicKey string // the Ed25519 public key its requests are signed with, base64; "" for none
}

// keyForm is what the key form was sent with, to show again when it is refused.
type keyForm struct {
	Label, Scope, Expires, Allowlist, PublicKey string
}

// keyLifetime is one of the form's expiry choices: days from now, 0 for never. The longest is
// 365 days, which is never more than the year a key may live (auth.MaxExpiry).
type keyLifetime struct {
	Days int
	Name string
}

var keyLifetimes = []keyLifetime{{0, "Never"}, {1, "In 1 day"}, {7, "In 7 days"}, {30, "In 30 days"},
	{90, "In 90 days"}, {365, "In 1 year"}}

// keyFields are the form's field names by the key rules' (the *httpkit.Error fields NewAPIKey
// refuses on).
var keyFields = map[string]string{"label": "label", "scope": "scope", "expiresAt": "expires", "ipAllowlist": "allowlist", "publicKey": "publickey"}

// createKey creates a key and shows it, this once: it is never stored, so the page that shows it is
// the answer to the POST itself (not cached, not a redirect to a URL that would hold it).
func (st *settings) createKey(c *gin.Context, u *user) {
	form := keyForm{Label: strings.TrimSpace(c.PostForm("label")), Scope: c.PostForm("scope"),
		Expires: c.PostForm("expires"), Allowlist: strings.TrimSpace(c.PostForm("allowlist")),
		PublicKey: strings.TrimSpace(c.PostForm("publickey"))}
	refuse := func(field, problem string) {
		st.dashboard(c, u, http.StatusBadRequest, &page{Fields: map[string]string{field: problem}, Form: form})
	}
	if problem := labelProblem(form.Label); problem != "" {
		refuse("label", problem)
		return
	}
	spec := auth.KeySpec{Label: form.Label}
	var err error
	if spec.Scope, err = auth.ParseScope(form.Scope); err != nil { // none sent: trade, as before scopes
		refuse("scope", "Choose what the key may do: read, cancel, trade or keys.")
		return
	}
	i := slices.IndexFunc(keyLifetimes, func(l keyLifetime) bool {
		return strconv.Itoa(l.Days) == form.Expires || form.Expires == "" && l.Days == 0
	})
	if i < 0 {
		refuse("expires", "Choose when the key expires from the list.")
		return
	}
	if days := keyLifetimes[i].Days; days > 0 {
		t := st.now().AddDate(0, 0, days)
		spec.ExpiresAt = &t
	}
	if spec.Allowlist, err = auth.ParseAllowlist(strings.FieldsFunc(form.Allowlist, isListSeparator)); err != nil {
		refuse("allowlist", capitalize(err.Error())+".")
		return
	}
	if form.PublicKey != "" {
		if spec.PublicKey, err = auth.ParsePublicKey(form.PublicKey); err != nil {
			refuse("publickey", capitalize(err.Error())+".")
			return
		}
	}
	key, err := st.cfg.Accounts.NewAPIKey(c.Request.Context(), u.account, spec)
	var e *httpkit.Error
	if errors.As(err, &e) && keyFields[e.Field] != "" {
		refuse(keyFields[e.Field], capitalize(e.Message)+".")
		return
	}
	if errors.As(err, &e) && e.Status < http.StatusInternalServerError { // too many keys: not one field's fault
		st.dashboard(c, u, e.Status, &page{Error: capitalize(e.Message) + ".", Form: form})
		return
	}
	if err != nil {
		st.fail(c, err)
		return
	}
	st.dashboard(c, u, http.StatusCreated, &page{NewKey: key, NewKeyLabel: form.Label,
		Flash: "Key created. Copy it now: pmx keeps only its hash, so it cannot show it again."})
}

// isListSeparator splits the allowlist field: commas, spaces or lines between ranges.
func isListSeparator(r rune) bool { return r == ',' || unicode.IsSpace(r) }

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// labelProblem says what is wrong with a key's label (package auth's rule), as the form says it.
func labelProblem(label string) string {
	if err := auth.CheckLabel(label); err != nil {
		return capitalize(err.Error()) + "."
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

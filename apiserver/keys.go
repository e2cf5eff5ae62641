package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// API keys: making them (for the settings pages, the admin API and the API itself, which choose
// what each key may do: package auth's rules), listing the caller's (GET /api/v1/account/keys),
// and, with a key of scope keys, making and revoking them through the API (POST and DELETE
// /api/v1/account/keys; POST /admin/v1/accounts/{id}/keys for the operator).

// APIKey is a key as GET /api/v1/account/keys shows it: everything but the secret, which pmx
// never keeps.
type APIKey struct {
	ID          uuid.UUID  `json:"id"`
	Prefix      string     `json:"prefix"`
	Label       string     `json:"label"`
	Scope       string     `json:"scope"`
	CreatedAt   time.Time  `json:"createdAt"`
	ExpiresAt   *time.Time `json:"expiresAt"`
	IPAllowlist []string   `json:"ipAllowlist"`
	PublicKey   *string    `json:"publicKey"`
	LastUsedAt  *time.Time `json:"lastUsedAt"`
	RevokedAt   *time.Time `json:"revokedAt"`
	Current     bool       `json:"current"`
}

// NewKey is the answer that makes a key (POST /api/v1/account/keys, POST
// /admin/v1/accounts/{id}/keys): the whole key, shown this once, and the key as the listing shows it.
type NewKey struct {
	APIKey string `json:"apiKey"`
	Key    APIKey `json:"key"`
}

// errTooManyKeys refuses a key past auth.MaxKeys, on every path that makes one.
var errTooManyKeys = &httpkit.Error{Status: http.StatusConflict, Code: "too_many_keys",
	Message: fmt.Sprintf("the account holds %d active API keys, the most it may: revoke one it no longer uses "+
		"(DELETE /api/v1/account/keys/{id}, or the developer settings page, /settings) and make this one again", auth.MaxKeys)}

// NewAPIKey creates an API key for an account as spec says and returns it; only its hash is kept.
// An expiry that is past or more than a year away is a 400 on the field expiresAt; an account
// that holds auth.MaxKeys active keys already is a 409 too_many_keys.
func (s *Server) NewAPIKey(ctx context.Context, account int64, spec auth.KeySpec) (string, error) {
	key, _, err := s.newAPIKey(ctx, account, spec)
	return key, err
}

// newAPIKey is NewAPIKey, also returning the key as stored: the one way every key is made.
func (s *Server) newAPIKey(ctx context.Context, account int64, spec auth.KeySpec) (string, accounts.APIKey, error) {
	now := s.now().Truncate(time.Microsecond) // as Postgres keeps it
	scope, err := auth.ParseScope(string(spec.Scope))
	if err != nil {
		return "", accounts.APIKey{}, httpkit.FieldError("scope", "invalid_value", "%v", err)
	}
	if err := auth.CheckLabel(spec.Label); err != nil {
		return "", accounts.APIKey{}, httpkit.FieldError("label", "invalid_value", "%v", err)
	}
	if spec.ExpiresAt != nil {
		if err := auth.CheckExpiry(*spec.ExpiresAt, now); err != nil {
			return "", accounts.APIKey{}, httpkit.FieldError("expiresAt", "invalid_value", "%v", err)
		}
	}
	if len(spec.Allowlist) > auth.MaxAllowlist {
		return "", accounts.APIKey{}, httpkit.FieldError("ipAllowlist", "invalid_value", "the allowlist takes %d ranges at most", auth.MaxAllowlist)
	}
	key, prefix, hash := auth.NewKey()
	k := accounts.APIKey{ID: uuid.New(), AccountID: account, Prefix: prefix, Label: spec.Label, Scope: scope, CreatedAt: now,
		ExpiresAt: spec.ExpiresAt, Allowlist: spec.Allowlist, PublicKey: spec.PublicKey}
	err = s.cfg.Store.CreateAPIKey(ctx, k, hash, auth.MaxKeys)
	if errors.Is(err, store.ErrTooManyKeys) {
		return "", k, errTooManyKeys
	}
	return key, k, err
}

// keySpec reads and checks the optional label, scope, expiresAt, ipAllowlist and publicKey of a
// body that makes a key (the admin API's new account and new key, POST /api/v1/account/keys),
// before anything is made: absent, a key without a label, of scope trade, that never expires,
// usable from anywhere, whose requests are not signed.
func (s *Server) keySpec(o object) (auth.KeySpec, error) {
	var spec auth.KeySpec
	if o.has("label") {
		label, err := o.string("label")
		if err != nil {
			return spec, err
		}
		if err := auth.CheckLabel(label); err != nil {
			return spec, httpkit.FieldError("label", "invalid_value", "%v", err)
		}
		spec.Label = label
	}
	if o.has("scope") {
		name, err := o.string("scope")
		if err != nil {
			return spec, err
		}
		if spec.Scope, err = auth.ParseScope(name); err != nil || name == "" {
			return spec, httpkit.FieldError("scope", "invalid_value", "scope must be read, cancel, trade or keys")
		}
	}
	if o.has("expiresAt") {
		t, err := o.time("expiresAt")
		if err != nil {
			return spec, err
		}
		if err := auth.CheckExpiry(t, s.now()); err != nil {
			return spec, httpkit.FieldError("expiresAt", "invalid_value", "%v", err)
		}
		spec.ExpiresAt = &t
	}
	if o.has("ipAllowlist") {
		var entries []string
		if json.Unmarshal(o["ipAllowlist"], &entries) != nil {
			return spec, httpkit.FieldError("ipAllowlist", "invalid_type", `ipAllowlist must be an array of CIDR ranges, like ["203.0.113.0/24", "2001:db8::/48"]`)
		}
		list, err := auth.ParseAllowlist(entries)
		if err != nil {
			return spec, httpkit.FieldError("ipAllowlist", "invalid_value", "%v", err)
		}
		spec.Allowlist = list
	}
	if o.has("publicKey") {
		text, err := o.string("publicKey")
		if err != nil {
			return spec, err
		}
		if spec.PublicKey, err = auth.ParsePublicKey(text); err != nil {
			return spec, httpkit.FieldError("publicKey", "invalid_value", "%v", err)
		}
	}
	return spec, nil
}

// createKey makes a key of the caller's account with a key of scope keys: 201 with the whole key,
// shown this once. The new key can do no more, for no longer, from no more places than the key
// that makes it (auth.Confine: what the body leaves out it inherits, what it asks beyond is a 403
// exceeds_own_key on the field), so holding scope keys never widens a key's own rights.
func (s *Server) createKey(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	spec, err := s.keySpec(obj)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	maker, err := s.cfg.Store.APIKeyOf(ctx, accountOf(c), keyOf(c))
	if errors.Is(err, store.ErrNotFound) || err == nil && maker.RevokedAt != nil {
		return errInvalidKey // revoked (or gone) since it was checked: it makes nothing
	}
	if err != nil {
		return err
	}
	if err := auth.Confine(&spec, auth.Maker{Scope: maker.Scope, ExpiresAt: maker.ExpiresAt, Allowlist: maker.Allowlist}); err != nil {
		var ke *auth.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		return &httpkit.Error{Status: http.StatusForbidden, Code: "exceeds_own_key", Field: ke.Field,
			Message: err.Error() + "; nothing was made"}
	}
	return s.answerNewKey(c, accountOf(c), spec)
}

// answerNewKey makes a key as spec says and answers 201 with it.
func (s *Server) answerNewKey(c *gin.Context, account int64, spec auth.KeySpec) error {
	key, k, err := s.newAPIKey(c.Request.Context(), account, spec)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, NewKey{APIKey: key, Key: APIKeyOf(&k, false)})
	return nil
}

// revokeKey revokes one of the caller's keys, the one it is made with included, with a key of
// scope keys: 204. It is the settings page's revocation (store.RevokeAPIKey), so every front
// forgets the key as it does then: this one at once, the others when Postgres tells them. An id
// that is not an active key of the account, another account's included, is a 404 key_not_found,
// and nothing changes.
func (s *Server) revokeKey(c *gin.Context) error {
	id, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	prefix, err := s.cfg.Store.RevokeAPIKey(c.Request.Context(), accountOf(c), id, s.now())
	if errors.Is(err, store.ErrNotFound) {
		return &httpkit.Error{Status: http.StatusNotFound, Code: "key_not_found", Field: "id",
			Message: "no active key of this account has this id (it may be revoked already): nothing was changed; GET /api/v1/account/keys lists the account's keys"}
	}
	if err != nil {
		return err
	}
	s.KeyRevoked(prefix)
	c.Status(http.StatusNoContent)
	return nil
}

// adminCreateKey makes a key for an account (POST /admin/v1/accounts/{id}/keys), as the body says,
// with none of a maker's bounds: the operator may give any scope, keys included. 201 with the
// whole key, shown this once.
func (s *Server) adminCreateKey(c *gin.Context) error {
	uid, err := parseUUID("id", c.Param("id"))
	if err != nil {
		return err
	}
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	spec, err := s.keySpec(obj) // checked before the account is looked for: a bad body makes nothing
	if err != nil {
		return err
	}
	account, err := s.cfg.Store.AccountByUID(c.Request.Context(), uid)
	if errors.Is(err, store.ErrNotFound) {
		return &httpkit.Error{Status: http.StatusNotFound, Code: "account_not_found", Field: "id",
			Message: "no account has this id: the id is the account's id as POST /admin/v1/accounts answered it"}
	}
	if err != nil {
		return err
	}
	return s.answerNewKey(c, account, spec)
}

// accountKeys lists the caller's keys, revoked ones included, newest first.
func (s *Server) accountKeys(c *gin.Context) error {
	keys, err := s.cfg.Store.APIKeys(c.Request.Context(), accountOf(c))
	if err != nil {
		return err
	}
	current := keyOf(c)
	out := make([]APIKey, len(keys))
	for i, k := range keys {
		out[i] = APIKeyOf(&k, k.ID == current)
	}
	c.JSON(http.StatusOK, gin.H{"keys": out})
	return nil
}

// APIKeyOf is a stored key as the API shows it.
func APIKeyOf(k *accounts.APIKey, current bool) APIKey {
	return APIKey{ID: k.ID, Prefix: k.Prefix, Label: k.Label, Scope: string(k.Scope), CreatedAt: k.CreatedAt.UTC(),
		ExpiresAt: utc(k.ExpiresAt), IPAllowlist: auth.FormatAllowlist(k.Allowlist), PublicKey: publicKeyOf(k), LastUsedAt: utc(k.LastUsedAt),
		RevokedAt: utc(k.RevokedAt), Current: current}
}

func publicKeyOf(k *accounts.APIKey) *string {
	if len(k.PublicKey) == 0 {
		return nil
	}
	text := auth.FormatPublicKey(k.PublicKey)
	return &text
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
)

// API keys: making them (for the settings pages and the admin API, which choose what each key may
// do: package auth's rules) and listing the caller's (GET /api/v1/account/keys).

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

// NewAPIKey creates an API key for an account as spec says and returns it; only its hash is kept.
// An expiry that is past or more than a year away is a 400 on the field expiresAt.
func (s *Server) NewAPIKey(ctx context.Context, account int64, spec auth.KeySpec) (string, error) {
	now := s.now()
	scope, err := auth.ParseScope(string(spec.Scope))
	if err != nil {
		return "", httpkit.FieldError("scope", "invalid_value", "%v", err)
	}
	if spec.ExpiresAt != nil {
		if err := auth.CheckExpiry(*spec.ExpiresAt, now); err != nil {
			return "", httpkit.FieldError("expiresAt", "invalid_value", "%v", err)
		}
	}
	if len(spec.Allowlist) > auth.MaxAllowlist {
		return "", httpkit.FieldError("ipAllowlist", "invalid_value", "the allowlist takes %d ranges at most", auth.MaxAllowlist)
	}
	key, prefix, hash := auth.NewKey()
	err = s.cfg.Store.InsertAPIKey(ctx, store.APIKey{ID: uuid.New(), AccountID: account, Prefix: prefix,
		Label: spec.Label, Scope: scope, CreatedAt: now, ExpiresAt: spec.ExpiresAt, Allowlist: spec.Allowlist,
		PublicKey: spec.PublicKey}, hash)
	return key, err
}

// keySpec reads and checks the optional scope, expiresAt, ipAllowlist and publicKey of a body that
// makes a key (the admin API's new account), before anything is made: absent, a key of scope
// trade that never expires, usable from anywhere, whose requests are not signed.
func (s *Server) keySpec(o object) (auth.KeySpec, error) {
	var spec auth.KeySpec
	if o.has("scope") {
		name, err := o.string("scope")
		if err != nil {
			return spec, err
		}
		if spec.Scope, err = auth.ParseScope(name); err != nil || name == "" {
			return spec, httpkit.FieldError("scope", "invalid_value", "scope must be read, cancel or trade")
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
func APIKeyOf(k *store.APIKey, current bool) APIKey {
	return APIKey{ID: k.ID, Prefix: k.Prefix, Label: k.Label, Scope: string(k.Scope), CreatedAt: k.CreatedAt.UTC(),
		ExpiresAt: utc(k.ExpiresAt), IPAllowlist: auth.FormatAllowlist(k.Allowlist), PublicKey: publicKeyOf(k), LastUsedAt: utc(k.LastUsedAt),
		RevokedAt: utc(k.RevokedAt), Current: current}
}

func publicKeyOf(k *store.APIKey) *string {
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

package apiserver

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/auth"
	"github.com/pmx-dev/pmx/httpkit"
	"github.com/pmx-dev/pmx/store"
)

// accountKey is where authenticate leaves the caller's account id in the gin context.
const accountKey = "account"

// touchEvery is how often a key's last-used time is written, at most.
const touchEvery = time.Minute

var (
	errMissingKey = &httpkit.Error{Status: http.StatusUnauthorized, Code: "missing_api_key",
		Message: "send your API key as Authorization: Bearer <key>; create one on the developer settings page (/settings)"}
	errInvalidKey = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "the API key is malformed, unknown or revoked; create a new one on the developer settings page (/settings)"}
)

// authenticate resolves the bearer API key to its account; every /api/v1 call needs one.
func (s *Server) authenticate(c *gin.Context) {
	key, ok := httpkit.Bearer(c.Request)
	if !ok {
		httpkit.AbortUnread(c, errMissingKey)
		return
	}
	prefix, ok := auth.ParseKey(key)
	if !ok {
		httpkit.AbortUnread(c, errInvalidKey)
		return
	}
	rec, cached, gen := s.keys.get(prefix)
	if !cached {
		var err error
		rec, err = s.cfg.Store.KeyByPrefix(c.Request.Context(), prefix)
		if errors.Is(err, store.ErrNotFound) {
			httpkit.AbortUnread(c, errInvalidKey)
			return
		}
		if err != nil {
			writeError(c, err)
			return
		}
		s.keys.put(prefix, rec, gen)
	}
	if rec.Revoked || !auth.KeyMatches(key, rec.Hash) {
		httpkit.AbortUnread(c, errInvalidKey)
		return
	}
	if now := s.now(); s.keys.due(rec.ID, now) {
		if err := s.cfg.Store.TouchAPIKey(c.Request.Context(), rec.ID, now); err != nil {
			s.log.Warn("could not record an API key's use", "key", rec.ID, "err", err)
		}
	}
	c.Set(accountKey, rec.AccountID)
	c.Next()
}

func accountOf(c *gin.Context) int64 { return c.GetInt64(accountKey) }

// authenticateAdmin checks the admin token.
func (s *Server) authenticateAdmin(c *gin.Context) {
	token, ok := httpkit.Bearer(c.Request)
	if !ok || !auth.TokenMatches(token, s.cfg.AdminToken) {
		httpkit.AbortUnread(c, &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_admin_token",
			Message: "send the admin token as Authorization: Bearer <token>; pmx dev prints where it is"})
		return
	}
	c.Next()
}

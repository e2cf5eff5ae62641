package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/kit/addrlimit"
	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/kit/clientaddr"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// Where authenticate leaves the caller's account id, and its key's id and scope, in the gin
// context; and the key itself, with the key cache's generation when it was read, for the feed
// (a connection ends with its key: keyCache.watch).
const (
	accountKey   = "account"
	keyIDKey     = "apiKey"
	scopeKey     = "scope"
	keyRecordKey = "apiKeyRecord"
	keyGenKey    = "apiKeyGeneration"
)

var (
	errMissingKey = &httpkit.Error{Status: http.StatusUnauthorized, Code: "missing_api_key",
		Message: "send your API key as Authorization: Bearer <key> (or a signing key's prefix as Authorization: PMX-Ed25519 <prefix>, with its signature); create one on the developer settings page (/settings)"}
	errInvalidKey = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_api_key",
		Message: "the API key is malformed, unknown or revoked; create a new one on the developer settings page (/settings)"}
)

// Failed authentications are limited per client address (addrlimit's Ready and Spend): an address
// may fail authFailureBurst times at once and authFailureRate times a second after that, with an
// API key, a ws-token or the admin token alike. Past that, a credential from that address is
// refused unchecked with 429 too_many_failures and Retry-After, before any Postgres work (an
// unknown key prefix costs a read, a ws-token a DELETE), until the bucket refills: at most
// (authFailureBurst+1)/authFailureRate, about 3 s, after a flood, because failures already let in
// are counted too. A ws-token or the admin token from the guessing address is refused unchecked
// even when it is right, which is the price of not checking it; another address, the real
// holder's, is never refused for it. An API key this replica has in its cache (keyCache: every key
// used here since the cache last started) is checked all the same, since that costs no Postgres
// work: the clients behind an address that also guesses (a NAT, a proxy all clients share) keep
// trading, and only a key the replica would have to read is refused unchecked.
//
// Every credential pmx issues is random (API keys and ws-tokens carry 192 and 256 bits, the admin
// token at least 32 characters), so the limit is not what keeps them from being guessed; it bounds
// what a guesser costs (10 Postgres point reads a second instead of thousands) and keeps the noise
// out of the logs. No real client fails ten times a second: one with a revoked key or an expired
// ws-token fails once and gets a new one, and a fleet restarted with a bad key still sees its
// failures, only as 429 instead of 401 past the burst.
const (
	authFailureRate  = 10 // a second
	authFailureBurst = 30
)

// authMetrics counts the credentials refused, by kind (api_key, signature, ws_token, admin_token) and how:
// "invalid" were checked and wrong, "throttled" refused unchecked (authThrottled).
func newAuthMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pmx_api_auth_failures_total",
		Help: "Credentials refused, by kind (api_key, signature, ws_token, admin_token) and how: invalid (checked and wrong) or throttled (refused unchecked: the client address failed too often)."},
		[]string{"credential", "outcome"})
	reg.MustRegister(m)
	return m
}

// authThrottled answers 429 and reports true when the client's address has failed to authenticate
// too often; it is asked before a credential is checked. The clock is the wall's, not the
// server's: the bucket must refill in real time even where a test holds the server's clock.
func (s *Server) authThrottled(c *gin.Context, credential string) bool {
	ok, wait := s.authFailures.Ready(addrlimit.Key(c.Request), time.Now())
	if ok {
		return false
	}
	s.authFailed.WithLabelValues(credential, "throttled").Inc()
	retry := addrlimit.RetryAfter(wait)
	c.Header("Retry-After", strconv.Itoa(retry))
	httpkit.AbortUnread(c, &httpkit.Error{Status: http.StatusTooManyRequests, Code: "too_many_failures",
		Message: fmt.Sprintf("too many failed authentications from this address (%d at once, %d a second after that): "+
			"nothing was checked; retry after %d s with a valid credential", authFailureBurst, authFailureRate, retry)})
	return true
}

// refuse answers a wrong credential and counts it against the client's address.
func (s *Server) refuse(c *gin.Context, credential string, e *httpkit.Error) {
	s.authFailures.Spend(addrlimit.Key(c.Request), time.Now())
	s.authFailed.WithLabelValues(credential, "invalid").Inc()
	httpkit.AbortUnread(c, e)
}

// authenticate resolves the request's API key to its account; every /api/v1 call needs one: the
// whole key as Authorization: Bearer <key>, or a signing key's prefix alone as
// Authorization: PMX-Ed25519 <prefix> (signed.go), and a signing key's signature either way. A
// missing or malformed key costs nothing to refuse and guesses nothing, so only a well-formed key
// counts as a failure, and only one that must be read from Postgres is refused unchecked when its
// address has failed too often (authFailureRate).
func (s *Server) authenticate(c *gin.Context) {
	key, bearer := httpkit.Bearer(c.Request)
	var prefix string
	var ok bool
	if bearer {
		prefix, ok = auth.ParseKey(key)
	} else {
		var present bool
		if prefix, present, ok = signedPrefix(c.Request); !present {
			httpkit.AbortUnread(c, errMissingKey)
			return
		}
	}
	if !ok {
		httpkit.AbortUnread(c, errInvalidKey)
		return
	}
	rec, cached, gen := s.keys.get(prefix)
	if !cached {
		if s.authThrottled(c, "api_key") {
			return
		}
		var err error
		rec, gen, err = s.keyRead.get(c.Request.Context(), prefix) // cached, unless a key was revoked meanwhile
		if errors.Is(err, store.ErrNotFound) {
			s.refuse(c, "api_key", errInvalidKey)
			return
		}
		if err != nil {
			writeError(c, err)
			return
		}
	}
	if rec.Revoked || bearer && !auth.KeyMatches(key, rec.Hash) {
		s.refuse(c, "api_key", errInvalidKey)
		return
	}
	if !bearer && len(rec.PublicKey) == 0 {
		s.refuse(c, "api_key", errUnsignedKey)
		return
	}
	if !s.verifySigned(c, rec) {
		return
	}
	s.admit(c, rec, gen)
}

// admit lets a request in with a key that is its account's (an API key that matched, or the key
// that fetched a ws-token) if the key has not expired and the request comes from an address the
// key allows, and leaves what the routes need in the context: the account, the key and its scope
// (routes.go checks the scope), and the key with the key cache's generation gen when it was read
// (for the feed, keyCache.watch). A refusal here is not counted as a failed authentication
// (authFailureRate): the credential is right, nothing is being guessed, and counting it would
// throttle the other clients behind the same address.
func (s *Server) admit(c *gin.Context, rec accounts.KeyRecord, gen uint64) {
	now := s.now()
	if auth.Expired(rec.ExpiresAt, now) {
		httpkit.AbortUnread(c, &httpkit.Error{Status: http.StatusUnauthorized, Code: "key_expired",
			Message: fmt.Sprintf("the API key expired at %s; create a new one on the developer settings page (/settings)",
				rec.ExpiresAt.UTC().Format(time.RFC3339))})
		return
	}
	if addr := clientaddr.Of(c.Request); !auth.Allowed(rec.Allowlist, addr) {
		seen := "an unknown address"
		if addr.IsValid() {
			seen = addr.String()
		}
		httpkit.AbortUnread(c, &httpkit.Error{Status: http.StatusForbidden, Code: "ip_not_allowed",
			Message: fmt.Sprintf("this API key is only accepted from the addresses on its allowlist, and this request came from %s; "+
				"send it from an allowed address, or make a key that allows this one on the developer settings page (/settings)", seen)})
		return
	}
	if rec.ID != uuid.Nil {
		s.keyUse.note(rec.ID, now)
	}
	c.Set(accountKey, rec.AccountID)
	c.Set(keyIDKey, rec.ID)
	c.Set(scopeKey, rec.Scope)
	c.Set(keyRecordKey, rec)
	c.Set(keyGenKey, gen)
	c.Next()
}

func accountOf(c *gin.Context) int64 { return c.GetInt64(accountKey) }

// keyOf is the id of the key the request was admitted with (uuid.Nil for a ws-token from before
// keys had rights).
func keyOf(c *gin.Context) uuid.UUID {
	id, _ := c.Value(keyIDKey).(uuid.UUID)
	return id
}

// scopeOf is the scope of the key the request was admitted with.
func scopeOf(c *gin.Context) auth.Scope {
	scope, _ := c.Value(scopeKey).(auth.Scope)
	return scope
}

var errInvalidAdminToken = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_admin_token",
	Message: "send the admin token as Authorization: Bearer <token>; pmx dev prints where it is"}

// authenticateAdmin checks the admin token, limited by its address's failures (authFailureRate).
func (s *Server) authenticateAdmin(c *gin.Context) {
	token, ok := httpkit.Bearer(c.Request)
	if !ok {
		httpkit.AbortUnread(c, errInvalidAdminToken)
		return
	}
	if s.authThrottled(c, "admin_token") {
		return
	}
	if !auth.TokenMatches(token, s.cfg.AdminToken) {
		s.refuse(c, "admin_token", errInvalidAdminToken)
		return
	}
	c.Next()
}

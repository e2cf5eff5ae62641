package apiserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
)

// Feed sessions: connection tokens for browsers (POST /api/v1/ws-token) and cancel-on-disconnect.

const (
	wsTokenTTL = time.Minute
	// presenceRefresh is how often a front records the cancel-on-disconnect connections it holds;
	// presenceTTL how long a record lasts unrefreshed before the account counts as disconnected
	// (a front that died).
	presenceRefresh = 5 * time.Second
	presenceTTL     = 15 * time.Second
)

var errInvalidWSToken = &httpkit.Error{Status: http.StatusUnauthorized, Code: "invalid_ws_token",
	Message: "the token is unknown, used or expired: get a new one with POST /api/v1/ws-token (each connects once, within a minute)"}

// wsToken issues a single-use token to connect to the feed without an Authorization header.
func (s *Server) wsToken(c *gin.Context) error {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	token := base64.RawURLEncoding.EncodeToString(raw)
	hash := sha256.Sum256([]byte(token))
	expires, err := s.cfg.Store.CreateWSToken(c.Request.Context(), accountOf(c), keyOf(c), hash[:], wsTokenTTL)
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, gin.H{"token": token, "expiresAt": expires.UTC()})
	return nil
}

// authenticateWS admits a feed connection by its token (?token=) or, without one, by API key. A
// token connects with the rights of the key that fetched it, checked now as the key's own
// requests are (admit): a key revoked or expired since, or a connection from outside the key's
// allowlist, is refused.
func (s *Server) authenticateWS(c *gin.Context) {
	token, ok := c.GetQuery("token")
	if !ok {
		s.authenticate(c)
		return
	}
	// Each try spends a token in Postgres (a DELETE), so it is limited by its address's failures
	// (authFailureRate) before that.
	if s.authThrottled(c, "ws_token") {
		return
	}
	hash := sha256.Sum256([]byte(token))
	gen := s.keys.generation() // before the read: a revocation after it may be the token's key's
	key, err := s.cfg.Store.UseWSToken(c.Request.Context(), hash[:])
	if errors.Is(err, store.ErrNotFound) || err == nil && key.Revoked {
		s.refuse(c, "ws_token", errInvalidWSToken)
		return
	}
	if err != nil {
		writeError(c, err)
		c.Abort()
		return
	}
	s.admit(c, key, gen)
}

// presence counts this front's cancel-on-disconnect connections per account and keeps Postgres
// told (store.TouchPresence), so that the account's orders are cancelled when its last such
// connection on any front closes, or the front holding it dies.
type presence struct {
	store Presence
	log   *slog.Logger
	front uuid.UUID

	mu     sync.Mutex
	counts map[int64]int
}

func newPresence(st Presence, log *slog.Logger) *presence {
	return &presence{store: st, log: log, front: uuid.New(), counts: map[int64]int{}}
}

// join counts a connection in; the first of an account is recorded before it is answered.
func (p *presence) join(ctx context.Context, account int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.counts[account] == 0 {
		if err := p.store.TouchPresence(ctx, p.front, []int64{account}); err != nil {
			return err
		}
	}
	p.counts[account]++
	return nil
}

// leave counts a connection out; after the account's last one here, its orders are cancelled
// unless another front holds one, or unless cancel is false: the connection was closed because its
// key was revoked or expired (wsConn.keyHeld), and a key without authority over the account does
// not act on it by ending. The account's other connections, of live keys, still cancel by theirs.
func (p *presence) leave(account int64, cancel bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.counts[account]--
	if p.counts[account] > 0 {
		return
	}
	delete(p.counts, account)
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if !cancel {
		if err := p.store.WithdrawPresence(ctx, p.front, account); err != nil {
			// Then the record lapses within presenceTTL, and the sweep cancels the orders: a
			// failure errs on the side cancelOnDisconnect was asked for.
			p.log.Warn("could not record the end of a cancel-on-disconnect connection whose key ended; its orders are cancelled when the record lapses",
				"account", account, "err", err)
		}
		return
	}
	tripped, err := p.store.LeavePresence(ctx, p.front, account, presenceTTL)
	if err != nil {
		// The record lapses within presenceTTL, and a sweep cancels the orders then.
		p.log.Warn("could not record a cancel-on-disconnect connection's end; its orders are cancelled when the record lapses",
			"account", account, "err", err)
		return
	}
	if tripped {
		p.log.Info("the account's last cancel-on-disconnect connection closed: cancelling its open orders", "account", account)
	}
}

// run refreshes this front's records and sweeps every front's lapsed ones until ctx ends.
func (p *presence) run(ctx context.Context) {
	every(ctx, presenceRefresh, func() {
		p.refresh(ctx)
		if n, err := p.store.SweepPresence(ctx, presenceTTL); err != nil && ctx.Err() == nil {
			p.log.Warn("could not sweep lapsed cancel-on-disconnect records", "err", err)
		} else if n > 0 {
			p.log.Info("cancel-on-disconnect records lapsed (a front stopped): cancelling the accounts' open orders", "accounts", n)
		}
	})
}

// refresh renews this front's records. It holds the counts while it does, as join and leave do:
// a refresh that read an account's count and wrote after its last connection's leave would
// bring back the record leave removed, and the account's orders would be cancelled only when
// that record lapsed.
func (p *presence) refresh(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	accounts := make([]int64, 0, len(p.counts))
	for a := range p.counts {
		accounts = append(accounts, a)
	}
	tctx, cancel := context.WithTimeout(ctx, presenceRefresh)
	defer cancel()
	if err := p.store.TouchPresence(tctx, p.front, accounts); err != nil && ctx.Err() == nil {
		p.log.Warn("could not refresh the cancel-on-disconnect connections' records", "err", err)
	}
}

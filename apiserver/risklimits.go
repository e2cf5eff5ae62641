package apiserver

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// Self-set risk limits (GET and PUT /api/v1/account/risk-limits). The front only keeps them in
// Postgres: the shards decide every refusal by them (internal/shard/risk.go), reading them with the
// account's cash, and the database holds at commit what a shard decided (migration 024), so a
// change needs no message to any shard and takes effect for the next order decided after it.

// maxRiskLimit bounds either limit: far above any position or cash play money reaches, and exact
// in every JSON reader (2^53 − 1).
const maxRiskLimit = 1<<53 - 1

// RiskLimits is GET and PUT /api/v1/account/risk-limits' answer: the limits (null: none) and what
// the account uses of them now.
type RiskLimits struct {
	MaxPosition   *int64        `json:"maxPosition"`
	MaxLockedCash *int64        `json:"maxLockedCash"`
	Used          RiskLimitsUse `json:"used"`
}

// RiskLimitsUse is what an account uses of its limits: its largest position-if-filled (shares of
// one outcome held plus the remaining quantity of its open BUY orders of that outcome) with the
// market and outcome it is in (null when it has none), and the cash its open orders lock.
type RiskLimitsUse struct {
	Position         int64      `json:"position"`
	PositionMarketID *uuid.UUID `json:"positionMarketId"`
	PositionOutcome  *string    `json:"positionOutcome"`
	LockedCash       int64      `json:"lockedCash"`
}

func riskLimitsOf(r *accounts.RiskLimits) RiskLimits {
	return RiskLimits{MaxPosition: r.MaxPosition, MaxLockedCash: r.MaxLockedCash,
		Used: RiskLimitsUse{Position: r.Position, PositionMarketID: r.PositionMarketID, PositionOutcome: r.PositionOutcome,
			LockedCash: r.LockedCash}}
}

// riskLimits shows the caller's risk limits and what it uses of them.
func (s *Server) riskLimits(c *gin.Context) error {
	r, err := s.cfg.Store.RiskLimits(c.Request.Context(), accountOf(c))
	return s.answerRiskLimits(c, r, err)
}

// setRiskLimits replaces the caller's risk limits: a field that is null or absent removes that
// limit. A limit below what is used now is allowed: it refuses only orders that add to it.
func (s *Server) setRiskLimits(c *gin.Context) error {
	obj, err := readObject(c.Request)
	if err != nil {
		return err
	}
	var limits [2]*int64
	for i, field := range []string{"maxPosition", "maxLockedCash"} {
		if !obj.has(field) {
			continue
		}
		n, err := obj.integer(field, 0, maxRiskLimit)
		if err != nil {
			return err
		}
		limits[i] = &n
	}
	r, err := s.cfg.Store.SetRiskLimits(c.Request.Context(), accountOf(c), limits[0], limits[1])
	return s.answerRiskLimits(c, r, err)
}

func (s *Server) answerRiskLimits(c *gin.Context, r accounts.RiskLimits, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return httpkit.NewError(http.StatusNotFound, "account_not_found", "the account of this API key no longer exists")
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, riskLimitsOf(&r))
	return nil
}

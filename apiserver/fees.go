package apiserver

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// Fees (docs/fees.md; package engine owns the rule, engine.Fees): a market's or an event's fee
// schedule, set through the admin API in pmx dev (PUT and DELETE /admin/v1/markets/{id}/fees and
// /admin/v1/events/{id}/fees) and through the resources' spec.fees where the operator manages them;
// and what an account paid over a period (GET /api/v1/account/fees).

// feeSpan bounds GET /account/fees' period: the sum reads every fill of the account within it.
const (
	feeSpan        = 366 * 24 * time.Hour
	defaultFeeSpan = 30 * 24 * time.Hour
)

// AccountFees is GET /api/v1/account/fees' answer: what the account paid the exchange for its fills
// made at or after since and before until, in cents.
type AccountFees struct {
	Since   time.Time `json:"since"`
	Until   time.Time `json:"until"`
	Paid    int64     `json:"paid"`    // fees, as taker and as maker
	Rebates int64     `json:"rebates"` // rebates the exchange paid it (≥ 0)
	Net     int64     `json:"net"`     // paid − rebates
	Fills   int64     `json:"fills"`   // its fills that paid a fee or were paid a rebate
}

func (s *Server) accountFees(c *gin.Context) error {
	q := c.Request.URL.Query()
	at := func(field string, def time.Time) (time.Time, error) {
		if !q.Has(field) {
			return def, nil
		}
		return parseTime(field, q.Get(field))
	}
	until, err := at("until", s.now())
	if err != nil {
		return err
	}
	since, err := at("since", until.Add(-defaultFeeSpan))
	if err != nil {
		return err
	}
	if !since.Before(until) {
		return httpkit.FieldError("since", "out_of_range", "since must be before until")
	}
	if until.Sub(since) > feeSpan {
		return httpkit.FieldError("since", "out_of_range", "a call spans at most 366 days: narrow since and until, and add up several calls for longer")
	}
	t, err := s.cfg.Store.Fees(c.Request.Context(), accountOf(c), since, until)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, AccountFees{Since: since, Until: until, Paid: t.Paid, Rebates: t.Rebates, Net: t.Paid - t.Rebates, Fills: t.Fills})
	return nil
}

// feesOf reads a schedule's body: {"takerBps": 0..10000, "makerBps": −takerBps..takerBps}.
func feesOf(c *gin.Context) (*engine.Fees, error) {
	obj, err := readObject(c.Request)
	if err != nil {
		return nil, err
	}
	if err := obj.oneKeyPerField([]string{"takerBps", "makerBps"}); err != nil {
		return nil, err
	}
	for _, f := range []string{"takerBps", "makerBps"} {
		if !obj.has(f) {
			return nil, httpkit.FieldError(f, "missing_field", "%s is required: a schedule has a taker and a maker rate in basis points of P × (1 − P) per share (DELETE the schedule to charge none)", f)
		}
	}
	taker, err := obj.integer("takerBps", 0, engine.MaxFeeRate)
	if err != nil {
		return nil, err
	}
	maker, err := obj.integer("makerBps", -engine.MaxFeeRate, engine.MaxFeeRate)
	if err != nil {
		return nil, err
	}
	f := engine.Fees{Taker: int(taker), Maker: int(maker)}
	if f.Validate() != nil {
		return nil, httpkit.FieldError("makerBps", "out_of_range", "makerBps must be from -takerBps to takerBps (%d to %d): a maker pays no more than a taker, and a rebate is no larger than the taker's fee", -taker, taker)
	}
	return &f, nil
}

// setFees answers PUT (set) and DELETE (remove) /admin/v1/{markets|events}/{id}/fees with the market
// or the event as it is afterwards.
func (s *Server) setFees(events, remove bool) func(*gin.Context) error {
	set := s.cfg.Store.SetMarketFees
	if events {
		set = s.cfg.Store.SetEventFees
	}
	return s.changeRow(events, func(c *gin.Context, id uuid.UUID) error {
		var fees *engine.Fees
		if !remove {
			var err error
			if fees, err = feesOf(c); err != nil {
				return err
			}
		}
		changed, err := set(c.Request.Context(), id, fees, s.now())
		if changed {
			s.log.Info("a fee schedule changed", "id", id, "event", events, "fees", fees)
		}
		return err
	})
}

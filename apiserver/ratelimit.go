package apiserver

import (
	"math"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/pmx-dev/pmx/internal/kit/httpkit"
	"github.com/pmx-dev/pmx/internal/kit/ratelimit"
)

// Rate limits (package ratelimit): every authenticated /api/v1 request spends a token of its
// account's read bucket (GET) or write bucket (the rest); a batch spends one per order or cancel
// it names. Every answer says where the account stands in the RateLimit-Limit,
// RateLimit-Remaining and RateLimit-Reset headers; a refused request is 429 rate_limited with
// Retry-After, and changes nothing.

// kindOf says which bucket a request spends from.
func kindOf(r *http.Request) string {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return ratelimit.Read
	}
	return ratelimit.Write
}

// rateLimit spends one token of the request's kind, or answers 429.
func (s *Server) rateLimit(c *gin.Context) {
	if err := s.charge(c, kindOf(c.Request), 1); err != nil {
		if e, ok := err.(*httpkit.Error); ok {
			httpkit.AbortUnread(c, e)
		} else {
			writeError(c, err)
			c.Abort()
		}
		return
	}
	c.Next()
}

// charge spends cost tokens of the caller's bucket of a kind and sets the RateLimit headers; it
// returns the 429 to answer when the bucket cannot pay.
func (s *Server) charge(c *gin.Context, kind string, cost float64) error {
	if cost <= 0 {
		return nil
	}
	d, err := s.limiter.Take(c.Request.Context(), accountOf(c), kind, cost)
	if err != nil {
		return err
	}
	setRateHeaders(c, d)
	if d.Allowed {
		return nil
	}
	retry := max(1, int(math.Ceil(d.RetryAfter.Seconds())))
	c.Header("Retry-After", strconv.Itoa(retry))
	return &httpkit.Error{Status: http.StatusTooManyRequests, Code: "rate_limited",
		Message: "the account's " + kind + " rate limit is spent (" + strconv.FormatFloat(d.Limit.Rate, 'f', -1, 64) +
			" a second, bursts of " + strconv.FormatFloat(d.Limit.Burst, 'f', -1, 64) + "; a batch counts each of its orders): retry after " +
			strconv.Itoa(retry) + " s, and see GET /api/v1/account/limits"}
}

func setRateHeaders(c *gin.Context, d ratelimit.Decision) {
	if !d.Limit.On() {
		return
	}
	c.Header("RateLimit-Limit", strconv.FormatFloat(d.Limit.Burst, 'f', 0, 64))
	c.Header("RateLimit-Remaining", strconv.FormatFloat(math.Floor(d.Remaining), 'f', 0, 64))
	c.Header("RateLimit-Reset", strconv.Itoa(int(math.Ceil(d.Reset.Seconds()))))
}

// limitView is one bucket as GET /account/limits shows it.
type limitView struct {
	Limited      bool    `json:"limited"`
	PerSecond    float64 `json:"perSecond"`
	Burst        float64 `json:"burst"`
	Remaining    float64 `json:"remaining"`
	ResetSeconds float64 `json:"resetSeconds"`
}

// accountLimits shows the caller's limits and what is left of each.
func (s *Server) accountLimits(c *gin.Context) error {
	out := map[string]limitView{}
	for _, kind := range []string{ratelimit.Read, ratelimit.Write} {
		d, err := s.limiter.Peek(c.Request.Context(), accountOf(c), kind)
		if err != nil {
			return err
		}
		v := limitView{Limited: d.Limit.On()}
		if v.Limited {
			v.PerSecond, v.Burst = d.Limit.Rate, d.Limit.Burst
			v.Remaining, v.ResetSeconds = math.Floor(d.Remaining), math.Ceil(d.Reset.Seconds())
		}
		out[kind+"s"] = v
	}
	c.JSON(http.StatusOK, out)
	return nil
}

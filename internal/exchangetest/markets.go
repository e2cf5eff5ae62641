package exchangetest

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// Markets creates markets and moves them through their lifecycle: through the admin API in the
// standalone exchange, through Market resources in distributed mode. Each call returns once the
// exchange has done it, with the market as it then is.
type Markets interface {
	// Create makes an OPEN market, ready to trade; fields are the Market fields (question,
	// category, closesAt, ...).
	Create(t testing.TB, fields map[string]any) apiserver.Market
	Close(t testing.TB, id uuid.UUID) apiserver.Market
	Reopen(t testing.TB, id uuid.UUID) apiserver.Market
	Resolve(t testing.TB, id uuid.UUID, outcome string) apiserver.Market
	Cancel(t testing.TB, id uuid.UUID) apiserver.Market
	// Pause pauses (or resumes) trading in the market without closing it, and returns once every
	// shard refuses (or takes) its placements.
	Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Market
	// SetFees gives the market its own fee schedule (nil: takes it away, leaving its event's or
	// none), and returns once every shard places its orders under it.
	SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Market
}

// AdminMarkets drives markets through the admin API.
type AdminMarkets struct{ T *Target }

func (a AdminMarkets) Create(t testing.TB, fields map[string]any) apiserver.Market {
	t.Helper()
	var m apiserver.Market
	a.T.Admin(t, "POST", "/admin/v1/markets", marketFields(fields), http.StatusCreated, &m)
	return m
}

func (a AdminMarkets) act(t testing.TB, id uuid.UUID, action string, body any) apiserver.Market {
	t.Helper()
	var m apiserver.Market
	a.T.Admin(t, "POST", "/admin/v1/markets/"+id.String()+"/"+action, body, http.StatusOK, &m)
	return m
}

func (a AdminMarkets) Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Market {
	if paused {
		return a.act(t, id, "pause", nil)
	}
	return a.act(t, id, "resume", nil)
}

func (a AdminMarkets) SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Market {
	t.Helper()
	var m apiserver.Market
	if fees == nil {
		a.T.Admin(t, "DELETE", "/admin/v1/markets/"+id.String()+"/fees", nil, http.StatusOK, &m)
	} else {
		a.T.Admin(t, "PUT", "/admin/v1/markets/"+id.String()+"/fees", fees, http.StatusOK, &m)
	}
	return m
}

func (a AdminMarkets) Close(t testing.TB, id uuid.UUID) apiserver.Market {
	return a.act(t, id, "close", nil)
}
func (a AdminMarkets) Reopen(t testing.TB, id uuid.UUID) apiserver.Market {
	return a.act(t, id, "reopen", nil)
}
func (a AdminMarkets) Cancel(t testing.TB, id uuid.UUID) apiserver.Market {
	return a.act(t, id, "cancel", nil)
}
func (a AdminMarkets) Resolve(t testing.TB, id uuid.UUID, outcome string) apiserver.Market {
	return a.act(t, id, "resolve", map[string]any{"outcome": outcome})
}

// marketFields fills in the required fields a test leaves out.
func marketFields(fields map[string]any) map[string]any {
	body := map[string]any{"question": "Will the test pass?", "category": "testing"}
	for k, v := range fields {
		body[k] = v
	}
	return body
}

package exchangetest

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
)

// Events creates events and moves all of an event's markets through their lifecycle together:
// through the admin API in the standalone exchange, through Event resources in distributed mode.
// Each call returns once the exchange has done it, with the event as it then is.
type Events interface {
	// Create makes an OPEN event of the given outcome keys (each labelled "Outcome <key>"), every
	// outcome's market ready to trade.
	Create(t testing.TB, keys ...string) apiserver.Event
	Close(t testing.TB, id uuid.UUID) apiserver.Event
	Reopen(t testing.TB, id uuid.UUID) apiserver.Event
	// Resolve resolves the event to the outcome key.
	Resolve(t testing.TB, id uuid.UUID, key string) apiserver.Event
	// Cancel voids the event.
	Cancel(t testing.TB, id uuid.UUID) apiserver.Event
	// Pause pauses (or resumes) trading in every market of the event without closing them.
	Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Event
	// SetFees gives the event a fee schedule, which its markets without one of their own carry (nil:
	// takes it away), and returns once every shard places their orders under it.
	SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Event
}

// events is how the suite makes events on tg: its Events; or else, for a target whose markets
// are Market resources, Event resources the same way; or else the admin API (the standalone
// exchange's targets that predate events set only Markets).
func (tg *Target) events() Events {
	if tg.Events != nil {
		return tg.Events
	}
	if k, ok := tg.Markets.(*KubeMarkets); ok {
		return &KubeEvents{Markets: k}
	}
	return AdminEvents{tg}
}

// eventQuestion is the question of every event the suite makes.
const eventQuestion = "Which one wins"

// AdminEvents drives events through the admin API.
type AdminEvents struct{ T *Target }

func (a AdminEvents) Create(t testing.TB, keys ...string) apiserver.Event {
	t.Helper()
	outcomes := make([]map[string]any, len(keys))
	for i, k := range keys {
		outcomes[i] = map[string]any{"key": k, "label": "Outcome " + k}
	}
	var e apiserver.Event
	a.T.Admin(t, "POST", "/admin/v1/events", map[string]any{"question": eventQuestion, "category": "test",
		"outcomes": outcomes}, http.StatusCreated, &e)
	return e
}

func (a AdminEvents) act(t testing.TB, id uuid.UUID, action string, body any) apiserver.Event {
	t.Helper()
	var e apiserver.Event
	a.T.Admin(t, "POST", "/admin/v1/events/"+id.String()+"/"+action, body, http.StatusOK, &e)
	return e
}

func (a AdminEvents) Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Event {
	if paused {
		return a.act(t, id, "pause", nil)
	}
	return a.act(t, id, "resume", nil)
}

func (a AdminEvents) SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Event {
	t.Helper()
	var e apiserver.Event
	if fees == nil {
		a.T.Admin(t, "DELETE", "/admin/v1/events/"+id.String()+"/fees", nil, http.StatusOK, &e)
	} else {
		a.T.Admin(t, "PUT", "/admin/v1/events/"+id.String()+"/fees", fees, http.StatusOK, &e)
	}
	return e
}

func (a AdminEvents) Close(t testing.TB, id uuid.UUID) apiserver.Event {
	return a.act(t, id, "close", nil)
}
func (a AdminEvents) Reopen(t testing.TB, id uuid.UUID) apiserver.Event {
	return a.act(t, id, "reopen", nil)
}
func (a AdminEvents) Cancel(t testing.TB, id uuid.UUID) apiserver.Event {
	return a.act(t, id, "cancel", nil)
}
func (a AdminEvents) Resolve(t testing.TB, id uuid.UUID, key string) apiserver.Event {
	return a.act(t, id, "resolve", map[string]any{"outcome": key})
}

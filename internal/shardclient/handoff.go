package shardapi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/store"
)

// The planned handoff (docs/architecture.md §6) adds two optional calls to version 1, which the
// operator sends: POST /internal/v1/handoff to the old owner, which hands the markets over in its
// batch loop (exchange.Handoff) and answers their new epochs, then POST /internal/v1/take-over to
// the new owner, which loads them at once. A shard of the release before answers 404 to both: the
// operator then moves the markets as before the handoff existed (store.Move, fenced like a
// failover), and a new owner of that release loads them on first use. A command the old owner
// refuses after the handoff answers not_owner, as a shard that lost a market always has, with
// "handedOver": true, which a front of the release before ignores.
const (
	internalHandoff  = "/internal/v1/handoff"
	internalTakeOver = "/internal/v1/take-over"
)

// handoffV1 asks the owner of markets to hand them to the shard named To.
type handoffV1 struct {
	Markets []uuid.UUID `json:"markets"`
	To      string      `json:"to"`
}

// handedV1 answers a handoff: each market's epoch under its new owner, in the request's order.
type handedV1 struct {
	Epochs []int64 `json:"epochs"`
}

// takeOverV1 tells the new owner of markets to load them under their epochs.
type takeOverV1 struct {
	Markets []uuid.UUID `json:"markets"`
	Epochs  []int64     `json:"epochs"`
}

// handoffTimeout bounds a handoff as the operator waits for it: a shard's batch loop gives up on a
// transaction after 30 s, and a stuck shard must not hold the operator's rebalancing longer.
const handoffTimeout = 30 * time.Second

// maxShardName bounds a shard's name as a handoff names it (a StatefulSet pod's name is at most
// 63 characters).
const maxShardName = 253

// checkMarkets checks the markets a handoff names: from 1 to maxMany, none the nil id, none twice.
func checkMarkets(markets []uuid.UUID) *domain.Error {
	if len(markets) == 0 || len(markets) > maxMany {
		return invalid("markets", "name from 1 to %d markets", maxMany)
	}
	seen := make(map[uuid.UUID]bool, len(markets))
	for _, id := range markets {
		if id == uuid.Nil || seen[id] {
			return invalid("markets", "each market is a market's id, a UUID, named once")
		}
		seen[id] = true
	}
	return nil
}

// handoffRoutes serves the handoff's two calls.
func handoffRoutes(in *gin.RouterGroup, ho exchange.Shard, answer func(*gin.Context, int, any, error)) {
	in.POST("/handoff", func(c *gin.Context) {
		var w handoffV1
		if !bind(c, &w) {
			return
		}
		if e := checkMarkets(w.Markets); e != nil {
			refuse(c, e)
			return
		}
		if w.To == "" || len(w.To) > maxShardName {
			refuse(c, invalid("to", "to must name the shard to hand the markets to, in at most %d characters", maxShardName))
			return
		}
		epochs, err := ho.HandOff(c.Request.Context(), w.Markets, w.To)
		answer(c, http.StatusOK, handedV1{Epochs: epochs}, err)
	})
	in.POST("/take-over", func(c *gin.Context) {
		var w takeOverV1
		if !bind(c, &w) {
			return
		}
		if e := checkMarkets(w.Markets); e != nil {
			refuse(c, e)
			return
		}
		if len(w.Epochs) != len(w.Markets) {
			refuse(c, invalid("epochs", "epochs must give each market's epoch, in the order of markets"))
			return
		}
		answer(c, http.StatusNoContent, nil, ho.TakeOver(c.Request.Context(), w.Markets, w.Epochs))
	})
}

// HandOff, in the operator, moves markets from one live shard to another by the planned handoff:
// the old owner finishes what it has taken for them and moves them in Postgres itself, then the new
// owner is told to load them. An old owner of the release before the handoff (404), or one with no
// registered address, has them moved as before (store.Move: fenced, as in a failover). moved is
// false, with no error, when the old owner no longer owns them all: the caller looks again.
func (r *Router) HandOff(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error) {
	hc := r.client()
	ctx, cancel := context.WithTimeout(ctx, handoffTimeout)
	defer cancel()
	addr, err := r.Store.ShardAddress(ctx, from)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	if addr == "" {
		return r.Store.Move(ctx, markets, from, to)
	}
	old := &shardClient{base: "http://" + addr, token: r.Token, http: hc}
	var handed handedV1
	err = r.noteVersion(old.call(ctx, http.MethodPost, internalHandoff, handoffV1{Markets: markets, To: to}, &handed))
	switch {
	case errors.Is(err, errOlderPeer):
		r.log.Info("the shard has no planned handoff (an older release): moving its markets as a failover does", "shard", from, "err", err)
		return r.Store.Move(ctx, markets, from, to)
	case errors.Is(err, exchange.ErrNotOwner):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("while shard %s handed %d markets to %s: %w", from, len(markets), to, err)
	case len(handed.Epochs) != len(markets):
		return true, fmt.Errorf("shard %s handed %d markets to %s and answered %d epochs", from, len(markets), to, len(handed.Epochs))
	}
	r.takeOver(ctx, markets, handed.Epochs, to)
	return true, nil
}

// takeOver tells the new owner of markets to load them now rather than on their first use or its
// next heartbeat. It only speeds the handoff up: a failure is logged.
func (r *Router) takeOver(ctx context.Context, markets []uuid.UUID, epochs []int64, to string) {
	addr, err := r.Store.ShardAddress(ctx, to)
	if err == nil && addr != "" {
		c := &shardClient{base: "http://" + addr, token: r.Token, http: r.client()}
		err = r.noteVersion(c.call(ctx, http.MethodPost, internalTakeOver, takeOverV1{Markets: markets, Epochs: epochs}, nil))
	}
	if err != nil && !errors.Is(err, errOlderPeer) {
		r.log.Warn("could not tell the new owner to load the markets handed to it; it loads them on first use", "shard", to, "err", err)
	}
}

// HandOffAll, in a shard process that stops (SIGTERM), hands every OPEN market it owns (from) to
// the other live shards — live within ttl — by the planned handoff on its own shards (ho), each
// unit (a market, or an event's markets together) to the one then holding the fewest markets, and
// tells each new owner to load them. What it cannot hand over (no other shard is live, or a
// handoff fails) the process's unregistering releases as before, for the operator to schedule. It
// returns how many markets it handed over.
func (r *Router) HandOffAll(ctx context.Context, from string, ho exchange.Handoff, ttl time.Duration) (int, error) {
	r.client()
	live, err := r.Store.LiveShards(ctx, ttl)
	if err != nil {
		return 0, fmt.Errorf("while listing the live shards to hand markets to: %w", err)
	}
	count := map[string]int{}
	for _, sh := range live {
		if sh.Name != from && !sh.Draining { // another that stops too takes nothing
			count[sh.Name] = sh.Markets
		}
	}
	if len(count) == 0 {
		return 0, nil
	}
	rows, err := r.Store.Markets(ctx, domain.MarketOpen)
	if err != nil {
		return 0, fmt.Errorf("while listing the markets to hand over: %w", err)
	}
	var units [][]uuid.UUID
	events := map[uuid.UUID]int{}
	for _, m := range rows {
		if m.Shard == nil || *m.Shard != from {
			continue
		}
		if m.EventID == nil {
			units = append(units, []uuid.UUID{m.ID})
			continue
		}
		i, ok := events[*m.EventID]
		if !ok {
			i = len(units)
			events[*m.EventID] = i
			units = append(units, nil)
		}
		units[i] = append(units[i], m.ID)
	}
	handed := 0
	for _, unit := range units {
		to := slices.MinFunc(slices.Sorted(maps.Keys(count)), func(a, b string) int { return cmp.Compare(count[a], count[b]) })
		epochs, err := ho.HandOff(ctx, unit, to)
		if err != nil {
			r.log.Warn("could not hand markets over on stopping; unregistering releases them", "markets", unit, "to", to, "err", err)
			continue
		}
		count[to] += len(unit)
		handed += len(unit)
		r.takeOver(ctx, unit, epochs, to)
	}
	return handed, nil
}

package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/event"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// A conversion (event.Conversion) is one command of the batch loop, like a placement: the shard
// owning all of an event's markets decides it on what the batch read of the account's holdings
// (never from the views: it runs from reads, its NO holdings locked, its account's limits read),
// and writes its shares, its cash, its row and its account's converted event in the batch's
// transaction, answering only once that has committed. Shares that open SELL orders lock are not
// the account's to convert: only freeShares counts. A retry with the same client request id
// finds the conversion's row when it is readied (prepareConvert) and answers it, changing nothing.

// conversion is a cmdConvert's request and answer.
type conversion struct {
	req     exchange.ConvertRequest
	ev      records.Event
	conv    event.Conversion
	markets []uuid.UUID // the event's markets, in its outcomes' order

	done *records.Conversion // the conversion a retry names, found when readied: nothing to do
	row  records.Conversion  // the answer: done's, or the conversion the batch wrote
}

// converts reports whether a batch holds a conversion, which never runs from the views.
func converts(cmds []*command) bool {
	return slices.ContainsFunc(cmds, func(c *command) bool { return c.kind == cmdConvert })
}

// convertsFrom adds what a conversion reserves from to a batch's reads: the account (for its risk
// limits) and its NO holdings of the listed outcomes.
func convertsFrom(c *command, cash map[int64]bool, shares map[store.ShareKey]bool) {
	if c.err != nil || c.convert.done != nil {
		return
	}
	cv := c.convert
	cash[cv.req.Account] = true
	for _, i := range cv.conv.Listed {
		shares[store.ShareKey{Account: cv.req.Account, Market: cv.markets[i], Outcome: engine.No.String()}] = true
	}
}

// Convert converts an account's shares of an event in one of the shard's batches.
func (s *Shard) Convert(ctx context.Context, req exchange.ConvertRequest) (records.Conversion, error) {
	e, err := s.cfg.Store.Event(ctx, req.Event)
	if errors.Is(err, store.ErrNotFound) {
		return records.Conversion{}, domain.ErrEventNotFound
	} else if err != nil {
		return records.Conversion{}, err
	}
	keys := make([]string, len(e.Outcomes))
	markets := make([]uuid.UUID, len(e.Outcomes))
	for i, o := range e.Outcomes {
		keys[i], markets[i] = o.Key, o.MarketID
	}
	conv, err := event.ParseConversion(keys, req.Outcomes, req.Quantity)
	if err != nil {
		return records.Conversion{}, err
	}
	c := &command{kind: cmdConvert, market: markets[0], convert: &conversion{req: req, ev: e, conv: conv, markets: markets}}
	if err := s.do(ctx, c); err != nil {
		return records.Conversion{}, err
	}
	return c.convert.row, nil
}

// prepareConvert loads the event's markets and finds the conversion a retry names, if any. It
// runs each time the batch is readied, so a batch that failed on the unique index of client
// request ids (another batch wrote the same conversion first) finds it when it runs again.
func (s *Shard) prepareConvert(ctx context.Context, c *command) error {
	cv := c.convert
	cv.done, cv.row = nil, records.Conversion{}
	for _, id := range cv.markets {
		if _, err := s.ensure(ctx, id); err != nil {
			return err
		}
	}
	if cv.req.ClientRequestID == "" {
		return nil
	}
	prev, err := s.cfg.Store.ConversionByRequest(ctx, cv.req.Account, cv.req.ClientRequestID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if prev.EventID != cv.req.Event || prev.Quantity != cv.req.Quantity || !slices.Equal(prev.Outcomes, cv.req.Outcomes) {
		return domain.ErrClientRequestIDReused
	}
	cv.done, cv.row = &prev, prev
	return nil
}

// convert runs a conversion into the batch being built, or refuses it with nothing changed.
func (s *Shard) convert(c *command, now time.Time) {
	cv := c.convert
	if cv.done != nil {
		return
	}
	a := s.acc
	account := cv.req.Account
	if cv.req.ClientRequestID != "" {
		k := store.ClientOrderKey{Account: account, ID: cv.req.ClientRequestID}
		if a.convertIDs[k] != nil {
			// The same request twice in one batch: the first one's conversion answers both.
			prev := a.convertIDs[k]
			if prev.EventID != cv.req.Event || prev.Quantity != cv.req.Quantity || !slices.Equal(prev.Outcomes, cv.req.Outcomes) {
				c.err = domain.ErrClientRequestIDReused
				return
			}
			cv.row = *prev
			return
		}
	}
	ms := make([]*marketState, len(cv.markets))
	for i, id := range cv.markets {
		m := s.markets[id]
		if m == nil || m.status != domain.MarketOpen {
			c.err = domain.ErrEventNotOpen
			return
		}
		ms[i] = m
	}
	eff := cv.conv.Effect(len(ms))
	for i, m := range ms {
		if eff.NO[i] < 0 && a.freeShares[store.ShareKey{Account: account, Market: m.id, Outcome: engine.No.String()}] < -eff.NO[i] {
			c.err = a.short(&domain.Error{Kind: domain.Invalid, Code: domain.ErrInsufficientShares.Code, Field: "quantity",
				Message: fmt.Sprintf("the account holds fewer than %d unlocked NO shares of outcome %q: shares its open SELL orders lock cannot be converted; GET /positions shows them",
					-eff.NO[i], cv.ev.Outcomes[i].Key)})
			return
		}
	}
	// A conversion adds YES shares: like a BUY, it may not take a position past maxPosition.
	for i, m := range ms {
		if eff.YES[i] > 0 {
			if err := a.checkRisk(account, engine.Yes, m.exposed(account, engine.Yes), eff.YES[i], 0); err != nil {
				c.err = err
				return
			}
		}
	}
	for i, m := range ms {
		a.touch(m) // its exposures change: a batch that fails reloads it (undo)
		if eff.NO[i] != 0 {
			a.addShares(account, m.id, engine.No, eff.NO[i], 0)
			s.expose(m.id, account, engine.No, eff.NO[i])
		}
		if eff.YES[i] != 0 {
			a.addShares(account, m.id, engine.Yes, eff.YES[i], 0)
			s.expose(m.id, account, engine.Yes, eff.YES[i])
		}
	}
	if eff.Cash != 0 {
		a.addCash(account, eff.Cash, 0)
	}
	row := records.Conversion{ID: uuid.New(), EventID: cv.ev.ID, AccountID: account, Outcomes: slices.Clone(cv.req.Outcomes),
		Quantity: cv.req.Quantity, Cash: eff.Cash, CreatedAt: now}
	if cv.req.ClientRequestID != "" {
		id := cv.req.ClientRequestID
		row.ClientRequestID = &id
		a.convertIDs[store.ClientOrderKey{Account: account, ID: id}] = &row
	}
	a.batch.Conversions = append(a.batch.Conversions, row)
	cv.row = row
	w := apijson.ConversionOf(&row)
	s.accountEvent(account, feed.AccountEvent{Type: feed.AccountConverted, Conversion: &w})
}

// Convert converts on the shard serving the event's markets (Shard.Convert).
func (set *Set) Convert(ctx context.Context, req exchange.ConvertRequest) (records.Conversion, error) {
	e, err := set.cfg.Store.Event(ctx, req.Event)
	if errors.Is(err, store.ErrNotFound) {
		return records.Conversion{}, domain.ErrEventNotFound
	} else if err != nil {
		return records.Conversion{}, err
	}
	i := -1
	for _, o := range e.Outcomes {
		j, err := set.of(ctx, o.MarketID)
		if err != nil {
			return records.Conversion{}, err
		}
		if i >= 0 && j != i {
			return records.Conversion{}, fmt.Errorf("event %s's markets are on different shards: %w", req.Event, exchange.ErrUnavailable)
		}
		i = j
	}
	return set.shards[i].Convert(ctx, req)
}

// ownsAll reports whether the shard holds every one of the markets.
func (s *Shard) ownsAll(markets []uuid.UUID) bool {
	for _, id := range markets {
		if _, ok := s.markets[id]; !ok {
			return false
		}
	}
	return true
}

package shard

import (
	"fmt"
	"time"

	"github.com/pmx-dev/pmx/domain"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/store"
)

// Execution: what each trading or lifecycle command does to a book and to the batch's effects.

// place reserves an order's cash or shares, then matches it. The reservation sees every earlier
// command of the batch, as if each had committed on its own.
func (s *Shard) place(c *command, now time.Time) {
	p := &c.place
	m := s.markets[p.Market]
	if m.status != domain.MarketOpen {
		c.err = domain.ErrMarketNotOpen
		return
	}
	o := engine.Order{ID: engine.OrderID(m.lastOrder + 1), Account: engine.AccountID(p.Account),
		Side: p.Side, Outcome: p.Outcome, Price: p.Price, Quantity: p.Quantity}
	if err := s.acc.reserve(m.id, &o); err != nil {
		c.err = err
		return
	}
	r := &s.result
	if err := m.book.Submit(o, r); err != nil {
		s.acc.unlock(m.id, &engine.OrderState{Order: o})
		c.err = err
		return
	}
	m.lastOrder++
	s.acc.touch(m)
	placed := store.PlacedOrder{
		Order: store.Order{ID: store.NewID(), MarketID: m.id, Side: p.Side.String(), Outcome: p.Outcome.String(),
			Price: p.Price, Quantity: p.Quantity, FilledQuantity: r.Order.Filled, Status: r.Order.Status,
			CreatedAt: now, UpdatedAt: now, Seq: m.lastOrder, AccountID: p.Account},
		Trades: make([]store.Trade, 0, len(r.Fills)),
	}
	s.acc.newOrder(placed.Order)
	for i := range r.Fills {
		f := &r.Fills[i]
		m.lastTrade++
		t := store.Trade{ID: store.NewID(), MarketID: m.id, Outcome: f.Taker.Outcome.String(), Side: f.Taker.Side.String(),
			Price: f.Taker.Price, Quantity: f.Quantity, YesPrice: f.YesPrice, CreatedAt: now}
		placed.Trades = append(placed.Trades, t)
		s.acc.batch.Trades = append(s.acc.batch.Trades, store.TradeRow{Trade: t, Seq: m.lastTrade, Kind: f.Kind.String(),
			TakerOrderSeq: m.lastOrder, MakerOrderSeq: int64(f.Maker.Order),
			TakerAccount: int64(f.Taker.Account), MakerAccount: int64(f.Maker.Account)})
		s.acc.leg(m.id, &f.Taker)
		s.acc.leg(m.id, &f.Maker)
		s.acc.orderState(orderKey{m.id, int64(f.Maker.Order)}, int64(f.Maker.Account), f.Maker.Filled, f.Maker.Status)
		m.lastPrice = f.YesPrice
	}
	for i := range r.Cancelled {
		s.acc.release(m.id, &r.Cancelled[i])
	}
	if len(r.Fills) > 0 {
		last := m.lastPrice
		s.acc.market(m.id).LastTradePrice = &last
	}
	c.placed = placed
}

// cancel takes an order of the account out of its book; see finished.go for the refusals.
func (s *Shard) cancel(c *command) {
	r := &c.cancel
	m := s.markets[r.Market]
	id := engine.OrderID(r.Seq)
	if m.book != nil {
		if st, ok := m.book.Order(id); ok {
			if int64(st.Account) != r.Account {
				c.err = domain.ErrNotYourOrder
				return
			}
			st, err := m.book.Cancel(id)
			if err != nil {
				panic(fmt.Sprintf("shard: order %d of market %s is in the book and could not be cancelled: %v", id, m.id, err))
			}
			s.acc.touch(m)
			s.acc.release(m.id, &st)
			c.keys = append(c.keys[:0], orderKey{m.id, r.Seq})
			return
		}
	}
	if f, ok := m.finished.get(r.Seq); ok {
		c.err = refuseCancel(f.account, f.status, r.Account)
		return
	}
	c.err = errFateUnknown
}

func (s *Shard) cancelAll(c *command) {
	c.keys = c.keys[:0]
	for _, id := range c.markets {
		m, ok := s.markets[id]
		if !ok || m.book == nil {
			continue
		}
		cancelled := m.book.CancelAccount(engine.AccountID(c.account), nil)
		if len(cancelled) == 0 {
			continue
		}
		s.acc.touch(m)
		for i := range cancelled {
			s.acc.release(m.id, &cancelled[i])
			c.keys = append(c.keys, orderKey{m.id, int64(cancelled[i].ID)})
		}
	}
}

func (s *Shard) transition(c *command) {
	m := s.markets[c.market]
	plan, err := market.Transition(m.status, c.action)
	if err != nil {
		c.err = err
		return
	}
	s.acc.touch(m)
	if plan.CancelOrders && m.book != nil {
		for _, st := range m.book.Resting(nil) {
			cancelled, err := m.book.Cancel(st.ID)
			if err != nil {
				panic(fmt.Sprintf("shard: resting order %d of market %s could not be cancelled: %v", st.ID, m.id, err))
			}
			s.acc.release(m.id, &cancelled)
		}
	}
	if plan.Settle {
		s.acc.batch.Settlements = append(s.acc.batch.Settlements, store.Settlement{Market: m.id, Outcome: plan.Outcome})
		m.book = nil
	} else {
		s.acc.market(m.id).Status = plan.To
	}
	m.status = plan.To
}

// answerCancels fills in the orders cancel commands answer with, from the rows just written.
func (s *Shard) answerCancels(cmds []*command, updated []store.Order) {
	byKey := make(map[orderKey]store.Order, len(updated))
	for _, o := range updated {
		byKey[orderKey{o.MarketID, o.Seq}] = o
	}
	for _, c := range cmds {
		if c.err != nil || (c.kind != cmdCancel && c.kind != cmdCancelAll) {
			continue
		}
		c.orders = make([]store.Order, 0, len(c.keys))
		for _, k := range c.keys {
			o, ok := byKey[k]
			if !ok {
				o, _ = s.acc.order(k) // placed earlier in this same batch
			}
			c.orders = append(c.orders, o)
		}
	}
}

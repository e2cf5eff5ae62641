package shard

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Execution: what each trading or lifecycle command does to a book and to the batch's effects.

// place reserves an order's cash or shares, then matches it. The reservation sees every earlier
// command of the batch, as if each had committed on its own.
func (s *Shard) place(c *command, now time.Time) {
	p := &c.place
	if p.TimeInForce == engine.GTD {
		// The order's feed events carry its expiry, and an event that cannot be encoded (a time
		// past year 9999) would fail the whole batch with it (recordAccountEvents): the one value
		// of a placement that can is refused here, for this order alone, whoever sent it.
		if err := domain.CheckTime("expiresAt", p.ExpiresAt); err != nil {
			c.err = err
			return
		}
	}
	m := s.markets[p.Market]
	if m.status != domain.MarketOpen {
		c.err = domain.ErrMarketNotOpen
		return
	}
	if halted := s.haltOf(m); halted != nil {
		c.err = halted
		return
	}
	clientID := store.ClientOrderKey{Account: p.Account, ID: p.ClientOrderID}
	if p.ClientOrderID != "" && s.acc.taken(clientID) {
		c.err = domain.ErrClientOrderIDTaken
		return
	}
	if p.OrderGroupID != uuid.Nil {
		if err := s.checkGroup(p.Account, p.OrderGroupID); err != nil {
			c.err = err
			return
		}
	}
	s.expire(m, now) // an expired order never trades
	o := engine.Order{ID: engine.OrderID(m.lastOrder + 1), Account: engine.AccountID(p.Account),
		Side: p.Side, Outcome: p.Outcome, Price: p.Price, Quantity: p.Quantity,
		TimeInForce: p.TimeInForce, PostOnly: p.PostOnly, SelfTrade: p.SelfTrade, Fees: s.feesOf(m)}
	if o.TimeInForce.Rests() && m.book.OpenOrders(o.Account) >= s.cfg.MaxOpenOrders {
		c.err = domain.TooManyOpenOrders(s.cfg.MaxOpenOrders)
		return
	}
	r := &s.result
	if o.TimeInForce == engine.GTD && !p.ExpiresAt.After(now) {
		// Its time came before its batch did: it is recorded as expired, and never trades.
		r.Order = engine.OrderState{Order: o, Status: engine.StatusCancelled}
		r.Reason = engine.ReasonExpired
		r.Fills, r.Cancelled = r.Fills[:0], r.Cancelled[:0]
	} else {
		if o.Side == engine.Buy {
			lock, _ := o.Lock()
			if err := s.acc.checkRisk(p.Account, o.Outcome, m.exposed(p.Account, o.Outcome), o.Quantity, lock); err != nil {
				c.err = err
				return
			}
		}
		if err := s.acc.reserve(m.id, &o); err != nil {
			c.err = err
			return
		}
		if err := m.book.Submit(o, r); err != nil {
			s.acc.unlockTaker(m.id, &engine.OrderState{Order: o})
			c.err = err
			if errors.Is(err, engine.ErrPostOnlyWouldCross) {
				c.err = domain.ErrPostOnlyWouldCross
			}
			return
		}
		s.acc.arrived(m.id, &r.Order) // what an IOC or FOK order left unfilled, a maker's fee reserve
	}
	m.lastOrder++
	s.acc.touch(m)
	placed := records.PlacedOrder{
		Order: records.Order{ID: store.NewID(), MarketID: m.id, Side: p.Side.String(), Outcome: p.Outcome.String(),
			Price: p.Price, Quantity: p.Quantity, FilledQuantity: r.Order.Filled, Status: r.Order.Status,
			CreatedAt: now, UpdatedAt: now, Seq: m.lastOrder, AccountID: p.Account,
			TimeInForce: p.TimeInForce.String(), PostOnly: p.PostOnly, SelfTrade: p.SelfTrade.String(),
			CancelReason: reasonText(r.Reason), Fees: o.Fees},
		Trades: make([]records.Trade, 0, len(r.Fills)),
	}
	if p.OrderGroupID != uuid.Nil {
		group := p.OrderGroupID
		placed.OrderGroupID = &group
	}
	if p.TimeInForce == engine.GTD {
		at := p.ExpiresAt
		placed.ExpiresAt = &at
		if r.Order.Status.Resting() {
			m.expiries.add(at, m.lastOrder)
		}
	}
	if p.ClientOrderID != "" {
		id, fp := p.ClientOrderID, p.Placement
		placed.ClientOrderID, placed.Placement = &id, &fp
		s.acc.claim(clientID)
	}
	s.acc.newOrder(placed.Order)
	final := apijson.OrderOf(&placed.Order)
	taker := final // as accepted: before any fill
	taker.FilledQuantity, taker.Status, taker.CancelReason = 0, engine.StatusOpen.String(), nil
	s.orderEvent(p.Account, feed.AccountAccepted, taker)
	placed.Trades = s.settle(m, r, now, placed.Trades, &taker)
	s.restOrLeave(m, m.lastOrder, p.Account, final, r.Order.Status)
	c.placed = placed
	s.triggerReached()
}

// settle applies what a submission or an amend did besides the taker's own row: each fill's trade
// and both its legs, the makers' new fills, and the self-trade cancels; it appends the trades, as
// the taker sees them, to trades. taker is the taker's state for its account's feed, which each
// fill moves on (nil: none).
func (s *Shard) settle(m *marketState, r *engine.Result, now time.Time, trades []records.Trade, taker *apijson.Order) []records.Trade {
	for i := range r.Fills {
		f := &r.Fills[i]
		m.lastTrade++
		t := records.Trade{ID: store.NewID(), MarketID: m.id, Outcome: f.Taker.Outcome.String(), Side: f.Taker.Side.String(),
			Price: f.Taker.Price, Quantity: f.Quantity, YesPrice: f.YesPrice, CreatedAt: now, Fee: f.Taker.Fee}
		trades = append(trades, t)
		s.acc.batch.Trades = append(s.acc.batch.Trades, store.TradeRow{Trade: t, Seq: m.lastTrade, Kind: f.Kind.String(),
			TakerOrderSeq: int64(f.Taker.Order), MakerOrderSeq: int64(f.Maker.Order),
			TakerAccount: int64(f.Taker.Account), MakerAccount: int64(f.Maker.Account), MakerFee: f.Maker.Fee})
		s.acc.leg(m.id, &f.Taker)
		s.acc.leg(m.id, &f.Maker)
		if fee := f.Taker.Fee + f.Maker.Fee; fee != 0 {
			s.acc.addCash(s.exchange, fee, 0) // never negative: a rebate is paid out of the fill's taker fee
		}
		s.acc.orderState(orderKey{m.id, int64(f.Maker.Order)}, int64(f.Maker.Account), f.Maker.Filled, f.Maker.Status, engine.ReasonNone)
		if taker != nil {
			s.groupFilled(taker.OrderGroupID, f.Quantity)
		}
		if o, ok := m.resting[int64(f.Maker.Order)]; ok {
			s.groupFilled(o.OrderGroupID, f.Quantity)
		}
		m.lastPrice = f.YesPrice
		if taker != nil {
			taker.FilledQuantity, taker.Status, taker.UpdatedAt = f.Taker.Filled, f.Taker.Status.String(), now
			s.fillEvent(int64(f.Taker.Account), taker, &f.Taker, &t, "TAKER")
		}
		s.makerFilled(m, &f.Maker, &t)
	}
	for i := range r.Cancelled {
		s.release(m, &r.Cancelled[i], engine.ReasonSelfTrade)
	}
	if len(r.Fills) > 0 {
		last := m.lastPrice
		s.acc.market(m.id).LastTradePrice = &last
	}
	return trades
}

// amend changes a resting order of the account in place (engine.Book.Amend): it reserves what the
// order will lock beyond what it does, or releases what it will no longer lock, and settles the
// fills of a new price that crosses, as a placement does. An order that is not in the book is
// refused as a cancel of it would be.
func (s *Shard) amend(c *command, now time.Time) {
	r := &c.amend
	m := s.markets[r.Market]
	id := engine.OrderID(r.Seq)
	var st engine.OrderState
	ok := false
	if m.book != nil {
		s.expire(m, now)
		st, ok = m.book.Order(id)
	}
	if !ok {
		if f, known := m.finished.get(r.Seq); known {
			c.err = exchange.RefuseCancel(r.Account, &records.Order{AccountID: f.account, Status: f.status})
		} else {
			c.err = errFateUnknown
		}
		return
	}
	if int64(st.Account) != r.Account {
		c.err = domain.ErrNotYourOrder
		return
	}
	if halted := s.haltOf(m); halted != nil {
		c.err = halted
		return
	}
	price, remaining := cmp.Or(r.Price, st.Price), cmp.Or(r.Remaining, st.Remaining())
	cash, shares := st.AmendLock(price, remaining)
	added := remaining - st.Remaining() // to its position if filled, for a BUY
	if st.Side == engine.Buy {
		if err := s.acc.checkRisk(r.Account, st.Outcome, m.exposed(r.Account, st.Outcome), added, cash); err != nil {
			c.err = err
			return
		}
	}
	if err := s.acc.adjust(m.id, &st, max(cash, 0), max(shares, 0)); err != nil {
		c.err = err
		return
	}
	res := &s.result
	if err := m.book.Amend(id, price, remaining, res); err != nil {
		if undo := s.acc.adjust(m.id, &st, -max(cash, 0), -max(shares, 0)); undo != nil {
			panic(fmt.Sprintf("shard: could not undo the reservation of a failed amend: %v", undo))
		}
		c.err = err
		if errors.Is(err, engine.ErrPostOnlyWouldCross) {
			c.err = domain.ErrPostOnlyWouldCross
		}
		return
	}
	if err := s.acc.adjust(m.id, &st, min(cash, 0), min(shares, 0)); err != nil {
		panic(fmt.Sprintf("shard: releasing what an amended order no longer locks failed: %v", err))
	}
	if st.Side == engine.Buy {
		s.expose(m.id, r.Account, st.Outcome, added)
	}
	s.acc.arrived(m.id, &res.Order) // what a self-trade cancel left unfilled, a maker's fee reserve
	s.acc.touch(m)
	k := orderKey{m.id, r.Seq}
	s.acc.orderState(k, r.Account, res.Order.Filled, res.Order.Status, res.Reason)
	row := s.acc.row(k, r.Account)
	row.Price, row.Quantity = price, res.Order.Quantity
	var moved int64 // the number its move took, if it moved
	if !st.AmendKeepsPriority(price, remaining) {
		// Its new place in time is the next number of the order sequence, so that a book rebuilt
		// from Postgres puts it where this one did: behind every order before, ahead of every after.
		m.lastOrder++
		row.Priority, moved = m.lastOrder, m.lastOrder
	}
	var amended *apijson.Order // its state for its account's feed, as amended: before any fill
	if base, ok := s.restingOrder(m, id); ok {
		o := *base
		o.Price, o.Quantity, o.FilledQuantity, o.Status, o.UpdatedAt = price, res.Order.Quantity, st.Filled, st.Status.String(), now
		amended = &o
		// The move's number goes with the event, as its batch keeps it (never to a client): the
		// row keeps only an order's last, and pmx audit replays each move at its own
		// (feed.AccountEvent.Priority).
		event := o // a copy: settle changes amended
		s.accountEvent(r.Account, feed.AccountEvent{Type: feed.AccountAmended, Order: &event, Priority: moved})
	}
	c.placed.Trades = s.settle(m, res, now, make([]records.Trade, 0, len(res.Fills)), amended)
	if amended != nil {
		final := *amended
		final.FilledQuantity, final.Status, final.CancelReason = res.Order.Filled, res.Order.Status.String(), reasonText(res.Reason)
		s.restOrLeave(m, r.Seq, r.Account, final, res.Order.Status)
	}
	s.triggerReached()
}

// reasonText is a cancel reason as an order's row keeps it: nil for none.
func reasonText(r engine.CancelReason) *string {
	if r == engine.ReasonNone {
		return nil
	}
	s := r.String()
	return &s
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
			s.release(m, &st, cmp.Or(r.Reason, engine.ReasonUser))
			c.keys = append(c.keys[:0], orderKey{m.id, r.Seq})
			return
		}
	}
	if f, ok := m.finished.get(r.Seq); ok {
		c.err = exchange.RefuseCancel(r.Account, &records.Order{AccountID: f.account, Status: f.status})
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
			s.release(m, &cancelled[i], engine.ReasonUser)
			c.keys = append(c.keys, orderKey{m.id, int64(cancelled[i].ID)})
		}
	}
}

func (s *Shard) transition(c *command) {
	m := s.markets[c.market]
	if m.inEvent && c.event == nil {
		c.err = domain.ErrMarketInEvent
		return
	}
	plan, err := market.Transition(m.status, c.action)
	if err != nil {
		c.err = err
		return
	}
	s.moveEvent(c, &plan)
	s.acc.touch(m)
	if plan.CancelOrders && m.book != nil {
		for _, st := range m.book.Resting(nil) {
			cancelled, err := m.book.Cancel(st.ID)
			if err != nil {
				panic(fmt.Sprintf("shard: resting order %d of market %s could not be cancelled: %v", st.ID, m.id, err))
			}
			s.release(m, &cancelled, engine.ReasonMarketClosed)
		}
	}
	if plan.Settle {
		st := store.Settlement{Market: m.id, Outcome: plan.Outcome}
		if c.event != nil && plan.Outcome == "" {
			st.VoidYes, st.VoidNo = c.event.voidYes, c.event.voidNo
		}
		s.acc.batch.Settlements = append(s.acc.batch.Settlements, st)
		m.book, m.exposure = nil, nil
	} else {
		s.acc.market(m.id).Status = plan.To
	}
	m.status = plan.To
}

// answerCancels fills in the orders cancel commands answer with, from the rows just written.
func (s *Shard) answerCancels(a *accumulator, cmds []*command, updated []records.Order) {
	byKey := make(map[orderKey]records.Order, len(updated))
	for _, o := range updated {
		byKey[orderKey{o.MarketID, o.Seq}] = o
	}
	for _, c := range cmds {
		if c.err != nil || (c.kind != cmdCancel && c.kind != cmdCancelAll) {
			continue
		}
		c.orders = make([]records.Order, 0, len(c.keys))
		for _, k := range c.keys {
			o, ok := byKey[k]
			if !ok {
				o, _ = a.order(k) // placed earlier in this same batch
			}
			c.orders = append(c.orders, o)
		}
	}
}

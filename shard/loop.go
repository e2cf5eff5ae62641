package shard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/market"
	"github.com/pmx-dev/pmx/store"
)

// commitTimeout bounds one batch's transaction.
const commitTimeout = 30 * time.Second

// loop is the shard's only goroutine touching books: it takes every queued command as one batch.
func (s *Shard) loop() {
	defer close(s.done)
	batch := make([]*command, 0, s.cfg.MaxBatch)
	for {
		select {
		case c := <-s.cmds:
			batch = append(batch[:0], c)
		case <-s.stop:
			s.drain(batch[:0])
			return
		}
	fill:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case c := <-s.cmds:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		s.process(batch)
	}
}

// drain runs what was accepted before Stop.
func (s *Shard) drain(batch []*command) {
	for {
		select {
		case c := <-s.cmds:
			if batch = append(batch, c); len(batch) == s.cfg.MaxBatch {
				s.process(batch)
				batch = batch[:0]
			}
		default:
			if len(batch) > 0 {
				s.process(batch)
			}
			return
		}
	}
}

// process runs one batch in one transaction and answers its commands.
func (s *Shard) process(cmds []*command) {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	for _, c := range cmds {
		c.err = s.prepare(ctx, c)
		if c.kind == cmdCheck {
			c.checkErr = s.checkBooks(ctx)
		}
	}
	s.acc.reset(now)
	if err := s.commit(ctx, cmds, now); err != nil {
		s.log.Error("batch failed; rebuilding its markets from the database", "err", err, "commands", len(cmds))
		for id := range s.acc.touched {
			delete(s.markets, id) // reloaded from Postgres on next use
		}
		for _, c := range cmds {
			c.reply <- ErrUnavailable
		}
		return
	}
	for _, m := range s.acc.touched {
		s.publish(m)
	}
	for _, c := range cmds {
		c.reply <- c.err
	}
}

// prepare loads the markets a command names.
func (s *Shard) prepare(ctx context.Context, c *command) error {
	switch c.kind {
	case cmdCheck:
		return nil
	case cmdCancelAll:
		for _, id := range c.markets {
			if _, err := s.ensure(ctx, id); err != nil && !errors.Is(err, ErrUnknownMarket) && !errors.Is(err, ErrNotOwner) {
				return err
			}
		}
		return nil
	case cmdSync:
		s.sync(ctx, c.owned)
		return nil
	default:
		_, err := s.ensure(ctx, c.market)
		return err
	}
}

// commit reserves, matches and writes a batch, and commits it.
func (s *Shard) commit(ctx context.Context, cmds []*command, now time.Time) error {
	tx, err := s.cfg.Store.Pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("while beginning a batch: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op once committed
	if s.cfg.Name != "" {
		if err := s.fence(ctx, tx, cmds); err != nil {
			return err
		}
	}

	var rs []store.Reservation
	var placing []*command
	for _, c := range cmds {
		if c.kind != cmdPlace || c.err != nil {
			continue
		}
		if s.markets[c.market].status != store.MarketOpen {
			c.err = ErrMarketNotOpen
			continue
		}
		rs = append(rs, reservation(&c.place))
		placing = append(placing, c)
	}
	if len(rs) > 0 {
		res, err := store.Reserve(ctx, tx, rs, now)
		if err != nil {
			return err
		}
		for i, c := range placing {
			c.reserved = res[i]
		}
	}

	for _, c := range cmds {
		if c.err != nil {
			continue
		}
		switch c.kind {
		case cmdPlace:
			s.place(c, now)
		case cmdCancel:
			s.cancel(c)
		case cmdCancelAll:
			s.cancelAll(c)
		case cmdTransition:
			s.transition(c)
		}
	}

	s.acc.finish()
	updated, err := store.Apply(ctx, tx, &s.acc.batch)
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("while committing a batch: %w", err)
	}
	s.answerCancels(cmds, updated)
	return nil
}

func reservation(p *PlaceRequest) store.Reservation {
	r := store.Reservation{Account: p.Account, Market: p.Market, Outcome: p.Outcome.String()}
	if p.Side == engine.Buy {
		r.Cash = int64(p.Price) * p.Quantity
	} else {
		r.Shares = p.Quantity
	}
	return r
}

// place matches one reserved order.
func (s *Shard) place(c *command, now time.Time) {
	switch c.reserved {
	case store.InsufficientCash:
		c.err = ErrInsufficientFunds
		return
	case store.InsufficientShare:
		c.err = ErrInsufficientShares
		return
	}
	p := &c.place
	m := s.markets[p.Market]
	if m.status != store.MarketOpen { // closed earlier in this batch: give the reservation back
		s.acc.unlock(p.Account, m.id, p.Side, p.Outcome, p.Price, p.Quantity)
		c.err = ErrMarketNotOpen
		return
	}
	o := engine.Order{ID: engine.OrderID(m.lastOrder + 1), Account: engine.AccountID(p.Account),
		Side: p.Side, Outcome: p.Outcome, Price: p.Price, Quantity: p.Quantity}
	r := &s.result
	if err := m.book.Submit(o, r); err != nil {
		s.acc.unlock(p.Account, m.id, p.Side, p.Outcome, p.Price, p.Quantity)
		c.err = err
		return
	}
	m.lastOrder++
	s.acc.touch(m)
	placed := store.PlacedOrder{
		Order: store.Order{ID: uuid.New(), MarketID: m.id, Side: p.Side.String(), Outcome: p.Outcome.String(),
			Price: p.Price, Quantity: p.Quantity, FilledQuantity: r.Order.Filled, Status: r.Order.Status.String(),
			CreatedAt: now, UpdatedAt: now, Seq: m.lastOrder, AccountID: p.Account},
		Trades: make([]store.Trade, 0, len(r.Fills)),
	}
	s.acc.newOrder(placed.Order)
	for i := range r.Fills {
		f := &r.Fills[i]
		m.lastTrade++
		t := store.Trade{ID: uuid.New(), MarketID: m.id, Outcome: f.Taker.Outcome.String(), Side: f.Taker.Side.String(),
			Price: f.Taker.Price, Quantity: f.Quantity, YesPrice: f.YesPrice, CreatedAt: now}
		placed.Trades = append(placed.Trades, t)
		s.acc.batch.Trades = append(s.acc.batch.Trades, store.TradeRow{Trade: t, Seq: m.lastTrade, Kind: f.Kind.String(),
			TakerOrderSeq: m.lastOrder, MakerOrderSeq: int64(f.Maker.Order),
			TakerAccount: int64(f.Taker.Account), MakerAccount: int64(f.Maker.Account)})
		s.acc.leg(m.id, &f.Taker)
		s.acc.leg(m.id, &f.Maker)
		s.acc.orderState(orderKey{m.id, int64(f.Maker.Order)}, f.Maker.Filled, f.Maker.Status)
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

func (s *Shard) cancel(c *command) {
	m := s.markets[c.market]
	if m.book == nil {
		c.err = ErrOrderNotOpen
		return
	}
	st, err := m.book.Cancel(engine.OrderID(c.seq))
	if err != nil {
		c.err = ErrOrderNotOpen
		return
	}
	s.acc.touch(m)
	s.acc.release(m.id, &st)
	c.keys = append(c.keys[:0], orderKey{m.id, c.seq})
}

func (s *Shard) cancelAll(c *command) {
	c.keys = c.keys[:0]
	cancelIn := func(m *marketState) {
		if m.book == nil {
			return
		}
		cancelled := m.book.CancelAccount(engine.AccountID(c.account), nil)
		if len(cancelled) == 0 {
			return
		}
		s.acc.touch(m)
		for i := range cancelled {
			s.acc.release(m.id, &cancelled[i])
			c.keys = append(c.keys, orderKey{m.id, int64(cancelled[i].ID)})
		}
	}
	if c.markets == nil {
		for _, m := range s.markets {
			cancelIn(m)
		}
		return
	}
	for _, id := range c.markets {
		if m, ok := s.markets[id]; ok {
			cancelIn(m)
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

// fence checks, within the batch's transaction, that the shard still owns every market the batch
// touches under the epoch it loaded it with, and holds those rows until the commit so that no
// owner change can slip in between. Commands on a market it lost fail with ErrNotOwner and the
// market is dropped.
func (s *Shard) fence(ctx context.Context, tx pgx.Tx, cmds []*command) error {
	var ids []uuid.UUID
	for id := range s.markets {
		ids = append(ids, id)
	}
	owners, err := store.LockOwnership(ctx, tx, ids)
	if err != nil {
		return err
	}
	for id, m := range s.markets {
		if o, ok := owners[id]; !ok || o.Shard != s.cfg.Name || o.Epoch != m.epoch {
			s.drop(id)
		}
	}
	for _, c := range cmds {
		if c.err != nil || c.kind == cmdCancelAll || c.kind == cmdSync || c.kind == cmdCheck {
			continue
		}
		if _, ok := s.markets[c.market]; !ok {
			c.err = ErrNotOwner
		}
	}
	return nil
}

// sync makes the set of markets held match the ownership recorded in Postgres: it loads markets
// newly assigned to this shard and drops those it lost.
func (s *Shard) sync(ctx context.Context, owned []store.Ownership) {
	want := make(map[uuid.UUID]int64, len(owned))
	for _, o := range owned {
		want[o.Market] = o.Epoch
	}
	for id, m := range s.markets {
		if epoch, ok := want[id]; !ok || epoch != m.epoch {
			s.drop(id)
		}
	}
	for _, o := range owned {
		if o.Status != store.MarketOpen {
			continue
		}
		if _, err := s.ensure(ctx, o.Market); err != nil && !errors.Is(err, ErrNotOwner) {
			s.log.Warn("could not load an assigned market", "market", o.Market, "err", err)
		}
	}
}

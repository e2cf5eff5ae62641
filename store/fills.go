package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Fill is one side of a trade, as the account on that side sees it.
type Fill struct {
	TradeID       uuid.UUID
	OrderID       uuid.UUID
	ClientOrderID *string
	MarketID      uuid.UUID
	Side, Outcome string
	Price         int // in the order's outcome's terms
	Quantity      int64
	Role          string // MAKER or TAKER
	CreatedAt     time.Time
}

// Fills lists an account's fills, as taker and as maker, newest first, after a cursor (the last
// row's time and trade id), in one market or all (migration 016's indexes, one per role).
func (s *Store) Fills(ctx context.Context, account int64, market *uuid.UUID, after *Cursor, limit int) ([]Fill, error) {
	var afterTime *time.Time
	var afterID *uuid.UUID
	if after != nil {
		afterTime, afterID = &after.CreatedAt, &after.ID
	}
	rows, err := s.Pool.Query(ctx, `with f as (
		  (select id, market_id, created_at, 'TAKER' as role, taker_order_seq as order_seq, yes_price, quantity
		   from trades where taker_account_id = $1 and ($2::uuid is null or market_id = $2)
		     and ($3::timestamptz is null or (created_at, id) < ($3, $4))
		   order by created_at desc, id desc limit $5)
		  union all
		  (select id, market_id, created_at, 'MAKER', maker_order_seq, yes_price, quantity
		   from trades where maker_account_id = $1 and ($2::uuid is null or market_id = $2)
		     and ($3::timestamptz is null or (created_at, id) < ($3, $4))
		   order by created_at desc, id desc limit $5))
		select f.id, o.id, o.client_order_id, f.market_id, o.side, o.outcome,
		       case when o.outcome = 'YES' then f.yes_price else 100 - f.yes_price end, f.quantity, f.role, f.created_at
		from (select * from f order by created_at desc, id desc limit $5) f
		join orders o on o.market_id = f.market_id and o.seq = f.order_seq
		order by f.created_at desc, f.id desc`, account, market, afterTime, afterID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Fill, error) {
		var f Fill
		var price int16
		err := r.Scan(&f.TradeID, &f.OrderID, &f.ClientOrderID, &f.MarketID, &f.Side, &f.Outcome, &price, &f.Quantity, &f.Role, &f.CreatedAt)
		f.Price = int(price)
		return f, err
	})
}

// Candle is one interval's trades of a market: the YES price's open, high, low and close, the
// shares traded and the number of trades.
type Candle struct {
	Start                  time.Time
	Open, High, Low, Close int
	Volume                 int64
	Trades                 int64
}

// Candles sums a market's trades up in intervals of every, from from (inclusive) to to
// (exclusive), intervals aligned on UTC; intervals without trades are left out.
func (s *Store) Candles(ctx context.Context, market uuid.UUID, every time.Duration, from, to time.Time) ([]Candle, error) {
	rows, err := s.Pool.Query(ctx, `select date_bin($2::interval, created_at, timestamptz '2000-01-01 00:00:00+00') as start,
		       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price),
		       (array_agg(yes_price order by seq desc))[1], sum(quantity), count(*)
		from trades where market_id = $1 and created_at >= $3 and created_at < $4
		group by start order by start`, market, every, from, to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Candle, error) {
		var c Candle
		var o, h, l, cl int16
		err := r.Scan(&c.Start, &o, &h, &l, &cl, &c.Volume, &c.Trades)
		c.Open, c.High, c.Low, c.Close = int(o), int(h), int(l), int(cl)
		return c, err
	})
}

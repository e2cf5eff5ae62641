package markets

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// Fills lists an account's fills, as taker and as maker, newest first, after a cursor (the last
// row's time and trade id), in one market or all (migration 016's indexes, one per role).
func (s *Rows) Fills(ctx context.Context, account int64, market *uuid.UUID, after *db.Cursor, limit int) ([]records.Fill, error) {
	// The cursor is a row comparison the indexes seek to, written out only when there is one:
	// "$3 is null or (created_at, id) < ($3, $4)" would make Postgres filter rather than seek.
	args := []any{account, limit}
	where := ""
	if market != nil {
		args = append(args, *market)
		where += fmt.Sprintf(" and market_id = $%d", len(args))
	}
	if after != nil {
		args = append(args, after.CreatedAt, after.ID)
		where += fmt.Sprintf(" and (created_at, id) < ($%d, $%d)", len(args)-1, len(args))
	}
	rows, err := s.Pool.Query(ctx, `with f as (
		  (select id, market_id, created_at, 'TAKER' as role, taker_order_seq as order_seq, yes_price, quantity, taker_fee as fee
		   from trades where taker_account_id = $1`+where+`
		   order by created_at desc, id desc limit $2)
		  union all
		  (select id, market_id, created_at, 'MAKER', maker_order_seq, yes_price, quantity, maker_fee
		   from trades where maker_account_id = $1`+where+`
		   order by created_at desc, id desc limit $2))
		select f.id, o.id, o.client_order_id, f.market_id, o.side, o.outcome,
		       case when o.outcome = 'YES' then f.yes_price else 100 - f.yes_price end, f.quantity, f.role, f.created_at, f.fee
		from (select * from f order by created_at desc, id desc limit $2) f
		join orders o on o.market_id = f.market_id and o.seq = f.order_seq
		order by f.created_at desc, f.id desc`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Fill, error) {
		var f records.Fill
		var price int16
		err := r.Scan(&f.TradeID, &f.OrderID, &f.ClientOrderID, &f.MarketID, &f.Side, &f.Outcome, &price, &f.Quantity, &f.Role, &f.CreatedAt, &f.Fee)
		f.Price = int(price)
		return f, err
	})
}

// FeeTotals is what an account paid the exchange over a period (GET /account/fees): the fees of
// its fills, the rebates it was paid, and how many of its fills paid either.
type FeeTotals struct {
	Paid    int64 // cents of fees, as taker and as maker
	Rebates int64 // cents of rebates (≥ 0)
	Fills   int64 // fills that paid a fee or were paid a rebate
}

// Fees sums an account's fees and rebates over its fills made at or after since and before until,
// through the fills' indexes (migration 016).
func (s *Rows) Fees(ctx context.Context, account int64, since, until time.Time) (FeeTotals, error) {
	var t FeeTotals
	err := s.Pool.QueryRow(ctx, `with f as (
		  select taker_fee as fee from trades where taker_account_id = $1 and created_at >= $2 and created_at < $3 and taker_fee <> 0
		  union all
		  select maker_fee from trades where maker_account_id = $1 and created_at >= $2 and created_at < $3 and maker_fee <> 0)
		select coalesce(sum(fee) filter (where fee > 0), 0)::bigint, coalesce(-sum(fee) filter (where fee < 0), 0)::bigint, count(*)
		from f`, account, since, until).Scan(&t.Paid, &t.Rebates, &t.Fills)
	return t, err
}

// Candles sums a market's trades up in intervals of every (a minute, 5 minutes, an hour or a
// day), UTC-aligned, from the interval that holds from to those that begin before to; intervals
// without trades are left out. It reads the rolled-up minutes (1m, 5m) or hours (1h, 1d) that each
// batch keeps (migration 016), never the trades.
func (s *Rows) Candles(ctx context.Context, market uuid.UUID, every time.Duration, from, to time.Time) ([]records.Candle, error) {
	table := "candles_1m"
	if every >= time.Hour {
		table = "candles_1h"
	}
	rows, err := s.Pool.Query(ctx, `select date_bin($2::interval, start, timestamptz '2000-01-01 00:00:00+00') as b,
		       (array_agg(open order by start))[1], max(high), min(low), (array_agg(close order by start desc))[1],
		       sum(volume), sum(trades)
		from `+table+`
		where market_id = $1 and start >= date_bin($2::interval, $3::timestamptz, timestamptz '2000-01-01 00:00:00+00') and start < $4
		group by b order by b`, market, every, from, to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Candle, error) {
		var c records.Candle
		var o, h, l, cl int16
		err := r.Scan(&c.Start, &o, &h, &l, &cl, &c.Volume, &c.Trades)
		c.Open, c.High, c.Low, c.Close = int(o), int(h), int(l), int(cl)
		return c, err
	})
}

// RebuildCandles rebuilds the rolled-up candles from the trades, as migration 016 first built
// them: for trades written other than by a batch (a bulk load).
func (s *Rows) RebuildCandles(ctx context.Context) error {
	for _, c := range []struct{ table, interval string }{{"candles_1m", "1 minute"}, {"candles_1h", "1 hour"}} {
		if _, err := s.Pool.Exec(ctx, `truncate `+c.table+`; insert into `+c.table+`
			select market_id, date_bin('`+c.interval+`', created_at, timestamptz '2000-01-01 00:00:00+00'),
			       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price), (array_agg(yes_price order by seq desc))[1],
			       sum(quantity), count(*), min(seq), max(seq)
			from trades group by 1, 2`); err != nil {
			return err
		}
	}
	return nil
}

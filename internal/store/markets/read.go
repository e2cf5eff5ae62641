package markets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

const marketColumns = `id, url, question, description, category, status, closes_at, resolves_at, outcome,
	label_a, label_b, created_at, updated_at, name, last_trade_price, shard, epoch, event_seq,
	event_id, outcome_key, series_id, paused,
	(select h.exchange from halts h where h.id), coalesce((select e.paused from events e where e.id = event_id), false),
	coalesce(taker_fee_bps, (select e.taker_fee_bps from events e where e.id = event_id), 0),
	coalesce(maker_fee_bps, (select e.maker_fee_bps from events e where e.id = event_id), 0), taker_fee_bps is not null,
	pool, dedicated`

func scanMarket(row pgx.Row) (records.Market, error) {
	var m records.Market
	var last *int16
	var exchange, eventPaused bool
	err := row.Scan(&m.ID, &m.URL, &m.Question, &m.Description, &m.Category, &m.Status, &m.ClosesAt,
		&m.ResolvesAt, &m.Outcome, &m.LabelA, &m.LabelB, &m.CreatedAt, &m.UpdatedAt, &m.Name, &last, &m.Shard, &m.Epoch,
		&m.EventSeq, &m.EventID, &m.OutcomeKey, &m.SeriesID, &m.Paused, &exchange, &eventPaused,
		&m.Fees.Taker, &m.Fees.Maker, &m.OwnFees, &m.Pool, &m.Dedicated)
	m.Halted = domain.Of(exchange, eventPaused, m.Paused)
	if last != nil {
		p := int(*last)
		m.LastTradePrice = &p
	}
	m.Resolved = m.Status == domain.MarketResolved
	return m, err
}

// Market returns one market.
func (s *Rows) Market(ctx context.Context, id uuid.UUID) (records.Market, error) {
	m, err := scanMarket(s.Pool.QueryRow(ctx, `select `+marketColumns+` from markets where id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, db.ErrNotFound
	}
	return m, err
}

// MarketByName returns the market created from the manifest with this metadata.name.
func (s *Rows) MarketByName(ctx context.Context, name string) (records.Market, error) {
	m, err := scanMarket(s.Pool.QueryRow(ctx, `select `+marketColumns+` from markets where name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return m, db.ErrNotFound
	}
	return m, err
}

// Markets lists markets newest first, all of them or only those in one status.
func (s *Rows) Markets(ctx context.Context, status domain.MarketStatus) ([]records.Market, error) {
	return s.MarketsPage(ctx, status, nil, 0)
}

// MarketsPage lists markets newest first, all of them or only those in one status, after a
// position (nil: from the newest), at most limit of them (0: no limit). The index on (created_at,
// id) serves every page alike, however deep.
func (s *Rows) MarketsPage(ctx context.Context, status domain.MarketStatus, after *db.Cursor, limit int) ([]records.Market, error) {
	var afterTime *time.Time
	var afterID *uuid.UUID
	if after != nil {
		afterTime, afterID = &after.CreatedAt, &after.ID
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.Pool.Query(ctx, `select `+marketColumns+` from markets
		where ($1 = '' or status = $1) and ($2::timestamptz is null or (created_at, id) < ($2, $3))
		order by created_at desc, id desc limit $4`, string(status), afterTime, afterID, lim)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Market, error) { return scanMarket(r) })
}

// MarketsClosingBy lists the OPEN markets whose closesAt is at or before t.
func (s *Rows) MarketsClosingBy(ctx context.Context, t time.Time) ([]uuid.UUID, error) {
	rows, err := s.Pool.Query(ctx, `select id from markets where status = 'OPEN' and closes_at <= $1 order by closes_at, id`, t)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// NextClosing is the earliest closesAt of an OPEN market, if any.
func (s *Rows) NextClosing(ctx context.Context) (*time.Time, error) {
	var t *time.Time
	err := s.Pool.QueryRow(ctx, `select min(closes_at) from markets where status = 'OPEN'`).Scan(&t)
	return t, err
}

// Trades lists a market's most recent trades, newest first, from the taker's side.
func (s *Rows) Trades(ctx context.Context, market uuid.UUID, limit int) ([]records.Trade, error) {
	rows, err := s.Pool.Query(ctx, `select id, market_id, taker_outcome, taker_side, taker_price, quantity,
		yes_price, created_at from trades where market_id = $1 order by seq desc limit $2`, market, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Trade, error) {
		var t records.Trade
		var price, yes int16
		err := r.Scan(&t.ID, &t.MarketID, &t.Outcome, &t.Side, &price, &t.Quantity, &yes, &t.CreatedAt)
		t.Price, t.YesPrice = int(price), int(yes)
		return t, err
	})
}

// Positions lists an account's holdings with a positive quantity, oldest first.
func (s *Rows) Positions(ctx context.Context, account int64) ([]records.Position, error) {
	rows, err := s.Pool.Query(ctx, `select p.id, p.market_id, m.question, m.status, p.outcome, p.quantity,
		p.locked_quantity, p.created_at, p.updated_at
		from positions p join markets m on m.id = p.market_id
		where p.account_id = $1 and p.quantity > 0 order by p.created_at, p.id`, account)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Position, error) {
		var p records.Position
		err := r.Scan(&p.ID, &p.MarketID, &p.MarketQuestion, &p.MarketStatus, &p.Outcome, &p.Quantity,
			&p.LockedQuantity, &p.CreatedAt, &p.UpdatedAt)
		return p, err
	})
}

func collectOrders(rows pgx.Rows, err error) ([]records.Order, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.Order, error) { return db.ScanOrder(r) })
}

// Order returns one order, whoever owns it.
func (s *Rows) Order(ctx context.Context, id uuid.UUID) (records.Order, error) {
	o, err := db.ScanOrder(s.Pool.QueryRow(ctx, `select `+db.OrderColumns+` from orders where id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	return o, err
}

// OrderBySeq reads the order with sequence number seq in a market.
func (s *Rows) OrderBySeq(ctx context.Context, market uuid.UUID, seq int64) (records.Order, error) {
	o, err := db.ScanOrder(s.Pool.QueryRow(ctx, `select `+db.OrderColumns+` from orders where market_id = $1 and seq = $2`, market, seq))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	return o, err
}

// OrderFilter selects an account's orders.
type OrderFilter struct {
	Account int64
	Market  *uuid.UUID
	Status  engine.Status // one order status, or 0 for all
	// After continues a listing after this order (the last of the previous page).
	After *db.Cursor
	Limit int
}

// Orders lists an account's orders newest first.
func (s *Rows) Orders(ctx context.Context, f OrderFilter) ([]records.Order, error) {
	var afterTime *time.Time
	var afterID *uuid.UUID
	if f.After != nil {
		afterTime, afterID = &f.After.CreatedAt, &f.After.ID
	}
	return collectOrders(s.Pool.Query(ctx, `select `+db.OrderColumns+` from orders
		where account_id = $1 and ($2::uuid is null or market_id = $2) and ($3 = '' or status = $3)
		  and ($4::timestamptz is null or (created_at, id) < ($4, $5))
		order by created_at desc, id desc limit $6`,
		f.Account, f.Market, db.StatusText(f.Status), afterTime, afterID, f.Limit))
}

// RestingOrders lists a market's resting orders in time priority (migration 011), to rebuild its
// book.
func (s *Rows) RestingOrders(ctx context.Context, market uuid.UUID) ([]records.Order, error) {
	return collectOrders(s.Pool.Query(ctx, `select `+db.OrderColumns+` from orders
		where market_id = $1 and status in ('OPEN', 'PARTIALLY_FILLED') order by coalesce(priority, seq)`, market))
}

// RestingMarkets lists the markets where an account has resting orders.
func (s *Rows) RestingMarkets(ctx context.Context, account int64) ([]uuid.UUID, error) {
	rows, err := s.Pool.Query(ctx, `select distinct market_id from orders
		where account_id = $1 and status in ('OPEN', 'PARTIALLY_FILLED') order by market_id`, account)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
}

// Sequences returns the last numbers of a market's order and trade sequences, which a shard that
// loads the market continues. The order sequence's is the highest number any order took: its seq,
// or the priority an amend that moved it gave it, ended orders included — the number a move took
// is never taken again, even once the moved order has ended (migrations 011 and 041: the partial
// index orders_moved finds the highest priority among the market's few moved orders).
func (s *Rows) Sequences(ctx context.Context, market uuid.UUID) (orders, trades int64, err error) {
	err = s.Pool.QueryRow(ctx, `select greatest(coalesce((select max(seq) from orders where market_id = $1), 0),
		coalesce((select max(priority) from orders where market_id = $1 and priority is not null), 0)),
		coalesce((select max(seq) from trades where market_id = $1), 0)`, market).Scan(&orders, &trades)
	if err != nil {
		err = fmt.Errorf("while reading the sequences of market %s: %w", market, err)
	}
	return orders, trades, err
}

// OrderByClientID reads the account's order with the given client order id.
func (s *Rows) OrderByClientID(ctx context.Context, account int64, clientOrderID string) (records.Order, error) {
	o, err := db.ScanOrder(s.Pool.QueryRow(ctx, `select `+db.OrderColumns+` from orders
		where account_id = $1 and client_order_id = $2`, account, clientOrderID))
	if errors.Is(err, pgx.ErrNoRows) {
		return o, db.ErrNotFound
	}
	return o, err
}

// AccountRestingOrders lists an account's resting orders in one market, in time priority.
func (s *Rows) AccountRestingOrders(ctx context.Context, account int64, market uuid.UUID) ([]records.Order, error) {
	return collectOrders(s.Pool.Query(ctx, `select `+db.OrderColumns+` from orders
		where account_id = $1 and market_id = $2 and status in ('OPEN', 'PARTIALLY_FILLED') order by seq`, account, market))
}

// Settlements lists an account's settlements newest first (then by market and outcome), after a
// cursor (the last row of the previous page; nil for the first), at most limit.
func (s *Rows) Settlements(ctx context.Context, account int64, after *db.Cursor, limit int) ([]records.AccountSettlement, error) {
	var afterTime *time.Time
	var afterMarket *uuid.UUID
	var afterOutcome string
	if after != nil {
		afterTime, afterMarket, afterOutcome = &after.CreatedAt, &after.ID, after.Outcome
	}
	rows, err := s.Pool.Query(ctx, `select s.market_id, m.status, s.outcome, s.quantity, s.amount, s.created_at
		from settlements s join markets m on m.id = s.market_id
		where s.account_id = $1 and ($2::timestamptz is null or (s.created_at, s.market_id, s.outcome) < ($2, $3, $4))
		order by s.created_at desc, s.market_id desc, s.outcome desc limit $5`, account, afterTime, afterMarket, afterOutcome, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (records.AccountSettlement, error) {
		var a records.AccountSettlement
		err := r.Scan(&a.MarketID, &a.MarketStatus, &a.Outcome, &a.Quantity, &a.Payout, &a.SettledAt)
		return a, err
	})
}

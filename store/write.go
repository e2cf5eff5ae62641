package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// uniqueViolation is Postgres's SQLSTATE for a duplicate key.
const uniqueViolation = "23505"

func isUniqueViolation(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == uniqueViolation
}

// CreateAccount opens an account with a grant of play money and no password (no web sign-in).
// A taken name is ErrConflict.
func (s *Store) CreateAccount(ctx context.Context, name string, grant int64, now time.Time) (Account, error) {
	return s.CreateAccountWithPassword(ctx, name, grant, "", now)
}

// APIKey describes a stored key; the key itself is never stored.
type APIKey struct {
	ID         uuid.UUID
	AccountID  int64
	Prefix     string
	Label      string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// InsertAPIKey stores a new key by its public prefix and the SHA-256 hash of the whole key.
func (s *Store) InsertAPIKey(ctx context.Context, k APIKey, hash []byte) error {
	_, err := s.Pool.Exec(ctx, `insert into api_keys (id, account_id, prefix, hash, label, created_at)
		values ($1, $2, $3, $4, $5, $6)`, k.ID, k.AccountID, k.Prefix, hash, k.Label, k.CreatedAt)
	return err
}

// TouchAPIKey records that a key was used.
func (s *Store) TouchAPIKey(ctx context.Context, id uuid.UUID, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `update api_keys set last_used_at = $2 where id = $1`, id, now)
	return err
}

// CreateMarket inserts a new OPEN market. A taken manifest name is ErrConflict.
func (s *Store) CreateMarket(ctx context.Context, m Market) (Market, error) {
	m.Status = MarketOpen
	_, err := s.Pool.Exec(ctx, `insert into markets (id, name, question, description, category, url, label_a,
		label_b, status, closes_at, resolves_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		m.ID, m.Name, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.Status,
		m.ClosesAt, m.ResolvesAt, m.CreatedAt)
	if isUniqueViolation(err) {
		return m, fmt.Errorf("market %s: %w", m.ID, ErrConflict)
	}
	m.UpdatedAt = m.CreatedAt
	return m, err
}

// UpdateMarketText updates a market's descriptive fields and its schedule, not its status.
func (s *Store) UpdateMarketText(ctx context.Context, m Market, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `update markets set question = $2, description = $3, category = $4, url = $5,
		label_a = $6, label_b = $7, closes_at = $8, resolves_at = $9, updated_at = $10 where id = $1
		and (question, description, category, url, label_a, label_b, closes_at, resolves_at) is distinct from
		    ($2, $3, $4, $5, $6, $7, $8, $9)`,
		m.ID, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.ClosesAt, m.ResolvesAt, now)
	return err
}

// Batch is everything one shard transaction writes: the accumulated effects of a batch of orders,
// cancels and market transitions, already netted per order, account and position.
type Batch struct {
	Now          time.Time
	NewOrders    []Order // inserted in their final state
	OrderUpdates []Order // existing orders: FilledQuantity and Status are written
	Trades       []TradeRow
	Cash         []CashDelta
	Shares       []ShareDelta
	Markets      []MarketUpdate
	Settlements  []Settlement // run last, after every other write
}

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset(now time.Time) {
	*b = Batch{Now: now, NewOrders: b.NewOrders[:0], OrderUpdates: b.OrderUpdates[:0], Trades: b.Trades[:0],
		Cash: b.Cash[:0], Shares: b.Shares[:0], Markets: b.Markets[:0], Settlements: b.Settlements[:0]}
}

// TradeRow is one fill as stored.
type TradeRow struct {
	Trade
	Seq           int64
	Kind          string
	TakerOrderSeq int64
	MakerOrderSeq int64
	TakerAccount  int64
	MakerAccount  int64
}

// CashDelta changes one account's available and locked cash.
type CashDelta struct {
	Account   int64
	Available int64
	Locked    int64
}

// ShareDelta changes one account's holding of one outcome of one market.
type ShareDelta struct {
	Account  int64
	Market   uuid.UUID
	Outcome  string
	Quantity int64
	Locked   int64
}

// MarketUpdate records a market's last trade price and, when Status is set, a move between OPEN
// and CLOSED.
type MarketUpdate struct {
	ID             uuid.UUID
	LastTradePrice *int
	Status         string
}

// Settlement resolves a market (Outcome YES or NO) or cancels it (Outcome empty).
type Settlement struct {
	Market  uuid.UUID
	Outcome string
}

// Reservation is what one order must lock before it is matched: cash for a BUY, shares of one
// outcome of one market for a SELL.
type Reservation struct {
	Account int64
	Market  uuid.UUID
	Outcome string
	Cash    int64
	Shares  int64
}

// Reservation results.
const (
	Reserved          = 0
	InsufficientCash  = 1
	InsufficientShare = 2
)

// Reserve locks what each order needs, in order, within tx, and returns for each Reserved,
// InsufficientCash or InsufficientShare.
func Reserve(ctx context.Context, tx pgx.Tx, rs []Reservation, now time.Time) ([]int16, error) {
	n := len(rs)
	accounts, markets, outcomes := make([]int64, n), make([]uuid.UUID, n), make([]string, n)
	cash, shares := make([]int64, n), make([]int64, n)
	for i, r := range rs {
		accounts[i], markets[i], outcomes[i], cash[i], shares[i] = r.Account, r.Market, r.Outcome, r.Cash, r.Shares
	}
	var out []int16
	err := tx.QueryRow(ctx, `select reserve($1, $2, $3, $4, $5, $6)`, accounts, markets, outcomes, cash, shares, now).Scan(&out)
	if err != nil {
		return nil, fmt.Errorf("while reserving funds: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("while reserving funds: %d results for %d orders", len(out), n)
	}
	return out, nil
}

// Apply writes a batch within tx, in one round trip, and returns the updated existing orders in
// their new state.
func Apply(ctx context.Context, tx pgx.Tx, b *Batch) ([]Order, error) {
	var q pgx.Batch
	if len(b.NewOrders) > 0 {
		q.Queue(insertOrders, orderColumnsOf(b.NewOrders, b.Now)...)
	}
	var updated []Order
	if len(b.OrderUpdates) > 0 {
		markets, seqs, filled, status := make([]uuid.UUID, len(b.OrderUpdates)), make([]int64, len(b.OrderUpdates)),
			make([]int64, len(b.OrderUpdates)), make([]string, len(b.OrderUpdates))
		for i, o := range b.OrderUpdates {
			markets[i], seqs[i], filled[i], status[i] = o.MarketID, o.Seq, o.FilledQuantity, o.Status
		}
		q.Queue(`update orders o set filled_quantity = d.filled, status = d.status, updated_at = $5
			from unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[]) as d(market_id, seq, filled, status)
			where o.market_id = d.market_id and o.seq = d.seq returning `+updatedOrderColumns,
			markets, seqs, filled, status, b.Now).Query(func(rows pgx.Rows) error {
			var err error
			updated, err = collectOrders(rows, nil)
			return err
		})
	}
	if len(b.Trades) > 0 {
		q.Queue(insertTrades, tradeColumnsOf(b.Trades, b.Now)...)
	}
	if len(b.Cash) > 0 {
		ids, avail, locked := make([]int64, len(b.Cash)), make([]int64, len(b.Cash)), make([]int64, len(b.Cash))
		for i, d := range b.Cash {
			ids[i], avail[i], locked[i] = d.Account, d.Available, d.Locked
		}
		q.Queue(`update accounts a set available = a.available + d.available, locked = a.locked + d.locked,
			updated_at = $4 from unnest($1::bigint[], $2::bigint[], $3::bigint[]) as d(id, available, locked)
			where a.id = d.id`, ids, avail, locked, b.Now)
	}
	if len(b.Shares) > 0 {
		n := len(b.Shares)
		ids, accounts, markets, outcomes := make([]uuid.UUID, n), make([]int64, n), make([]uuid.UUID, n), make([]string, n)
		qty, locked := make([]int64, n), make([]int64, n)
		for i, d := range b.Shares {
			ids[i], accounts[i], markets[i], outcomes[i], qty[i], locked[i] = uuid.New(), d.Account, d.Market, d.Outcome, d.Quantity, d.Locked
		}
		// Existing positions take the deltas; the rest are new, and a new position only ever
		// grows (shares come from a buy). One statement rather than an upsert, because Postgres
		// checks an upsert's proposed row — negative for a sale — before it finds the conflict.
		q.Queue(`with d as (
				select * from unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::bigint[], $6::bigint[])
				  as d(id, account_id, market_id, outcome, quantity, locked)),
			updated as (
				update positions p set quantity = p.quantity + d.quantity, locked_quantity = p.locked_quantity + d.locked,
				       updated_at = $7
				from d where p.account_id = d.account_id and p.market_id = d.market_id and p.outcome = d.outcome
				returning p.account_id, p.market_id, p.outcome)
			insert into positions (id, account_id, market_id, outcome, quantity, locked_quantity, created_at, updated_at)
			select d.id, d.account_id, d.market_id, d.outcome, d.quantity, d.locked, $7, $7 from d
			where not exists (select 1 from updated u
			                  where u.account_id = d.account_id and u.market_id = d.market_id and u.outcome = d.outcome)`,
			ids, accounts, markets, outcomes, qty, locked, b.Now)
	}
	for _, m := range b.Markets {
		var status *string
		if m.Status != "" {
			status = &m.Status
		}
		q.Queue(`update markets set last_trade_price = coalesce($2, last_trade_price), status = coalesce($3, status),
			updated_at = $4 where id = $1`, m.ID, m.LastTradePrice, status, b.Now)
	}
	for _, st := range b.Settlements {
		var outcome *string
		if st.Outcome != "" {
			outcome = &st.Outcome
		}
		q.Queue(`select settle($1, $2, $3)`, st.Market, outcome, b.Now)
	}
	if q.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, &q).Close(); err != nil {
		return nil, fmt.Errorf("while writing a batch: %w", err)
	}
	return updated, nil
}

// updatedOrderColumns is orderColumns, qualified for an update joined with its data.
const updatedOrderColumns = `o.id, o.market_id, o.side, o.outcome, o.price, o.quantity, o.filled_quantity,
	o.status, o.created_at, o.updated_at, o.seq, o.account_id`

const insertOrders = `insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity,
	filled_quantity, status, created_at, updated_at)
	select id, market_id, seq, account_id, side, outcome, price, quantity, filled, status, $11, $11
	from unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::bigint[], $5::text[], $6::text[], $7::smallint[],
	            $8::bigint[], $9::bigint[], $10::text[])
	  as d(id, market_id, seq, account_id, side, outcome, price, quantity, filled, status)`

func orderColumnsOf(os []Order, now time.Time) []any {
	n := len(os)
	ids, markets, seqs, accounts := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]int64, n), make([]int64, n)
	sides, outcomes, prices := make([]string, n), make([]string, n), make([]int16, n)
	qty, filled, status := make([]int64, n), make([]int64, n), make([]string, n)
	for i, o := range os {
		ids[i], markets[i], seqs[i], accounts[i] = o.ID, o.MarketID, o.Seq, o.AccountID
		sides[i], outcomes[i], prices[i] = o.Side, o.Outcome, int16(o.Price)
		qty[i], filled[i], status[i] = o.Quantity, o.FilledQuantity, o.Status
	}
	return []any{ids, markets, seqs, accounts, sides, outcomes, prices, qty, filled, status, now}
}

const insertTrades = `insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq,
	maker_order_seq, taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at)
	select id, market_id, seq, kind, yes_price, quantity, taker_seq, maker_seq, taker_account, maker_account,
	       side, outcome, price, $13
	from unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::smallint[], $6::bigint[], $7::bigint[],
	            $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $14::smallint[])
	  as d(id, market_id, seq, kind, yes_price, quantity, taker_seq, maker_seq, taker_account, maker_account,
	       side, outcome, price)`

func tradeColumnsOf(ts []TradeRow, now time.Time) []any {
	n := len(ts)
	ids, markets, seqs, kinds := make([]uuid.UUID, n), make([]uuid.UUID, n), make([]int64, n), make([]string, n)
	yes, qty, takerSeq, makerSeq := make([]int16, n), make([]int64, n), make([]int64, n), make([]int64, n)
	takerAcc, makerAcc, sides, outcomes, prices := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n), make([]int16, n)
	for i, t := range ts {
		ids[i], markets[i], seqs[i], kinds[i] = t.ID, t.MarketID, t.Seq, t.Kind
		yes[i], qty[i], takerSeq[i], makerSeq[i] = int16(t.YesPrice), t.Quantity, t.TakerOrderSeq, t.MakerOrderSeq
		takerAcc[i], makerAcc[i], sides[i], outcomes[i], prices[i] = t.TakerAccount, t.MakerAccount, t.Side, t.Outcome, int16(t.Price)
	}
	return []any{ids, markets, seqs, kinds, yes, qty, takerSeq, makerSeq, takerAcc, makerAcc, sides, outcomes, now, prices}
}

package batches

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The dead-man switch (migration 009). Deadlines are on the database's clock, so that every front
// replica and every shard agree on when one has passed.

// Heartbeat is the state of an account's dead-man switch.
type Heartbeat struct {
	Armed    bool
	Deadline *time.Time // while armed
}

// ArmHeartbeat sets the account's deadline timeout from now, or disarms the switch when timeout
// is 0. A deadline that had already passed is kept as tripped, so that the orders it covers are
// still cancelled.
func (s *Writer) ArmHeartbeat(ctx context.Context, account int64, timeout time.Duration) (Heartbeat, error) {
	var deadline *time.Time
	var seconds *float64
	if timeout > 0 {
		sec := timeout.Seconds()
		seconds = &sec
	}
	err := s.Pool.QueryRow(ctx, `insert into heartbeats as h (account_id, deadline)
		values ($1, now() + $2 * interval '1 second')
		on conflict (account_id) do update
		   set deadline = excluded.deadline,
		       tripped = case when h.deadline <= now() then greatest(h.deadline, h.tripped) else h.tripped end
		returning deadline`, account, seconds).Scan(&deadline)
	if err != nil {
		return Heartbeat{}, err
	}
	return Heartbeat{Armed: deadline != nil, Deadline: deadline}, nil
}

// TrippedOrder is an open order that its account's dead-man switch covers.
type TrippedOrder struct {
	Market  uuid.UUID
	Event   *uuid.UUID // the market's event, if it is an outcome of one
	Seq     int64
	Account int64
}

// trippedOrdersSQL lists the open orders covered by passed deadlines. Every shard runs it every
// heartbeatSweep, nearly always with no deadline passed; so it starts from the switches and looks
// up each one's orders through the lateral join (a nested loop over orders_account_resting): with
// none tripped, it reads no order at all. Joined the plain way, the planner hashed every resting
// order of every account in each sweep, however few switches there were.
const trippedOrdersSQL = `select o.market_id, m.event_id, o.seq, h.account_id
	from heartbeats h
	cross join lateral (
		select o.market_id, o.seq from orders o
		where o.account_id = h.account_id and o.status in ('OPEN', 'PARTIALLY_FILLED')
		  and o.created_at <= case when h.deadline <= now() then greatest(h.deadline, h.tripped) else h.tripped end
		  and ($1 = '' or o.market_id in (select id from markets where shard = $1))
		offset 0 -- kept a subquery: pulled up into a plain join, it could be hashed again
	) o
	join markets m on m.id = o.market_id
	where h.deadline <= now() or h.tripped is not null
	order by o.market_id, o.seq`

// TrippedOrders lists the open orders, in the markets that shard owns (every market when shard is
// ""), that were placed at or before their account's latest passed heartbeat deadline, each with
// its market's event: a sweep that takes a market on must take its event whole.
func (s *Writer) TrippedOrders(ctx context.Context, shard string) ([]TrippedOrder, error) {
	rows, err := s.Pool.Query(ctx, trippedOrdersSQL, shard)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (TrippedOrder, error) {
		var t TrippedOrder
		err := r.Scan(&t.Market, &t.Event, &t.Seq, &t.Account)
		return t, err
	})
}

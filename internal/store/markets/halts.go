package markets

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// Halts (migration 033): a market's own pause, an event's and the exchange's. Each change runs
// change_halts first in its transaction, which waits for the batches checking the halts' version
// to end and raises it, so that every shard's next batch that decides a placement or an amend
// reads the change before it commits one (docs/architecture.md §4, "Halts").

// Halts reads every halt, as of one version: the shards decide placements and amends under them.
func (s *Rows) Halts(ctx context.Context) (records.Halts, error) {
	h := records.Halts{Markets: map[uuid.UUID]bool{}, Events: map[uuid.UUID]bool{},
		Fees: map[uuid.UUID]engine.Fees{}, EventFees: map[uuid.UUID]engine.Fees{}}
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `select version, exchange from halts where id`).Scan(&h.Version, &h.Exchange); err != nil {
			return err
		}
		for _, q := range []struct {
			sql  string
			into map[uuid.UUID]bool
		}{{`select id from markets where paused`, h.Markets}, {`select id from events where paused`, h.Events}} {
			rows, err := tx.Query(ctx, q.sql)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
			if err != nil {
				return err
			}
			for _, id := range ids {
				q.into[id] = true
			}
		}
		for _, q := range []struct {
			sql  string
			into map[uuid.UUID]engine.Fees
		}{{`select id, taker_fee_bps, maker_fee_bps from markets where taker_fee_bps is not null`, h.Fees},
			{`select id, taker_fee_bps, maker_fee_bps from events where taker_fee_bps is not null`, h.EventFees}} {
			rows, err := tx.Query(ctx, q.sql)
			if err != nil {
				return err
			}
			var id uuid.UUID
			var f engine.Fees
			if _, err := pgx.ForEachRow(rows, []any{&id, &f.Taker, &f.Maker}, func() error {
				q.into[id] = f
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return h, err
}

// SetMarketFees gives a market its own fee schedule (migration 035), or takes it away (nil: the
// market's orders then carry its event's, or none), at now. Orders placed after it commits carry
// it; resting orders keep theirs. It reports whether that changed anything; an unknown market is
// db.ErrNotFound. The schedule must be valid (engine.Fees.Validate); the database checks it too.
func (s *Rows) SetMarketFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error) {
	return s.setFees(ctx, "markets", "market", id, fees, now)
}

// SetEventFees gives an event its fee schedule, which its markets without one of their own carry,
// or takes it away (nil), at now; as SetMarketFees.
func (s *Rows) SetEventFees(ctx context.Context, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error) {
	return s.setFees(ctx, "events", "event", id, fees, now)
}

func (s *Rows) setFees(ctx context.Context, table, what string, id uuid.UUID, fees *engine.Fees, now time.Time) (changed bool, err error) {
	var taker, maker *int
	if fees != nil {
		if err := fees.Validate(); err != nil {
			return false, err
		}
		taker, maker = &fees.Taker, &fees.Maker
	}
	err = s.changeHalts(ctx, func(tx pgx.Tx) (int64, error) {
		var found bool
		if err := tx.QueryRow(ctx, `select true from `+table+` where id = $1 for update`, id).Scan(&found); err != nil {
			return 0, db.NotFound(err, what+" "+id.String())
		}
		tag, err := tx.Exec(ctx, `update `+table+` set taker_fee_bps = $2, maker_fee_bps = $3, updated_at = $4
			where id = $1 and (taker_fee_bps, maker_fee_bps) is distinct from ($2::integer, $3::integer)`, id, taker, maker, now)
		return tag.RowsAffected(), err
	}, &changed)
	return changed, err
}

// ExchangeHalt says whether the whole exchange is halted, and since when (its last change).
func (s *Rows) ExchangeHalt(ctx context.Context) (halted bool, since time.Time, err error) {
	err = s.Pool.QueryRow(ctx, `select exchange, changed_at from halts where id`).Scan(&halted, &since)
	return halted, since, err
}

// SetExchangeHalted halts or resumes the whole exchange at now. It reports whether that changed
// anything: halting a halted exchange is no change, and raises no version.
func (s *Rows) SetExchangeHalted(ctx context.Context, halted bool, now time.Time) (changed bool, err error) {
	err = s.changeHalts(ctx, func(tx pgx.Tx) (int64, error) {
		tag, err := tx.Exec(ctx, `update halts set exchange = $1, changed_at = $2 where id and exchange <> $1`, halted, now)
		return tag.RowsAffected(), err
	}, &changed)
	return changed, err
}

// SetMarketPaused pauses or resumes one market on its own, at now (its updated_at, which the
// feed's lifecycle channel follows). It reports whether that changed anything; an unknown market
// is db.ErrNotFound.
func (s *Rows) SetMarketPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error) {
	err = s.changeHalts(ctx, func(tx pgx.Tx) (int64, error) {
		var was bool
		if err := tx.QueryRow(ctx, `select paused from markets where id = $1 for update`, id).Scan(&was); err != nil {
			return 0, db.NotFound(err, "market "+id.String())
		}
		if was == paused {
			return 0, nil
		}
		tag, err := tx.Exec(ctx, `update markets set paused = $2, updated_at = $3 where id = $1`, id, paused, now)
		return tag.RowsAffected(), err
	}, &changed)
	return changed, err
}

// SetEventPaused pauses or resumes an event, and so every market of it, at now (the event's and
// its markets' updated_at). It reports whether that changed anything; an unknown event is
// db.ErrNotFound.
func (s *Rows) SetEventPaused(ctx context.Context, id uuid.UUID, paused bool, now time.Time) (changed bool, err error) {
	err = s.changeHalts(ctx, func(tx pgx.Tx) (int64, error) {
		var was bool
		if err := tx.QueryRow(ctx, `select paused from events where id = $1 for update`, id).Scan(&was); err != nil {
			return 0, db.NotFound(err, "event "+id.String())
		}
		if was == paused {
			return 0, nil
		}
		if _, err := tx.Exec(ctx, `update markets set updated_at = $2 where event_id = $1`, id, now); err != nil {
			return 0, err
		}
		tag, err := tx.Exec(ctx, `update events set paused = $2, updated_at = $3 where id = $1`, id, paused, now)
		return tag.RowsAffected(), err
	}, &changed)
	return changed, err
}

// changeHalts runs change in a transaction that first takes the halts' mark (change_halts) and,
// when change changed a row, raises the version; a change of nothing leaves the version as it was.
func (s *Rows) changeHalts(ctx context.Context, change func(pgx.Tx) (int64, error), changed *bool) error {
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `select change_halts()`); err != nil {
			return err
		}
		n, err := change(tx)
		if err != nil {
			return err
		}
		*changed = n > 0
		if n == 0 {
			return errNoChange // rolled back: the version stays
		}
		return nil
	})
	if errors.Is(err, errNoChange) {
		return nil
	}
	return err
}

var errNoChange = errors.New("no halt changed")

package markets

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// ListedMarket is a market as the public list shows it: its row and the shares traded in it.
type ListedMarket struct {
	records.Market
	Volume int64 // shares traded since it opened: the sum of its candles' volumes
}

// MarketList lists markets newest first, after a position (nil: from the newest), at most limit
// of them, each with its volume, in one statement. One statement reads one snapshot, and a batch
// writes a market's event_seq and its candles in one transaction, so each volume is exactly the
// trades up to the row's seq: the list follows trades from there and counts each once. Its cost is
// the page's rows of the (created_at, id) index and, for each market, its hours with trades
// (candles_1h's primary key), however often it is asked.
func (s *Rows) MarketList(ctx context.Context, after *db.Cursor, limit int) ([]ListedMarket, error) {
	var afterTime *time.Time
	var afterID *uuid.UUID
	if after != nil {
		afterTime, afterID = &after.CreatedAt, &after.ID
	}
	rows, err := s.Pool.Query(ctx, `select `+marketColumns+`,
		  coalesce((select sum(c.volume) from candles_1h c where c.market_id = m.id), 0)::bigint
		from markets m
		where ($1::timestamptz is null or (created_at, id) < ($1, $2))
		order by created_at desc, id desc limit $3`, afterTime, afterID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (ListedMarket, error) {
		var l ListedMarket
		var err error
		l.Market, err = scanMarket(listedRow{r, &l.Volume})
		return l, err
	})
}

// listedRow scans a market's columns with scanMarket and the volume after them.
type listedRow struct {
	pgx.Row
	volume *int64
}

func (r listedRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.volume)...) }

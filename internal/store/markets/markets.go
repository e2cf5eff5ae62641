// Package markets owns the rows of what is traded and what trading left, as the API and the pages
// read them: markets and events (created here, in one transaction for an event and its outcomes'
// markets), orders, trades, positions, fills and candles, settlements, and the markets list. The
// batch writer (package batches) writes the orders, trades and positions a shard commits.
package markets

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// Rows is the markets', events', orders' and trades' rows, on the exchange's database.
type Rows struct {
	// Pool is the connection pool every method uses (the aggregate store's).
	Pool *pgxpool.Pool
}

// New returns the rows on pool.
func New(pool *pgxpool.Pool) *Rows { return &Rows{Pool: pool} }

// CreateMarket inserts a new OPEN market. A taken manifest name is db.ErrConflict.
func (s *Rows) CreateMarket(ctx context.Context, m records.Market) (records.Market, error) {
	m.Status = domain.MarketOpen
	_, err := s.Pool.Exec(ctx, `insert into markets (id, name, question, description, category, url, label_a,
		label_b, status, closes_at, resolves_at, created_at, updated_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)`,
		m.ID, m.Name, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.Status,
		m.ClosesAt, m.ResolvesAt, m.CreatedAt)
	if db.IsUniqueViolation(err) {
		return m, fmt.Errorf("market %s: %w", m.ID, db.ErrConflict)
	}
	m.UpdatedAt = m.CreatedAt
	return m, err
}

// UpdateMarketText updates a market's descriptive fields and its schedule, not its status.
func (s *Rows) UpdateMarketText(ctx context.Context, m records.Market, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `update markets set question = $2, description = $3, category = $4, url = $5,
		label_a = $6, label_b = $7, closes_at = $8, resolves_at = $9, updated_at = $10 where id = $1
		and (question, description, category, url, label_a, label_b, closes_at, resolves_at) is distinct from
		    ($2, $3, $4, $5, $6, $7, $8, $9)`,
		m.ID, m.Question, m.Description, m.Category, m.URL, m.LabelA, m.LabelB, m.ClosesAt, m.ResolvesAt, now)
	return err
}

package batches

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// A conversion (package event) is written by its shard's batch: its shares and cash as the
// batch's deltas, its row here, in the same transaction, so that a retry with the same
// client_request_id finds it (ConversionByRequest) and a second insert of it is refused by the
// unique index (Refused), which makes the batch run again and find it.

const conversionColumns = `id, event_id, account_id, client_request_id, outcomes, quantity, cash, created_at`

// queueConversions queues the insert of a batch's conversions.
func queueConversions(q *pgx.Batch, b *Batch) {
	for _, c := range b.Conversions {
		q.Queue(`insert into conversions (`+conversionColumns+`) values ($1, $2, $3, $4, $5, $6, $7, $8)`,
			c.ID, c.EventID, c.AccountID, c.ClientRequestID, c.Outcomes, c.Quantity, c.Cash, c.CreatedAt)
	}
}

// ConversionByRequest returns the conversion an account made with a client request id, or
// db.ErrNotFound.
func (s *Writer) ConversionByRequest(ctx context.Context, account int64, clientRequestID string) (records.Conversion, error) {
	var c records.Conversion
	err := s.Pool.QueryRow(ctx, `select `+conversionColumns+` from conversions
		where account_id = $1 and client_request_id = $2`, account, clientRequestID).
		Scan(&c.ID, &c.EventID, &c.AccountID, &c.ClientRequestID, &c.Outcomes, &c.Quantity, &c.Cash, &c.CreatedAt)
	return c, db.NotFound(err, fmt.Sprintf("account %d's conversion %q", account, clientRequestID))
}

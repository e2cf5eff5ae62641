package db

import (
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
)

// StatusColumn scans an order's status column, text as the API spells it, into an engine.Status.
type StatusColumn struct{ To *engine.Status }

// Scan implements sql.Scanner, which pgx calls for it.
func (c StatusColumn) Scan(src any) error {
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("order status: got %T, want text", src)
	}
	st, ok := engine.ParseStatus(s)
	if !ok {
		return fmt.Errorf("order status %q is not one the engine knows", s)
	}
	*c.To = st
	return nil
}

// StatusText is a status as its column holds it, "" for none.
func StatusText(s engine.Status) string {
	if s == 0 {
		return ""
	}
	return s.String()
}

// OrderColumns are an order row's columns, in the order ScanOrder reads them.
const OrderColumns = `id, market_id, side, outcome, price, quantity, filled_quantity, status, created_at,
	updated_at, seq, account_id, time_in_force, expires_at, post_only, self_trade, client_order_id, placement,
	cancel_reason, order_group_id, taker_fee_bps, maker_fee_bps`

// ScanOrder reads a row of OrderColumns.
func ScanOrder(row pgx.Row) (records.Order, error) {
	var o records.Order
	var price, taker, maker int16
	err := row.Scan(&o.ID, &o.MarketID, &o.Side, &o.Outcome, &price, &o.Quantity, &o.FilledQuantity,
		StatusColumn{To: &o.Status}, &o.CreatedAt, &o.UpdatedAt, &o.Seq, &o.AccountID, &o.TimeInForce, &o.ExpiresAt,
		&o.PostOnly, &o.SelfTrade, &o.ClientOrderID, &o.Placement, &o.CancelReason, &o.OrderGroupID, &taker, &maker)
	o.Price = int(price)
	o.Fees = engine.Fees{Taker: int(taker), Maker: int(maker)}
	return o, err
}

package db

import (
	"fmt"

	"github.com/pmx-dev/pmx/engine"
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

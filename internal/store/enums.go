package store

import (
	"fmt"

	"github.com/pmx-dev/pmx/engine"
)

// statusColumn scans an order's status column, text as the API spells it, into an engine.Status.
type statusColumn struct{ to *engine.Status }

// Scan implements sql.Scanner, which pgx calls for it.
func (c statusColumn) Scan(src any) error {
	s, ok := src.(string)
	if !ok {
		return fmt.Errorf("order status: got %T, want text", src)
	}
	st, ok := engine.ParseStatus(s)
	if !ok {
		return fmt.Errorf("order status %q is not one the engine knows", s)
	}
	*c.to = st
	return nil
}

// statusText is a status as its column holds it, "" for none.
func statusText(s engine.Status) string {
	if s == 0 {
		return ""
	}
	return s.String()
}

package exchange_test

import (
	"testing"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
)

func TestRefuseCancel(t *testing.T) {
	const me, other = 7, 8
	for _, tc := range []struct {
		name  string
		order *records.Order
		want  *domain.Error
	}{
		{"no such order", nil, domain.ErrOrderNotOpen},
		{"another account's filled order", &records.Order{AccountID: other, Status: engine.StatusFilled}, domain.ErrNotYourOrder},
		{"another account's resting order", &records.Order{AccountID: other, Status: engine.StatusOpen}, domain.ErrNotYourOrder},
		{"filled", &records.Order{AccountID: me, Status: engine.StatusFilled}, domain.OrderNotOpen("FILLED")},
		{"cancelled", &records.Order{AccountID: me, Status: engine.StatusCancelled}, domain.OrderNotOpen("CANCELLED")},
		// Resting in Postgres yet in no book: the book has the last word, so no status is named.
		{"resting", &records.Order{AccountID: me, Status: engine.StatusPartiallyFilled}, domain.ErrOrderNotOpen},
	} {
		if got := exchange.RefuseCancel(me, tc.order); *got != *tc.want {
			t.Errorf("%s: refused with %+v, want %+v", tc.name, *got, *tc.want)
		}
	}
}

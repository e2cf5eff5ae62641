package domain

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorsCompareByCode(t *testing.T) {
	notOpen := OrderNotOpen("FILLED")
	if !errors.Is(notOpen, ErrOrderNotOpen) || !errors.Is(fmt.Errorf("wrapped: %w", notOpen), ErrOrderNotOpen) {
		t.Error("OrderNotOpen is not ErrOrderNotOpen")
	}
	if errors.Is(notOpen, ErrNotYourOrder) || errors.Is(ErrMarketNotOpen, ErrUnknownMarket) {
		t.Error("refusals with different codes compare equal")
	}
	if errors.Is(errors.New(ErrOrderNotOpen.Message), ErrOrderNotOpen) {
		t.Error("a plain error with the same text is a refusal")
	}
	if want := "the order is FILLED: only OPEN and PARTIALLY_FILLED orders can be cancelled or amended"; notOpen.Message != want || notOpen.Field != "orderId" {
		t.Errorf("OrderNotOpen: %+v", notOpen)
	}
}

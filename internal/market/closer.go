package market

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// CloseTarget closes markets, and events whole: in the standalone exchange, the shards.
type CloseTarget interface {
	Transitioner
	exchange.EventLifecycle
}

// Transitioner applies lifecycle actions; in the standalone exchange it is the shard.
type Transitioner interface {
	Transition(ctx context.Context, market uuid.UUID, action domain.MarketAction) error
}

// Closer closes every OPEN market when its closesAt arrives.
type Closer struct {
	Store  ClosingReads
	Target CloseTarget
	Logger *slog.Logger
	Now    func() time.Time // default time.Now
	// Poll is the longest it sleeps between looks (default 1s), so that markets created or
	// rescheduled meanwhile close on time too.
	Poll time.Duration
}

// Run closes due markets until ctx ends.
func (c *Closer) Run(ctx context.Context) {
	now, poll := c.Now, c.Poll
	if now == nil {
		now = time.Now
	}
	if poll <= 0 {
		poll = time.Second
	}
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait := poll
		if err := c.CloseDue(ctx, now()); err != nil && ctx.Err() == nil {
			log.Error("could not close due markets", "err", err)
		} else if next, err := c.Store.NextClosing(ctx); err == nil && next != nil {
			wait = min(poll, max(next.Sub(now()), time.Millisecond))
		}
		timer.Reset(wait)
	}
}

// CloseDue closes the OPEN markets whose closesAt is at or before now. One market that cannot be
// closed does not hold up the others: each is tried, and the errors of those that failed are
// returned together (each naming its market), for Run to try them again at its next look.
func (c *Closer) CloseDue(ctx context.Context, now time.Time) error {
	ids, err := c.Store.MarketsClosingBy(ctx, now)
	if err != nil {
		return err
	}
	var failed []error
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Another path (an admin request) may have moved it meanwhile: that is fine.
		err := c.Target.Transition(ctx, id, domain.CloseMarket)
		if errors.Is(err, domain.ErrMarketInEvent) {
			err = c.closeEvent(ctx, id)
		}
		if errors.Is(err, ErrIllegalTransition) {
			continue
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("market %s: %w", id, err))
			continue
		}
		if c.Logger != nil {
			c.Logger.Info("closed market at its closing time", "market", id)
		}
	}
	return errors.Join(failed...)
}

// closeEvent closes the event of a market whose closesAt has come: an event's markets share its
// schedule and move only together.
func (c *Closer) closeEvent(ctx context.Context, id uuid.UUID) error {
	m, err := c.Store.Market(ctx, id)
	if err != nil || m.EventID == nil {
		return err
	}
	return c.Target.TransitionEvent(ctx, *m.EventID, domain.EventAction{Action: domain.CloseMarket})
}

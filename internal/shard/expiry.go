package shard

import (
	"container/heap"
	"context"
	"errors"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// Good-till-date orders. The engine knows no time: a GTD order rests as a GTC one, and the shard
// cancels it (reason EXPIRED) once its time has come. Each market keeps its resting GTD orders in a
// heap, soonest first; the books are rebuilt from Postgres with each order's expiry, so an expiry
// holds across restarts and failovers.
//
// An expired order never trades: before a placement or an amend matches in a market, the market's
// due orders are cancelled in the same batch, at the batch's time. Between trades, the expiry
// sweep (a command every expirySweep) cancels them, so a quiet market's orders leave its book
// within about that long of their time.

// expirySweep is how often the shard looks for expired orders in markets no trade has touched.
const expirySweep = 250 * time.Millisecond

// expiry is one resting GTD order's expiry.
type expiry struct {
	at  time.Time
	seq int64
}

// expiries is a min-heap of expiries. An order that left the book by other means stays in it
// until its time, and is skipped then.
type expiries []expiry

func (e expiries) Len() int           { return len(e) }
func (e expiries) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e expiries) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *expiries) Push(x any)        { *e = append(*e, x.(expiry)) }
func (e *expiries) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

func (e *expiries) add(at time.Time, seq int64) { heap.Push(e, expiry{at, seq}) }

// due reports whether an expiry is at or before now.
func (e expiries) due(now time.Time) bool { return len(e) > 0 && !e[0].at.After(now) }

// expire cancels the market's resting GTD orders whose time is at or before now.
func (s *Shard) expire(m *marketState, now time.Time) {
	for m.expiries.due(now) {
		x := heap.Pop(&m.expiries).(expiry)
		if m.book == nil {
			continue
		}
		st, err := m.book.Cancel(engine.OrderID(x.seq))
		if err != nil {
			continue // it filled or was cancelled before its time
		}
		s.acc.touch(m)
		s.release(m, &st, engine.ReasonExpired)
	}
}

// expireAll runs the expiry sweep over every market.
func (s *Shard) expireAll(now time.Time) {
	for _, m := range s.markets {
		s.expire(m, now)
	}
}

// anyDue reports whether an order of any market is due to expire.
func (s *Shard) anyDue(now time.Time) bool {
	for _, m := range s.markets {
		if m.expiries.due(now) {
			return true
		}
	}
	return false
}

// errNothingDue answers an expiry sweep that found nothing to do; it never leaves the shard.
var errNothingDue = errors.New("shard: no order is due to expire")

// sweepExpiries sends the expiry sweep command (every expirySweep, see New).
func (s *Shard) sweepExpiries(ctx context.Context) {
	err := s.do(ctx, &command{kind: cmdExpire})
	if err != nil && !errors.Is(err, errNothingDue) && !errors.Is(err, exchange.ErrStopped) {
		s.log.Warn("the expiry sweep failed; it runs again shortly", "err", err)
	}
}

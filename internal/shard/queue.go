package shard

import (
	"context"
	"errors"
	"sync"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// queueRead is a cmdQueue's request and answer.
type queueRead struct {
	account int64
	seq     int64
	pos     exchange.QueuePosition
}

// QueuePositions reads where each of the account's orders stands in its book's queue
// (exchange.QueueReader), in one batch of the loop. A read is readied with its batch, before the
// batch's own commands run, and never joins a batch while the one before is uncommitted (it is
// not pipelinable): what it reads is the books as the batches before it committed them, and
// nothing changes them until its own batch commits, when it is answered. An order the book does
// not hold is refused as a cancel of it would be (exchange.RefuseQueuePosition).
func (s *Shard) QueuePositions(ctx context.Context, account int64, refs []exchange.OrderRef) []exchange.QueueResult {
	cmds := make([]*command, len(refs))
	for i, r := range refs {
		cmds[i] = &command{kind: cmdQueue, market: r.Market, queue: &queueRead{account: account, seq: r.Seq}}
	}
	errs := s.doGroup(ctx, cmds)
	out := make([]exchange.QueueResult, len(refs))
	for i, c := range cmds {
		switch {
		case errors.Is(errs[i], errFateUnknown):
			out[i].Err = s.readQueueFate(ctx, account, refs[i])
		case errs[i] != nil:
			out[i].Err = errs[i]
		default:
			out[i].Position = c.queue.pos
		}
	}
	return out
}

// queuePosition runs on the loop goroutine, as its batch is readied.
func (s *Shard) queuePosition(c *command) error {
	q := c.queue
	m := s.markets[c.market]
	id := engine.OrderID(q.seq)
	if m.book != nil {
		if st, ok := m.book.Order(id); ok {
			if int64(st.Account) != q.account {
				return exchange.RefuseQueuePosition(q.account, &records.Order{AccountID: int64(st.Account), Status: st.Status})
			}
			p, _ := m.book.QueuePosition(id)
			q.pos = exchange.QueuePosition{Side: st.Side, Outcome: st.Outcome, Price: st.Price, Ahead: p.Ahead, Level: p.Level,
				Epoch: m.epoch}
			return nil
		}
	}
	if f, ok := m.finished.get(q.seq); ok {
		return exchange.RefuseQueuePosition(q.account, &records.Order{AccountID: f.account, Status: f.status})
	}
	return errFateUnknown
}

// readQueueFate refuses the queue position of an order the shard neither holds nor remembers, by
// what Postgres records of it.
func (s *Shard) readQueueFate(ctx context.Context, account int64, r exchange.OrderRef) error {
	o, err := s.cfg.Store.OrderBySeq(ctx, r.Market, r.Seq)
	if errors.Is(err, store.ErrNotFound) {
		return exchange.RefuseQueuePosition(account, nil)
	}
	if err != nil {
		s.log.Warn("could not read an order to refuse its queue position", "market", r.Market, "seq", r.Seq, "err", err)
		return exchange.ErrUnavailable
	}
	return exchange.RefuseQueuePosition(account, &o)
}

// QueuePositions reads each order's position on its market's shard, each shard's orders in one
// batch of its own, the shards at once.
func (set *Set) QueuePositions(ctx context.Context, account int64, refs []exchange.OrderRef) []exchange.QueueResult {
	out := make([]exchange.QueueResult, len(refs))
	groups := set.split(ctx, len(refs), func(i int) uuid.UUID { return refs[i].Market }, func(i int, err error) { out[i].Err = err })
	var wg sync.WaitGroup
	for sh, idx := range groups {
		wg.Go(func() {
			in := make([]exchange.OrderRef, len(idx))
			for j, i := range idx {
				in[j] = refs[i]
			}
			for j, res := range set.shards[sh].QueuePositions(ctx, account, in) {
				out[idx[j]] = res
			}
		})
	}
	wg.Wait()
	return out
}

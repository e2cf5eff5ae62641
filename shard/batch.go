package shard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/domain"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/feed"
	"github.com/pmx-dev/pmx/store"
)

// Batching: the loop takes every command queued while the previous batch ran, readies them,
// begins a transaction (locking what they reserve from), executes them on the books and commits,
// then answers. A failed commit rebuilds every book it touched from Postgres.

// commitTimeout bounds one batch's transaction.
const commitTimeout = 30 * time.Second

// batch is a set of commands taken from the queue to run in one transaction. A batch taken while
// the previous one was being committed began in the same round trip as that commit: started,
// with the locks it holds.
type batch struct {
	cmds    []*command
	started bool
	asked   store.Begin // what a started batch locked
	locked  store.Locked
	// floor is the least-trusting way it may learn what it reserves from: raised each time a
	// run finds what it learned out of date (views.go).
	floor reserveMode
}

// loop is the shard's only goroutine touching books. Each batch is every command queued while
// the previous one was running; two command buffers take turns.
func (s *Shard) loop() {
	defer close(s.done)
	bufs := [2][]*command{make([]*command, 0, s.cfg.MaxBatch), make([]*command, 0, s.cfg.MaxBatch)}
	var next batch
	for i := 0; ; i ^= 1 {
		cur := next // already in bufs[i], if it has commands
		if len(cur.cmds) == 0 {
			select {
			case c := <-s.cmds:
				cur = batch{cmds: s.take(add(bufs[i][:0], c))}
			case <-s.stop:
				s.drain(bufs[i][:0])
				return
			}
		}
		next = s.process(cur, &batch{cmds: bufs[i^1][:0]})
	}
}

// take adds the commands waiting in the queue to cmds, up to the batch size.
func (s *Shard) take(cmds []*command) []*command {
	for len(cmds) < s.cfg.MaxBatch {
		select {
		case c := <-s.cmds:
			cmds = add(cmds, c)
		default:
			return cmds
		}
	}
	return cmds
}

// add appends a command to a batch's, or a group's commands in its place and in its order: a
// group is never split across batches (a batch may then hold a few more than MaxBatch).
func add(cmds []*command, c *command) []*command {
	if c.kind == cmdGroup {
		return append(cmds, c.group...)
	}
	return append(cmds, c)
}

// drain runs what was accepted before Stop.
func (s *Shard) drain(cmds []*command) {
	for {
		cmds = s.take(cmds)
		if len(cmds) == 0 {
			return
		}
		s.process(batch{cmds: cmds}, nil)
		cmds = cmds[:0]
	}
}

// process runs one batch in one transaction and answers its commands. A batch that only raced
// another transaction (a deadlock) runs once more, on books rebuilt from Postgres. When next is
// not nil, the commands queued meanwhile are taken into it and, if they can, begin with this
// batch's commit; process returns it.
func (s *Shard) process(b batch, next *batch) batch {
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	start := time.Now()
	var err error
	committed := false // a transaction ran: the batch counts in the metrics
	retried := false
	for {
		now := s.cfg.Now().UTC().Truncate(time.Microsecond)
		if !b.started {
			s.prepareAll(ctx, b.cmds)
		}
		s.acc.reset(now)
		if !b.started && !writes(b.cmds) {
			break // only loads, checks and syncs, or nothing left to do: no transaction
		}
		committed = true
		mode := b.floor
		if mode == fromViews && (b.started || !s.unlockable(b.cmds)) {
			mode = fromReads // a batch begun ahead read what it reserves from
		}
		if err = s.commit(ctx, b, now, next, mode); err == nil {
			break
		}
		b.started = false // a retry begins afresh
		for id := range s.acc.touched {
			delete(s.markets, id) // reloaded from Postgres on next use
		}
		s.forget()
		if mode < fromLocks && (errors.Is(err, errDoubted) || store.Refused(err)) {
			// What it reserved from was out of date: not a failure, a batch that runs again,
			// learning it more surely (at most twice: what refuses a locked batch is final).
			s.metrics.rerun.Inc()
			s.log.Debug("a batch runs again, reading what it reserves from more surely", "reason", err, "commands", len(b.cmds), "was", mode)
			b.floor = mode + 1
			continue
		}
		s.log.Error("batch failed; rebuilding its markets from the database", "err", err, "commands", len(b.cmds), "retried", retried)
		s.releaseConn()
		if retried || !store.Retryable(err) {
			break
		}
		retried = true
	}
	var ahead batch
	if next != nil {
		ahead = *next
	}
	if err != nil {
		s.metrics.failures.Inc()
		for _, c := range b.cmds {
			c.reply <- ErrUnavailable
		}
		return ahead
	}
	if committed {
		s.metrics.batches.Inc()
		s.metrics.size.Observe(float64(len(b.cmds)))
		s.metrics.duration.Observe(time.Since(start).Seconds())
	}
	for _, m := range s.acc.touched {
		s.publish(m)
	}
	s.cfg.Feed.Publish(s.acc.published)
	s.recordFinished()
	for _, c := range b.cmds {
		c.reply <- c.err
	}
	return ahead
}

// recordFinished remembers, once a batch has committed, the final status of every order that
// left its book in it.
func (s *Shard) recordFinished() {
	for _, rows := range [][]store.Order{s.acc.batch.NewOrders, s.acc.batch.OrderUpdates} {
		for i := range rows {
			o := &rows[i]
			if o.Status.Resting() {
				continue
			}
			if m, ok := s.markets[o.MarketID]; ok {
				m.finished.put(o.Seq, finished{status: o.Status, account: o.AccountID})
			}
		}
	}
}

// prepareAll readies every command of a batch that has not begun.
func (s *Shard) prepareAll(ctx context.Context, cmds []*command) {
	for _, c := range cmds {
		c.reset()
		c.err = s.prepare(ctx, c)
		if c.kind == cmdCheck {
			c.checkErr = s.checkBooks(ctx)
		}
	}
}

// prepare loads the markets a command names.
func (s *Shard) prepare(ctx context.Context, c *command) error {
	switch c.kind {
	case cmdCheck:
		return nil
	case cmdExpire:
		if !s.anyDue(s.cfg.Now()) {
			return errNothingDue // no transaction for nothing
		}
		return nil
	case cmdCancelAll:
		for _, id := range c.markets {
			if _, err := s.ensure(ctx, id); err != nil && !errors.Is(err, domain.ErrUnknownMarket) && !errors.Is(err, ErrNotOwner) {
				return err
			}
		}
		return nil
	case cmdSync:
		s.sync(ctx, c.owned)
		return nil
	default:
		_, err := s.ensure(ctx, c.market)
		return err
	}
}

// writes reports whether a batch has a command to commit: one that trades or moves a market and
// was readied without error.
func writes(cmds []*command) bool {
	for _, c := range cmds {
		switch c.kind {
		case cmdPlace, cmdCancel, cmdCancelAll, cmdTransition, cmdExpire, cmdAmend:
			if c.err == nil {
				return true
			}
		}
	}
	return false
}

// canBeginAhead reports whether a batch may be readied and begun while the batch before it is
// still uncommitted: only if its commands just trade. Checking and syncing the books compare
// them with Postgres and a load publishes what it read, so they wait until the batch before has
// committed. (Readying a trading command may load a market the shard does not hold yet: the
// batch before cannot have touched it, so what Postgres holds of it is already final.)
//
// Only a standalone shard (no Name) begins batches ahead. A named shard shares the rows it locks
// with other shards (accounts, holdings) and with the operator (its markets' ownership rows, which
// a move or a lifecycle change updates). A next batch whose locks are taken in the very pipeline
// of the commit that released them would take them again before a waiting transaction is even
// woken, so under steady load that transaction could wait for as long as the load lasts.
func canBeginAhead(cmds []*command) bool {
	for _, c := range cmds {
		switch c.kind {
		case cmdPlace, cmdCancel, cmdCancelAll, cmdTransition, cmdExpire, cmdAmend:
		default:
			return false
		}
	}
	return true
}

// begin names what a batch locks when it begins: the ownership of the shard's markets (in
// distributed mode) and the accounts and holdings its placements reserve from.
func (s *Shard) begin(cmds []*command) store.Begin {
	var b store.Begin
	if s.cfg.Name != "" {
		b.Markets = slices.SortedFunc(maps.Keys(s.markets), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	}
	b.Accounts, b.Holdings = reservedFrom(cmds)
	b.ClientOrderIDs = clientOrderIDs(cmds)
	return b
}

// clientOrderIDs lists, in key order, the client order ids the batch's placements give.
func clientOrderIDs(cmds []*command) []store.ClientOrderKey {
	var keys []store.ClientOrderKey
	for _, c := range cmds {
		if c.kind == cmdPlace && c.err == nil && c.place.ClientOrderID != "" {
			keys = append(keys, store.ClientOrderKey{Account: c.place.Account, ID: c.place.ClientOrderID})
		}
	}
	slices.SortFunc(keys, func(a, b store.ClientOrderKey) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.ID, b.ID))
	})
	return slices.Compact(keys)
}

// commit runs a batch: unless it began with the previous commit, one round trip begins the
// transaction and locks what it needs — the ownership of the shard's markets and the accounts
// and holdings its placements reserve from; then the books match in memory; then one round trip
// writes every effect, commits, and begins the next batch (the commands queued meanwhile).
func (s *Shard) commit(ctx context.Context, b batch, now time.Time, next *batch, mode reserveMode) error {
	conn, err := s.connection(ctx)
	if err != nil {
		return err
	}
	locked, asked := b.locked, b.asked
	switch {
	case mode == fromViews:
		locked = s.viewed(b.cmds)
	case !b.started:
		asked = s.begin(b.cmds)
		asked.LockAccounts = mode == fromLocks
		if locked, err = store.BeginBatch(ctx, conn, asked); err != nil {
			return err
		}
	}
	if mode != fromViews {
		s.learn(asked, locked)
	}
	if s.cfg.Name != "" {
		s.fence(locked.Owners, b.cmds)
	}
	s.acc.track(locked)
	s.acc.unlocked = mode == fromViews

	for _, c := range b.cmds {
		if c.err != nil {
			continue
		}
		switch c.kind {
		case cmdPlace:
			s.place(c, now)
		case cmdCancel:
			s.cancel(c)
		case cmdCancelAll:
			s.cancelAll(c)
		case cmdTransition:
			s.transition(c)
		case cmdExpire:
			s.expireAll(now)
		case cmdAmend:
			s.amend(c, now)
		}
	}
	if s.acc.doubted {
		return errDoubted // before anything reaches Postgres
	}
	if err := s.recordEvents(now); err != nil {
		return err
	}
	if err := s.recordAccountEvents(); err != nil {
		return err
	}
	if !s.cfg.NoEventLog {
		s.acc.batch.SettledEvents = settledEvents
	}
	s.acc.finish()
	s.acc.batch.Unlocked = mode == fromViews

	// The next batch begins with this commit if it must lock: if the views, as they stand before
	// this batch's deltas, cannot pay for it (it runs unlocked otherwise, and needs no beginning).
	var ahead *store.Begin
	if next != nil {
		next.cmds = s.take(next.cmds)
		if s.cfg.Name == "" && len(next.cmds) > 0 && canBeginAhead(next.cmds) {
			s.prepareAll(ctx, next.cmds)
			if !s.unlockable(next.cmds) {
				bg := s.begin(next.cmds)
				ahead = &bg
			}
		}
	}
	res, err := store.CommitBatch(ctx, conn, &s.acc.batch, ahead)
	if err != nil {
		return err
	}
	s.advance(&s.acc.batch)
	s.answerCancels(b.cmds, res.Updated)
	for _, a := range res.Accounts {
		s.acc.published = append(s.acc.published, feed.Batch{Account: a.Account, First: a.First, Last: a.Last, Events: a.Events})
	}
	if ahead != nil {
		if res.NextErr != nil {
			s.log.Warn("the next batch could not begin with this one's commit; it begins on its own", "err", res.NextErr)
		} else {
			next.started, next.asked, next.locked = true, *ahead, res.Next
		}
	}
	return nil
}

// reservedFrom lists, in key order, the accounts whose cash and the holdings whose shares the
// batch's placements and amends would reserve.
func reservedFrom(cmds []*command) ([]int64, []store.ShareKey) {
	cash := map[int64]bool{}
	shares := map[store.ShareKey]bool{}
	for _, c := range cmds {
		if c.err != nil {
			continue
		}
		var account int64
		var market uuid.UUID
		var side engine.Side
		var outcome engine.Outcome
		switch c.kind {
		case cmdPlace:
			account, market, side, outcome = c.place.Account, c.place.Market, c.place.Side, c.place.Outcome
		case cmdAmend:
			account, market, side, outcome = c.amend.Account, c.amend.Market, c.amend.Side, c.amend.Outcome
		default:
			continue
		}
		if side == engine.Buy {
			cash[account] = true
		} else {
			shares[store.ShareKey{Account: account, Market: market, Outcome: outcome.String()}] = true
		}
	}
	accounts := slices.Sorted(maps.Keys(cash))
	holdings := slices.SortedFunc(maps.Keys(shares), func(a, b store.ShareKey) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), bytes.Compare(a.Market[:], b.Market[:]), cmp.Compare(a.Outcome, b.Outcome))
	})
	return accounts, holdings
}

// connection returns the shard's own connection, acquiring one when it has none: batches never
// wait behind the API's reads for a connection of the pool.
func (s *Shard) connection(ctx context.Context) (*pgx.Conn, error) {
	if s.conn == nil {
		c, err := s.cfg.Store.Acquire(ctx)
		if err != nil {
			return nil, fmt.Errorf("while acquiring a connection: %w", err)
		}
		s.conn = c
	}
	return s.conn.Conn(), nil
}

// releaseConn gives the connection back after a failure; the pool replaces it if it is broken.
func (s *Shard) releaseConn() {
	if s.conn != nil {
		s.conn.Release()
		s.conn = nil
	}
}

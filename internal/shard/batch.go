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

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Batching: the loop takes every command queued while the previous batch ran, readies them,
// reserves and matches them in memory and sends their commit to Postgres; while that commit is on
// its way, it takes the commands queued meanwhile and matches them too, on the state the batch in
// flight leaves, then sends their commit once the one before has committed (pipelining). Answers
// go out only after their own batch commits. A failed commit rebuilds every book it touched, and
// every book the batch built on it touched, from Postgres, and runs both batches again.

// commitTimeout bounds one batch's transaction.
const commitTimeout = 30 * time.Second

// batch is a set of commands taken from the queue to run in one transaction.
type batch struct {
	cmds []*command
	// floor is the least-trusting way it may learn what it reserves from: raised each time a
	// run finds what it learned out of date (views.go).
	floor reserveMode
}

// flight is a batch built — reserved and matched in memory, its effects in its accumulator — whose
// commit is on its way to Postgres, or about to be.
type flight struct {
	b      batch
	mode   reserveMode
	acc    *accumulator
	conn   BatchConn
	ctx    context.Context
	cancel context.CancelFunc
	start  time.Time
	now    time.Time     // the batch's time
	done   chan struct{} // closed when the commit has an answer: res, err
	res    store.Committed
	err    error
}

// loop is the shard's only goroutine touching books. Each batch is every command queued while
// the previous one was being built and committed.
func (s *Shard) loop() {
	defer close(s.done)
	var fl *flight // the batch whose commit is on its way, if any
	for {
		if fl != nil {
			fl = s.pipeline(fl)
			continue
		}
		select {
		case c := <-s.cmds:
			fl = s.launch(batch{cmds: s.take(add(make([]*command, 0, 16), c))})
		case <-s.stop:
			s.drain(nil)
			return
		}
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

// drain runs what was accepted before Stop, each batch to its end (cmds first, if any).
func (s *Shard) drain(cmds []*command) {
	for {
		cmds = s.take(cmds)
		if len(cmds) == 0 {
			return
		}
		if fl := s.launch(batch{cmds: cmds}); fl != nil { // launch: a handoff runs in its own turn
			s.land(fl)
		}
		cmds = cmds[:0]
	}
}

// pipeline builds the next batch while fl commits, on the state fl leaves: every command queued
// meanwhile that just trades and that the views can pay for joins it, as it arrives, until fl
// has committed; then it is sent, and pipeline returns it (nil if there is none). The first
// command that cannot join (a load, a check, one the views cannot pay for) waits for fl, and
// runs after the batch built meanwhile. If fl fails, the batch built on it is undone with it: the
// books both touched are rebuilt, and both run again, in order, each to its end.
func (s *Shard) pipeline(fl *flight) *flight {
	var next *flight
	var nextErr error
	var held []*command // commands that could not join next, in order
	for held == nil {
		var queue <-chan *command
		if nextErr == nil && (next == nil || len(next.b.cmds) < s.cfg.MaxBatch) {
			queue = s.cmds
		}
		select {
		case c := <-queue:
			cmds := s.take(add(make([]*command, 0, 16), c))
			if !pipelinable(cmds) {
				held = cmds
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
			s.prepareAll(ctx, cmds)
			cancel()
			var learning <-chan learned
			if writes(cmds) {
				learning = s.learnAccounts(cmds) // views.go
			}
			if learning != nil {
				select {
				case l := <-learning:
					s.viewLearned(l)
				case <-fl.done:
					// fl came back before the acquire: it is answered, and the batch built on it
					// sent, now; cmds then run after that batch, as held commands do, on what
					// the acquire read.
					nf := s.after(fl, next, nextErr, nil)
					s.viewLearned(<-learning)
					s.metrics.held.Add(float64(len(cmds)))
					return s.startAfter(nf, cmds)
				}
			}
			switch {
			case next == nil && writes(cmds) && s.unlockable(cmds):
				next, nextErr = s.open(batch{cmds: cmds}, fromViews)
				s.metrics.ahead.Add(float64(len(cmds)))
			case next != nil && s.topUp(cmds):
				s.extend(next, cmds)
				s.metrics.ahead.Add(float64(len(cmds)))
			default:
				held = cmds // readied again when they run: a load may have published what fl had not committed
			}
		case <-fl.done:
			return s.after(fl, next, nextErr, nil)
		case <-s.stop:
			// Finish what is in hand; the loop then drains the queue and stops.
			if next = s.after(fl, next, nextErr, nil); next != nil {
				s.land(next)
			}
			return nil
		}
	}
	s.metrics.held.Add(float64(len(held)))
	return s.after(fl, next, nextErr, held)
}

// after lands fl, sends next (the batch built on it), then starts held: it returns the batch then
// in flight. Once fl has committed, next is sealed and sent before fl's books and events are
// published and its callers answered (announce), so that the shard's connection, which carries
// one batch at a time, does not wait on that work: next commits no sooner (its round trip follows
// fl's), and fl is still published and answered before it.
func (s *Shard) after(fl, next *flight, nextErr error, held []*command) *flight {
	if !s.committed(fl) {
		if next != nil {
			s.discard(next) // built on what did not commit
		}
		s.runNow(fl.b, fl.mode, fl.err)
		if next != nil {
			s.runNow(next.b, 0, nil)
		}
		return s.startAfter(nil, held)
	}
	if next != nil && nextErr == nil {
		if nextErr = s.seal(next); nextErr == nil {
			s.send(next)
		}
	}
	s.announce(fl)
	if next != nil && nextErr != nil {
		s.discard(next)
		s.runNow(next.b, fromViews, nextErr)
		next = nil
	}
	return s.startAfter(next, held)
}

// startAfter starts held commands as a batch of their own after prev (in flight, or nil).
func (s *Shard) startAfter(prev *flight, held []*command) *flight {
	if held == nil {
		return prev
	}
	if prev != nil {
		s.land(prev)
	}
	return s.launch(batch{cmds: s.take(held)})
}

// launch readies a batch and sends its commit on its way, or runs it to its end when it cannot
// (nothing to commit, or a failure). It returns the batch in flight, if any.
func (s *Shard) launch(b batch) *flight {
	if i := slices.IndexFunc(b.cmds, handingOff); i >= 0 {
		return s.launchAround(b.cmds, i) // handoff.go
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	s.prepareAll(ctx, b.cmds)
	cancel()
	if !writes(b.cmds) {
		answer(b.cmds) // only loads, checks and syncs, or nothing left to do: no transaction
		return nil
	}
	mode := s.modeOf(b)
	fl, err := s.build(b, mode)
	if err != nil {
		s.discard(fl)
		s.runNow(b, mode, err)
		return nil
	}
	s.send(fl)
	return fl
}

// land waits for a flight and, if it failed, runs it again to its end.
func (s *Shard) land(fl *flight) {
	if !s.landed(fl) {
		s.runNow(fl.b, fl.mode, fl.err)
	}
}

// runNow runs a batch to its end, nothing else in flight, and answers its commands. When err is
// set, its last attempt (in mode) failed with it, and its books were rebuilt: it runs once more
// for each failure again allows. Otherwise it begins with its first attempt.
func (s *Shard) runNow(b batch, mode reserveMode, err error) {
	retried := false
	for {
		if err != nil && !s.again(&b, mode, err, &retried) {
			s.metrics.failures.Inc()
			// A batch whose commit may have landed is never answered as refused nor as done:
			// its commands answer that their outcome is unknown, and a retry with the same
			// client order id reads what happened from the books undo reloads.
			reply := exchange.ErrUnavailable
			if errors.Is(err, store.ErrCommitUnknown) {
				reply = exchange.ErrOutcomeUnknown
			}
			for _, c := range b.cmds {
				c.reply <- reply
			}
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
		s.prepareAll(ctx, b.cmds)
		cancel()
		if !writes(b.cmds) {
			answer(b.cmds)
			return
		}
		mode = s.modeOf(b)
		fl, buildErr := s.build(b, mode)
		if err = buildErr; err != nil {
			s.discard(fl)
			continue
		}
		s.send(fl)
		if s.landed(fl) {
			return
		}
		err = fl.err
	}
}

// modeOf is how a batch learns what it reserves from this time (views.go).
func (s *Shard) modeOf(b batch) reserveMode {
	if b.floor == fromViews && !s.unlockable(b.cmds) {
		return fromReads
	}
	return b.floor
}

// again decides what follows a failed attempt of a batch, whose books undo has already rebuilt:
// an attempt that found what it reserved from out of date runs again, learning it more surely
// (at most twice: what refuses a locked batch is final); one that only raced another transaction
// (a deadlock), or met a schema a migration changed under it (store.Retryable), runs once more;
// any other failure is final.
func (s *Shard) again(b *batch, mode reserveMode, err error, retried *bool) bool {
	if store.Fenced(err) {
		s.metrics.fenced.Inc() // the shard lost a market it held (ownership.go)
	}
	if store.HaltsMoved(err) {
		s.forgetHalts() // a halt changed since the batch read them: read them again (halts.go)
		s.metrics.rerun.Inc()
		return true
	}
	if store.AllocationMissing(err) {
		// An allocation row the shard had seen committed was not there (none is ever deleted, so
		// only by someone's hand): undo has forgotten which rows exist, and the batch runs again
		// writing its rows with the insert.
		s.log.Warn("an allocation row this shard had committed was missing; the batch runs again", "err", err)
		s.metrics.rerun.Inc()
		return true
	}
	if mode < fromLocks && (errors.Is(err, errDoubted) || store.Refused(err) || store.Fenced(err)) {
		s.metrics.rerun.Inc()
		s.log.Debug("a batch runs again, reading what it reserves from more surely", "reason", err, "commands", len(b.cmds), "was", mode)
		b.floor = mode + 1
		return true
	}
	s.log.Error("batch failed; rebuilding its markets from the database", "err", err, "commands", len(b.cmds), "retried", *retried)
	s.releaseConn()
	if *retried || !store.Retryable(err) {
		return false
	}
	*retried = true
	return true
}

// undo forgets what a batch that did not commit did in memory: every book it touched is reloaded
// from Postgres on next use, and the views start afresh.
func (s *Shard) undo(a *accumulator) {
	for id := range a.touched {
		delete(s.markets, id)
	}
	s.forget()
}

// discard drops a batch built but never sent.
func (s *Shard) discard(fl *flight) {
	fl.cancel()
	s.undo(fl.acc)
}

// answer answers commands that needed no transaction.
func answer(cmds []*command) {
	for _, c := range cmds {
		c.reply <- c.err
	}
}

// landed waits for a flight's commit; if it committed, it publishes the batch's books and events
// and answers its commands. It reports whether the batch committed; if not, its books are undone,
// and the caller runs it again.
func (s *Shard) landed(fl *flight) bool {
	if !s.committed(fl) {
		return false
	}
	s.announce(fl)
	return true
}

// committed waits for a flight's commit and reports whether the batch committed; if not, its books
// are undone. A batch that committed is then announced (announce) before any batch after it.
func (s *Shard) committed(fl *flight) bool {
	<-fl.done
	fl.cancel()
	if fl.err != nil {
		s.undo(fl.acc)
		return false
	}
	s.committedAllocations(fl.acc.batch.Cash) // allocations.go
	return true
}

// announce publishes a committed batch's books and events and answers its commands.
func (s *Shard) announce(fl *flight) {
	a := fl.acc
	s.answerCancels(a, fl.b.cmds, fl.res.Updated)
	for _, e := range fl.res.Accounts {
		a.published = append(a.published, feed.Batch{Account: e.Account, Holder: e.Holder, First: e.First, Last: e.Last,
			Events: e.Events, Epochs: s.epochsOf(a.accountEvents[e.Account])})
	}
	s.metrics.batches.Inc()
	s.metrics.size.Observe(float64(len(fl.b.cmds)))
	s.metrics.duration.Observe(time.Since(fl.start).Seconds())
	for _, snap := range a.snaps {
		s.snaps.Store(snap.market, snap.snap)
	}
	s.cfg.Feed.Publish(a.published)
	s.recordFinished(a)
	s.keepGroups(a)
	for _, c := range fl.b.cmds {
		c.reply <- c.err
	}
}

// recordFinished remembers, once a batch has committed, the final status of every order that
// left its book in it.
func (s *Shard) recordFinished(a *accumulator) {
	for _, rows := range [][]records.Order{a.batch.NewOrders, a.batch.OrderUpdates} {
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

// prepareAll readies every command of a batch.
func (s *Shard) prepareAll(ctx context.Context, cmds []*command) {
	for _, c := range cmds {
		c.reset()
		c.err = s.prepare(ctx, c)
		if c.kind == cmdCheck {
			c.checkErr = s.checkBooks(ctx)
		}
		if c.kind == cmdQueue && c.err == nil {
			c.err = s.queuePosition(c) // queue.go
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
			if _, err := s.ensure(ctx, id); err != nil && !errors.Is(err, domain.ErrUnknownMarket) && !errors.Is(err, exchange.ErrNotOwner) {
				return err
			}
		}
		return nil
	case cmdSync:
		s.sync(ctx, c.owned, c.readAt)
		return nil
	case cmdGroupSweep:
		return s.prepareGroupSweep(ctx, c)
	case cmdConvert:
		return s.prepareConvert(ctx, c)
	case cmdTakeOver:
		s.takeOver(ctx, c)
		return nil
	case cmdReturn:
		s.returnIdle(ctx) // allocations.go: on the shard's connection, which no batch holds now
		return nil
	default:
		if c.kind == cmdPlace || c.kind == cmdAmend {
			if err := s.readyHalts(ctx); err != nil { // halts.go
				return err
			}
		}
		_, err := s.ensure(ctx, c.market)
		return err
	}
}

// writes reports whether a batch has a command to commit: one that trades or moves a market and
// was readied without error.
func writes(cmds []*command) bool {
	for _, c := range cmds {
		switch c.kind {
		case cmdPlace, cmdCancel, cmdCancelAll, cmdTransition, cmdExpire, cmdAmend, cmdGroupSweep:
			if c.err == nil {
				return true
			}
		case cmdConvert:
			if c.err == nil && c.convert.done == nil {
				return true
			}
		}
	}
	return false
}

// pipelinable reports whether a batch may be readied and built while the batch before it is
// still uncommitted: only if its commands just trade. Checking and syncing the books compare
// them with Postgres and a load publishes what it read, so they wait until the batch before has
// landed. (Readying a trading command may load a market the shard does not hold yet: the batch
// before cannot have touched it, so what Postgres holds of it is already final.)
func pipelinable(cmds []*command) bool {
	for _, c := range cmds {
		switch c.kind {
		case cmdPlace, cmdCancel, cmdCancelAll, cmdTransition, cmdExpire, cmdAmend:
		default:
			return false
		}
	}
	return true
}

// claim is the token a standalone shard's batches carry (Config.Claim); a named shard's carry none.
func (s *Shard) claim() int64 {
	if s.cfg.Name != "" {
		return 0
	}
	return s.cfg.Claim
}

// begin names what a batch locks when it begins: the ownership of the shard's markets (in
// distributed mode) and the accounts and holdings its placements reserve from.
func (s *Shard) begin(cmds []*command) store.Begin {
	b := store.Begin{Holder: s.holder(), Claim: s.claim()}
	if s.cfg.Name != "" {
		b.Markets = slices.SortedFunc(maps.Keys(s.markets), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	}
	b.Accounts, b.Holdings = reservedFrom(cmds)
	b.ClientOrderIDs = clientOrderIDs(cmds)
	b.Groups = s.groupsOf(cmds, false)
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

// build runs a batch in memory (open, then seal). The flight it returns (with its accumulator,
// even on error) is not sent yet.
func (s *Shard) build(b batch, mode reserveMode) (*flight, error) {
	fl, err := s.open(b, mode)
	if err == nil {
		err = s.seal(fl)
	}
	return fl, err
}

// open begins building a batch: unless it reserves from the views, one round trip begins its
// transaction and reads (or locks) what its placements reserve from, with the ownership of the
// shard's markets in distributed mode; then its commands execute on the books, their effects
// gathering in an accumulator of its own.
func (s *Shard) open(b batch, mode reserveMode) (*flight, error) {
	if s.acc == &s.accs[0] { // the other accumulator may belong to the batch in flight
		s.acc = &s.accs[1]
	} else {
		s.acc = &s.accs[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	fl := &flight{b: b, mode: mode, acc: s.acc, ctx: ctx, cancel: cancel, start: time.Now(), done: make(chan struct{}),
		now: s.cfg.Now().UTC().Truncate(time.Microsecond)}
	s.acc.reset(fl.now)
	conn, err := s.connection(ctx)
	if err != nil {
		return fl, err
	}
	fl.conn = conn
	var locked store.Locked
	if mode == fromViews {
		locked = s.viewed(b.cmds) // a named shard's fence is checked at commit (seal)
	} else {
		s.metrics.read.Inc()
		if mode == fromReads {
			if err := s.acquire(ctx, conn, b.cmds, s.acc.exhausted); err != nil { // allocations.go
				return fl, err
			}
		}
		asked := s.begin(b.cmds)
		asked.LockAccounts = mode == fromLocks
		asked.AcquireAll = mode == fromLocks
		if asked.AcquireAll {
			for _, a := range asked.Accounts {
				s.acc.exhausted[a] = exhaustedCash | exhaustedRoom
			}
		}
		if asked.LockAccounts {
			asked.Groups = s.groupsOf(b.cmds, true) // a batch run again decides every group it may meet from a read
		}
		s.metrics.groupsRead.Add(float64(len(asked.Groups)))
		asked.Now = fl.now
		began := time.Now()
		locked, err = conn.BeginBatch(ctx, asked)
		s.metrics.database.Add(time.Since(began).Seconds())
		if err != nil {
			return fl, err
		}
		s.learn(asked, locked)
		if s.cfg.Name != "" {
			s.fence(locked.Owners, b.cmds)
		}
	}
	s.acc.track(locked)
	s.trackGroups(locked.Groups)
	s.acc.unlocked = mode == fromViews
	s.execute(b.cmds, fl.now)
	return fl, nil
}

// extend adds commands to a batch being built from the views (topUp has started what they reserve from).
func (s *Shard) extend(fl *flight, cmds []*command) {
	fl.b.cmds = append(fl.b.cmds, cmds...)
	s.execute(cmds, fl.now)
}

// execute runs commands on the books, into the batch being built.
func (s *Shard) execute(cmds []*command, now time.Time) {
	for _, c := range cmds {
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
		case cmdConvert:
			s.convert(c, now)
		}
	}
}

// seal finishes building a batch: its feed events, its rows in key order, the views it leaves
// and the snapshots of the books it touched, to publish once it commits.
func (s *Shard) seal(fl *flight) error {
	if s.acc != fl.acc {
		panic("shard: sealing a batch that is not the one being built")
	}
	if s.acc.doubted {
		return errDoubted // before anything reaches Postgres
	}
	if err := s.recordEvents(fl.now); err != nil {
		return err
	}
	s.recordAccountEvents()
	if !s.cfg.NoEventLog {
		s.acc.batch.SettledEvents = settledEvents
	}
	s.acc.batch.Groups = s.acc.groupDeltas()
	s.acc.finish()
	s.acc.batch.Unlocked = fl.mode == fromViews
	s.acc.batch.Claim = s.claim()
	s.acc.batch.Holder = s.holder()
	s.acc.batch.Allocated = s.allAllocated(s.acc.batch.Cash) // allocations.go
	if fl.mode == fromViews && s.cfg.Name != "" {
		s.acc.batch.Fence = s.fenceOf(s.acc.touched)
	}
	s.advance(&s.acc.batch) // the next batch reserves from what this one leaves
	for _, m := range s.acc.touched {
		s.acc.snaps = append(s.acc.snaps, pendingSnapshot{m.id, s.snapshotOf(m)})
	}
	return nil
}

// send writes a built batch's effects and commits them, on a goroutine of its own: the loop
// meanwhile builds the next batch, which touches neither this batch's accumulator nor the
// connection until this commit has an answer.
func (s *Shard) send(fl *flight) {
	go func() {
		defer close(fl.done)
		if fl.err = encodeAccountEvents(fl.acc); fl.err != nil {
			return
		}
		sent := time.Now()
		fl.res, fl.err = fl.conn.CommitBatch(fl.ctx, &fl.acc.batch)
		took := time.Since(sent).Seconds()
		s.metrics.database.Add(took)
		s.metrics.commit.Observe(took)
	}()
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
		case cmdConvert:
			convertsFrom(c, cash, shares)
			continue
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
func (s *Shard) connection(ctx context.Context) (BatchConn, error) {
	if s.conn == nil {
		c, err := s.cfg.Store.BatchConn(ctx)
		if err != nil {
			return nil, fmt.Errorf("while acquiring a connection: %w", err)
		}
		s.conn = c
	}
	return s.conn, nil
}

// releaseConn gives the connection back after a failure; the pool replaces it if it is broken.
func (s *Shard) releaseConn() {
	if s.conn != nil {
		s.conn.Release()
		s.conn = nil
	}
}

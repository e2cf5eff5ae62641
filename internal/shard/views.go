package shard

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/store"
)

// Reserving without locks. A placement reserves cash (a BUY) or shares (a SELL) before it
// matches, so a batch must know what its accounts and holdings have before it runs. Locking and
// reading them first (store.BeginBatch with LockAccounts) costs a round trip to Postgres before
// the batch can match, and holds the accounts' row locks while it matches and commits: with
// several shards trading for the same accounts, the shards would take turns on those rows, and a
// batch holding some while its commit pays a maker whose row another batch holds deadlocks.
//
// So a batch learns what it reserves from in the least costly of three ways that its shard can
// trust for it (reserveMode), and runs again, learning it more surely, when that was not enough:
//
//   - fromViews: the shard's views — what each account had available and each holding had unlocked
//     when the shard last learned it, kept current by its own batches' deltas — when they show
//     enough for every placement and amend of the batch. The batch reads nothing and locks
//     nothing: it begins, writes and commits in one round trip (store.Batch.Unlocked).
//   - fromReads: read at the start of the batch's transaction, unlocked (the holdings, which only
//     the market's shard changes, are locked).
//   - fromLocks: read and locked until the commit: exact, as every batch once was.
//
// Other shards and the API change accounts too, so what a batch learned without locks may be out
// of date either way:
//
//   - too high (another shard spent the money): the batch's write would take a balance below zero,
//     which the database's checks refuse (store.Refused); a client order id another shard's order
//     took is refused by its unique index the same way. The batch fails as a whole, its books are
//     rebuilt from Postgres, and it runs again.
//   - too low (another shard's fill paid the account): a batch never answers a refusal for want of
//     funds or shares from the views: such a refusal makes it doubted (errDoubted), and it is
//     dropped before it commits, its books rebuilt, and run again from reads. A refusal from a
//     read is true of the moment of the read, which falls between the order's arrival and its
//     answer.
//
// Rows are locked only by the commit's statements, in key order (store.Batch), the accounts' by
// the last of them: batches of several shards wait for each other only from that statement to the
// commit, and cannot deadlock on accounts unless one of them locked at its start, the last resort.

// reserveMode is how a batch learns what its placements reserve from.
type reserveMode int

const (
	fromViews reserveMode = iota // the shard's views: nothing read, nothing locked
	fromReads                    // read at the start of the transaction, accounts unlocked
	fromLocks                    // read and locked at the start of the transaction
)

// errDoubted fails a batch run from the views that would refuse a placement or amend for want of
// funds or shares: the views may be out of date, so it runs again from reads.
var errDoubted = errors.New("a batch run from the views would refuse for want of funds or shares")

// accountReadTimeout bounds learnAccounts's read: a round trip on an idle pooled connection takes
// well under a millisecond, and past this the commands rather wait for a batch that reads.
// A variable so that a test can hold an acquire longer.
var accountReadTimeout = time.Second

// maxCashViews bounds how many accounts the shard keeps a view of; past it the views start afresh.
const maxCashViews = 1 << 20

// holding names one of an account's holdings in a market (marketState.free).
type holding struct {
	account int64
	outcome engine.Outcome
}

// unlockable reports whether a batch may run from the views: they know every account and holding
// the batch's placements and amends reserve from, show enough for all of them together, and no
// risk limit that refuses one (risk.go). (A
// named shard's batch that runs from the views checks its ownership at commit: fenceOf.)
func (s *Shard) unlockable(cmds []*command) bool {
	return s.payable(cmds, s.cashView, s.sharesView) && !s.riskRefuses(cmds) && !s.involvesGroups(cmds) && !converts(cmds)
}

// payable reports whether what cash and shares show pays for everything the commands could
// reserve.
func (s *Shard) payable(cmds []*command, cash func(int64) (int64, bool), shares func(store.ShareKey) (int64, bool)) bool {
	needCash, needShares := s.needs(cmds)
	for account, need := range needCash {
		if have, ok := cash(account); !ok || have < need {
			return false
		}
	}
	for k, need := range needShares {
		if have, ok := shares(k); !ok || have < need {
			return false
		}
	}
	return true
}

// needs adds up, per account and per holding, the most the commands' placements and amends could
// reserve. A guess that falls short only makes a batch doubted.
func (s *Shard) needs(cmds []*command) (map[int64]int64, map[store.ShareKey]int64) {
	cash := map[int64]int64{}
	shares := map[store.ShareKey]int64{}
	for _, c := range cmds {
		if c.err != nil {
			continue
		}
		var account int64
		var market uuid.UUID
		var o engine.Order
		switch c.kind {
		case cmdPlace:
			p := &c.place
			account, market = p.Account, p.Market
			o = engine.Order{Side: p.Side, Outcome: p.Outcome, Price: p.Price, Quantity: p.Quantity}
			if m := s.markets[p.Market]; m != nil {
				o.Fees = s.feesOf(m)
			}
		case cmdAmend:
			// At most the amended order's whole new lock.
			a := &c.amend
			account, market = a.Account, a.Market
			o = engine.Order{Side: a.Side, Outcome: a.Outcome, Price: a.Price, Quantity: a.Remaining}
			if m := s.markets[a.Market]; m != nil && m.book != nil {
				if st, ok := m.book.Order(engine.OrderID(a.Seq)); ok {
					o.Price = max(o.Price, st.Price)
					o.Quantity = max(o.Quantity, st.Remaining())
					o.Fees = st.Fees
				}
			}
		default:
			continue
		}
		lockCash, lockShares := o.Lock()
		if o.Side == engine.Buy {
			cash[account] += lockCash
		} else {
			shares[store.ShareKey{Account: account, Market: market, Outcome: o.Outcome.String()}] += lockShares
		}
	}
	return cash, shares
}

// cashView is the view of an account's available cash, if the shard has one.
func (s *Shard) cashView(account int64) (int64, bool) {
	v, ok := s.cash[account]
	return v, ok
}

// sharesView is the view of a holding's unlocked shares, if the shard has one.
func (s *Shard) sharesView(k store.ShareKey) (int64, bool) {
	m := s.markets[k.Market]
	if m == nil {
		return 0, false
	}
	outcome, _ := engine.ParseOutcome(k.Outcome)
	v, ok := m.free[holding{k.Account, outcome}]
	return v, ok
}

// topUp reports whether commands can join the batch being built from the views, and if they can,
// starts the batch's account of what they reserve from: an account or holding the batch has
// already reserved from counts what it has left, any other what the views show plus what the
// batch has already done to it.
func (s *Shard) topUp(cmds []*command) bool {
	a := s.acc
	cash := func(account int64) (int64, bool) {
		if v, ok := a.freeCash[account]; ok {
			return v, true
		}
		v, ok := s.cash[account]
		if i, moved := a.cash[account]; moved {
			v += a.batch.Cash[i].Available
		}
		return v, ok
	}
	shares := func(k store.ShareKey) (int64, bool) {
		if a.seeded[k] {
			return a.freeShares[k], true
		}
		v, ok := s.sharesView(k)
		return v + a.freeShares[k], ok // freeShares holds the shares fills brought meanwhile
	}
	if !s.payable(cmds, cash, shares) || s.riskRefuses(cmds) || s.involvesGroups(cmds) {
		return false
	}
	accounts, holdings := reservedFrom(cmds)
	for _, account := range accounts {
		if _, ok := a.freeCash[account]; !ok {
			a.freeCash[account], _ = cash(account)
			r := s.risk[account]
			if i, moved := a.cash[account]; moved {
				r.Room += a.batch.Cash[i].Room
			}
			a.risk[account] = r
		}
	}
	for _, k := range holdings {
		if !a.seeded[k] {
			a.freeShares[k], _ = shares(k)
			a.seeded[k] = true
		}
	}
	return true
}

// viewed returns what the views show of the accounts and holdings a batch reserves from, in the
// form BeginBatch's locked reads take, for an unlocked batch to start from.
func (s *Shard) viewed(cmds []*command) store.Locked {
	accounts, holdings := reservedFrom(cmds)
	l := store.Locked{Cash: make(map[int64]int64, len(accounts)), Risk: make(map[int64]store.Risk, len(accounts)),
		Shares: make(map[store.ShareKey]int64, len(holdings))}
	for _, a := range accounts {
		l.Cash[a], l.Risk[a] = s.cash[a], s.risk[a]
	}
	for _, k := range holdings {
		outcome, _ := engine.ParseOutcome(k.Outcome)
		l.Shares[k] = s.markets[k.Market].free[holding{k.Account, outcome}]
	}
	return l
}

// learnAccounts acquires (store.Acquire, on a connection of the pool, in a transaction of its
// own) what the commands need of the accounts the views do not know yet, and takes the
// allocations it leaves into the views, so that commands arriving while a batch commits can join
// the next one instead of waiting for both commits and an acquire in a batch of their own
// (pipeline): each shard meets each account once, and with several shards trading for the same
// accounts those first meetings were most of the held commands. What it reads is as good as a
// view learned at a batch's start: another shard may take from the allocation later either way,
// and the database's checks catch it as they do then. The shard's own batches cannot have taken
// from an account it has no view of (reserving needs one); what they added to it (a maker's fill,
// a release) is in what it reads once they commit, and what the batch being built adds is added
// when it seals, so the view is never above what the shard's own batches leave. A failed acquire
// leaves the views as they were, and the commands wait as before; so does one that takes longer
// than accountReadTimeout (a busy pool).
//
// The acquire runs on a goroutine of its own, which delivers what it read (or its error) on the
// channel learnAccounts returns; nil when the views know every account the commands need.
// Meanwhile the loop waits for it or for fl, the batch in flight, and takes no other command:
// when fl's commit comes back first, it is answered and the batch built on it sent while the
// acquire goes on (pipeline), rather than after. A shard meeting many accounts at once (a fresh
// one, or one taking markets over) otherwise held every answer behind its acquires: on 2 cores,
// its first batch committed 15 ms after it opened and was answered 45 ms after, behind four.
func (s *Shard) learnAccounts(cmds []*command) <-chan learned {
	needCash, _ := s.needs(cmds)
	var missing []store.Need
	for a, c := range needCash {
		if _, ok := s.cash[a]; !ok {
			missing = append(missing, store.Need{Account: a, Cash: c, Room: c})
		}
	}
	if len(missing) == 0 {
		return nil
	}
	got := make(chan learned, 1)
	forgets, timeout := s.forgets, accountReadTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		began := time.Now()
		cash, risk, err := s.cfg.Store.AcquireCash(ctx, s.holder(), missing, s.cfg.Spread)
		s.metrics.aside.Inc()
		s.metrics.asideSeconds.Add(time.Since(began).Seconds())
		if err != nil {
			s.log.Debug("could not read accounts for the views; their commands wait for a batch that reads them", "err", err)
		}
		got <- learned{cash: cash, risk: risk, forgets: forgets, err: err}
	}()
	return got
}

// learned is what an acquire aside read (learnAccounts), with Shard.forgets when it began.
type learned struct {
	cash    map[int64]int64
	risk    map[int64]store.Risk
	forgets uint64
	err     error
}

// viewLearned takes what an acquire aside read into the views: only for the accounts they still
// do not know, and nothing if they were cleared since it began (a batch failed meanwhile, and
// the one run again may have learned and spent from them since).
func (s *Shard) viewLearned(l learned) {
	if l.err != nil || l.forgets != s.forgets {
		return
	}
	for a := range l.cash {
		if _, ok := s.cash[a]; ok {
			delete(l.cash, a)
		}
	}
	s.viewAccounts(l.cash, l.risk)
}

// viewAccounts takes accounts' cash and risk, as read, into the views (starting them afresh past
// maxCashViews).
func (s *Shard) viewAccounts(cash map[int64]int64, risk map[int64]store.Risk) {
	if len(s.cash) > maxCashViews {
		clear(s.cash)
		clear(s.risk)
	}
	now := s.cfg.Now()
	for a, v := range cash {
		s.cash[a], s.risk[a] = v, risk[a]
		s.used[a] = now // returned once idle (allocations.go), views or not
	}
}

// learn takes what a batch read at its start into the views. A holding it asked for that does not
// exist has no shares.
func (s *Shard) learn(b store.Begin, l store.Locked) {
	s.viewAccounts(l.Cash, l.Risk) // the accounts of b.Accounts that exist
	for _, k := range b.Holdings {
		m := s.markets[k.Market]
		if m == nil {
			continue
		}
		outcome, _ := engine.ParseOutcome(k.Outcome)
		m.free[holding{k.Account, outcome}] = l.Shares[k]
	}
}

// advance adds a committed batch's deltas to the views of the accounts and holdings they show.
func (s *Shard) advance(b *store.Batch) {
	for _, d := range b.Cash {
		s.used[d.Account] = b.Now
		if v, ok := s.cash[d.Account]; ok {
			s.cash[d.Account] = v + d.Available
			r := s.risk[d.Account]
			if d.Room < 0 || d.RoomVersion == r.Version {
				r.Room += d.Room
			}
			s.risk[d.Account] = r
		}
	}
	for _, d := range b.Shares {
		m := s.markets[d.Market]
		if m == nil {
			continue
		}
		outcome, _ := engine.ParseOutcome(d.Outcome)
		k := holding{d.Account, outcome}
		if v, ok := m.free[k]; ok {
			m.free[k] = v + d.Quantity - d.Locked
		} else if free := d.Quantity - d.Locked; free > 0 {
			// A holding the views do not know yet, which this batch adds to (most often the shares
			// of an account's first fill in the market): it had at least none free, so it has at
			// least what the batch adds, a view too low at worst, never too high. Without it, the
			// holding's first sale could not join a pipelined batch; it would wait for two commits
			// and read (pmx_shard_commands_held_total).
			m.free[k] = free
		}
	}
}

// forget clears the views after a failed batch: the next batches read again.
func (s *Shard) forget() {
	s.forgets++
	clear(s.cash)
	clear(s.risk)
	clear(s.allocated)
	for _, m := range s.markets {
		clear(m.free)
	}
}

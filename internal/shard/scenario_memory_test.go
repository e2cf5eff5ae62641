package shard

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// memoryStore is an implementation of the shard's storage interfaces (storage.go) in memory, for
// the scenario tests (scenario_*_test.go), as etcd's raft tests its core against MemoryStorage:
// the shard runs its real code path — its loop, batches, views, matching, risk checks, commits
// and reloads — with no Postgres. It keeps the rows a standalone shard's batches read and write
// (markets, orders, trades, accounts' wallets, the shards' allocations of them — free cash, room,
// limits' version, feed numbers — and risk limits, holdings, the markets' feed numbers) and holds
// to the store's contract for them: a batch commits whole or not at all; an allocation, room or
// holding that would go negative, a client order id taken twice, or risk limits changed since the
// batch decided by them fail the commit with the errors store.Refused recognises, as Postgres's
// checks do; Committed reports the existing orders a batch cancelled and the accounts' feed
// numbers it used; an acquire moves cash from the wallet, then from other holders, as
// acquire_cash does (migration 042).
//
// What the SQL alone does is not done here, and a batch that needs it fails with an error that
// says so, rather than passing on a guess: settlements (settle()), events' status changes and
// conversions, order groups' deltas, ownership (Begin.Markets, Batch.Fence: a named shard) and the
// registry of shard processes. Those are tested against Postgres (shard_test.go and the others).
type memoryStore struct {
	mu        sync.Mutex
	markets   map[uuid.UUID]records.Market
	orders    map[uuid.UUID]records.Order
	trades    map[uuid.UUID][]store.TradeRow // by market, in the order committed
	accounts  map[int64]*memoryAccount
	positions map[store.ShareKey]*memoryPosition
	feed      map[uuid.UUID][]store.EventBatch // the markets' feed events, by market
	commits   int                              // batches committed
}

// memoryAccount is an account's row — its wallet, risk limits (store.NoLimit for none) and their
// version — with every holder's allocation of it.
type memoryAccount struct {
	available                  int64
	maxPosition, maxLockedCash int64
	riskVersion                int64
	alloc                      map[string]memoryAlloc
}

// memoryAlloc is a holder's allocation of an account: free cash, room, the version of the limits
// it was last told of, and the last number of the account's feed stream from the holder.
type memoryAlloc struct{ available, room, riskVersion, feedSeq int64 }

// memoryPosition is a holding's row: the shares held, and how many of them resting sells lock.
type memoryPosition struct{ quantity, locked int64 }

func newMemoryStore() *memoryStore {
	return &memoryStore{markets: map[uuid.UUID]records.Market{}, orders: map[uuid.UUID]records.Order{},
		trades: map[uuid.UUID][]store.TradeRow{}, accounts: map[int64]*memoryAccount{},
		positions: map[store.ShareKey]*memoryPosition{}, feed: map[uuid.UUID][]store.EventBatch{}}
}

var _ Store = (*memoryStore)(nil)

// addMarket adds an OPEN market and returns its id.
func (m *memoryStore) addMarket() uuid.UUID {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := uuid.New()
	m.markets[id] = records.Market{ID: id, Question: "q", Category: "c", Status: "OPEN", LabelA: "Yes", LabelB: "No"}
	return id
}

// addAccount adds an account with cash available and no risk limits.
func (m *memoryStore) addAccount(id, cash int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accounts[id] = &memoryAccount{available: cash, maxPosition: store.NoLimit, maxLockedCash: store.NoLimit, alloc: map[string]memoryAlloc{}}
}

// setRiskLimits sets an account's limits, bumping their version as store.SetRiskLimits does.
func (m *memoryStore) setRiskLimits(id, maxPosition, maxLockedCash int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[id]
	a.maxPosition, a.maxLockedCash = maxPosition, maxLockedCash
	a.riskVersion++
	for h, al := range a.alloc {
		al.room, al.riskVersion = 0, a.riskVersion
		a.alloc[h] = al
	}
}

// cash returns an account's available and locked cash, as account_balances has them: its wallet
// and every allocation's free cash, and what its open BUY orders lock.
func (m *memoryStore) cash(id int64) (available, locked int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[id]
	available = a.available
	for _, al := range a.alloc {
		available += al.available
	}
	return available, m.lockedBy(id)
}

// lockedBy is what an account's open BUY orders lock.
func (m *memoryStore) lockedBy(id int64) int64 {
	var locked int64
	for _, o := range m.orders {
		if o.AccountID == id && o.Side == "BUY" && o.Status.Resting() {
			locked += int64(o.Price) * (o.Quantity - o.FilledQuantity)
		}
	}
	return locked
}

// position returns the shares an account holds of an outcome of a market, and how many are locked.
func (m *memoryStore) position(account int64, market uuid.UUID, outcome engine.Outcome) (quantity, locked int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.positions[store.ShareKey{Account: account, Market: market, Outcome: outcome.String()}]; p != nil {
		return p.quantity, p.locked
	}
	return 0, 0
}

// errMemory is what the memory store answers for what only the SQL does (see memoryStore).
func errMemory(what string) error {
	return fmt.Errorf("the memory store does not implement %s: test it against Postgres (storetest)", what)
}

// refused is the error Postgres's checks give a batch that would break one: what store.Refused
// recognises (check_violation, or unique_violation for a client order id).
func refused(code, format string, args ...any) error {
	return &pgconn.PgError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// BookReads.

func (m *memoryStore) Market(_ context.Context, id uuid.UUID) (records.Market, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	row, ok := m.markets[id]
	if !ok {
		return row, store.ErrNotFound
	}
	return row, nil
}

func (m *memoryStore) Sequences(_ context.Context, market uuid.UUID) (orders, trades int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.orders {
		if o.MarketID == market {
			orders = max(orders, o.Seq, o.Priority)
		}
	}
	for _, t := range m.trades[market] {
		trades = max(trades, t.Seq)
	}
	return orders, trades, nil
}

// RestingOrders lists a market's resting orders in time priority: an amend's priority, else seq.
func (m *memoryStore) RestingOrders(_ context.Context, market uuid.UUID) ([]records.Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []records.Order
	for _, o := range m.orders {
		if o.MarketID == market && o.Status.Resting() {
			out = append(out, o)
		}
	}
	priority := func(o records.Order) int64 { return cmp.Or(o.Priority, o.Seq) }
	slices.SortFunc(out, func(a, b records.Order) int { return cmp.Compare(priority(a), priority(b)) })
	return out, nil
}

func (m *memoryStore) Holdings(_ context.Context, market uuid.UUID) ([]store.Holding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Holding
	for k, p := range m.positions {
		if k.Market == market && p.quantity > 0 {
			outcome, _ := engine.ParseOutcome(k.Outcome)
			out = append(out, store.Holding{Account: k.Account, Outcome: outcome, Quantity: p.quantity})
		}
	}
	return out, nil
}

func (m *memoryStore) OrderBySeq(_ context.Context, market uuid.UUID, seq int64) (records.Order, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, o := range m.orders {
		if o.MarketID == market && o.Seq == seq {
			return o, nil
		}
	}
	return records.Order{}, store.ErrNotFound
}

func (m *memoryStore) AcquireCash(ctx context.Context, holder string, need []store.Need, spread int) (map[int64]int64, map[int64]store.Risk, error) {
	return memoryConn{m}.Acquire(ctx, holder, need, spread)
}

// view is what holder holds of the account, with its limits, as allocationsQuery reads it.
func (a *memoryAccount) view(holder string) (int64, store.Risk) {
	al, ok := a.alloc[holder]
	if !ok {
		al.riskVersion = a.riskVersion
	}
	return al.available, store.Risk{Room: al.room, MaxPosition: a.maxPosition, MaxLockedCash: a.maxLockedCash, Version: al.riskVersion}
}

// TriggeredGroups: the memory store keeps no order groups, so none is triggered.
func (m *memoryStore) TriggeredGroups(context.Context, []uuid.UUID) ([]uuid.UUID, error) {
	return nil, nil
}

// TrippedOrders: the memory store arms no dead-man switches, so none has tripped.
func (m *memoryStore) TrippedOrders(context.Context, string) ([]store.TrippedOrder, error) {
	return nil, nil
}

func (m *memoryStore) ConversionByRequest(context.Context, int64, string) (records.Conversion, error) {
	return records.Conversion{}, store.ErrNotFound
}

// EventReads: the memory store keeps no events.

// Halts: the memory store halts nothing (halts run against Postgres: internal/exchangetest).
func (m *memoryStore) Halts(context.Context) (records.Halts, error) { return records.Halts{}, nil }

// ExchangeAccount is an account no scenario trades from: the scenarios place orders with no fee.
func (m *memoryStore) ExchangeAccount(context.Context) (int64, error) { return 1 << 40, nil }

func (m *memoryStore) Event(context.Context, uuid.UUID) (records.Event, error) {
	return records.Event{}, store.ErrNotFound
}

func (m *memoryStore) EventMarkets(context.Context, records.Event) ([]records.Market, error) {
	return nil, nil
}

// PruneEvents drops the markets' feed events older than cutoff (by their batch's time, which the
// memory store does not keep: it keeps them all and reports none pruned).
func (m *memoryStore) PruneEvents(context.Context, time.Time) (int64, error) { return 0, nil }

// Bookkeeping: a standalone shard registers nowhere; a named one needs Postgres.

func (m *memoryStore) Register(context.Context, string, string, string) (uuid.UUID, error) {
	return uuid.Nil, errMemory("the registry of shard processes")
}
func (m *memoryStore) Beat(context.Context, string, string, uuid.UUID) error {
	return errMemory("the registry of shard processes")
}
func (m *memoryStore) Incarnation(context.Context, string) (uuid.UUID, error) {
	return uuid.Nil, errMemory("the registry of shard processes")
}
func (m *memoryStore) Unregister(context.Context, string, uuid.UUID) error {
	return errMemory("the registry of shard processes")
}
func (m *memoryStore) ReportLoad(context.Context, string, uuid.UUID, map[uuid.UUID]float64) error {
	return errMemory("the registry of shard processes")
}
func (m *memoryStore) OwnedMarkets(context.Context, string) ([]store.Ownership, error) {
	return nil, errMemory("market ownership")
}
func (m *memoryStore) HandOver(context.Context, []uuid.UUID, []int64, string, string) (bool, error) {
	return false, errMemory("market ownership")
}

// BatchConns.

func (m *memoryStore) BatchConn(context.Context) (store.BatchConn, error) { return memoryConn{m}, nil }

// memoryConn is a connection to the memory store. Its transactions are not isolated from the
// API's reads, which the scenario tests do not race; a commit is still whole or nothing.
type memoryConn struct{ m *memoryStore }

func (c memoryConn) Release() {}

// BeginBatch reads what a batch reserves from, as store.BeginBatch does (locking is moot: one
// shard writes the memory store, one batch at a time).
func (c memoryConn) BeginBatch(_ context.Context, b store.Begin) (store.Locked, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(b.Markets) > 0 {
		return store.Locked{}, errMemory("market ownership (Begin.Markets)")
	}
	l := store.Locked{Cash: map[int64]int64{}, Risk: map[int64]store.Risk{}, Shares: map[store.ShareKey]int64{},
		Taken: map[store.ClientOrderKey]bool{}, Groups: map[uuid.UUID]store.GroupState{}}
	for _, id := range b.Accounts {
		if a, ok := m.accounts[id]; ok {
			l.Cash[id], l.Risk[id] = a.view(b.Holder)
		}
	}
	for _, k := range b.Holdings {
		if p, ok := m.positions[k]; ok {
			l.Shares[k] = p.quantity - p.locked
		}
	}
	for _, k := range b.ClientOrderIDs {
		l.Taken[k] = m.clientOrderIDTaken(k)
	}
	maps.DeleteFunc(l.Taken, func(_ store.ClientOrderKey, taken bool) bool { return !taken })
	return l, nil
}

func (m *memoryStore) clientOrderIDTaken(k store.ClientOrderKey) bool {
	for _, o := range m.orders {
		if o.AccountID == k.Account && o.ClientOrderID != nil && *o.ClientOrderID == k.ID {
			return true
		}
	}
	return false
}

// CommitBatch writes a batch whole or not at all: it checks every row against the contract's
// guards on copies, and only then makes them the store's.
func (c memoryConn) CommitBatch(_ context.Context, b *store.Batch) (store.Committed, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case len(b.Settlements) > 0:
		return store.Committed{}, errMemory("settlements")
	case len(b.EventChanges) > 0 || len(b.Conversions) > 0:
		return store.Committed{}, errMemory("events' changes and conversions")
	case len(b.Groups) > 0:
		return store.Committed{}, errMemory("order groups")
	case b.Fence != nil:
		return store.Committed{}, errMemory("market ownership (Batch.Fence)")
	}
	orders := maps.Clone(m.orders)
	var com store.Committed
	for _, o := range b.NewOrders {
		if o.ClientOrderID != nil && m.clientOrderIDTaken(store.ClientOrderKey{Account: o.AccountID, ID: *o.ClientOrderID}) {
			return store.Committed{}, refused("23505", "client order id %q of account %d is taken", *o.ClientOrderID, o.AccountID)
		}
		orders[o.ID] = o
	}
	for _, u := range b.OrderUpdates {
		// An update names its order by market and number (store.Batch.OrderUpdates), as the SQL does.
		var o records.Order
		var ok bool
		for _, cur := range orders {
			if cur.MarketID == u.MarketID && cur.Seq == u.Seq {
				o, ok = cur, true
				break
			}
		}
		if !ok {
			return store.Committed{}, fmt.Errorf("the batch updates order %d of market %s, which does not exist", u.Seq, u.MarketID)
		}
		o.FilledQuantity, o.Status, o.CancelReason, o.UpdatedAt = u.FilledQuantity, u.Status, u.CancelReason, b.Now
		if u.Price != 0 {
			o.Price = u.Price
		}
		if u.Quantity != 0 {
			o.Quantity = u.Quantity
		}
		if u.Priority != 0 {
			o.Priority = u.Priority
		}
		orders[o.ID] = o
		if o.Status == engine.StatusCancelled || o.Status == engine.StatusPartiallyFilledCancelled {
			com.Updated = append(com.Updated, o)
		}
	}
	allocs := map[int64]memoryAlloc{}
	for _, d := range b.Cash {
		cur, ok := m.accounts[d.Account]
		if !ok {
			return store.Committed{}, fmt.Errorf("the batch moves the cash of account %d, which does not exist", d.Account)
		}
		al, ok := cur.alloc[b.Holder]
		if !ok {
			al.riskVersion = cur.riskVersion
		}
		if d.RiskDecided && al.riskVersion != d.RiskVersion {
			return store.Committed{}, refused("23514", "the risk limits of account %d changed since the batch decided by them", d.Account)
		}
		al.available += d.Available
		if d.Room < 0 || d.RoomVersion == al.riskVersion {
			al.room += d.Room
		}
		if al.available < 0 || al.room < 0 {
			return store.Committed{}, refused("23514", "%s's allocation of account %d would have %d available and %d room", b.Holder, d.Account, al.available, al.room)
		}
		if d.EventCount > 0 {
			al.feedSeq += d.EventCount
			com.Accounts = append(com.Accounts, store.AccountEvents{Account: d.Account, First: al.feedSeq - d.EventCount + 1, Last: al.feedSeq, Events: d.Events})
		}
		allocs[d.Account] = al
	}
	positions := map[store.ShareKey]memoryPosition{}
	for _, d := range b.Shares {
		k := store.ShareKey{Account: d.Account, Market: d.Market, Outcome: d.Outcome}
		var p memoryPosition
		if cur := m.positions[k]; cur != nil {
			p = *cur
		}
		p.quantity += d.Quantity
		p.locked += d.Locked
		if p.locked < 0 || p.quantity < p.locked {
			return store.Committed{}, refused("23514", "holding %v would have %d shares, %d locked", k, p.quantity, p.locked)
		}
		positions[k] = p
	}
	markets := map[uuid.UUID]records.Market{}
	for _, u := range b.Markets {
		row, ok := m.markets[u.ID]
		if !ok {
			return store.Committed{}, fmt.Errorf("the batch updates market %s, which does not exist", u.ID)
		}
		if u.LastTradePrice != nil {
			row.LastTradePrice = u.LastTradePrice
		}
		if u.Status != "" {
			row.Status = u.Status
		}
		if u.EventSeq != 0 {
			row.EventSeq = u.EventSeq
		}
		markets[u.ID] = row
	}
	// Every guard has passed: the batch commits.
	m.orders = orders
	for _, t := range b.Trades {
		m.trades[t.MarketID] = append(m.trades[t.MarketID], t)
	}
	for id, al := range allocs {
		m.accounts[id].alloc[b.Holder] = al
	}
	for k, p := range positions {
		m.positions[k] = &p
	}
	maps.Copy(m.markets, markets)
	for _, e := range b.Events {
		m.feed[e.Market] = append(m.feed[e.Market], e)
	}
	m.commits++
	return com, nil
}

// Acquire moves to holder's allocations what need asks where the accounts have it, as
// acquire_cash (migration 042) does: from the wallet, with a share of what is left, then from the
// other holders, largest first, with a share of what the first has beyond the need; room
// likewise, from what the limit leaves. A share is 1/spread, or 1/(the holders of the account)
// when they are more.
func (c memoryConn) Acquire(_ context.Context, holder string, need []store.Need, spread int) (map[int64]int64, map[int64]store.Risk, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	cash, risk := map[int64]int64{}, map[int64]store.Risk{}
	for _, n := range need {
		a, ok := m.accounts[n.Account]
		if !ok {
			continue
		}
		mine, ok := a.alloc[holder]
		if !ok {
			mine.riskVersion = a.riskVersion
		}
		others := slices.Sorted(maps.Keys(a.alloc))
		others = slices.DeleteFunc(others, func(h string) bool { return h == holder })
		shares := int64(max(spread, len(others)+1))
		if short := n.Cash - mine.available; short > 0 {
			take := min(a.available, short+max(a.available-short, 0)/shares)
			a.available -= take
			mine.available += take
			short -= take
			slices.SortStableFunc(others, func(x, y string) int { return cmp.Compare(a.alloc[y].available, a.alloc[x].available) })
			for i, h := range others {
				if short <= 0 {
					break
				}
				o := a.alloc[h]
				t := min(o.available, short)
				if i == 0 {
					t = min(o.available, short+max(o.available-short, 0)/shares)
				}
				o.available -= t
				a.alloc[h] = o
				mine.available += t
				short -= t
			}
		}
		if short := n.Room - mine.room; a.maxLockedCash != store.NoLimit && short > 0 {
			free := a.maxLockedCash - m.lockedBy(n.Account)
			for _, al := range a.alloc {
				free -= al.room
			}
			take := min(max(free, 0), short+max(free-short, 0)/shares)
			mine.room += take
			short -= take
			slices.SortStableFunc(others, func(x, y string) int { return cmp.Compare(a.alloc[y].room, a.alloc[x].room) })
			for i, h := range others {
				if short <= 0 {
					break
				}
				o := a.alloc[h]
				t := min(o.room, short)
				if i == 0 {
					t = min(o.room, short+max(o.room-short, 0)/shares)
				}
				o.room -= t
				a.alloc[h] = o
				mine.room += t
				short -= t
			}
		}
		a.alloc[holder] = mine
		cash[n.Account], risk[n.Account] = a.view(holder)
	}
	return cash, risk, nil
}

// ReturnIdle is Return: in memory no other transaction holds a wallet.
func (c memoryConn) ReturnIdle(ctx context.Context, holder string, accounts []int64) ([]int64, error) {
	_, err := c.Return(ctx, holder, accounts)
	return nil, err
}

// Return gives back to the wallets what holder holds of accounts (every account when nil).
func (c memoryConn) Return(_ context.Context, holder string, accounts []int64) (int64, error) {
	m := c.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var total int64
	for id, a := range m.accounts {
		if accounts != nil && !slices.Contains(accounts, id) {
			continue
		}
		if al, ok := a.alloc[holder]; ok {
			a.available += al.available
			total += al.available
			al.available, al.room = 0, 0
			a.alloc[holder] = al
		}
	}
	return total, nil
}

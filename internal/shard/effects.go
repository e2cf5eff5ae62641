package shard

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// orderKey names an order within the shard: its market and sequence number.
type orderKey struct {
	market uuid.UUID
	seq    int64
}

type shareKey struct {
	account int64
	market  uuid.UUID
	outcome engine.Outcome
}

type orderRef struct {
	isNew bool
	i     int
}

// accumulator nets the effects of a batch into the rows store.CommitBatch writes: one row per order in
// its final state, one cash delta per account, one share delta per position, one update per market.
type accumulator struct {
	batch   store.Batch
	orders  map[orderKey]orderRef
	cash    map[int64]int
	shares  map[shareKey]int
	markets map[uuid.UUID]int
	touched map[uuid.UUID]*marketState

	// What the batch's placements may still reserve: the available cash of the accounts and the
	// unlocked shares of the holdings BeginBatch read (or the views showed), kept current by every delta.
	freeCash   map[int64]int64
	freeShares map[store.ShareKey]int64
	seeded     map[store.ShareKey]bool // the holdings freeShares started from what was read or viewed
	// risk is what the accounts of freeCash lock and their limits (risk.go), kept current likewise.
	risk map[int64]store.Risk
	// expose is Shard.expose: what each reservation, fill and release does to a position-if-filled.
	expose func(market uuid.UUID, account int64, outcome engine.Outcome, delta int64)
	// unlocked: they came from the shard's views, not from reads (views.go); doubted: a placement
	// or amend was refused for want of them, which only reads may decide.
	unlocked, doubted bool
	// exhausted are the accounts the batch holds all the free cash, or all the room, of: it
	// acquired everything they had of it (allocations.go). A batch that read its allocations
	// answers a refusal for want of cash only for an account whose cash is exhausted, and for
	// want of room only for one whose room is; for another it is doubted, and runs again
	// acquiring everything the account has. The two are apart: an account short of cash may
	// still have room another holder took from this one after its acquire, and the other way.
	exhausted map[int64]exhaustion

	takenIDs map[store.ClientOrderKey]bool // client order ids orders already had when the batch began
	claimed  map[store.ClientOrderKey]bool // and those the batch's placements took
	// convertIDs are the client request ids the batch's conversions took (convert.go).
	convertIDs map[store.ClientOrderKey]*records.Conversion

	published     []feed.Batch                  // the batch's events, for the feed's followers once it commits
	snaps         []pendingSnapshot             // the books it touched as it leaves them, published once it commits
	accountEvents map[int64][]feed.AccountEvent // each account's events in the batch (accountfeed.go)
	groups        map[uuid.UUID]*groupState     // the order groups the batch read, and what it did to them (groups.go)
}

func (a *accumulator) reset(now time.Time) {
	a.batch.Reset(now)
	a.published = a.published[:0]
	a.snaps = a.snaps[:0]
	if a.orders == nil {
		a.orders = map[orderKey]orderRef{}
		a.cash = map[int64]int{}
		a.shares = map[shareKey]int{}
		a.markets = map[uuid.UUID]int{}
		a.touched = map[uuid.UUID]*marketState{}
		a.accountEvents = map[int64][]feed.AccountEvent{}
		a.groups = map[uuid.UUID]*groupState{}
	}
	clear(a.groups)
	if a.freeCash == nil {
		a.freeCash = map[int64]int64{}
		a.freeShares = map[store.ShareKey]int64{}
		a.seeded = map[store.ShareKey]bool{}
		a.risk = map[int64]store.Risk{}
		a.claimed = map[store.ClientOrderKey]bool{}
	}
	clear(a.claimed)
	if a.convertIDs == nil {
		a.convertIDs = map[store.ClientOrderKey]*records.Conversion{}
	}
	clear(a.convertIDs)
	a.takenIDs = nil
	a.unlocked, a.doubted = false, false
	if a.exhausted == nil {
		a.exhausted = map[int64]exhaustion{}
	}
	clear(a.exhausted)
	clear(a.freeCash)
	clear(a.freeShares)
	clear(a.risk)
	clear(a.seeded)
	clear(a.orders)
	clear(a.cash)
	clear(a.shares)
	clear(a.markets)
	clear(a.touched)
	clear(a.accountEvents)
}

func (a *accumulator) touch(m *marketState) { a.touched[m.id] = m }

// track starts from what the batch's transaction locked. A holding that does not exist yet holds
// no shares.
func (a *accumulator) track(l store.Locked) {
	maps.Copy(a.freeCash, l.Cash)
	maps.Copy(a.risk, l.Risk)
	maps.Copy(a.freeShares, l.Shares)
	for k := range l.Shares {
		a.seeded[k] = true
	}
	a.takenIDs = l.Taken
	for account, outside := range l.Elsewhere {
		if outside > 0 {
			a.exhausted[account] &^= exhaustedCash // another holder took some back since the acquire (allocations.go)
		}
	}
}

// reserve locks what an order needs (engine.Order.Lock) — cash for a BUY, shares for a SELL — or
// says why it cannot.
func (a *accumulator) reserve(market uuid.UUID, o *engine.Order) error {
	account := int64(o.Account)
	cash, shares := o.Lock()
	if o.Side == engine.Buy {
		if a.freeCash[account] < cash {
			return a.shortOf(account, exhaustedCash, domain.ErrInsufficientFunds)
		}
		a.addCash(account, -cash, cash)
		a.expose(market, account, o.Outcome, o.Quantity)
		return nil
	}
	if a.freeShares[store.ShareKey{Account: account, Market: market, Outcome: o.Outcome.String()}] < shares {
		return a.short(domain.ErrInsufficientShares)
	}
	a.addShares(account, market, o.Outcome, 0, shares)
	return nil
}

// short is a refusal for want of funds or shares: final when the batch reserves from what it
// read, a doubt about the views when it does not.
// exhaustion says what of an account's free cash and room a batch holds all of.
type exhaustion uint8

const (
	exhaustedCash exhaustion = 1 << iota
	exhaustedRoom
)

// shortOf is short for a refusal for want of an account's cash (exhaustedCash) or room
// (exhaustedRoom): one only an allocation that holds all the account has of it may answer
// (exhausted).
func (a *accumulator) shortOf(account int64, what exhaustion, err error) error {
	if a.exhausted[account]&what == 0 {
		a.doubted = true
	}
	return err
}

func (a *accumulator) short(err error) error {
	if a.unlocked {
		a.doubted = true
	}
	return err
}

// newOrder records an order placed in this batch, in its state after placement.
func (a *accumulator) newOrder(o records.Order) {
	a.orders[orderKey{o.MarketID, o.Seq}] = orderRef{isNew: true, i: len(a.batch.NewOrders)}
	a.batch.NewOrders = append(a.batch.NewOrders, o)
}

// orderState records an order of account's new fill and status, and why it was cancelled if it
// was, on its row if it is new in this batch.
func (a *accumulator) orderState(k orderKey, account int64, filled int64, status engine.Status, reason engine.CancelReason) {
	o := a.row(k, account)
	o.FilledQuantity = filled
	o.Status = status
	if reason != engine.ReasonNone {
		o.CancelReason = reasonText(reason)
	}
}

// row returns the row the batch writes for an order of account: the new order's, or the update of
// an existing one (a new update writes no price or quantity, which stay as they are).
func (a *accumulator) row(k orderKey, account int64) *records.Order {
	ref, ok := a.orders[k]
	if !ok {
		ref = orderRef{i: len(a.batch.OrderUpdates)}
		a.orders[k] = ref
		a.batch.OrderUpdates = append(a.batch.OrderUpdates, records.Order{MarketID: k.market, Seq: k.seq, AccountID: account})
	}
	if ref.isNew {
		return &a.batch.NewOrders[ref.i]
	}
	return &a.batch.OrderUpdates[ref.i]
}

// adjust reserves (when positive) or releases (when negative) a change in what a resting order
// locks: cash for a BUY, shares for a SELL, as engine.OrderState.AmendLock says.
func (a *accumulator) adjust(market uuid.UUID, st *engine.OrderState, cash, shares int64) error {
	account := int64(st.Account)
	if cash > 0 && a.freeCash[account] < cash {
		return a.shortOf(account, exhaustedCash, domain.ErrInsufficientFunds)
	}
	if shares > 0 && a.freeShares[store.ShareKey{Account: account, Market: market, Outcome: st.Outcome.String()}] < shares {
		return a.short(domain.ErrInsufficientShares)
	}
	if cash != 0 {
		a.addCash(account, -cash, cash)
	}
	if shares != 0 {
		a.addShares(account, market, st.Outcome, 0, shares)
	}
	return nil
}

// order returns the row of an order placed in this batch.
func (a *accumulator) order(k orderKey) (records.Order, bool) {
	ref, ok := a.orders[k]
	if !ok || !ref.isNew {
		return records.Order{}, false
	}
	return a.batch.NewOrders[ref.i], true
}

// cashDelta returns the batch's row of an account: its cash delta and its events.
func (a *accumulator) cashDelta(account int64) *store.CashDelta {
	i, ok := a.cash[account]
	if !ok {
		i = len(a.batch.Cash)
		a.cash[account] = i
		a.batch.Cash = append(a.batch.Cash, store.CashDelta{Account: account})
	}
	return &a.batch.Cash[i]
}

// addCash moves an account's cash in the batch's holder's allocation: available to or from its
// free cash, and locked into (positive) or out of (negative) the account's orders. Under a
// maxLockedCash what the orders lock comes out of the holder's room and what they release goes
// back to it (docs/architecture.md §11), for an account the batch knows the limits of; the
// room of one it does not know is left as it is, which only leaves less room than there could be.
func (a *accumulator) addCash(account int64, available, locked int64) {
	d := a.cashDelta(account)
	d.Available += available
	if _, tracked := a.freeCash[account]; tracked {
		a.freeCash[account] += available
	}
	if r, tracked := a.risk[account]; tracked && r.MaxLockedCash != store.NoLimit {
		r.Room -= locked
		a.risk[account] = r
		d.Room -= locked
		d.RoomVersion = r.Version
	}
}

func (a *accumulator) addShares(account int64, market uuid.UUID, outcome engine.Outcome, quantity, locked int64) {
	k := shareKey{account, market, outcome}
	i, ok := a.shares[k]
	if !ok {
		i = len(a.batch.Shares)
		a.shares[k] = i
		a.batch.Shares = append(a.batch.Shares, store.ShareDelta{Account: account, Market: market, Outcome: outcome.String()})
	}
	a.batch.Shares[i].Quantity += quantity
	a.batch.Shares[i].Locked += locked
	// Shares a fill brings count at once, even for a holding that did not exist when the batch
	// began; a holding is only ever created by a buy, never reserved from before it exists.
	a.freeShares[store.ShareKey{Account: account, Market: market, Outcome: outcome.String()}] += quantity - locked
}

// leg applies one side of a fill.
func (a *accumulator) leg(market uuid.UUID, l *engine.Leg) {
	if l.Cash != 0 || l.CashLocked != 0 {
		a.addCash(int64(l.Account), l.Cash, l.CashLocked)
	}
	a.addShares(int64(l.Account), market, l.Outcome, l.Shares, l.SharesLocked)
	if l.Side == engine.Sell {
		a.expose(market, int64(l.Account), l.Outcome, l.Shares) // a BUY's fill only moves its shares from the order to the holding
	}
}

// release returns the lock of a cancelled order and records its final status and why.
func (a *accumulator) release(market uuid.UUID, st *engine.OrderState, reason engine.CancelReason) {
	a.unlock(market, st)
	a.orderState(orderKey{market, int64(st.ID)}, int64(st.Account), st.Filled, st.Status, reason)
}

// taken reports whether a client order id is an order's already: one the batch's transaction
// found, or one an earlier placement of the batch gave its order (claim).
func (a *accumulator) taken(k store.ClientOrderKey) bool { return a.takenIDs[k] || a.claimed[k] }

// claim records that a placement of the batch gave its order a client order id. Only an order
// that is recorded claims its id: a placement refused for another reason leaves it free.
func (a *accumulator) claim(k store.ClientOrderKey) { a.claimed[k] = true }

// unlock releases what a resting order locks: cash and shares as engine.OrderState.Lock says.
func (a *accumulator) unlock(market uuid.UUID, st *engine.OrderState) {
	cash, shares := st.Lock()
	a.unlockOf(market, st, cash, shares)
}

// unlockTaker releases what an order reserved as the taker it was (engine.OrderState.TakerLock)
// and did not fill: an order the engine refused, or the remainder it did not rest.
func (a *accumulator) unlockTaker(market uuid.UUID, st *engine.OrderState) {
	cash, shares := st.TakerLock()
	a.unlockOf(market, st, cash, shares)
}

// arrived settles what a submitted or amended order's remainder holds once the engine is done
// with it as a taker (engine.Result): all of its TakerLock when it does not rest; when it rests,
// what its taker fee reserve holds beyond its maker fee reserve.
func (a *accumulator) arrived(market uuid.UUID, st *engine.OrderState) {
	if !st.Status.Resting() {
		a.unlockTaker(market, st)
		return
	}
	held, _ := st.TakerLock()
	rest, _ := st.Lock()
	if d := held - rest; d != 0 {
		a.addCash(int64(st.Account), d, -d)
	}
}

func (a *accumulator) unlockOf(market uuid.UUID, st *engine.OrderState, cash, shares int64) {
	if cash != 0 {
		a.addCash(int64(st.Account), cash, -cash)
	}
	if st.Side == engine.Buy {
		a.expose(market, int64(st.Account), st.Outcome, -st.Remaining())
	}
	if shares != 0 {
		a.addShares(int64(st.Account), market, st.Outcome, 0, -shares)
	}
}

// market returns the pending update of a market's row.
func (a *accumulator) market(id uuid.UUID) *store.MarketUpdate {
	i, ok := a.markets[id]
	if !ok {
		i = len(a.batch.Markets)
		a.markets[id] = i
		a.batch.Markets = append(a.batch.Markets, store.MarketUpdate{ID: id})
	}
	return &a.batch.Markets[i]
}

// finish drops deltas that netted to nothing (and add no events) and sorts rows by key, so that every transaction
// takes its row locks in the same order.
func (a *accumulator) finish() {
	a.batch.Cash = slices.DeleteFunc(a.batch.Cash, func(d store.CashDelta) bool {
		return d.Available == 0 && d.Room == 0 && d.EventCount == 0 && !d.RiskDecided
	})
	a.batch.Shares = slices.DeleteFunc(a.batch.Shares, func(d store.ShareDelta) bool { return d.Quantity == 0 && d.Locked == 0 })
	slices.SortFunc(a.batch.Cash, func(x, y store.CashDelta) int { return cmp.Compare(x.Account, y.Account) })
	slices.SortFunc(a.batch.Shares, func(x, y store.ShareDelta) int {
		return cmp.Or(cmp.Compare(x.Account, y.Account), slices.Compare(x.Market[:], y.Market[:]), cmp.Compare(x.Outcome, y.Outcome))
	})
}

package batches

import (
	"cmp"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// Batch is everything one shard transaction writes: the accumulated effects of a batch of orders,
// cancels and market transitions, already netted per order, account and position.
type Batch struct {
	// Holder names the shard whose allocations of the accounts the batch's cash moves
	// (docs/architecture.md §11), and whose streams of their feeds its events join.
	Holder       string
	Now          time.Time
	NewOrders    []records.Order // inserted in their final state
	OrderUpdates []records.Order // existing orders: FilledQuantity, Status and CancelReason are written, and Price, Quantity and Priority when not 0 (an amend)
	Trades       []TradeRow
	Cash         []CashDelta // sorted by account: the order its rows are locked in, and how the statement's feed numbers are matched to them
	Shares       []ShareDelta
	Markets      []MarketUpdate
	Events       []db.EventBatch
	Settlements  []Settlement         // run last, after every other write
	Groups       []GroupDelta         // what the batch did to order groups, guarded (migration 027)
	EventChanges []EventChange        // events' status changes, written before the settlements
	Conversions  []records.Conversion // conversions of events' shares (their shares and cash are in Shares and Cash)
	// SettledEvents encodes the events of an account's holdings that a settlement paid (its part
	// of the account's feed), for CommitBatch to write with the batch. Needed when Settlements is
	// not empty and the account feed is kept.
	SettledEvents func(account int64, holdings []SettledHolding) ([]byte, error)
	// Unlocked says the batch did not begin with BeginBatch: it reserved cash and shares from what
	// its shard believed the accounts and holdings had, without reading them, and CommitBatch
	// begins its transaction. The database's checks — no balance or holding below zero, one order
	// per client order id — are then what refuses a batch whose belief was out of date (Refused),
	// and its shard runs it again. The rows it writes are locked in key order (Cash and Shares are
	// sorted) by its statements, so that batches of several shards do not deadlock on them.
	Unlocked bool
	// Fence, for an unlocked batch of a named shard, is the ownership its markets must still have
	// when it commits: CommitBatch checks it in the batch's transaction, before the writes
	// (fence_markets, migration 018), and the batch fails as Fenced otherwise.
	Fence *Fence
	// Claim is an unlocked standalone batch's claim token (Claim.Token), as Begin.Claim is a
	// locked batch's, which BeginBatch checks: CommitBatch checks it (claimCheck), under the
	// standalone batches' mark that the batch's first statement took, and the batch fails as
	// ClaimLost if the token moved.
	Claim int64
	// Halts, for a batch that decided a placement or an amend, is the version of the halts it
	// decided them under: CommitBatch checks it before committing (haltsCheck: in the accounts'
	// statement when the batch has one, else in a statement of its own), under the halts' mark
	// that every batch holds from its first statement to its commit, and the batch fails as
	// HaltsMoved if a halt changed since.
	Halts *int64
	// Allocated says Holder's allocation row of every account of Cash exists: its shard has seen
	// one committed (allocation rows are never deleted). The accounts' statement then writes them
	// by an update alone, and fails the batch as AllocationMissing should one not exist after all.
	Allocated bool
}

// Fence is a shard's claim on the markets a batch wrote for: each owned by Shard under its epoch.
type Fence struct {
	Shard   string
	Markets []uuid.UUID // sorted, the order their rows are locked in
	Epochs  []int64
}

// Reset empties the batch, keeping its storage.
func (b *Batch) Reset(now time.Time) {
	*b = Batch{Holder: b.Holder, Now: now, NewOrders: b.NewOrders[:0], OrderUpdates: b.OrderUpdates[:0], Trades: b.Trades[:0],
		Cash: b.Cash[:0], Shares: b.Shares[:0], Markets: b.Markets[:0], Events: b.Events[:0], Settlements: b.Settlements[:0],
		Groups: b.Groups[:0], Conversions: b.Conversions[:0]}
}

// TradeRow is one fill as stored.
type TradeRow struct {
	records.Trade
	Seq           int64
	Kind          string
	TakerOrderSeq int64
	MakerOrderSeq int64
	TakerAccount  int64
	MakerAccount  int64
	MakerFee      int64 // what the maker paid the exchange (Trade.Fee is the taker's): negative for a rebate
}

// CashDelta changes what the batch's holder holds of one account — its free cash and, under a
// maxLockedCash, its room — and adds the batch's events of the account, if any, to its stream of
// the account's feed. (What the account's open orders lock is not a column: it is in the orders.)
type CashDelta struct {
	Account   int64
	Available int64
	// Room changes the holder's room under a maxLockedCash: less what the batch's orders lock,
	// more what they release. What it releases counts only if the limits are still those of
	// RoomVersion (a change of the limits takes every holder's room back): room it did not know
	// was taken is not given back.
	Room        int64
	RoomVersion int64
	// EventCount events, as a JSON array without their numbers (migration 017); nil for none.
	EventCount int64
	Events     []byte
	// RiskDecided: the batch placed or amended up an order of the account, deciding it by the
	// risk limits of RiskVersion (Risk.Version); the commit fails if they have changed since
	// (migration 024), and the shard decides the batch again from what it reads.
	RiskDecided bool
	RiskVersion int64
}

// SettledHolding is one holding a settlement paid, as settle() reports it.
type SettledHolding struct {
	Market    uuid.UUID
	Account   int64
	Outcome   string
	Quantity  int64
	Payout    int64
	Status    string // the market's new status: RESOLVED or CANCELED
	SettledAt time.Time
	LastSeq   int64 // the account's last feed number once the settlement is numbered
}

// ShareDelta changes one account's holding of one outcome of one market.
type ShareDelta struct {
	Account  int64
	Market   uuid.UUID
	Outcome  string
	Quantity int64
	Locked   int64
}

// MarketUpdate records a market's last trade price and, when Status is set, a move between OPEN
// and CLOSED.
type MarketUpdate struct {
	ID             uuid.UUID
	LastTradePrice *int
	Status         domain.MarketStatus // "" leaves it
	EventSeq       int64               // the feed's last number after the batch; 0 leaves it
}

// Settlement resolves a market (Outcome YES or NO) or cancels it (Outcome empty).
type Settlement struct {
	Market  uuid.UUID
	Outcome string
	// VoidYes and VoidNo, when VoidYes is not 0, are what a cancelled market of an event pays per
	// YES and NO share (event.VoidPayout) instead of 50 and 50.
	VoidYes, VoidNo int64
}

// orderColumnsOf lays orders out as newOrdersPart's parameters, one array per column.
func orderColumnsOf(os []records.Order) []any {
	n := len(os)
	ids, markets, seqs, accounts := make([][16]byte, n), make([][16]byte, n), make([]int64, n), make([]int64, n)
	sides, outcomes, prices := make([]string, n), make([]string, n), make([]int16, n)
	qty, filled, status := make([]int64, n), make([]int64, n), make([]string, n)
	tifs, expires, postOnly, selfTrade := make([]string, n), make([]*time.Time, n), make([]bool, n), make([]string, n)
	clientIDs, placements, reasons, priorities := make([]*string, n), make([]*string, n), make([]*string, n), make([]int64, n)
	groups := make([]pgtype.UUID, n)
	takerFees, makerFees := make([]int16, n), make([]int16, n)
	for i, o := range os {
		takerFees[i], makerFees[i] = int16(o.Fees.Taker), int16(o.Fees.Maker)
		if o.OrderGroupID != nil {
			groups[i] = pgtype.UUID{Bytes: *o.OrderGroupID, Valid: true}
		}
		ids[i], markets[i], seqs[i], accounts[i] = o.ID, o.MarketID, o.Seq, o.AccountID
		sides[i], outcomes[i], prices[i] = o.Side, o.Outcome, int16(o.Price)
		qty[i], filled[i], status[i] = o.Quantity, o.FilledQuantity, o.Status.String()
		tifs[i], expires[i], postOnly[i], selfTrade[i] = cmp.Or(o.TimeInForce, "GTC"), o.ExpiresAt, o.PostOnly, cmp.Or(o.SelfTrade, "CANCEL_RESTING")
		clientIDs[i], placements[i], reasons[i], priorities[i] = o.ClientOrderID, o.Placement, o.CancelReason, o.Priority
	}
	return []any{ids, markets, seqs, accounts, sides, outcomes, prices, qty, filled, status, tifs, expires, postOnly,
		selfTrade, clientIDs, placements, reasons, priorities, groups, takerFees, makerFees}
}

// tradeColumnsOf lays trades out as tradesPart's parameters, one array per column.
func tradeColumnsOf(ts []TradeRow) []any {
	n := len(ts)
	ids, markets, seqs, kinds := make([][16]byte, n), make([][16]byte, n), make([]int64, n), make([]string, n)
	yes, qty, takerSeq, makerSeq := make([]int16, n), make([]int64, n), make([]int64, n), make([]int64, n)
	takerAcc, makerAcc, sides, outcomes, prices := make([]int64, n), make([]int64, n), make([]string, n), make([]string, n), make([]int16, n)
	takerFees, makerFees := make([]int64, n), make([]int64, n)
	for i, t := range ts {
		takerFees[i], makerFees[i] = t.Fee, t.MakerFee
		ids[i], markets[i], seqs[i], kinds[i] = t.ID, t.MarketID, t.Seq, t.Kind
		yes[i], qty[i], takerSeq[i], makerSeq[i] = int16(t.YesPrice), t.Quantity, t.TakerOrderSeq, t.MakerOrderSeq
		takerAcc[i], makerAcc[i], sides[i], outcomes[i], prices[i] = t.TakerAccount, t.MakerAccount, t.Side, t.Outcome, int16(t.Price)
	}
	return []any{ids, markets, seqs, kinds, yes, qty, takerSeq, makerSeq, takerAcc, makerAcc, sides, outcomes, prices, takerFees, makerFees}
}

// EventChange is an event's move to Status, written in the batch that moves its markets:
// Resolution is the winning key when RESOLVED; VoidYes and VoidNo, when CANCELED, what each
// share is paid, which records what the void leaves of the collateral (exchange_remainders).
type EventChange struct {
	Event           uuid.UUID
	Status          domain.MarketStatus
	Resolution      *string
	VoidYes, VoidNo int64
}

// queueEventChanges queues a batch's event changes, before its settlements, which zero the
// positions a void's remainder is computed from.
func queueEventChanges(q *pgx.Batch, b *Batch) {
	for _, ec := range b.EventChanges {
		q.Queue(`update events set status = $2, resolution = $3, updated_at = $4 where id = $1`,
			ec.Event, ec.Status, ec.Resolution, b.Now)
		if ec.Status == domain.MarketCanceled {
			q.Queue(`select record_void_remainder($1, $2, $3, $4)`, ec.Event, ec.VoidYes, ec.VoidNo, b.Now)
		}
	}
}

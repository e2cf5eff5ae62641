package batches

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// A shard's batch runs as one transaction on a connection of its own. BeginBatch opens it and, in
// the same pipeline, reads (and may lock) what the batch's placements reserve from; the shard
// decides reservations and matches in memory; CommitBatch writes every effect and commits in a
// second pipeline. A batch that reserved from what its shard already knew (Batch.Unlocked) skips
// BeginBatch: CommitBatch begins its transaction, so that it costs one round trip.

// ShareKey names a holding: an account's shares of one outcome of one market.
type ShareKey struct {
	Account int64
	Market  uuid.UUID
	Outcome string
}

// Begin names what a batch locks when it begins: the ownership rows of markets, the accounts
// whose cash and the holdings whose shares it reserves from. Any of the lists may be empty.
type Begin struct {
	// Holder names the shard (docs/architecture.md §11): the accounts' cash read is its
	// allocation of each.
	Holder   string
	Markets  []uuid.UUID
	Accounts []int64
	Holdings []ShareKey
	// LockAccounts locks the accounts' wallets (FOR SHARE), so that what is read of the holder's
	// allocations stays true until the batch commits: another shard's acquire takes from them, and
	// a change of the limits changes them, only with the wallet locked. Without it they are read as
	// last committed, unlocked, and the allocations' checks refuse this batch's commit if what it
	// reserved is no longer there (Refused). Holdings are locked either way: only the shard of
	// their market changes them.
	LockAccounts bool
	// AcquireAll, with LockAccounts, first moves all the free cash and room each account has —
	// its wallet's, other holders' — to the holder's allocation, in the batch's transaction, which
	// holds the wallets locked until it ends: what the batch reads is then all the account has,
	// and a refusal for want of it is true (docs/architecture.md §11). The last resort, as
	// LockAccounts is.
	AcquireAll bool
	// ClientOrderIDs are the client order ids the batch's placements give their orders. The batch
	// takes a lock on each (so that a placement with the same id in another shard's batch waits
	// for this one to end) and finds those an order already has.
	ClientOrderIDs []ClientOrderKey
	// Claim, for a batch of a standalone exchange that claimed its database, is its claim's token
	// (Claim.Token; standalone.go): the batch's transaction takes the shared mark that a new pmx
	// dev waits on before it loads its books, and fails as ClaimLost if another pmx dev has
	// claimed the database since. Zero for a named shard's batch.
	Claim int64
	// Groups are the order groups the batch may decide orders of or count fills for (groups.go),
	// read as of Now, and locked (FOR UPDATE, in id order) with LockAccounts.
	Groups []uuid.UUID
	Now    time.Time
}

// ClientOrderKey is an account's client order id.
type ClientOrderKey struct {
	Account int64
	ID      string
}

// Locked is what BeginBatch found and holds until the transaction ends.
type Locked struct {
	Owners map[uuid.UUID]db.Ownership // of the markets asked for (FOR SHARE: nobody can move them)
	Cash   map[int64]int64            // the holder's free cash of each account asked for (its wallet FOR SHARE with Begin.LockAccounts)
	Risk   map[int64]Risk             // and its room and risk limits, read with it
	// Elsewhere is each account's free cash outside the holder's allocation — its wallet and every
	// other holder's — read with Cash in one statement: 0 means the holder held all of it then,
	// so a refusal for want of it, decided from Cash, is true as of that read. A locked batch
	// (Begin.LockAccounts with AcquireAll) holds it all: 0, not read.
	Elsewhere map[int64]int64
	Shares    map[ShareKey]int64       // unlocked shares of each holding asked for that exists (FOR UPDATE)
	Taken     map[ClientOrderKey]bool  // the client order ids asked for that an order already has
	Groups    map[uuid.UUID]GroupState // the order groups asked for that exist
}

// BeginBatch begins a transaction on conn and locks, in key order so that concurrent batches
// cannot deadlock on them, what b names.
func BeginBatch(ctx context.Context, conn *pgx.Conn, b Begin) (Locked, error) {
	var q pgx.Batch
	l := queueBegin(&q, b)
	if err := conn.SendBatch(ctx, &q).Close(); err != nil {
		rollbackBatch(ctx, conn)
		return l, fmt.Errorf("while beginning a batch: %w", err)
	}
	return l, nil
}

// queueBegin queues the statements of BeginBatch; the Locked it returns is filled in as their
// results are read.
func queueBegin(q *pgx.Batch, b Begin) Locked {
	l := Locked{Owners: map[uuid.UUID]db.Ownership{}, Cash: map[int64]int64{}, Risk: map[int64]Risk{}, Elsewhere: map[int64]int64{},
		Shares: map[ShareKey]int64{}, Taken: map[ClientOrderKey]bool{}, Groups: map[uuid.UUID]GroupState{}}
	queueTxStart(q, b.Claim, true)
	if len(b.Markets) > 0 {
		q.Queue(`select id, shard, epoch, status from markets where id = any($1) order by id for share`, uuidArray(b.Markets)).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var o db.Ownership
					var shard *string
					if err := rows.Scan(&o.Market, &shard, &o.Epoch, &o.Status); err != nil {
						return err
					}
					if shard != nil {
						o.Shard = *shard
					}
					l.Owners[o.Market] = o
				}
				return rows.Err()
			})
	}
	if len(b.Accounts) > 0 {
		if b.AcquireAll && b.LockAccounts {
			all := make([]int64, len(b.Accounts))
			for i := range all {
				all[i] = everything
			}
			q.Queue(`select count(*) from acquire_cash($1, $2, $3, $3, 1)`, b.Holder, b.Accounts, all)
		}
		sql := allocationsUnlocked
		if b.LockAccounts {
			sql = allocationsLocked
		}
		q.Queue(sql, b.Accounts, b.Holder).Query(func(rows pgx.Rows) error {
			return scanBeginAllocations(rows, l.Cash, l.Risk, l.Elsewhere)
		})
	}
	if len(b.Holdings) > 0 {
		ids, markets, outcomes := make([]int64, len(b.Holdings)), make([][16]byte, len(b.Holdings)), make([]string, len(b.Holdings))
		for i, h := range b.Holdings {
			ids[i], markets[i], outcomes[i] = h.Account, h.Market, h.Outcome
		}
		q.Queue(`select p.account_id, p.market_id, p.outcome, p.quantity - p.locked_quantity from positions p
			join unnest($1::bigint[], $2::uuid[], $3::text[]) as k(account_id, market_id, outcome)
			  on p.account_id = k.account_id and p.market_id = k.market_id and p.outcome = k.outcome
			order by p.account_id, p.market_id, p.outcome for update of p`, ids, markets, outcomes).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k ShareKey
					var free int64
					if err := rows.Scan(&k.Account, &k.Market, &k.Outcome, &free); err != nil {
						return err
					}
					l.Shares[k] = free
				}
				return rows.Err()
			})
	}
	if len(b.ClientOrderIDs) > 0 {
		queueClientOrderIDs(q, b.ClientOrderIDs, l.Taken)
	}
	if len(b.Groups) > 0 {
		queueGroups(q, b.Groups, b.Now, b.LockAccounts, l.Groups)
	}
	return l
}

// queueTxStart begins a batch's transaction, sets the planner for its statements and takes the
// halts' mark shared (haltsCheck); a batch of a claimed standalone exchange (claim, its token) also
// takes its shared mark (standalone.go) and, with checkClaim, checks its token now, as BeginBatch
// does; an unlocked batch's commit, in the same round trip, checks it instead (claimCheck).
func queueTxStart(q *pgx.Batch, claim int64, checkClaim bool) {
	q.Queue("begin")
	// Every statement of a batch joins a few rows of parameters to large tables by an indexed key:
	// a nested loop over the index is always the right plan. Without this, a planner working from
	// stale statistics (a table that grew since it was last analyzed) hash-joins the whole orders
	// table for each batch, which measured 6 ms a batch and capped the exchange at a third of its speed.
	// Sequential scans go too: under the market-maker mix (amends update existing orders in most
	// batches) the planner, from the same stale statistics, scanned the whole orders table for the
	// updates, 16 ms a batch against 2, and the mix ran at a quarter of its speed in most runs.
	// And every statement keeps one generic plan: with those choices made, a plan for the batch's
	// own parameters is no better, and Postgres planned one anew for every execution of a third of
	// the batch statements, 0.3–0.7 ms each, a fifth of its CPU at 1,000 orders/s.
	// JIT compilation goes with them: a plan that must scan a table anyway carries the disabled
	// scan's cost (10^10), far above jit_above_cost, and was compiled again for every execution,
	// 10 ms for a statement that needs microseconds (a one-row table's lookup, measured).
	// Materializing goes too: the plans are made in a shard's first batches, when the tables are
	// small, and a plan that read all of the holder's allocations once (by the primary key's
	// second column) and kept them to match each account against cost every later batch as much
	// as the holder had accounts; without a Materialize the inner side of a nested loop is read
	// again for each row, and the lookup by the key is the only plan that is cheap
	// (TestBatchReadsOnlyItsAccountsAllocations).
	switch {
	case claim != 0 && checkClaim:
		q.Queue(txStartStandaloneSQL, claim)
	case claim != 0:
		q.Queue(txStartMarkedSQL)
	default:
		q.Queue(txStartSQL)
	}
}

// txStartSQL sets the planner for a batch's statements (queueTxStart) and takes the halts' mark
// shared (haltsCheck); txStartStandaloneSQL also takes the standalone batches' shared mark and
// checks the claim's token, its one parameter (standalone_batch, migration 021); txStartMarkedSQL
// takes that mark only, under which the batch's commit checks the token (claimCheck).
var txStartSQL = "select set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true), set_config('jit', 'off', true), set_config('enable_material', 'off', true)" +
	fmt.Sprintf(", pg_advisory_xact_lock_shared(%d, %d)", haltsSpace, haltsKey)

var (
	txStartStandaloneSQL = txStartSQL + fmt.Sprintf(", standalone_batch(%d, %d, $1)", lockSpace, batchKey)
	txStartMarkedSQL     = txStartSQL + fmt.Sprintf(", pg_advisory_xact_lock_shared(%d, %d)", lockSpace, batchKey)
)

// The halts' mark (migration 033): change_halts takes it exclusively, first in the transaction of
// every change of a halt, and raises halts.version; every batch takes it shared in the first
// statement of its transaction (txStartSQL) and holds it to its commit.
const (
	haltsSpace int32 = 0x706d7868 // "pmxh"
	haltsKey   int32 = 1
)

// haltsCheck is the check of a batch's halts (Batch.Halts) as an expression of the bigint
// parameter p, true when p is null: the halts' version is still p. The batch has held the halts'
// mark since its first statement, so no change of a halt can commit until it ends, and a later
// statement's snapshot, taken after the mark was granted, reads the version as it will be at the
// commit: the check is a plain read, with no function call nor lock of its own. Only when it
// fails does it call batch_checks (migration 036), which raises PX003 (HaltsMoved). It is a
// scalar subquery so that Postgres evaluates it once, before a statement's first row.
func haltsCheck(p string) string {
	return "(select " + p + "::bigint is null or exists (select from halts where id and version = " + p + ") or batch_checks(0, null, " + p + "))"
}

// claimCheck is, as haltsCheck is for the halts, the check of an unlocked standalone batch's claim
// token (Batch.Claim) as an expression of the bigint parameter p, true when p is null: the token
// is still the database's. The batch has held the standalone batches' mark since its first
// statement (txStartMarkedSQL), which Claim.Fence takes exclusively to raise the token, so a later
// statement reads the token as it will be at the commit. Only when it fails does it call
// standalone_batch (migration 021), which raises PX002 (ClaimLost).
func claimCheck(p string) string {
	return "(select " + p + "::bigint is null or exists (select from standalone_claim where id and token = " + p + ") or " +
		fmt.Sprintf("standalone_batch(%d, %d, %s) is null)", lockSpace, batchKey, p)
}

// commitChecks is the statement that checks a batch's halts and claim ($1, $2: Batch.Halts and
// the claim's token, each null when there is none to check) for a batch that has no accounts'
// statement, which otherwise checks them (cashSQL).
var commitChecks = "select " + haltsCheck("$1") + " and " + claimCheck("$2")

// queueClientOrderIDs queues the claim of client order ids. The unique index on (account_id,
// client_order_id) is the guarantee, but meeting it at commit would fail the whole batch; so a
// batch first takes a transaction-scoped advisory lock on each id (a hash of it: a collision only
// makes two batches wait for each other), in key order as every other lock, and then reads which
// ids an order has. A batch of another shard placing the same id waits at the lock until this one
// ends, then finds its order; within one batch the shard itself refuses the second placement of an id.
func queueClientOrderIDs(q *pgx.Batch, keys []ClientOrderKey, taken map[ClientOrderKey]bool) {
	locks := make([]int64, 0, len(keys))
	accounts, ids := make([]int64, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		h := fnv.New64a()
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(k.Account)))
		h.Write([]byte(k.ID))
		locks = append(locks, int64(h.Sum64()))
		accounts[i], ids[i] = k.Account, k.ID
	}
	slices.Sort(locks)
	locks = slices.Compact(locks)
	q.Queue(`select count(pg_advisory_xact_lock(k)) from unnest($1::bigint[]) as u(k)`, locks)
	q.Queue(`select o.account_id, o.client_order_id from orders o
		join unnest($1::bigint[], $2::text[]) as k(account_id, client_order_id)
		  on o.account_id = k.account_id and o.client_order_id = k.client_order_id`, accounts, ids).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k ClientOrderKey
				if err := rows.Scan(&k.Account, &k.ID); err != nil {
					return err
				}
				taken[k] = true
			}
			return rows.Err()
		})
}

// Committed is what CommitBatch reports besides an error.
type Committed struct {
	Updated []records.Order // the existing orders the batch cancelled, in their new state
	// Accounts is what the batch added to accounts' feeds (CashDelta.Events and the settlements'
	// events), numbered, in the order written.
	Accounts []db.AccountEvents
}

// CommitBatch writes a batch within the transaction BeginBatch opened (or, for a batch that read
// nothing, Batch.Unlocked, in a transaction it begins itself) and commits it, in one round trip
// (two for a batch that settles a market). An error means the batch did not commit: its
// transaction was rolled back, and the connection is left outside any transaction.
func CommitBatch(ctx context.Context, conn *pgx.Conn, b *Batch) (Committed, error) {
	var q pgx.Batch
	var c Committed
	if b.Unlocked {
		queueTxStart(&q, b.Claim, false)
		if f := b.Fence; f != nil {
			q.Queue(`select fence_markets($1, $2, $3)`, f.Shard, uuidArray(f.Markets), f.Epochs)
		}
	}
	settled := queueApply(&q, b, &c.Updated, &c.Accounts)
	queueGroupDeltas(&q, b)
	if len(b.Settlements) > 0 {
		// The settlements' events are encoded from what settle() returns, and written before the
		// commit: a round trip more, for the rare batch that settles a market.
		if err := conn.SendBatch(ctx, &q).Close(); err != nil {
			rollbackBatch(ctx, conn)
			return c, fmt.Errorf("while committing a batch: %w", err)
		}
		q = pgx.Batch{}
		if err := queueSettledEvents(&q, b, *settled, &c.Accounts); err != nil {
			rollbackBatch(ctx, conn)
			return c, fmt.Errorf("while committing a batch: %w", err)
		}
	}
	if claim := claimParam(b); (b.Halts != nil || claim != nil) && len(b.Cash) == 0 { // with cash, the accounts' statement checks them (cashStatement)
		q.Queue(commitChecks, b.Halts, claim)
	}
	q.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return errors.New("the batch's transaction was rolled back")
		}
		return nil
	})
	if err := conn.SendBatch(ctx, &q).Close(); err != nil {
		rollbackBatch(ctx, conn)
		if commitOutcomeUnknown(err) {
			return c, fmt.Errorf("while committing a batch: %w: %w", ErrCommitUnknown, err)
		}
		return c, fmt.Errorf("while committing a batch: %w", err)
	}
	return c, nil
}

// rollbackBatch ends a batch's transaction without writing it. A connection that cannot even roll
// back is closed, for its pool to replace.
func rollbackBatch(ctx context.Context, conn *pgx.Conn) {
	if conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := conn.Exec(ctx, "rollback"); err != nil {
		_ = conn.Close(ctx)
	}
}

// Refused reports whether a batch failed on one of the database's own guards of what a batch
// reserves: a balance or holding that would have gone negative, or a client order id an order
// already has. A batch that reserved without locking (Batch.Unlocked) fails so when what it
// believed it could reserve was out of date; it can be run again with locks.
func Refused(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "23514" || pg.Code == "23505") // check_violation, unique_violation
}

// Fenced reports whether an unlocked batch of a named shard failed its fence (Batch.Fence): the
// shard no longer owns a market it wrote for, under the epoch it loaded it with.
func Fenced(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "PX001"
}

// AllocationMissing reports whether a batch of Batch.Allocated found one of its holder's
// allocation rows missing (batch_checks, migration 036): nothing was written, and the batch can
// run again without Allocated.
func AllocationMissing(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "PX004"
}

// HaltsMoved reports whether a batch failed its check of the halts (Batch.Halts): a market's,
// an event's or the exchange's halt changed after the shard read the halts it decided under.
func HaltsMoved(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "PX003"
}

// Retryable reports whether a batch failed only because it raced another transaction (a
// deadlock or a serialization failure), or because a migration changed the type of a column one
// of its prepared statements returns (a process still running while a newer one upgrades the
// schema: pgx drops the failed batch's statements and prepares them anew), so that running it
// again can succeed.
func Retryable(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (pg.Code == "40P01" || pg.Code == "40001" ||
		pg.Code == "0A000" && strings.Contains(pg.Message, "cached plan must not change result type"))
}

// queueApply queues every write of a batch: one statement for all of them but the accounts' (see
// applyStatement), then the accounts' (cashStatement, which checks the batch's halts too), then the settlements, which read what they
// wrote. What the statements return is read into updated and accounts; the holdings the
// settlements paid, into what it returns.
func queueApply(q *pgx.Batch, b *Batch, updated *[]records.Order, accounts *[]db.AccountEvents) *[]SettledHolding {
	if sql, args, mask := applyStatement(b); sql != "" {
		qq := q.Queue(sql, args...)
		if mask&(1<<partOrderUpdates) != 0 {
			qq.Query(func(rows pgx.Rows) error { return readCancelled(rows, updated) })
		}
	}
	if sql, args, withEvents := cashStatement(b); sql != "" {
		qq := q.Queue(sql, args...)
		if withEvents {
			qq.Query(func(rows pgx.Rows) error { return readAccountSeqs(rows, b, accounts) })
		}
	}
	queueConversions(q, b)
	queueEventChanges(q, b)
	settled := new([]SettledHolding)
	for _, st := range b.Settlements {
		var outcome *string
		status := "CANCELED"
		if st.Outcome != "" {
			outcome, status = &st.Outcome, "RESOLVED"
		}
		voidYes, voidNo := st.VoidYes, st.VoidNo
		if voidYes == 0 { // a market's own void: 50 and 50
			voidYes, voidNo = 50, 50
		}
		q.Queue(`select account_id, outcome, quantity, payout, last_seq from settle_holder($1, $2, $3, $4, $5, $6)`,
			b.Holder, st.Market, outcome, voidYes, voidNo, b.Now).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				h := SettledHolding{Market: st.Market, Status: status, SettledAt: b.Now}
				if err := rows.Scan(&h.Account, &h.Outcome, &h.Quantity, &h.Payout, &h.LastSeq); err != nil {
					return err
				}
				*settled = append(*settled, h)
			}
			return rows.Err()
		})
	}
	return settled
}

// readCancelled reads what the batch's statement returns when it updates orders: the existing
// orders it cancelled, in their new state.
func readCancelled(rows pgx.Rows, updated *[]records.Order) error {
	for rows.Next() {
		o, err := db.ScanOrder(rows)
		if err != nil {
			return err
		}
		*updated = append(*updated, o)
	}
	return rows.Err()
}

// readAccountSeqs reads what the accounts' statement returns when the batch adds to accounts'
// feeds: each such account's last feed number.
func readAccountSeqs(rows pgx.Rows, b *Batch, accounts *[]db.AccountEvents) error {
	for rows.Next() {
		var account, last int64
		if err := rows.Scan(&account, &last); err != nil {
			return err
		}
		i, found := slices.BinarySearchFunc(b.Cash, account, func(d CashDelta, a int64) int { return cmp.Compare(d.Account, a) })
		if !found || b.Cash[i].EventCount == 0 {
			return fmt.Errorf("the batch's statement returned the feed of account %d, which the batch did not add to", account)
		}
		d := &b.Cash[i]
		*accounts = append(*accounts, db.AccountEvents{Account: account, Holder: b.Holder, First: last - d.EventCount + 1, Last: last, Events: d.Events})
	}
	return rows.Err()
}

// queueSettledEvents queues the insert of the events of every holding the batch's settlements
// paid, one row per account per settlement, encoded by b.SettledEvents, and adds them to accounts.
func queueSettledEvents(q *pgx.Batch, b *Batch, settled []SettledHolding, accounts *[]db.AccountEvents) error {
	if len(settled) == 0 {
		return nil
	}
	if b.SettledEvents == nil {
		return nil // the accounts' feeds are not kept (shard.Config.NoEventLog)
	}
	var ids []int64
	var first, last []int64
	var events [][]byte
	for i := 0; i < len(settled); {
		j := i + 1
		for j < len(settled) && settled[j].Account == settled[i].Account && settled[j].Market == settled[i].Market {
			j++
		}
		raw, err := b.SettledEvents(settled[i].Account, settled[i:j])
		if err != nil {
			return fmt.Errorf("while encoding the settlement events of account %d: %w", settled[i].Account, err)
		}
		e := db.AccountEvents{Account: settled[i].Account, Holder: b.Holder, First: settled[i].LastSeq - int64(j-i) + 1, Last: settled[i].LastSeq, Events: raw}
		*accounts = append(*accounts, e)
		ids, first, last, events = append(ids, e.Account), append(first, e.First), append(last, e.Last), append(events, raw)
		i = j
	}
	q.Queue(`insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
		select account_id, $2, first_seq, last_seq, $1, events
		from unnest($3::bigint[], $4::bigint[], $5::bigint[], $6::bytea[]) as d(account_id, first_seq, last_seq, events)`,
		b.Now, b.Holder, ids, first, last, events)
	return nil
}

// The writes of a batch, each kind of row a data-modifying CTE over arrays of parameters. $1 is
// the batch's time in every part; a part's own parameters are numbered from 1 after it ({1}, {2},
// ...) and renumbered when the statement is put together.
const (
	newOrdersPart = `new_orders as (
		insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity,
		                    filled_quantity, status, created_at, updated_at, time_in_force, expires_at, post_only,
		                    self_trade, client_order_id, placement, cancel_reason, priority, order_group_id,
		                    taker_fee_bps, maker_fee_bps)
		select id, market_id, seq, account_id, side, outcome, price, quantity, filled, status, $1, $1,
		       tif, expires_at, post_only, self_trade, client_order_id, placement, cancel_reason, nullif(priority, 0), order_group_id,
		       taker_fee, maker_fee
		from unnest({1}::uuid[], {2}::uuid[], {3}::bigint[], {4}::bigint[], {5}::text[], {6}::text[],
		            {7}::smallint[], {8}::bigint[], {9}::bigint[], {10}::text[], {11}::text[], {12}::timestamptz[],
		            {13}::boolean[], {14}::text[], {15}::text[], {16}::text[], {17}::text[], {18}::bigint[], {19}::uuid[],
		            {20}::smallint[], {21}::smallint[])
		  as d(id, market_id, seq, account_id, side, outcome, price, quantity, filled, status, tif, expires_at,
		       post_only, self_trade, client_order_id, placement, cancel_reason, priority, order_group_id,
		       taker_fee, maker_fee))`
	orderUpdatesPart = `order_updates as (
		update orders o set price = coalesce(nullif(d.price, 0), o.price), quantity = coalesce(nullif(d.quantity, 0), o.quantity),
		       filled_quantity = d.filled, status = d.status,
		       cancel_reason = d.cancel_reason, priority = coalesce(nullif(d.priority, 0), o.priority), updated_at = $1
		from unnest({1}::uuid[], {2}::bigint[], {3}::smallint[], {4}::bigint[], {5}::bigint[], {6}::text[], {7}::text[], {8}::bigint[])
		  as d(market_id, seq, price, quantity, filled, status, cancel_reason, priority)
		where o.market_id = d.market_id and o.seq = d.seq
		returning ` + updatedOrderColumns + `)`
	// cashPart writes the batch's deltas to its holder's allocation of each account ({1}: the
	// holder): an update of the rows that exist and an insert of the others, in one pass (not an
	// upsert, whose proposed row — negative for a spend — Postgres checks before it finds the
	// conflict; a new row only ever receives: spending needs cash the row would already hold). A
	// new row takes the account's version of its limits. It numbers the events the batch adds to
	// the account's stream from this holder. The holder comes as a column of each delta, from a
	// CTE the planner cannot look into, not as the parameter itself: with al.holder = {1} Postgres
	// may read all of the holder's rows by the key's second column (the whole index) and match
	// the deltas against them, a plan it made while the table was small and then kept, whose cost
	// grew with the accounts the holder holds; with the holder a column of the delta the only
	// cheap plan looks each row up by its whole key (TestBatchReadsOnlyItsAccountsAllocations).
	cashPart = `cash_deltas as materialized (
		select *, {1}::text as holder
		from unnest({2}::bigint[], {3}::bigint[], {4}::bigint[], {5}::bigint[], {6}::bigint[], {7}::bytea[], {8}::bigint[])
		  as d(id, available, room, room_version, n, events, risk)),
	cash_updated as (
		update allocations al set available = al.available + d.available,
		       room = al.room + case when d.room < 0 or d.room_version = al.risk_version then d.room else 0 end,
		       event_seq = al.event_seq + d.n,
		       risk_checked = case when d.risk < 0 then al.risk_version else d.risk end
		from cash_deltas d
		where al.account_id = d.id and al.holder = d.holder
		returning al.account_id, al.event_seq),
	cash_inserted as (
		insert into allocations (account_id, holder, available, room, event_seq, risk_version, risk_checked)
		select d.id, {1}, d.available, case when d.room < 0 or d.room_version = a.risk_version then d.room else 0 end,
		       d.n, a.risk_version, case when d.risk < 0 then a.risk_version else d.risk end
		from cash_deltas d join accounts a on a.id = d.id
		where not exists (select 1 from cash_updated u where u.account_id = d.id)
		returning account_id, event_seq),
	cash as (
		select d.id, c.event_seq, d.n, d.events
		from (select * from cash_updated union all select * from cash_inserted) c join cash_deltas d on d.id = c.account_id)`
	// cashUpdatePart is cashPart for a batch whose rows all exist (Batch.Allocated): the update
	// alone, each row's delta straight from the parameters (in a subquery that offset 0 keeps the
	// planner from merging into the update, for the holder's column: see cashPart).
	cashUpdatePart = `cash as (
		update allocations al set available = al.available + d.available,
		       room = al.room + case when d.room < 0 or d.room_version = al.risk_version then d.room else 0 end,
		       event_seq = al.event_seq + d.n,
		       risk_checked = case when d.risk < 0 then al.risk_version else d.risk end
		from (select *, {1}::text as holder
		      from unnest({2}::bigint[], {3}::bigint[], {4}::bigint[], {5}::bigint[], {6}::bigint[], {7}::bytea[], {8}::bigint[])
		        as d(id, available, room, room_version, n, events, risk)
		      offset 0) d
		where al.account_id = d.id and al.holder = d.holder
		returning al.account_id as id, al.event_seq, d.n, d.events)`
	// accountEventsPart writes the accounts' events the cash part numbered, in the holder's
	// streams ({1}); it takes no parameters of its own.
	accountEventsPart = `new_account_events as (
		insert into account_events (account_id, holder, first_seq, last_seq, created_at, events)
		select id, {1}, event_seq - n + 1, event_seq, $1, events from cash where n > 0)`
	sharesPart = `share_deltas as (
		select * from unnest({1}::uuid[], {2}::bigint[], {3}::uuid[], {4}::text[], {5}::bigint[], {6}::bigint[])
		  as d(id, account_id, market_id, outcome, quantity, locked)),
	positions_updated as (
		update positions p set quantity = p.quantity + d.quantity, locked_quantity = p.locked_quantity + d.locked,
		       updated_at = $1
		from share_deltas d where p.account_id = d.account_id and p.market_id = d.market_id and p.outcome = d.outcome
		returning p.account_id, p.market_id, p.outcome),
	positions_new as (
		insert into positions (id, account_id, market_id, outcome, quantity, locked_quantity, created_at, updated_at)
		select d.id, d.account_id, d.market_id, d.outcome, d.quantity, d.locked, $1, $1 from share_deltas d
		where not exists (select 1 from positions_updated u
		                  where u.account_id = d.account_id and u.market_id = d.market_id and u.outcome = d.outcome))`
	marketsPart = `market_updates as (
		update markets m set last_trade_price = coalesce(d.last, m.last_trade_price),
		       status = coalesce(d.status, m.status), event_seq = coalesce(nullif(d.event_seq, 0), m.event_seq), updated_at = $1
		from unnest({1}::uuid[], {2}::smallint[], {3}::text[], {4}::bigint[]) as d(id, last, status, event_seq) where m.id = d.id)`
	eventsPart = `new_events as (
		insert into market_events (market_id, first_seq, last_seq, created_at, events)
		select market_id, first_seq, last_seq, $1, events
		from unnest({1}::uuid[], {2}::bigint[], {3}::bigint[], {4}::bytea[]) as d(market_id, first_seq, last_seq, events))`
)

// tradesPart writes the trades and adds them to the candles (a var: built from candlesRollup).
var tradesPart = `trade_rows as (
		select * from unnest({1}::uuid[], {2}::uuid[], {3}::bigint[], {4}::text[], {5}::smallint[], {6}::bigint[],
		            {7}::bigint[], {8}::bigint[], {9}::bigint[], {10}::bigint[], {11}::text[], {12}::text[], {13}::smallint[],
		            {14}::bigint[], {15}::bigint[])
		  as d(id, market_id, seq, kind, yes_price, quantity, taker_seq, maker_seq, taker_account, maker_account,
		       side, outcome, price, taker_fee, maker_fee)),
	new_trades as (
		insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
		                    taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at,
		                    taker_fee, maker_fee)
		select id, market_id, seq, kind, yes_price, quantity, taker_seq, maker_seq, taker_account, maker_account,
		       side, outcome, price, $1, taker_fee, maker_fee
		from trade_rows),
	` + candlesRollup("candles_1m", "1 minute") + `,
	` + candlesRollup("candles_1h", "1 hour")

// candlesRollup adds a batch's trades, all of the batch's time ($1), to one interval per market of
// a candles table (migration 016). The interval's open is its trade of lowest seq, its close that
// of highest seq, whichever batch brought them.
func candlesRollup(table, interval string) string {
	return table + ` as (
		insert into ` + table + ` as c (market_id, start, open, high, low, close, volume, trades, first_seq, last_seq)
		select market_id, date_bin('` + interval + `', $1::timestamptz, timestamptz '2000-01-01 00:00:00+00'),
		       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price), (array_agg(yes_price order by seq desc))[1],
		       sum(quantity), count(*), min(seq), max(seq)
		from trade_rows group by market_id
		on conflict (market_id, start) do update
		   set open = case when excluded.first_seq < c.first_seq then excluded.open else c.open end,
		       close = case when excluded.last_seq > c.last_seq then excluded.close else c.close end,
		       high = greatest(c.high, excluded.high), low = least(c.low, excluded.low),
		       volume = c.volume + excluded.volume, trades = c.trades + excluded.trades,
		       first_seq = least(c.first_seq, excluded.first_seq), last_seq = greatest(c.last_seq, excluded.last_seq))`
}

// The parts of the batch's statement, by their index in applyParts.
const (
	partNewOrders = iota
	partOrderUpdates
	partTrades
	partShares
	partMarkets
	partEvents
)

// applyParts are the parts in the order a statement lists them, with how many parameters each
// takes; applySQL[mask] is the statement made of the parts whose bits mask sets (bit i: part i).
var (
	applyParts = []struct {
		sql  string
		args int
	}{{newOrdersPart, 21}, {orderUpdatesPart, 8}, {tradesPart, 15}, {sharesPart, 6}, {marketsPart, 4}, {eventsPart, 4}}
	applySQL = func() []string {
		out := make([]string, 1<<len(applyParts))
		for mask := 1; mask < len(out); mask++ {
			var parts []string
			base := 1 // $1 is the batch's time
			for i, p := range applyParts {
				if mask&(1<<i) == 0 {
					continue
				}
				parts = append(parts, numbered(p.sql, base))
				base += p.args
			}
			// Only cancelled orders are answered with their row (fills of resting orders need not
			// travel back).
			main := "select $1::timestamptz where false" // nothing to return
			if mask&(1<<partOrderUpdates) != 0 {
				main = "select * from order_updates where status in ('CANCELLED', 'PARTIALLY_FILLED_CANCELLED')"
			}
			out[mask] = "with " + strings.Join(parts, ",\n\t") + "\n" + main
		}
		return out
	}()
	// cashSQL[variant] is the accounts' statement (cashStatement): with cashEvents it writes the
	// events the cash part numbers and returns each such account's last feed number (without, it
	// returns nothing); with cashAllocated it writes the rows by an update alone (Batch.Allocated),
	// its guard counting the rows written. Every variant ends with the batch's checks: the halts'
	// ($10, when not null; haltsCheck), the standalone claim's ($11, when not null; claimCheck)
	// and, with cashAllocated, the rows' count. Each is a plain expression that calls batch_checks
	// (migration 036) or standalone_batch (migration 021) only to raise the batch's error when it
	// fails. They are one-time filters of the final select (scalar subqueries), which Postgres
	// evaluates before the select's first row (so also when it returns none), after the
	// data-modifying parts have run to completion. (Without events the batch's time, $1, is
	// written nowhere; it is named in the select so that every variant's parameters keep one shape.)
	cashSQL = func() [4]string {
		var out [4]string
		for v := range out {
			write, checks := numbered(cashPart, 1), haltsCheck("$10")+" and "+claimCheck("$11")
			if v&cashAllocated != 0 {
				write = numbered(cashUpdatePart, 1)
				checks += " and (select count(*) = cardinality($3::bigint[]) or batch_checks(count(*), cardinality($3::bigint[]), null) from cash)"
			}
			if v&cashEvents != 0 {
				out[v] = "with " + write + ",\n\t" + numbered(accountEventsPart, 1) +
					"\nselect id, event_seq from cash where n > 0 and " + checks
			} else {
				out[v] = "with " + write + "\nselect id, event_seq from cash where n > 0 and $1::timestamptz is not null and " + checks
			}
		}
		return out
	}()
)

// The variants of the accounts' statement (cashSQL).
const (
	cashEvents    = 1 << iota // the batch adds events to accounts' feeds
	cashAllocated             // every row exists (Batch.Allocated): an update alone
)

// numbered renumbers a part's own parameters ({1}, {2}, ...) to follow base: {k} becomes $(base+k).
func numbered(part string, base int) string {
	return placeholder.ReplaceAllStringFunc(part, func(m string) string {
		k, _ := strconv.Atoi(m[1 : len(m)-1])
		return "$" + strconv.Itoa(base+k)
	})
}

var placeholder = regexp.MustCompile(`\{(\d+)\}`)

// applyStatement writes a batch's effects but its cash (cashStatement) in one statement: a
// data-modifying CTE for each kind of row the batch has (new orders in their final state; the new
// fill and status of existing orders, which the statement returns in their new state; trades;
// share deltas; market updates; the markets' events), or "" when it has none. One statement
// rather than up to six saves each batch the per-statement work of both pgx and Postgres; leaving
// out the parts a batch does not need spares small batches the cost of the empty ones. Each
// combination is its own prepared statement.
//
// Every CTE runs against the same snapshot, so none may depend on another's writes, and none does:
// a batch's new orders and its updates of existing orders are different rows (an order placed in
// the batch is written once, in its final state). Share deltas update the positions that exist
// and insert the others, in one pass: not an upsert, because Postgres checks an upsert's proposed
// row — negative for a sale — before it finds the conflict; a new position only ever grows
// (shares come from a buy).
func applyStatement(b *Batch) (string, []any, int) {
	mask := 0
	args := []any{b.Now}
	add := func(part int, partArgs ...any) {
		if len(partArgs) != applyParts[part].args {
			panic(fmt.Sprintf("store: part %d of a batch's statement takes %d parameters, not %d", part, applyParts[part].args, len(partArgs)))
		}
		mask |= 1 << part
		args = append(args, partArgs...)
	}
	if len(b.NewOrders) > 0 {
		add(partNewOrders, orderColumnsOf(b.NewOrders)...)
	}
	if n := len(b.OrderUpdates); n > 0 {
		markets, seqs, prices, qty := make([][16]byte, n), make([]int64, n), make([]int16, n), make([]int64, n)
		filled, status, reasons, priorities := make([]int64, n), make([]string, n), make([]*string, n), make([]int64, n)
		for i, o := range b.OrderUpdates {
			markets[i], seqs[i], prices[i], qty[i] = o.MarketID, o.Seq, int16(o.Price), o.Quantity
			filled[i], status[i], reasons[i], priorities[i] = o.FilledQuantity, o.Status.String(), o.CancelReason, o.Priority
		}
		add(partOrderUpdates, markets, seqs, prices, qty, filled, status, reasons, priorities)
	}
	if len(b.Trades) > 0 {
		add(partTrades, tradeColumnsOf(b.Trades)...)
	}
	if n := len(b.Shares); n > 0 {
		ids, holders, holdings, outcomes := make([][16]byte, n), make([]int64, n), make([][16]byte, n), make([]string, n)
		qty, locked := make([]int64, n), make([]int64, n)
		for i, d := range b.Shares {
			// An id only for the positions the statement inserts; generating it costs little.
			ids[i], holders[i], holdings[i], outcomes[i], qty[i], locked[i] = db.NewID(), d.Account, d.Market, d.Outcome, d.Quantity, d.Locked
		}
		add(partShares, ids, holders, holdings, outcomes, qty, locked)
	}
	if n := len(b.Markets); n > 0 {
		ids, last, status, seqs := make([][16]byte, n), make([]*int16, n), make([]*string, n), make([]int64, n)
		for i := range b.Markets {
			m := &b.Markets[i]
			ids[i], seqs[i] = m.ID, m.EventSeq
			if m.LastTradePrice != nil {
				p := int16(*m.LastTradePrice)
				last[i] = &p
			}
			if m.Status != "" {
				st := string(m.Status)
				status[i] = &st
			}
		}
		add(partMarkets, ids, last, status, seqs)
	}
	if n := len(b.Events); n > 0 {
		markets, first, last, events := make([][16]byte, n), make([]int64, n), make([]int64, n), make([][]byte, n)
		for i, e := range b.Events {
			markets[i], first[i], last[i], events[i] = e.Market, e.First, e.Last, e.Events
		}
		add(partEvents, markets, first, last, events)
	}
	if mask == 0 {
		return "", nil, 0
	}
	return applySQL[mask], args, mask
}

// cashStatement writes a batch's cash deltas to its holder's allocations of the accounts (and the
// risk version each account's refusals were decided under), numbering and writing the events the
// batch adds to each account's stream from the holder, or "" when the batch moves no account. It
// is a statement of its own, queued after the batch's other writes (in the same round trip), and
// it checks the batch's halts and claim (Batch.Halts, Batch.Claim) with its rows, so that the
// batch needs no statement for them. The rows it writes are the holder's own: no other shard's
// batch writes them (docs/architecture.md §11), so batches of several shards trading for the same
// accounts do not take turns on them.
func cashStatement(b *Batch) (sql string, args []any, withEvents bool) {
	n := len(b.Cash)
	if n == 0 {
		return "", nil, false
	}
	accounts, avail, room, counts, events := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([][]byte, n)
	risk, roomVersion := make([]int64, n), make([]int64, n)
	for i, d := range b.Cash {
		accounts[i], avail[i], room[i], counts[i], events[i] = d.Account, d.Available, d.Room, d.EventCount, d.Events
		roomVersion[i] = d.RoomVersion
		risk[i] = -1
		if d.RiskDecided {
			risk[i] = d.RiskVersion
		}
		withEvents = withEvents || d.EventCount > 0
	}
	variant := 0
	if withEvents {
		variant |= cashEvents
	}
	if b.Allocated {
		variant |= cashAllocated
	}
	return cashSQL[variant], []any{b.Now, b.Holder, accounts, avail, room, roomVersion, counts, events, risk, b.Halts, claimParam(b)}, withEvents
}

// claimParam is the claim token a batch's commit checks, as the parameter of claimCheck: null for
// none, and for a batch that began with BeginBatch, which checked it then (txStartStandaloneSQL)
// under the mark it holds since, so that it cannot have moved.
func claimParam(b *Batch) *int64 {
	if b.Claim == 0 || !b.Unlocked {
		return nil
	}
	return &b.Claim
}

// updatedOrderColumns is db.OrderColumns, qualified for an update joined with its data.
const updatedOrderColumns = `o.id, o.market_id, o.side, o.outcome, o.price, o.quantity, o.filled_quantity,
	o.status, o.created_at, o.updated_at, o.seq, o.account_id, o.time_in_force, o.expires_at, o.post_only,
	o.self_trade, o.client_order_id, o.placement, o.cancel_reason, o.order_group_id, o.taker_fee_bps, o.maker_fee_bps`

// uuidArray converts ids for pgx, which encodes [16]byte directly rather than through each
// uuid.UUID's text form.
func uuidArray(ids []uuid.UUID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

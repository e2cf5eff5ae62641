// Package audit re-derives, from what Postgres keeps, every order's fills and final state, every
// book, position and balance, by running the matching engine (package engine, the one the shards
// run) over each market's commands in sequence order, and compares what it derives with what
// Postgres holds: pmx audit (docs/operations.md, "Auditing the record"; docs/architecture.md §3,
// "The audit").
//
// What a market's commands are, from what is kept (docs/architecture.md §3 says it in full):
//
//   - Placements: every order row, in its seq (the engine's order id, its time priority), with its
//     terms. An order never moved by an amend has the terms it was placed with, or fewer shares
//     (an amend that keeps priority only lowers the remaining quantity, which changes none of its
//     fills), so its row is enough.
//   - Amends that moved an order to the back of a queue took the next number of the order
//     sequence (orders.priority holds the last one); their terms, and the order's terms when it was
//     placed, are in its account's feed (account_events, "accepted" and "amended"), which is kept
//     for the event retention, and, once pruned, in order_terms: the pruning copies them there, for
//     ever, for every order an amend moved or still may (migration 037, feedlog.PruneEvents; both
//     read the events with feed.TermsOf). Each "amended" event of a move also tells the number it
//     took ("priority", feed.Terms.Priority; order_terms.priority, migration 039), so each move
//     replays at its own; a move an older pmx told no number of, overwritten by a later move of
//     its order, takes a number no order holds, in time order, ties broken by the order's seq (a
//     guess: plan). Only an order whose feed was pruned before the copy existed cannot be
//     replayed: its market is reported as not checkable rather than as different.
//   - Cancels (by the owner, the dead-man switch, an order group, expiry, a market closing) are not
//     numbered: the replay cancels an order in the batch its row was last changed in (updated_at),
//     once its fills up to its final filled quantity are made. The engine's own cancels (IOC, FOK,
//     self-trade) are the engine's to make again.
//
// The audit reads in one read-only, repeatable-read transaction, so it writes nothing and sees one
// snapshot: safe against a live primary or a hot standby.
package audit

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Options says what to audit. The zero value audits every market and every account.
type Options struct {
	Markets []string  // market ids or names; none: every market
	Event   string    // an event's id or name: its markets
	Since   time.Time // only markets changed at or after Since (zero: no bound)
	Until   time.Time // only markets created before Until (zero: no bound)
	// Progress, when set, is told how far the audit is every ProgressEvery (default 2 s).
	Progress      *slog.Logger
	ProgressEvery time.Duration
}

func (o *Options) all() bool {
	return len(o.Markets) == 0 && o.Event == "" && o.Since.IsZero() && o.Until.IsZero()
}

// Difference is one thing Postgres holds that the replay does not derive.
type Difference struct {
	Check  string    // which check: fill, order, book, position, settlement, conversion, cash, locked, numbering, feed, account feed
	Market uuid.UUID // uuid.Nil for an account's
	What   string    // what differs: what Postgres holds and what the replay derives
	Look   string    // where to look
}

func (d Difference) String() string {
	var b strings.Builder
	b.WriteString(d.Check)
	if d.Market != uuid.Nil {
		b.WriteString(": market ")
		b.WriteString(d.Market.String())
	}
	b.WriteString(": ")
	b.WriteString(d.What)
	if d.Look != "" {
		b.WriteString("; look at ")
		b.WriteString(d.Look)
	}
	return b.String()
}

// Report is what the audit found.
type Report struct {
	Markets, Events        int // markets audited, and the events they belong to
	Replayed               int // markets replayed whole
	Orders, Amends, Cancel int // commands replayed
	Trades                 int // trades checked, each against the replay's fill
	Conversions            int
	Settlements            int // settlement rows checked
	Accounts               int // accounts whose cash was checked (0 when only some markets were audited)
	AccountFills           int // fill events of the accounts' feeds checked against the trades
	Took                   time.Duration
	Differences            []Difference
	// CannotCheck says what the audit could not check, and why: markets with an order moved by an
	// amend whose terms neither the feeds nor order_terms hold, the accounts' feeds when none is
	// kept, and the limits of a partial audit.
	CannotCheck []string
}

// LogEvents are the log's records the audit replayed and checked: placements, amends, cancels and
// trades.
func (r *Report) LogEvents() int { return r.Orders + r.Amends + r.Cancel + r.Trades }

// EventsPerSecond is LogEvents over the time the audit took.
func (r *Report) EventsPerSecond() float64 {
	if r.Took <= 0 {
		return 0
	}
	return float64(r.LogEvents()) / r.Took.Seconds()
}

// Write prints the summary, every difference and what could not be checked.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "audited %d markets (%d replayed whole) of %d events: %d orders, %d amends, %d cancels, %d trades, %d conversions, %d settlements",
		r.Markets, r.Replayed, r.Events, r.Orders, r.Amends, r.Cancel, r.Trades, r.Conversions, r.Settlements)
	if r.Accounts > 0 {
		fmt.Fprintf(w, ", %d accounts' cash", r.Accounts)
	}
	if r.AccountFills > 0 {
		fmt.Fprintf(w, ", %d fills in the accounts' feeds", r.AccountFills)
	}
	fmt.Fprintf(w, "; %d log events in %s (%.0f events/s)\n", r.LogEvents(), r.Took.Round(time.Millisecond), r.EventsPerSecond())
	for _, c := range r.CannotCheck {
		fmt.Fprintf(w, "not checked: %s\n", c)
	}
	for _, d := range r.Differences {
		fmt.Fprintf(w, "DIFFERENCE %s\n", d)
	}
	if len(r.Differences) == 0 {
		fmt.Fprintln(w, "no differences: every fill, order, book, position and balance checked is what the replay derives")
	} else {
		fmt.Fprintf(w, "%d differences\n", len(r.Differences))
	}
}

// Querier is what the audit reads through: a pool or a connection (pgxpool.Pool, pgx.Conn).
type Querier interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// Run audits the database q reaches, as o says, in one read-only repeatable-read transaction.
func Run(ctx context.Context, q Querier, o Options) (*Report, error) {
	start := time.Now()
	tx, err := q.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("audit: could not begin a read-only transaction: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // read-only: nothing to keep
	a := &auditor{tx: tx, opts: o, r: &Report{}, progress: o.Progress, every: o.ProgressEvery, start: start, last: start}
	if a.every <= 0 {
		a.every = 2 * time.Second
	}
	if err := a.run(ctx); err != nil {
		return nil, err
	}
	a.r.Took = time.Since(start)
	slices.SortStableFunc(a.r.Differences, func(x, y Difference) int {
		return strings.Compare(x.Check+x.Market.String(), y.Check+y.Market.String())
	})
	return a.r, nil
}

// auditor is one audit's state.
type auditor struct {
	tx       pgx.Tx
	opts     Options
	r        *Report
	progress *slog.Logger
	every    time.Duration
	start    time.Time
	last     time.Time
	ledger   ledger
	exchange int64 // the exchange's own account, which the fills' fees are paid to (migration 035)
	done     int   // markets audited so far, of total
	total    int
}

func (a *auditor) differ(check string, market uuid.UUID, look string, format string, args ...any) {
	a.r.Differences = append(a.r.Differences, Difference{Check: check, Market: market, What: fmt.Sprintf(format, args...), Look: look})
}

// tick reports progress when it is time to.
func (a *auditor) tick() {
	if a.progress == nil {
		return
	}
	now := time.Now()
	if now.Sub(a.last) < a.every {
		return
	}
	a.last = now
	events := a.r.LogEvents()
	a.progress.Info("audit progress", "markets", a.done, "of", a.total, "events", events,
		"eventsPerSecond", int(float64(events)/now.Sub(a.start).Seconds()), "differences", len(a.r.Differences))
}

func (a *auditor) run(ctx context.Context) error {
	markets, err := a.readMarkets(ctx)
	if err != nil {
		return err
	}
	a.r.Markets = len(markets)
	events := map[uuid.UUID]bool{}
	for _, m := range markets {
		if m.event != uuid.Nil {
			events[m.event] = true
		}
	}
	a.r.Events = len(events)
	a.ledger = newLedger()
	if err := a.tx.QueryRow(ctx, `select id from accounts where name = 'pmx:exchange'`).Scan(&a.exchange); err != nil {
		return fmt.Errorf("audit: reading the exchange's account: %w", err)
	}
	moves, err := a.readMoves(ctx, markets)
	if err != nil {
		return err
	}
	if err := a.readEvents(ctx, markets); err != nil {
		return err
	}
	a.total = len(markets)
	for _, m := range markets {
		if err := a.market(ctx, m, moves); err != nil {
			return err
		}
		a.done++
		a.tick()
	}
	if err := a.events(ctx); err != nil {
		return err
	}
	if err := a.accountFeeds(ctx, markets); err != nil { // accountfeeds.go
		return err
	}
	if a.opts.all() {
		return a.accounts(ctx)
	}
	a.r.CannotCheck = append(a.r.CannotCheck, "accounts' cash: only some markets were audited, and an account's cash is the sum over all of them (audit without --market, --event, --since and --until to check it)")
	return nil
}

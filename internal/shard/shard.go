// Package shard runs the matching of a set of markets: it keeps each market's book in memory,
// executes every order, cancel and lifecycle change of its markets on one goroutine, and commits
// them to Postgres in batches before it answers (group commit).
//
// A batch is the commands queued while the previous batch was being built (at most MaxBatch). The
// shard reserves and matches it in memory, then one round trip writes every effect — netted per
// order, account and position — in two statements (the accounts' last) and commits
// (store.CommitBatch); only then are the callers answered and the books' read snapshots published.
// What its placements reserve from comes from the shard's views of the accounts and holdings,
// checked by the database's own guards at commit (views.go); when the views cannot pay for the
// batch, its transaction first reads them (store.BeginBatch). A named shard's batch also checks
// that the shard still owns its markets (fencing): with the reads when it reads, else in its commit
// (store.Batch.Fence). While a batch commits, the next is matched on the state it leaves
// (batch.go). If a transaction fails, every book it touched, and every book the batch built on it
// touched, is rebuilt from Postgres, so memory never runs ahead of what was committed; a batch that
// only raced another transaction runs once more.
//
// A Set runs several shards in one process, the markets spread across them (set.go). Both carry out
// the exchange contract (package exchange), which their callers speak.
package shard

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/apijson"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// Config configures a shard.
type Config struct {
	// Store is the database: *store.Store, or the scenario tests' memory (storage.go).
	Store Store
	// Name identifies the shard in distributed mode: it then serves only the markets Postgres
	// records as its own, and every commit checks that ownership (owner and epoch) in its own
	// transaction. Empty, as in the standalone exchange, the shard serves every market.
	Name string
	// Holder names the shard as the holder of its allocations of accounts' cash and of its
	// streams of their feeds (docs/architecture.md §11): unique among the shards that share the
	// database. Default: Name, or "standalone" for a standalone shard; a Set names each of its
	// shards after its own name and its slot ("shard-0#1").
	Holder string
	// Spread is how many shards of its process share the accounts' cash: a shard taking cash from
	// an account's wallet takes, besides what it needs, a 1/Spread share of what is left, or less
	// when more holders have a row of the account (store.Acquire). Default: the number of shards
	// of its Set, 1 for a shard alone.
	Spread int
	// Claim, for a standalone shard, is the token of its process's claim on the database
	// (store.Claim.Token): every batch carries it, and fails once another process has claimed the
	// database. Zero, a standalone shard's batches are neither marked nor fenced
	// (store.ClaimStandalone): only tests run one so.
	Claim  int64
	Logger *slog.Logger
	// MaxBatch bounds how many commands share one transaction (default 1024).
	MaxBatch int
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time
	// Metrics registers the shard's metrics, when set.
	Metrics prometheus.Registerer
	// MaxOpenOrders bounds the open orders one account may have in one market (default
	// DefaultMaxOpenOrders): each costs memory in the shard, and a book is no place for more.
	MaxOpenOrders int
	// EventRetention is how long the markets' feed events are kept (default DefaultEventRetention).
	EventRetention time.Duration
	// KeepEvents keeps the feeds' events, of markets and accounts, for ever: the shard deletes none.
	// An audit (pmx audit) needs none of it: the pruning keeps what it needs of the accounts' feeds
	// (the terms of the orders amends moved, order_terms) for ever; it is for clients that page
	// back through the feeds further than the retention (docs/operations.md, "Keeping the log long
	// enough", has the storage each costs).
	KeepEvents bool
	// Feed, when set, is handed every committed batch's events (after the commit, before the
	// answers), for the live feed.
	Feed *feed.Bus
	// NoEventLog records no feed events, of markets or accounts, to measure their cost (pmx dev
	// --no-event-log): the markets' and accounts' sequences stand still (but for settlements,
	// which settle() still numbers) and the live feed is silent. For measuring only.
	NoEventLog bool

	// Set by a Set for each of its shards: owns says which markets the shard serves (nil: all), and
	// noPruning leaves the pruning of old events to another shard.
	owns      func(uuid.UUID) bool
	ownsEvent func(market, event uuid.UUID) bool // owns, for a market of an event
	noPruning bool
}

// DefaultMaxOpenOrders is the default of Config.MaxOpenOrders.
const DefaultMaxOpenOrders = 1000

// Shard owns a set of markets. Its methods are safe for concurrent use.
type Shard struct {
	cfg   Config
	log   *slog.Logger
	cmds  chan *command
	stop  chan struct{}
	done  chan struct{}
	snaps sync.Map // uuid.UUID → *Snapshot, the committed state of each book
	// sweepers are the goroutines that expire GTD orders and fire dead-man switches.
	sweepers sync.WaitGroup
	// incarnation is the process's registration (store.Register) once it has one: a market is
	// loaded only while the shard's name is still registered to it.
	incarnation atomic.Pointer[uuid.UUID]
	// placed counts the placements per market, the load the process reports (orderrate.go).
	placed orderCounts
	// loads counts the markets' loads and handoffs, from 1: a heartbeat's read of the markets the
	// shard owns judges only the markets loaded before it (handoff.go).
	loads atomic.Int64

	// Owned by the loop goroutine.
	conn    BatchConn // the batches' own connection
	markets map[uuid.UUID]*marketState
	accs    [2]accumulator // one for the batch in flight, one for the batch being built
	acc     *accumulator   // the batch being built's
	result  engine.Result
	feed    []feed.Event // reused by each batch's recordEvents
	depth   engine.Depth
	metrics *metrics
	cash    map[int64]int64      // the views of accounts' available cash (views.go)
	used    map[int64]time.Time  // when a committed batch last moved each account's cash (allocations.go)
	risk    map[int64]store.Risk // and of their locked cash and risk limits (risk.go)
	handed  map[uuid.UUID]int64  // the markets handed to another shard, refused without a read, with Shard.loads then (handoff.go)
	// allocated are the accounts whose allocation row of this shard's a batch of it has committed
	// (allocations.go): a batch whose accounts are all here writes them by an update alone.
	allocated map[int64]struct{}
	// forgets counts the times the views were cleared (forget): an acquire aside begun before
	// one is not taken into them (views.go, learnAccounts).
	forgets uint64

	// groups are the order groups with orders resting here, as the last batch that met each left
	// them (groups.go).
	groups map[uuid.UUID]store.GroupState
	// halts are the halts placements and amends are decided under, and haltsKnown whether they
	// are still to be trusted (halts.go).
	halts      records.Halts
	haltsKnown bool
	// exchange is the exchange's own account, which fills' fees are paid to (read with the halts
	// the first time, halts.go); 0 until then.
	exchange int64
}

// marketState is one market as the shard holds it.
type marketState struct {
	id        uuid.UUID
	status    domain.MarketStatus
	book      *engine.Book // nil unless the market is OPEN or CLOSED
	lastOrder int64        // the last order sequence number used
	lastTrade int64        // the last trade sequence number used
	lastPrice int          // last trade's YES price, 0 if none
	epoch     int64        // the ownership epoch it was loaded under (distributed mode)
	loadedAt  int64        // Shard.loads when it was loaded
	inEvent   bool         // an outcome's market of an event: it moves only with the event (eventtransition.go)
	event     *uuid.UUID   // that event (halts.go)
	finished  finishedOrders
	expiries  expiries                         // the resting GTD orders, soonest first
	resting   map[int64]*apijson.Order         // the resting orders by seq, as their last account event left them (accountfeed.go)
	free      map[holding]int64                // the views of the market's holdings: unlocked shares (views.go)
	exposure  map[holding]int64                // each account's position-if-filled per outcome (risk.go); nil unless OPEN or CLOSED
	grouped   map[uuid.UUID]map[int64]struct{} // the resting orders of each order group, by seq (groups.go)
	// groupsKnown: every group in grouped has its state in Shard.groups, so a batch here reads
	// none of them (groups.go).
	groupsKnown bool

	// The feed (events.go): the last number used, and the levels and status it has described.
	eventSeq  int64
	levels    levels
	fedStatus domain.MarketStatus
}

// New starts a shard. Call Stop to drain and stop it.
func New(cfg Config) *Shard {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 1024
	}
	if cfg.MaxOpenOrders <= 0 {
		cfg.MaxOpenOrders = DefaultMaxOpenOrders
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = DefaultEventRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Holder == "" {
		cfg.Holder = cmp.Or(cfg.Name, "standalone")
	}
	cfg.Spread = max(cfg.Spread, 1)
	s := &Shard{
		cfg:     cfg,
		log:     cfg.Logger.With("component", "shard"),
		cmds:    make(chan *command, 4*cfg.MaxBatch),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		markets: map[uuid.UUID]*marketState{},
		groups:  map[uuid.UUID]store.GroupState{},
		metrics: newMetrics(cfg.Metrics),
		cash:    map[int64]int64{},
		used:    map[int64]time.Time{},
		risk:    map[int64]store.Risk{},

		allocated: map[int64]struct{}{},
	}
	s.loads.Store(1)
	s.accs[0].expose, s.accs[1].expose = s.expose, s.expose
	s.acc = &s.accs[0]
	go s.loop()
	s.every(expirySweep, s.sweepExpiries)
	s.every(heartbeatSweep, s.cancelTripped)
	s.every(groupSweep, s.sweepGroups)
	s.every(returnSweep, s.sweepReturns)
	if !cfg.noPruning && !cfg.KeepEvents {
		s.every(eventPruning, s.pruneEvents)
	}
	return s
}

// every runs f every interval, each time with commitTimeout to finish, until the shard stops; Stop
// waits for it.
func (s *Shard) every(interval time.Duration, f func(context.Context)) {
	s.sweepers.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
			f(ctx)
			cancel()
		}
	})
}

// Stop finishes every command already accepted, then stops. Later calls get ErrStopped.
func (s *Shard) Stop() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.sweepers.Wait()
	s.returnAll() // allocations.go
	s.releaseConn()
}

// snapshot returns the committed book of a market the shard has loaded.
func (s *Shard) snapshot(id uuid.UUID) (*exchange.Snapshot, bool) {
	v, ok := s.snaps.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*exchange.Snapshot), true
}

// PlaceMany places orders together: they run in one batch, in order, each as Place runs it and
// answered on its own, so one refused does not refuse the others.
func (s *Shard) PlaceMany(ctx context.Context, rs []exchange.PlaceRequest) []exchange.PlaceResult {
	cmds := make([]*command, len(rs))
	for i, r := range rs {
		cmds[i] = &command{kind: cmdPlace, place: r, market: r.Market}
		s.placed.add(r.Market)
	}
	errs := s.doGroup(ctx, cmds)
	out := make([]exchange.PlaceResult, len(rs))
	for i, c := range cmds {
		if out[i].Err = errs[i]; errs[i] == nil {
			out[i].Placed = c.placed
		}
	}
	return out
}

// Place reserves, matches and commits an order.
func (s *Shard) Place(ctx context.Context, r exchange.PlaceRequest) (records.PlacedOrder, error) {
	c := &command{kind: cmdPlace, place: r, market: r.Market}
	s.placed.add(r.Market)
	if err := s.do(ctx, c); err != nil {
		return records.PlacedOrder{}, err // c may still be running: leave its fields alone
	}
	return c.placed, nil
}

// Cancel cancels one resting order of the account. An order of another account is
// domain.ErrNotYourOrder; one that is no longer resting is domain.OrderNotOpen with its status.
func (s *Shard) Cancel(ctx context.Context, r exchange.CancelRequest) (records.Order, error) {
	c := &command{kind: cmdCancel, market: r.Market, cancel: r}
	err := s.do(ctx, c)
	if errors.Is(err, errFateUnknown) {
		return records.Order{}, s.readFate(ctx, r)
	}
	if err != nil {
		return records.Order{}, err
	}
	return c.orders[0], nil
}

// Amend changes a resting order (engine.Book.Amend) and returns it as it then stands, with the
// trades a crossing price made. An order that is not resting is refused as a cancel of it is.
func (s *Shard) Amend(ctx context.Context, r exchange.AmendRequest) (records.PlacedOrder, error) {
	c := &command{kind: cmdAmend, market: r.Market, amend: r}
	cancel := exchange.CancelRequest{Account: r.Account, Market: r.Market, Seq: r.Seq}
	err := s.do(ctx, c)
	if errors.Is(err, errFateUnknown) {
		return records.PlacedOrder{}, s.readFate(ctx, cancel)
	}
	if err != nil {
		return records.PlacedOrder{}, err
	}
	o, err := s.cfg.Store.OrderBySeq(ctx, r.Market, r.Seq)
	if err != nil {
		s.log.Warn("could not read an amended order", "market", r.Market, "seq", r.Seq, "err", err)
		return records.PlacedOrder{}, exchange.ErrUnavailable
	}
	return records.PlacedOrder{Order: o, Trades: c.placed.Trades}, nil
}

// CancelMany cancels orders together, in one batch, each as Cancel does and answered on its own.
func (s *Shard) CancelMany(ctx context.Context, rs []exchange.CancelRequest) []exchange.CancelResult {
	cmds := make([]*command, len(rs))
	for i, r := range rs {
		cmds[i] = &command{kind: cmdCancel, market: r.Market, cancel: r}
	}
	errs := s.doGroup(ctx, cmds)
	out := make([]exchange.CancelResult, len(rs))
	for i, c := range cmds {
		switch {
		case errors.Is(errs[i], errFateUnknown):
			out[i].Err = s.readFate(ctx, rs[i])
		case errs[i] != nil:
			out[i].Err = errs[i]
		default:
			out[i].Order = c.orders[0]
		}
	}
	return out
}

// CancelAll cancels every resting order of an account in the given markets.
func (s *Shard) CancelAll(ctx context.Context, account int64, markets []uuid.UUID) ([]records.Order, error) {
	c := &command{kind: cmdCancelAll, account: account, markets: markets}
	if err := s.do(ctx, c); err != nil {
		return nil, err
	}
	return c.orders, nil
}

// Transition applies a lifecycle action to a market (see package market), cancelling its resting
// orders when it leaves OPEN and settling it when it resolves or is cancelled.
func (s *Shard) Transition(ctx context.Context, marketID uuid.UUID, action domain.MarketAction) error {
	return s.do(ctx, &command{kind: cmdTransition, market: marketID, action: action})
}

// do queues a command and waits for its answer. Once queued, a command runs even if ctx ends.
func (s *Shard) do(ctx context.Context, c *command) error {
	c.reply = make(chan error, 1)
	if err := s.enqueue(ctx, c); err != nil {
		return err
	}
	return s.wait(ctx, c)
}

// doGroup queues commands to run together, in order, in one batch, and waits for each answer.
func (s *Shard) doGroup(ctx context.Context, cmds []*command) []error {
	errs := make([]error, len(cmds))
	for _, c := range cmds {
		c.reply = make(chan error, 1)
	}
	if err := s.enqueue(ctx, &command{kind: cmdGroup, group: cmds}); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, c := range cmds {
		errs[i] = s.wait(ctx, c)
	}
	return errs
}

// enqueue hands a command to the loop.
func (s *Shard) enqueue(ctx context.Context, c *command) error {
	select {
	case <-s.stop:
		return exchange.ErrStopped
	default:
	}
	select {
	case s.cmds <- c:
		return nil
	case <-s.stop:
		return exchange.ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait waits for the answer to a queued command.
func (s *Shard) wait(ctx context.Context, c *command) error {
	select {
	case err := <-c.reply:
		return err
	case <-s.done:
		// The loop has stopped; a command it did not reach never ran.
		select {
		case err := <-c.reply:
			return err
		default:
			return exchange.ErrStopped
		}
	case <-ctx.Done():
		// The caller gave up, but the command runs: say what became of it.
		go s.logAbandoned(c)
		return ctx.Err()
	}
}

// logAbandoned waits for the answer to a command whose caller stopped waiting for it, and logs
// what became of it, so that a placement committed after its client went away is on record.
func (s *Shard) logAbandoned(c *command) {
	var err error
	select {
	case err = <-c.reply:
	case <-s.done:
		select {
		case err = <-c.reply:
		default:
			err = exchange.ErrStopped
		}
	}
	log := s.log.With("kind", c.kind.String(), "market", c.market)
	switch {
	case err != nil:
		log.Info("a command whose caller gave up waiting was not carried out", "err", err)
	case c.kind == cmdPlace:
		log.Info("an order whose caller gave up waiting was placed", "order", c.placed.ID, "account", c.place.Account,
			"status", c.placed.Status.String(), "filled", c.placed.FilledQuantity)
	default:
		log.Info("a command whose caller gave up waiting was carried out", "orders", len(c.orders))
	}
}

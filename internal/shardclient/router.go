package shardclient

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

// A Router carries out the exchange contract for a front (and, with Lifecycle, the operator).
var _ exchange.Exchange = (*Router)(nil)

// Router is the front API's Exchange in distributed mode: it sends each market's writes and book
// reads to the shard that owns the market, as Postgres records it. Owners are cached briefly; a
// shard that answers "not owner" (or cannot be reached) sends the router back to Postgres for one
// retry, and a market that keeps moving — a planned handoff — is followed for at most HandoffWait.
// Any number of front replicas route alike, because the owner comes from Postgres.
type Router struct {
	Store *store.Store
	// Token authenticates the router to the shards' internal API.
	Token string
	// HTTP reaches the shards (default: one client with a 10s timeout on Transport, which keeps up
	// to 64 idle connections to each shard; Go's default transport keeps 2, so a busy front would
	// open and close a connection for most requests).
	HTTP *http.Client
	// DialTimeout bounds how long the default client waits for a shard to accept a connection
	// (default DefaultDialTimeout); a client given in HTTP is used as it is.
	DialTimeout time.Duration
	// OwnerTTL bounds how long an owner is trusted without asking Postgres (default 1s).
	OwnerTTL time.Duration
	// HandoffWait bounds how long a request follows its market from shard to shard (default
	// DefaultHandoffWait): while the owner Postgres names keeps changing, or the shard named says it
	// has just handed the market over, a request its owner refused with nothing done is sent on
	// rather than answered 503 (docs/architecture.md §6, "The planned handoff"). Today's one retry
	// is always made.
	HandoffWait time.Duration
	// Lifecycle is set in the operator, the one caller whose Transition is carried out (by the
	// market's owner). A front's answers exchange.ErrManagedByOperator: Market resources are the one way to
	// manage markets in distributed mode.
	Lifecycle bool
	// Logger is where the router reports a shard it shares no protocol version with (default
	// slog.Default()); Metrics is where it counts them (none when nil).
	Logger  *slog.Logger
	Metrics prometheus.Registerer

	mu     sync.Mutex
	routes map[uuid.UUID]route
	hcOnce sync.Once
	hc     *http.Client
	log    *slog.Logger
	// refused counts the calls refused for their protocol version.
	refused prometheus.Counter
}

// client returns the HTTP client that reaches the shards.
func (r *Router) client() *http.Client {
	r.hcOnce.Do(func() {
		r.log = r.Logger
		if r.log == nil {
			r.log = slog.Default()
		}
		r.refused = shardproto.NewRefusedCounter(r.Metrics)
		r.hc = r.HTTP
		if r.hc == nil {
			r.hc = &http.Client{Transport: Transport(r.DialTimeout), Timeout: 10 * time.Second}
		}
	})
	return r.hc
}

// DefaultDialTimeout is Router.DialTimeout's default. Within a cluster a shard accepts a
// connection in milliseconds; one that does not in this time is most likely gone, its address
// left behind (a stopped pod's IP, which drops what is sent to it rather than refusing it). The
// request was never sent, so the router may send it on to the market's owner as Postgres names it
// — rather than wait out the client's 10 s and answer a write as outcome unknown.
const DefaultDialTimeout = 2 * time.Second

// Transport is how every caller reaches the shards: up to 64 idle connections kept to each shard,
// and a connection not accepted within dialTimeout (DefaultDialTimeout when 0) given up.
func Transport(dialTimeout time.Duration) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	tr.MaxIdleConns = 0 // no limit over all shards
	tr.DialContext = connectWithin(cmp.Or(dialTimeout, DefaultDialTimeout))
	return tr
}

// connectWithin dials giving each address timeout to accept the connection. The timeout bounds the
// connection alone, not the lookup of a name before it: a cluster's DNS can take seconds to answer
// now and then (a lost UDP packet waits out the resolver's 5 s), a wait that is not a shard gone.
func connectWithin(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, &net.OpError{Op: "dial", Net: network, Err: err}
		}
		ips := []string{host}
		if net.ParseIP(host) == nil {
			if ips, err = net.DefaultResolver.LookupHost(ctx, host); err != nil {
				return nil, &net.OpError{Op: "dial", Net: network, Err: err}
			}
		}
		for _, ip := range ips {
			c, cancel := context.WithTimeout(ctx, timeout)
			var conn net.Conn
			conn, err = d.DialContext(c, network, net.JoinHostPort(ip, port))
			cancel()
			if err == nil {
				return conn, nil
			}
		}
		return nil, err
	}
}

// route is where a market's requests go, as last read.
type route struct {
	status domain.MarketStatus
	shard  string
	epoch  int64
	client *shardClient // nil unless OPEN and owned by a live shard
	at     time.Time
}

func (r *Router) ttl() time.Duration {
	if r.OwnerTTL > 0 {
		return r.OwnerTTL
	}
	return time.Second
}

// lookup returns a market's route, from the cache unless it is stale or fresh is set.
func (r *Router) lookup(ctx context.Context, id uuid.UUID, fresh bool) (route, error) {
	r.mu.Lock()
	if r.routes == nil {
		r.routes = map[uuid.UUID]route{}
	}
	rt, ok := r.routes[id]
	r.mu.Unlock()
	if ok && !fresh && time.Since(rt.at) < r.ttl() {
		return rt, nil
	}
	o, err := r.Store.Owner(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return rt, domain.ErrUnknownMarket
	}
	if err != nil {
		return rt, err
	}
	rt = route{status: o.Status, shard: o.Shard, epoch: o.Epoch, at: time.Now()}
	if o.Status == domain.MarketOpen && o.Shard != "" {
		addr, err := r.Store.ShardAddress(ctx, o.Shard)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return rt, err
		}
		if addr != "" {
			rt.client = &shardClient{base: "http://" + addr, token: r.Token, http: r.client()}
		}
	}
	r.mu.Lock()
	r.routes[id] = rt
	r.mu.Unlock()
	return rt, nil
}

// onOwner runs call against the market's owner, re-routing when the shard says it is not the
// owner (or cannot be reached, or could not commit: nothing was done). A market with no live owner
// yet is unavailable; one that is not OPEN gets closed. Writes trust a cached owner, because the
// shard's commit checks ownership itself; fresh asks Postgres first, for reads that the owner must
// answer. After the one retry every refusal has always had, the request goes on only while it
// follows a move (follow), for at most HandoffWait.
func (r *Router) onOwner(ctx context.Context, id uuid.UUID, fresh bool, closed error, call func(route) error) error {
	rt, err := r.lookup(ctx, id, fresh)
	if err == nil && !fresh && rt.status != domain.MarketOpen {
		rt, err = r.lookup(ctx, id, true) // the cache may not have seen the market reopen
	}
	var until time.Time // the end of the wait, set at the first refusal
	for attempt := 0; ; attempt++ {
		if err != nil {
			return err
		}
		if rt.status != domain.MarketOpen {
			return closed
		}
		if rt.client == nil {
			err = exchange.ErrUnavailable // being scheduled onto a shard
		} else {
			err = r.noteVersion(call(rt))
		}
		// A shard that shares no protocol version with this front will not share one a moment
		// later: the error goes back whole, for the log.
		if ve := (*shardproto.VersionError)(nil); errors.As(err, &ve) ||
			!errors.Is(err, exchange.ErrNotOwner) && !errors.Is(err, exchange.ErrUnavailable) && !errors.Is(err, exchange.ErrStopped) {
			return err
		}
		if until.IsZero() {
			until = time.Now().Add(r.handoffWait())
		}
		tried, handed := rt, errors.Is(err, exchange.ErrHandedOver)
		if rt, err = r.lookup(ctx, id, true); err != nil {
			return err
		}
		wait, ok := follow(attempt, tried, rt, handed, time.Until(until))
		if !ok {
			return exchange.ErrUnavailable
		}
		if wait > 0 {
			if !sleep(ctx, wait) {
				return exchange.ErrUnavailable
			}
			rt, err = r.lookup(ctx, id, true)
		}
	}
}

// DefaultHandoffWait is Router.HandoffWait's default: a planned handoff takes milliseconds, and
// a request that spans two or three in a row still goes through.
const DefaultHandoffWait = 2 * time.Second

// handoffPause is how long a request waits before it looks again at an owner that refused it as
// handed over while Postgres still names it: the market came back to it, and it has not been told
// yet (its next heartbeat tells it).
const handoffPause = 20 * time.Millisecond

func (r *Router) handoffWait() time.Duration {
	if r.HandoffWait > 0 {
		return r.HandoffWait
	}
	return DefaultHandoffWait
}

// follow decides what follows a refusal with nothing done — not owner, not reachable, not
// committed, stopping — of a request's attempt (0 the first) on the owner it tried, now that
// Postgres names next, with left of the request's wait left: another try at once, one after wait,
// or none (ok false: 503 unavailable, as before the handoff).
//
// The first refusal is always tried once more, at once: the owner may have just moved. After
// that, only within the wait: at once when the market moved since the last try (another owner, or
// the same under another epoch) to a shard that is live, and after a pause when the shard tried
// said it handed the market over and Postgres still names it. An owner that refuses without
// moving — a shard killed or stopping, the database failing over — is not waited for: that is an
// unplanned move's 503, which the client retries (docs/architecture.md §7).
func follow(attempt int, tried, next route, handedOver bool, left time.Duration) (wait time.Duration, ok bool) {
	moved := next.shard != tried.shard || next.epoch != tried.epoch
	switch {
	case attempt == 0:
		return 0, true
	case left <= 0:
		return 0, false
	case moved && next.client != nil:
		return 0, true
	case handedOver && !moved:
		return min(handoffPause, left), true
	}
	return 0, false
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Place sends a placement to the market's shard. The order it returns has its sequence number
// and account, as the shard's own Place does.
func (r *Router) Place(ctx context.Context, req exchange.PlaceRequest) (records.PlacedOrder, error) {
	var placed shardproto.PlacedV1
	err := r.onOwner(ctx, req.Market, false, domain.ErrMarketNotOpen, func(rt route) error {
		placed = shardproto.PlacedV1{}
		return rt.client.call(ctx, http.MethodPost, shardproto.PathPlace, shardproto.PlaceToV1(req), &placed)
	})
	if err != nil {
		return records.PlacedOrder{}, err
	}
	return placed.Placed(), nil
}

// Cancel sends a cancel to the market's shard. A market that is not OPEN has no shard and no
// resting orders: the order is read from Postgres to refuse the cancel as the shard would.
func (r *Router) Cancel(ctx context.Context, req exchange.CancelRequest) (records.Order, error) {
	var o shardproto.OrderV1
	err := r.onOwner(ctx, req.Market, false, errMarketNotOpen, func(rt route) error {
		return rt.client.call(ctx, http.MethodPost, shardproto.PathCancel, shardproto.CancelToV1(req), &o)
	})
	if errors.Is(err, errMarketNotOpen) {
		return records.Order{}, r.refuseStored(ctx, req.Account, req.Market, req.Seq)
	}
	if err != nil {
		return records.Order{}, err
	}
	return o.Order(), nil
}

// refuseStored refuses a cancel (or an amend), by account, of order seq of a market no shard holds,
// reading the order from Postgres to refuse it as a shard would (exchange.RefuseCancel). An error
// of the read itself is returned as it is.
func (r *Router) refuseStored(ctx context.Context, account int64, market uuid.UUID, seq int64) error {
	o, err := r.Store.OrderBySeq(ctx, market, seq)
	if errors.Is(err, store.ErrNotFound) {
		return exchange.RefuseCancel(account, nil)
	}
	if err != nil {
		return fmt.Errorf("while reading the order to cancel: %w", err)
	}
	return exchange.RefuseCancel(account, &o)
}

// Amend sends an amend to the market's shard; a market that is not OPEN has no resting orders,
// and the amend is refused as a cancel would be.
func (r *Router) Amend(ctx context.Context, req exchange.AmendRequest) (records.PlacedOrder, error) {
	var amended shardproto.PlacedV1
	err := r.onOwner(ctx, req.Market, false, errMarketNotOpen, func(rt route) error {
		amended = shardproto.PlacedV1{}
		return rt.client.call(ctx, http.MethodPost, shardproto.PathAmend, shardproto.AmendToV1(req), &amended)
	})
	if errors.Is(err, errMarketNotOpen) {
		return records.PlacedOrder{}, r.refuseStored(ctx, req.Account, req.Market, req.Seq)
	}
	if err != nil {
		return records.PlacedOrder{}, err
	}
	return amended.Placed(), nil
}

// byMarket groups the indexes of requests by market, markets in order of first appearance.
func byMarket(n int, market func(int) uuid.UUID) ([]uuid.UUID, map[uuid.UUID][]int) {
	var order []uuid.UUID
	groups := map[uuid.UUID][]int{}
	for i := range n {
		id := market(i)
		if _, ok := groups[id]; !ok {
			order = append(order, id)
		}
		groups[id] = append(groups[id], i)
	}
	return order, groups
}

// PlaceMany sends each market's placements, in order, to its shard in one call (they run there
// in one batch), the markets at once.
func (r *Router) PlaceMany(ctx context.Context, reqs []exchange.PlaceRequest) []exchange.PlaceResult {
	out := make([]exchange.PlaceResult, len(reqs))
	markets, groups := byMarket(len(reqs), func(i int) uuid.UUID { return reqs[i].Market })
	var wg sync.WaitGroup
	for _, id := range markets {
		idx := groups[id]
		wg.Go(func() {
			in := make([]shardproto.PlaceV1, len(idx))
			for j, i := range idx {
				in[j] = shardproto.PlaceToV1(reqs[i])
			}
			var answers []shardproto.PlaceResultV1
			err := r.onOwner(ctx, id, false, domain.ErrMarketNotOpen, func(rt route) error {
				answers = nil
				return rt.client.call(ctx, http.MethodPost, shardproto.PathPlaceMany, in, &answers)
			})
			for j, i := range idx {
				switch {
				case err != nil:
					out[i].Err = err
				case j >= len(answers):
					out[i].Err = errors.New("the shard answered fewer placements than it was sent")
				case answers[j].Error != nil:
					out[i].Err = answers[j].Error.Err(http.StatusConflict)
				case answers[j].Placed != nil:
					out[i].Placed = answers[j].Placed.Placed()
				}
			}
		})
	}
	wg.Wait()
	return out
}

// CancelMany sends each market's cancels to its shard in one call, the markets at once. A
// market that is not OPEN has no shard: its cancels are refused from Postgres, as Cancel does.
func (r *Router) CancelMany(ctx context.Context, reqs []exchange.CancelRequest) []exchange.CancelResult {
	out := make([]exchange.CancelResult, len(reqs))
	markets, groups := byMarket(len(reqs), func(i int) uuid.UUID { return reqs[i].Market })
	var wg sync.WaitGroup
	for _, id := range markets {
		idx := groups[id]
		wg.Go(func() {
			in := make([]shardproto.CancelV1, len(idx))
			for j, i := range idx {
				in[j] = shardproto.CancelToV1(reqs[i])
			}
			var answers []shardproto.CancelResultV1
			err := r.onOwner(ctx, id, false, errMarketNotOpen, func(rt route) error {
				answers = nil
				return rt.client.call(ctx, http.MethodPost, shardproto.PathCancelMany, in, &answers)
			})
			for j, i := range idx {
				switch {
				case errors.Is(err, errMarketNotOpen):
					out[i].Err = r.refuseStored(ctx, reqs[i].Account, reqs[i].Market, reqs[i].Seq)
				case err != nil:
					out[i].Err = err
				case j >= len(answers):
					out[i].Err = errors.New("the shard answered fewer cancels than it was sent")
				case answers[j].Error != nil:
					out[i].Err = answers[j].Error.Err(http.StatusConflict)
				case answers[j].Order != nil:
					out[i].Order = answers[j].Order.Order()
				}
			}
		})
	}
	wg.Wait()
	return out
}

// CancelAll fans out to the shards owning the given markets, at once, and merges their answers
// in the order of markets.
func (r *Router) CancelAll(ctx context.Context, account int64, markets []uuid.UUID) ([]records.Order, error) {
	perMarket := make([][]records.Order, len(markets))
	errs := make([]error, len(markets))
	var wg sync.WaitGroup
	for i, id := range markets {
		wg.Go(func() {
			errs[i] = r.onOwner(ctx, id, false, nil, func(rt route) error {
				var answer []shardproto.OrderV1
				err := rt.client.call(ctx, http.MethodPost, shardproto.PathCancelAll, shardproto.CancelAllV1{Account: account, Markets: []uuid.UUID{id}}, &answer)
				perMarket[i] = shardproto.OrdersOf(answer)
				return err
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return slices.Concat(perMarket...), nil
}

// OrderBook reads the book from the market's shard; a market that is not OPEN has an empty book
// and its last trade price, read from Postgres.
func (r *Router) OrderBook(ctx context.Context, id uuid.UUID) (*exchange.Snapshot, error) {
	var w shardproto.SnapshotV1
	err := r.onOwner(ctx, id, true, errMarketNotOpen, func(rt route) error {
		w = shardproto.SnapshotV1{}
		return rt.client.call(ctx, http.MethodGet, fmt.Sprintf("%s?market=%s&epoch=%d", shardproto.PathBook, id, rt.epoch), nil, &w)
	})
	if errors.Is(err, errMarketNotOpen) {
		m, err := r.Store.Market(ctx, id)
		if err != nil {
			return nil, err
		}
		return closedBook(m.Status, m.EventSeq, m.LastTradePrice), nil
	}
	if err != nil {
		return nil, err
	}
	snap := w.Snapshot()
	return &snap, nil
}

// errMarketNotOpen is what onOwner answers for a market that is not OPEN, for the caller to
// answer from Postgres.
var errMarketNotOpen = errors.New("market not open")

// noteVersion reports a call refused for its protocol version, loudly: during a rollout that
// mixed releases which share no version, every call to some shard fails so until it ends.
func (r *Router) noteVersion(err error) error {
	if ve := (*shardproto.VersionError)(nil); errors.As(err, &ve) {
		r.client() // sets up the log and the counter
		r.refused.Inc()
		r.log.Error("a shard and this process share no internal protocol version; answering unavailable", "err", ve)
	}
	return err
}

// ManagedByOperator reports that a front's markets and events are the operator's
// (exchange.OperatorManaged): only the operator's Router changes them.
func (r *Router) ManagedByOperator() bool { return !r.Lifecycle }

// Transition, in the operator (Lifecycle), has the market's owner carry out a lifecycle change:
// it cancels the resting orders and settles with the code pmx dev runs, and the market keeps its
// owner and epoch. A market that no live shard owns is exchange.ErrUnavailable: the operator
// schedules it onto one and tries again. A front answers exchange.ErrManagedByOperator.
func (r *Router) Transition(ctx context.Context, id uuid.UUID, action domain.MarketAction) error {
	if !r.Lifecycle {
		return exchange.ErrManagedByOperator
	}
	hc := r.client()
	for attempt := 0; ; attempt++ {
		o, err := r.Store.Owner(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return domain.ErrUnknownMarket
		}
		if err != nil {
			return err
		}
		addr := ""
		if o.Shard != "" {
			if addr, err = r.Store.ShardAddress(ctx, o.Shard); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if addr == "" {
			return fmt.Errorf("market %s has no live owner: %w", id, exchange.ErrUnavailable)
		}
		c := &shardClient{base: "http://" + addr, token: r.Token, http: hc}
		err = r.noteVersion(c.call(ctx, http.MethodPost, shardproto.PathTransition, shardproto.TransitionToV1(id, action), nil))
		// A shard that lost the market since (or never loaded it, being a moment behind Postgres)
		// says so; Postgres names the owner again, once.
		if !errors.Is(err, exchange.ErrNotOwner) || attempt == 1 {
			return err
		}
	}
}

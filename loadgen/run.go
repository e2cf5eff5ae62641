package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
)

const (
	apiPrefix   = "/api/v1"
	adminPrefix = "/admin/v1"

	// setupWorkers bounds the concurrent account creations.
	setupWorkers = 8
)

// market is one market the bots trade, with its read paths prepared.
type market struct {
	id         string
	bookPath   string
	tradesPath string
}

func newMarket(id string) market {
	q := url.QueryEscape(id)
	return market{
		id:         id,
		bookPath:   apiPrefix + "/market/order-book?marketId=" + q,
		tradesPath: apiPrefix + "/market/trades?marketId=" + q,
	}
}

// runner is the state shared by the bots of one run.
type runner struct {
	cfg         Config
	c           *client
	markets     []market
	marketIndex map[string]int
	mids        *mids

	start    time.Time
	deadline time.Time // zero: none

	attempted  atomic.Int64 // placements sent or about to be
	stopOnce   sync.Once
	stopCh     chan struct{}
	stopReason string // set once, under stopOnce
}

func (r *runner) stop(reason string) {
	r.stopOnce.Do(func() {
		r.stopReason = reason
		close(r.stopCh)
	})
}

// stopped tells whether the run is over: interrupted, stopped or past its deadline.
func (r *runner) stopped(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	select {
	case <-r.stopCh:
		return true
	default:
	}
	return !r.deadline.IsZero() && !time.Now().Before(r.deadline)
}

// reserve takes one placement from the --orders budget; false when it is spent.
func (r *runner) reserve() bool {
	if r.cfg.Orders <= 0 {
		return true
	}
	n := r.attempted.Add(1)
	if n >= r.cfg.Orders {
		r.stop("orders")
	}
	return n <= r.cfg.Orders
}

// Run creates one account per bot through the admin API, picks the OPEN markets, lets the bots
// trade until the duration has passed, the order budget is spent or ctx is cancelled, and returns
// the report. A cancelled ctx during the measured run is not an error: the report covers what was
// done and says it was interrupted. Progress lines go to progress once a second (nil: none).
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := newClient(cfg.URL, cfg.Bots, cfg.RequestTimeout)
	defer c.close()

	setupStart := time.Now()
	keys, err := createAccounts(ctx, c, cfg)
	if err != nil {
		return nil, err
	}
	markets, initial, err := loadMarkets(ctx, c, "Bearer "+keys[0], cfg.Markets)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg:         cfg,
		c:           c,
		markets:     markets,
		marketIndex: make(map[string]int, len(markets)),
		mids:        newMids(initial),
		stopCh:      make(chan struct{}),
	}
	for i, m := range markets {
		r.marketIndex[m.id] = i
	}
	rep := &Report{
		URL:     cfg.URL,
		Bots:    cfg.Bots,
		Markets: len(markets),
		Mode:    "closed",
		Seed:    cfg.Seed,
		Setup:   SetupStats{Accounts: len(keys), Seconds: time.Since(setupStart).Seconds()},
	}
	if cfg.Rate > 0 {
		rep.Mode, rep.TargetRate = "open", cfg.Rate
	}

	bots := make([]*bot, cfg.Bots)
	recs := make([]*recorder, cfg.Bots)
	for i := range bots {
		recs[i] = newRecorder()
		bots[i] = &bot{
			r:     r,
			idx:   i,
			auth:  "Bearer " + keys[i],
			gen:   newGenerator(cfg.Seed, uint64(i)+1, r.mids),
			state: newBotState(r.marketIndex),
			rec:   recs[i],
		}
	}

	r.start = time.Now()
	rep.StartedAt = r.start
	if cfg.Duration > 0 {
		r.deadline = r.start.Add(cfg.Duration)
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if progress != nil {
		progressWG.Go(func() { reportProgress(progress, recs, r.start, progressDone) })
	}
	var wg sync.WaitGroup
	for _, b := range bots {
		wg.Go(func() { b.run(ctx) })
	}
	wg.Wait()
	end := time.Now()
	close(progressDone)
	progressWG.Wait()

	rep.Seconds = end.Sub(r.start).Seconds()
	r.stop("duration") // no-op when already stopped by the order budget
	rep.StopReason = r.stopReason
	if ctx.Err() != nil {
		rep.StopReason, rep.Interrupted = "interrupted", true
	}
	rep.build(recs)
	return rep, nil
}

// newRunID returns a short id that makes this run's account names unique.
func newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(time.Now().Unix(), 36) + hex.EncodeToString(b[:])
}

// createAccounts creates one account per bot and returns their API keys.
func createAccounts(ctx context.Context, c *client, cfg Config) ([]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runID := newRunID()
	auth := "Bearer " + cfg.AdminToken
	keys := make([]string, cfg.Bots)
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(setupWorkers, cfg.Bots) {
		wg.Go(func() {
			var buf bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Bots || ctx.Err() != nil {
					return
				}
				key, err := createAccount(ctx, c, auth, fmt.Sprintf("loadgen-%s-%d", runID, i+1), &buf)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					cancel()
					return
				}
				keys[i] = key
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return keys, nil
}

func createAccount(ctx context.Context, c *client, auth, name string, buf *bytes.Buffer) (string, error) {
	res := c.do(ctx, "POST", adminPrefix+"/accounts", auth, appendObject1(nil, "name", name), buf)
	switch {
	case res.transport && ctx.Err() != nil:
		return "", ctx.Err()
	case res.transport:
		return "", fmt.Errorf("cannot reach pmx at %s: %w", c.base, res.err)
	case res.status == 401 || res.status == 403:
		return "", fmt.Errorf("the admin token was refused by %s (HTTP %d)", c.base, res.status)
	case res.status == 404:
		return "", fmt.Errorf("no admin API at %s%s (HTTP 404): is this a pmx server?", c.base, adminPrefix)
	case !res.ok():
		return "", res.describe("creating account " + name)
	}
	var r struct {
		APIKey string `json:"apiKey"`
	}
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil || r.APIKey == "" {
		return "", fmt.Errorf("creating account %s: the response carries no apiKey", name)
	}
	return r.APIKey, nil
}

// loadMarkets lists the OPEN markets (at most limit of them, newest first, when limit > 0) and
// a starting mid for each, taken from its order book.
func loadMarkets(ctx context.Context, c *client, auth string, limit int) ([]market, []int, error) {
	var buf bytes.Buffer
	res := c.do(ctx, "GET", apiPrefix+"/markets?status=OPEN", auth, nil, &buf)
	if res.transport && ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if !res.ok() {
		return nil, nil, res.describe("listing the open markets")
	}
	var r struct {
		Markets []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"markets"`
	}
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		return nil, nil, fmt.Errorf("listing the open markets: %w", err)
	}
	var markets []market
	for _, m := range r.Markets {
		if m.ID != "" && m.Status == "OPEN" && (limit <= 0 || len(markets) < limit) {
			markets = append(markets, newMarket(m.ID))
		}
	}
	if len(markets) == 0 {
		return nil, nil, fmt.Errorf("no OPEN market on %s: create one first", c.base)
	}
	initial := make([]int, len(markets))
	for i, m := range markets {
		initial[i] = initialMid(ctx, c, auth, m, &buf)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	return markets, initial, nil
}

// bookAnswer is what a bot reads of GET /market/orderbook: the YES view's best prices.
type bookAnswer struct {
	Yes struct {
		Bids []struct {
			Price int `json:"price"`
		} `json:"bids"`
		Asks []struct {
			Price int `json:"price"`
		} `json:"asks"`
		LastTradePrice *int `json:"lastTradePrice"`
	} `json:"orderBookYes"`
}

// initialMid estimates a market's YES mid from its order book: the middle of the best bid and
// ask, else the last trade, else next to the one side there is, else 50.
func initialMid(ctx context.Context, c *client, auth string, m market, buf *bytes.Buffer) int {
	res := c.do(ctx, "GET", m.bookPath, auth, nil, buf)
	if !res.ok() {
		return 50
	}
	var ob bookAnswer
	if json.Unmarshal(buf.Bytes(), &ob) != nil {
		return 50
	}
	y := &ob.Yes
	switch {
	case len(y.Bids) > 0 && len(y.Asks) > 0:
		return (y.Bids[0].Price + y.Asks[0].Price) / 2
	case y.LastTradePrice != nil:
		return *y.LastTradePrice
	case len(y.Bids) > 0:
		return y.Bids[0].Price + 1
	case len(y.Asks) > 0:
		return y.Asks[0].Price - 1
	}
	return 50
}

// bot is one trading account's loop.
type bot struct {
	r     *runner
	idx   int
	auth  string
	gen   *generator
	state *botState
	rec   *recorder
	buf   bytes.Buffer
}

// run steps until the run is over. Closed loop: each request is sent as soon as the previous one
// is answered, and timed from its send. Open loop: requests are due on a fixed schedule (the
// bots' schedules interleaved) and timed from when they were due, so a stalled server is charged
// for the requests that queue behind a slow one.
func (b *bot) run(ctx context.Context) {
	r := b.r
	var interval time.Duration
	var due time.Time
	var timer *time.Timer
	if r.cfg.Rate > 0 {
		due, interval = openLoopSchedule(r.cfg.Rate, r.cfg.Bots, b.idx, r.start)
		timer = time.NewTimer(time.Hour)
		defer timer.Stop()
	}
	for !r.stopped(ctx) {
		start := time.Now()
		if timer != nil {
			if !r.deadline.IsZero() && !due.Before(r.deadline) {
				return
			}
			if d := due.Sub(start); d > 0 {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-r.stopCh:
					return
				case <-timer.C:
				}
			}
			start, due = due, due.Add(interval)
		}
		s := b.gen.next(b.state)
		if s.kind == stepPlace && !r.reserve() {
			return
		}
		b.exec(ctx, s, start)
	}
}

// openLoopSchedule returns when bot idx of bots is first due and its interval, for rate order
// placements per second in all. Placements are placePct % of the steps, so the bots together
// take rate*100/placePct steps per second; their schedules are interleaved evenly.
func openLoopSchedule(rate float64, bots, idx int, start time.Time) (first time.Time, interval time.Duration) {
	stepsPerSec := rate * 100 / placePct
	interval = max(1, time.Duration(float64(bots)/stepsPerSec*float64(time.Second)))
	return start.Add(time.Duration(float64(interval) * float64(idx) / float64(bots))), interval
}

// exec sends one step's request, applies its answer to the bot's state and records it.
func (b *bot) exec(ctx context.Context, s step, start time.Time) {
	r := b.r
	var res result
	switch s.kind {
	case stepPlace:
		o := s.order
		res = r.c.do(ctx, "POST", apiPrefix+"/order", b.auth, appendOrderBody(make([]byte, 0, 128), r.markets[o.market].id, o), &b.buf)
		switch {
		case res.ok():
			var resp orderResp
			if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
				res.code = "bad_response"
				b.state.placeUnknown(o)
				break
			}
			b.state.placed(o, &resp)
			b.rec.placed(&resp)
		case res.rejected():
			b.state.placeRejected(o, res.code)
		default:
			b.state.placeUnknown(o)
		}

	case stepCancel:
		oo := b.state.takeOpen(s.cancel)
		res = r.c.do(ctx, "POST", apiPrefix+"/cancel-order", b.auth, appendObject1(make([]byte, 0, 64), "orderId", oo.id), &b.buf)
		if res.ok() {
			var resp orderResp
			if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
				res.code = "bad_response"
				break
			}
			b.state.cancelled(oo, &resp)
		}

	case stepCancelAll:
		res = r.c.do(ctx, "POST", apiPrefix+"/cancel-everything", b.auth, nil, &b.buf)
		if res.ok() {
			var resp []orderResp
			if data := bytes.TrimSpace(b.buf.Bytes()); len(data) > 0 && json.Unmarshal(data, &resp) != nil {
				res.code = "bad_response"
				break
			}
			b.state.cancelledAll(resp)
		}

	case stepBook:
		res = r.c.do(ctx, "GET", r.markets[s.market].bookPath, b.auth, nil, &b.buf)

	case stepTrades:
		res = r.c.do(ctx, "GET", r.markets[s.market].tradesPath, b.auth, nil, &b.buf)

	case stepPositions:
		res = r.c.do(ctx, "GET", apiPrefix+"/positions", b.auth, nil, &b.buf)
		if res.ok() {
			var resp positionsResp
			if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
				res.code = "bad_response"
				break
			}
			b.state.resync(resp.Positions)
		}
	}
	if res.transport && ctx.Err() != nil {
		return // aborted by the interrupt: neither a failure nor a latency
	}
	b.rec.record(s.kind, start, &res)
}

// reportProgress writes a progress line once a second until done is closed: on a terminal one
// line rewritten in place, otherwise one line each time.
func reportProgress(w io.Writer, recs []*recorder, start time.Time, done <-chan struct{}) {
	tty := isTerminal(w)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	scratch := newHist()
	var lastPlaced int64
	lastAt := start
	wrote := false
	for {
		select {
		case <-done:
			if tty && wrote {
				fmt.Fprintln(w)
			}
			return
		case now := <-t.C:
			s := takeSnapshot(recs, scratch)
			rate := 0.0
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				rate = float64(s.placed-lastPlaced) / dt
			}
			lastPlaced, lastAt = s.placed, now
			p99 := "-"
			if s.p99 > 0 {
				p99 = FormatLatency(s.p99)
			}
			line := fmt.Sprintf("%6.0fs  orders %s  %s orders/s  p99 %s  failed %s  rejected %s",
				now.Sub(start).Seconds(), FormatInt(s.placed), FormatRate(rate), p99, FormatInt(s.failed), FormatInt(s.rejected))
			if tty {
				fmt.Fprintf(w, "\r%s\x1b[K", line)
			} else {
				fmt.Fprintln(w, line)
			}
			wrote = true
		}
	}
}

// isTerminal tells whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

package loadgen

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	sdk "github.com/pmx-dev/pmx/client"
)

const (
	apiPrefix   = "/api/v1"
	adminPrefix = "/admin/v1"

	// setupWorkers bounds the concurrent account creations.
	setupWorkers = 8
)

// market is one market the bots trade: its id as the request bodies and the SDK take it.
type market struct {
	id   string
	uuid uuid.UUID
}

func newMarket(id uuid.UUID) market { return market{id: id.String(), uuid: id} }

// runner is the state shared by the bots of one run.
type runner struct {
	cfg         Config
	mix         mixSpec
	markets     []market
	marketIndex map[string]int
	mids        *mids

	start    time.Time
	measured time.Time // when the measured run begins: start, or start + Warmup
	deadline time.Time // zero: none
	pacer    *pacer    // open loop: releases the bots on their schedule

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

// reserve takes n placements from the --orders budget and returns how many it got: n, or fewer
// (none) when the budget is (all) spent; a batch then sends only those.
func (r *runner) reserve(n int) int {
	if r.cfg.Orders <= 0 {
		return n
	}
	after := r.attempted.Add(int64(n))
	if after >= r.cfg.Orders {
		r.stop("orders")
	}
	return int(max(0, min(int64(n), r.cfg.Orders-(after-int64(n)))))
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
	c, err := newClient(cfg.URL, cfg.Bots, cfg.RequestTimeout)
	if err != nil {
		return nil, err
	}
	defer c.close()

	setupStart := time.Now()
	keys, err := createAccounts(ctx, c, cfg)
	if err != nil {
		return nil, err
	}
	markets, initial, err := loadMarkets(ctx, c, authorization(keys[0]), cfg.Markets)
	if err != nil {
		return nil, err
	}
	r := &runner{
		cfg:         cfg,
		mix:         mixSpecs[cfg.Mix],
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
		Mix:     cfg.Mix,
		Mode:    "closed",
		Seed:    cfg.Seed,
		Setup:   SetupStats{Accounts: len(keys), Seconds: time.Since(setupStart).Seconds()},
	}
	if cfg.Rate > 0 {
		rep.Mode, rep.TargetRate = "open", cfg.Rate
	}

	// Each bot keeps to one front: URL's, or, with Fronts, the next in turn.
	fronts := []*client{c}
	for _, u := range cfg.Fronts {
		fc, err := newClient(u, cfg.Bots, cfg.RequestTimeout)
		if err != nil {
			return nil, err
		}
		defer fc.close()
		fronts = append(fronts, fc)
	}
	bots := make([]*bot, cfg.Bots)
	recs, warmRecs := make([]*recorder, cfg.Bots), make([]*recorder, cfg.Bots)
	for i := range bots {
		recs[i], warmRecs[i] = newRecorder(), newRecorder()
		bots[i] = &bot{
			r:     r,
			c:     fronts[i%len(fronts)],
			idx:   i,
			auth:  authorization(keys[i]),
			gen:   newGenerator(cfg.Seed, uint64(i)+1, r.mids, cfg.Mix),
			state: newBotState(r.marketIndex),
			meas:  recs[i],
			warm:  warmRecs[i],
		}
	}

	r.start = time.Now()
	r.measured = r.start.Add(cfg.Warmup)
	rep.StartedAt = r.measured
	if cfg.Duration > 0 {
		r.deadline = r.measured.Add(cfg.Duration)
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if progress != nil {
		progressWG.Go(func() {
			if cfg.Warmup > 0 {
				reportProgress(progress, "warm-up ", true, warmRecs, r.start, until(r.measured, progressDone))
			}
			reportProgress(progress, "", false, recs, r.measured, progressDone)
		})
	}
	var measuringErr error
	var measuringWG sync.WaitGroup
	if cfg.Warmup > 0 && cfg.Measuring != nil {
		measuringWG.Go(func() {
			select {
			case <-time.After(time.Until(r.measured)):
			case <-r.stopCh:
				return
			case <-ctx.Done():
				return
			}
			if measuringErr = cfg.Measuring(); measuringErr != nil {
				r.stop("measuring")
			}
		})
	}
	var wg, pacerWG sync.WaitGroup
	pacerStop := make(chan struct{})
	if cfg.Rate > 0 {
		r.pacer = newPacer(r.start, cfg.Rate, r.mix.placementsPer100, cfg.Bots)
		pacerWG.Go(func() { r.pacer.run(pacerStop, r.deadline) })
	}
	for _, b := range bots {
		wg.Go(func() { b.run(ctx) })
	}
	wg.Wait()
	end := time.Now()
	close(pacerStop)
	pacerWG.Wait()
	close(progressDone)
	progressWG.Wait()
	r.stop("duration") // no-op when already stopped by the order budget; ends the measuring wait
	measuringWG.Wait()
	if measuringErr != nil {
		return nil, measuringErr
	}

	rep.Seconds = max(0, end.Sub(r.measured).Seconds())
	rep.StopReason = r.stopReason
	if ctx.Err() != nil {
		rep.StopReason, rep.Interrupted = "interrupted", true
	}
	rep.build(recs, r.mix.kinds)
	if cfg.Warmup > 0 {
		warmEnd := r.measured
		if end.Before(warmEnd) {
			warmEnd = end
		}
		rep.Warmup = warmupStats(warmRecs, r.mix.kinds, warmEnd.Sub(r.start))
	}
	return rep, nil
}

// until is a channel closed at t, or when done is.
func until(t time.Time, done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		timer := time.NewTimer(time.Until(t))
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-done:
		}
	}()
	return ch
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
func loadMarkets(ctx context.Context, c *client, auth sdk.RequestEditorFn, limit int) ([]market, []int, error) {
	var buf bytes.Buffer
	open := sdk.MarketStatusOPEN
	resp, err := c.api.ListMarkets(ctx, &sdk.ListMarketsParams{Status: &open}, auth)
	res := read(resp, err, &buf)
	if res.transport && ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	if !res.ok() {
		return nil, nil, res.describe("listing the open markets")
	}
	var r struct {
		Markets []struct {
			ID     uuid.UUID `json:"id"`
			Status string    `json:"status"`
		} `json:"markets"`
	}
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		return nil, nil, fmt.Errorf("listing the open markets: %w", err)
	}
	var markets []market
	for _, m := range r.Markets {
		if m.ID != (uuid.UUID{}) && m.Status == "OPEN" && (limit <= 0 || len(markets) < limit) {
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
func initialMid(ctx context.Context, c *client, auth sdk.RequestEditorFn, m market, buf *bytes.Buffer) int {
	resp, err := c.api.GetOrderBook(ctx, &sdk.GetOrderBookParams{MarketID: m.uuid}, auth)
	res := read(resp, err, buf)
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
	c     *client // the front it sends to
	idx   int
	auth  sdk.RequestEditorFn
	gen   *generator
	state *botState
	rec   *recorder // the current step's: meas, or warm for a step of the warm-up
	meas  *recorder // the measured run's
	warm  *recorder // the warm-up's
	buf   bytes.Buffer
	taken []openOrder // scratch: the orders of a batch cancel
}

// read reads the answer to one of the bot's requests into its buffer.
func (b *bot) read(resp *http.Response, err error) result { return read(resp, err, &b.buf) }

// run steps until the run is over. Closed loop: each request is sent as soon as the previous one
// is answered, and timed from its send. Open loop: requests are due on a fixed schedule (the
// bots' schedules interleaved) and timed from when they were due, so a stalled server is charged
// for the requests that queue behind a slow one.
func (b *bot) run(ctx context.Context) {
	r := b.r
	var n int64 // open loop: the number of the bot's next step
	for !r.stopped(ctx) {
		start := time.Now()
		idle := false // open loop: the bot was idle when its step came due
		if p := r.pacer; p != nil {
			at := p.due(b.idx, n)
			due := r.start.Add(at)
			if !r.deadline.IsZero() && !due.Before(r.deadline) {
				return
			}
			if idle = due.After(start); idle && !p.wait(b.idx, at, r.stopCh, ctx.Done()) {
				return
			}
			start = due
			n++
		}
		s := b.gen.next(b.state)
		switch s.kind {
		case stepPlace:
			if r.reserve(1) == 0 {
				return
			}
		case stepPlaceBatch:
			if s.n = r.reserve(s.n); s.n == 0 {
				return
			}
		}
		// A step due (or sent) before the measured run begins is the warm-up's.
		b.rec = b.warm
		if !start.Before(r.measured) {
			b.rec = b.meas
		}
		switch {
		case r.pacer == nil:
		case idle:
			b.rec.lagged(time.Since(start))
		default: // it was still waiting for its last answer when this step came due
			b.rec.behind()
		}
		b.exec(ctx, s, start)
	}
}

// exec sends one step's request, applies its answer to the bot's state and records it in b.rec.
func (b *bot) exec(ctx context.Context, s step, start time.Time) {
	r := b.r
	var res result
	switch s.kind {
	case stepPlace:
		o := s.order
		res = b.read(b.c.api.PlaceOrderWithBody(ctx, jsonType, bytes.NewReader(appendOrderBody(make([]byte, 0, 128), r.markets[o.market].id, o)), b.auth))
		switch {
		case res.ok():
			var resp orderResp
			if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
				res.code = "bad_response"
				b.state.placeUnknown(o)
				break
			}
			b.state.placed(o, &resp)
			b.rec.placed(stepPlace, &resp)
		case res.rejected():
			b.state.placeRejected(o, res.code)
		default:
			b.state.placeUnknown(o)
		}

	case stepCancel:
		oo := b.state.takeOpen(s.cancel)
		res = b.read(b.c.api.CancelOrderWithBody(ctx, jsonType, bytes.NewReader(appendObject1(make([]byte, 0, 64), "orderId", oo.id)), b.auth))
		if res.ok() {
			var resp orderResp
			if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
				res.code = "bad_response"
				break
			}
			b.state.cancelled(oo, &resp)
		}

	case stepCancelAll:
		res = b.read(b.c.api.CancelEverything(ctx, b.auth))
		if res.ok() {
			var resp []orderResp
			if data := bytes.TrimSpace(b.buf.Bytes()); len(data) > 0 && json.Unmarshal(data, &resp) != nil {
				res.code = "bad_response"
				break
			}
			b.state.cancelledAll(resp)
		}

	case stepPlaceBatch:
		res = b.placeBatch(ctx, s.market, s.batch[:s.n])

	case stepAmend:
		res = b.amend(ctx, s.amend)

	case stepCancelBatch:
		b.taken = b.state.takeOldest(s.cancel, b.taken[:0])
		res = b.read(b.c.api.CancelOrdersWithBody(ctx, jsonType, bytes.NewReader(appendCancelIDsBody(make([]byte, 0, 16+40*len(b.taken)), b.taken)), b.auth))
		b.cancelledMany(stepCancelBatch, &res)

	case stepCancelMarket:
		res = b.read(b.c.api.CancelOrdersWithBody(ctx, jsonType, bytes.NewReader(appendObject1(make([]byte, 0, 64), "marketId", r.markets[s.market].id)), b.auth))
		if res.ok() {
			b.state.forgetMarket(s.market)
		}
		b.cancelledMany(stepCancelMarket, &res)

	case stepBook:
		res = b.read(b.c.api.GetOrderBook(ctx, &sdk.GetOrderBookParams{MarketID: r.markets[s.market].uuid}, b.auth))

	case stepTrades:
		res = b.read(b.c.api.ListMarketTrades(ctx, &sdk.ListMarketTradesParams{MarketID: r.markets[s.market].uuid}, b.auth))

	case stepPositions:
		res = b.read(b.c.api.ListPositions(ctx, b.auth))
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

// placeBatch sends the placements os, all in market m, in one POST /orders/batch and applies each
// one's answer as a single placement's. Whatever the request's fate, it leaves no placement
// unaccounted: an answer that cannot be matched to the placements counts as unknown for all.
func (b *bot) placeBatch(ctx context.Context, m int, os []order) result {
	body := make([]byte, 0, 16+128*len(os))
	res := b.read(b.c.api.PlaceOrdersWithBody(ctx, jsonType, bytes.NewReader(appendBatchBody(body, b.r.markets[m].id, os)), b.auth))
	switch {
	case res.ok():
		var resp batchResp
		if json.Unmarshal(b.buf.Bytes(), &resp) != nil || len(resp.Results) != len(os) {
			res.code = "bad_response"
			break
		}
		for i, o := range os {
			it := &resp.Results[i]
			ok, rejected := it.Status >= 200 && it.Status < 300, it.Status >= 400 && it.Status < 500
			switch {
			case ok:
				b.state.placed(o, &it.Order)
				b.rec.placed(stepPlaceBatch, &it.Order)
			case rejected:
				b.state.placeRejected(o, it.Details.Code)
			default:
				b.state.placeUnknown(o)
			}
			b.rec.item(stepPlaceBatch, ok, rejected, it.Status, it.Details.Code)
		}
		return res
	case res.rejected(): // refused as a whole: nothing was placed
		for _, o := range os {
			b.state.placeRejected(o, res.code)
		}
		return res
	}
	for _, o := range os {
		b.state.placeUnknown(o)
	}
	return res
}

// amend sends POST /order/amend for one of the bot's open orders and applies the answer.
func (b *bot) amend(ctx context.Context, a amendStep) result {
	oo := b.state.takeOpen(a.open)
	res := b.read(b.c.api.AmendOrderWithBody(ctx, jsonType, bytes.NewReader(appendAmendBody(make([]byte, 0, 96), oo.id, a.price, a.qty)), b.auth))
	switch {
	case res.ok():
		var resp orderResp
		if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
			res.code = "bad_response"
			b.state.amendUnknown(oo, a.qty)
			break
		}
		b.state.amended(oo, a.price, &resp)
		b.rec.amended(&resp)
	case res.rejected():
		b.state.amendRefused(oo, res.code)
	default:
		b.state.amendUnknown(oo, a.qty)
	}
	return res
}

// cancelledMany applies the answer of a POST /orders/cancel of kind k and counts its cancels, each
// on its own. The orders it names were taken out of the bot's open orders before it was sent:
// those not cancelled are no longer open, or (failed) of unknown fate, and stay forgotten; a SELL
// among them keeps its shares counted as locked, the case that leaves the bot fewer.
func (b *bot) cancelledMany(k stepKind, res *result) {
	if !res.ok() {
		return
	}
	var resp cancelManyResp
	if json.Unmarshal(b.buf.Bytes(), &resp) != nil {
		res.code = "bad_response"
		return
	}
	b.state.cancelledMany(resp.Cancelled)
	for range resp.Cancelled {
		b.rec.item(k, true, false, 0, "")
	}
	for i := range resp.Errors {
		code := resp.Errors[i].Details.Code
		b.rec.item(k, false, !serverFailure(code), 0, code)
	}
}

// serverFailure tells whether an error code inside a batch answer is the exchange's failure
// rather than a refusal by its rules: these are the codes of its 5xx answers.
func serverFailure(code string) bool {
	switch code {
	case "internal", "unavailable", "outcome_unknown", "client_closed_request":
		return true
	}
	return false
}

// reportProgress writes a progress line once a second until done is closed: on a terminal one
// line rewritten in place, otherwise one line each time, each starting with label. With closing
// (the warm-up's lines, labelled "warm-up "), it writes one more when done closes, so that a phase
// shorter than a second, or one whose last second a line fell just short of, still shows. Its p99
// is the run's so far, then that of the placements answered since the line before: a run's first
// seconds, on an exchange just started, can be slower than the rest, which the run's p99 alone does
// not show.
func reportProgress(w io.Writer, label string, closing bool, recs []*recorder, start time.Time, done <-chan struct{}) {
	tty := isTerminal(w)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	scratch := newHist()
	var lastPlaced int64
	var last *hdrhistogram.Snapshot // the placements' latencies up to the line before
	lastAt := start
	wrote := false
	line := func(now time.Time) {
		s := takeSnapshot(recs, scratch)
		rate := 0.0
		if dt := now.Sub(lastAt).Seconds(); dt > 0 {
			rate = float64(s.placed-lastPlaced) / dt
		}
		lastPlaced, lastAt = s.placed, now
		p99, p99Last := "-", "-"
		if s.p99 > 0 {
			p99 = FormatLatency(s.p99)
		}
		cum := scratch.Export()
		if d := sinceQuantile(cum, last, 99); d > 0 {
			p99Last = FormatLatency(d)
		}
		last = cum
		text := fmt.Sprintf("%s%6.0fs  orders %s  %s orders/s  p99 %s (this second %s)  failed %s  rejected %s",
			label, now.Sub(start).Seconds(), FormatInt(s.placed), FormatRate(rate), p99, p99Last, FormatInt(s.failed), FormatInt(s.rejected))
		if tty {
			fmt.Fprintf(w, "\r%s\x1b[K", text)
		} else {
			fmt.Fprintln(w, text)
		}
		wrote = true
	}
	for {
		select {
		case <-done:
			if closing {
				line(time.Now())
			}
			if tty && wrote {
				fmt.Fprintln(w)
			}
			return
		case now := <-t.C:
			line(now)
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

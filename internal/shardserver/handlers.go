package shardserver

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

// handlers serve the internal API's calls (routes) on one process's shards.
type handlers struct {
	sh       exchange.Shard
	log      *slog.Logger
	feed     *feed.Bus
	stopping <-chan struct{}
}

// answer writes a call's answer: v with status, or no body when v is nil, or err as the protocol
// carries it (shardproto.ErrorOf).
func (h *handlers) answer(c *gin.Context, status int, v any, err error) {
	if err == nil && v == nil {
		c.Status(status)
		return
	}
	if err == nil {
		c.JSON(status, v)
		return
	}
	status, w, ok := shardproto.ErrorOf(err)
	if !ok {
		h.log.Error("internal request failed", "path", c.Request.URL.Path, "err", err)
	}
	c.JSON(status, w)
}

// resultError is one result's error of a many-at-once call, nil for none.
func (h *handlers) resultError(c *gin.Context, err error) *shardproto.ErrorV1 {
	if err == nil {
		return nil
	}
	_, w, ok := shardproto.ErrorOf(err)
	if !ok {
		h.log.Error("internal request failed", "path", c.Request.URL.Path, "err", err)
	}
	return &w
}

func (h *handlers) place(c *gin.Context) {
	var w shardproto.PlaceV1
	if !bind(c, &w) {
		return
	}
	r := w.Request()
	if e := shardproto.CheckPlace(&r); e != nil {
		refuse(c, e)
		return
	}
	placed, err := h.sh.Place(c.Request.Context(), r)
	h.answer(c, http.StatusCreated, shardproto.PlacedToV1(placed), err)
}

func (h *handlers) cancel(c *gin.Context) {
	var w shardproto.CancelV1
	if !bind(c, &w) {
		return
	}
	r := w.Request()
	if e := shardproto.CheckCancel(&r); e != nil {
		refuse(c, e)
		return
	}
	o, err := h.sh.Cancel(c.Request.Context(), r)
	h.answer(c, http.StatusOK, shardproto.OrderToV1(o), err)
}

func (h *handlers) amend(c *gin.Context) {
	var w shardproto.AmendV1
	if !bind(c, &w) {
		return
	}
	r := w.Request()
	if e := shardproto.CheckAmend(&r); e != nil {
		refuse(c, e)
		return
	}
	amended, err := h.sh.Amend(c.Request.Context(), r)
	h.answer(c, http.StatusOK, shardproto.PlacedToV1(amended), err)
}

func (h *handlers) placeMany(c *gin.Context) {
	var ws []shardproto.PlaceV1
	if !bindMany(c, &ws) {
		return
	}
	rs := make([]exchange.PlaceRequest, len(ws))
	for i, w := range ws {
		rs[i] = w.Request()
	}
	out := make([]shardproto.PlaceResultV1, len(rs))
	ok, idx := splitValid(rs, shardproto.CheckPlace, func(i int, e *domain.Error) { out[i].Error = shardproto.RefusalResult(e) })
	var results []exchange.PlaceResult
	if len(ok) > 0 {
		results = h.sh.PlaceMany(c.Request.Context(), ok)
	}
	for j, i := range idx {
		if out[i].Error = h.resultError(c, results[j].Err); out[i].Error == nil {
			placed := shardproto.PlacedToV1(results[j].Placed)
			out[i].Placed = &placed
		}
	}
	c.JSON(http.StatusOK, out)
}

func (h *handlers) cancelMany(c *gin.Context) {
	var ws []shardproto.CancelV1
	if !bindMany(c, &ws) {
		return
	}
	rs := make([]exchange.CancelRequest, len(ws))
	for i, w := range ws {
		rs[i] = w.Request()
	}
	out := make([]shardproto.CancelResultV1, len(rs))
	ok, idx := splitValid(rs, shardproto.CheckCancel, func(i int, e *domain.Error) { out[i].Error = shardproto.RefusalResult(e) })
	var results []exchange.CancelResult
	if len(ok) > 0 {
		results = h.sh.CancelMany(c.Request.Context(), ok)
	}
	for j, i := range idx {
		if out[i].Error = h.resultError(c, results[j].Err); out[i].Error == nil {
			o := shardproto.OrderToV1(results[j].Order)
			out[i].Order = &o
		}
	}
	c.JSON(http.StatusOK, out)
}

func (h *handlers) cancelAll(c *gin.Context) {
	var w shardproto.CancelAllV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckCancelAll(&w); e != nil {
		refuse(c, e)
		return
	}
	orders, err := h.sh.CancelAll(c.Request.Context(), w.Account, w.Markets)
	h.answer(c, http.StatusOK, shardproto.OrdersToV1(orders), err)
}

func (h *handlers) transition(c *gin.Context) {
	var w shardproto.TransitionV1
	if !bind(c, &w) {
		return
	}
	action, e := shardproto.CheckTransition(&w)
	if e != nil {
		refuse(c, e)
		return
	}
	h.answer(c, http.StatusNoContent, nil, h.sh.Transition(c.Request.Context(), w.Market, action))
}

func (h *handlers) eventTransition(c *gin.Context) {
	var w shardproto.EventTransitionV1
	if !bind(c, &w) {
		return
	}
	action, e := shardproto.CheckEventTransition(&w)
	if e != nil {
		refuse(c, e)
		return
	}
	h.answer(c, http.StatusNoContent, nil, h.sh.TransitionEvent(c.Request.Context(), w.Event, action))
}

func (h *handlers) convert(c *gin.Context) {
	var w shardproto.ConvertV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckConvert(&w); e != nil {
		refuse(c, e)
		return
	}
	conv, err := h.sh.Convert(c.Request.Context(), exchange.ConvertRequest{Account: w.Account, Event: w.Event,
		Outcomes: w.Outcomes, Quantity: w.Quantity, ClientRequestID: w.ClientRequestID})
	h.answer(c, http.StatusOK, shardproto.ConversionToV1(conv), err)
}

func (h *handlers) handOff(c *gin.Context) {
	var w shardproto.HandoffV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckMarkets(w.Markets); e != nil {
		refuse(c, e)
		return
	}
	if w.To == "" || len(w.To) > shardproto.MaxShardName {
		refuse(c, shardproto.Invalid("to", "to must name the shard to hand the markets to, in at most %d characters", shardproto.MaxShardName))
		return
	}
	epochs, err := h.sh.HandOff(c.Request.Context(), w.Markets, w.To)
	h.answer(c, http.StatusOK, shardproto.HandedV1{Epochs: epochs}, err)
}

func (h *handlers) takeOver(c *gin.Context) {
	var w shardproto.TakeOverV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckMarkets(w.Markets); e != nil {
		refuse(c, e)
		return
	}
	if len(w.Epochs) != len(w.Markets) {
		refuse(c, shardproto.Invalid("epochs", "epochs must give each market's epoch, in the order of markets"))
		return
	}
	h.answer(c, http.StatusNoContent, nil, h.sh.TakeOver(c.Request.Context(), w.Markets, w.Epochs))
}

// anyEpoch is bookAt's epoch for a caller that names none (GET /internal/v1/book without one).
const anyEpoch = -1

// bookAt reads a market's book on this shard, which must hold it under epoch (unless anyEpoch):
// the front routed here because Postgres names this shard the owner at that epoch, and a shard
// that holds the market under another has not yet noticed a move.
func bookAt(ctx context.Context, sh exchange.Exchange, id uuid.UUID, epoch int64) (*exchange.Snapshot, error) {
	snap, err := sh.OrderBook(ctx, id)
	if err == nil && epoch != anyEpoch && snap.Epoch != epoch {
		err = exchange.ErrNotOwner
	}
	return snap, err
}

func (h *handlers) book(c *gin.Context) {
	market := c.Query("market")
	id, err := uuid.Parse(market)
	if err != nil || len(market) != 36 || id == uuid.Nil {
		refuse(c, shardproto.Invalid("market", "market must be a market's id, a UUID like 123e4567-e89b-12d3-a456-426614174000"))
		return
	}
	epoch, hasEpoch := c.GetQuery("epoch")
	want, err := strconv.ParseInt(epoch, 10, 64)
	if hasEpoch && (err != nil || want < 0) {
		refuse(c, shardproto.Invalid("epoch", "epoch must be the market's epoch, a whole number from 0"))
		return
	}
	if !hasEpoch {
		want = anyEpoch
	}
	snap, err := bookAt(c.Request.Context(), h.sh, id, want)
	if err != nil {
		h.answer(c, 0, nil, err)
		return
	}
	h.answer(c, http.StatusOK, shardproto.SnapshotToV1(snap), nil)
}

func (h *handlers) books(c *gin.Context) {
	var w shardproto.BooksV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckBooks(&w); e != nil {
		refuse(c, e)
		return
	}
	out := make([]shardproto.BookResultV1, len(w.Markets))
	for i, id := range w.Markets {
		snap, err := bookAt(c.Request.Context(), h.sh, id, w.Epochs[i])
		if out[i].Error = h.resultError(c, err); out[i].Error == nil {
			book := shardproto.SnapshotToV1(snap)
			out[i].Book = &book
		}
	}
	c.JSON(http.StatusOK, out)
}

func (h *handlers) queuePositions(c *gin.Context) {
	var w shardproto.QueuePositionsV1
	if !bind(c, &w) {
		return
	}
	if e := shardproto.CheckQueuePositions(&w); e != nil {
		refuse(c, e)
		return
	}
	refs := make([]exchange.OrderRef, len(w.Seqs))
	for i, seq := range w.Seqs {
		refs[i] = exchange.OrderRef{Market: w.Market, Seq: seq}
	}
	out := make([]shardproto.QueueResultV1, len(refs))
	for i, res := range h.sh.QueuePositions(c.Request.Context(), w.Account, refs) {
		err := res.Err
		if err == nil && res.Position.Epoch != w.Epoch {
			err = exchange.ErrNotOwner // as bookAt: a move this shard has not noticed yet
		}
		if out[i].Error = h.resultError(c, err); out[i].Error == nil {
			p := shardproto.QueuePositionToV1(res.Position)
			out[i].Position = &p
		}
	}
	c.JSON(http.StatusOK, out)
}

package shardserver

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/shardproto"
)

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

// convertOn carries a conversion out on this process's shards.
func convertOn(ctx context.Context, sh exchange.Shard, w *shardproto.ConvertV1) (shardproto.ConversionV1, error) {
	c, err := sh.Convert(ctx, exchange.ConvertRequest{Account: w.Account, Event: w.Event, Outcomes: w.Outcomes,
		Quantity: w.Quantity, ClientRequestID: w.ClientRequestID})
	return shardproto.ConversionToV1(c), err
}

// transitionEvent carries an event's change out on this process's shards.
func transitionEvent(ctx context.Context, sh exchange.Shard, id uuid.UUID, a domain.EventAction) error {
	return sh.TransitionEvent(ctx, id, a)
}

// handoffRoutes serves the handoff's two calls.
func handoffRoutes(in *gin.RouterGroup, ho exchange.Shard, answer func(*gin.Context, int, any, error)) {
	in.POST("/handoff", func(c *gin.Context) {
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
		epochs, err := ho.HandOff(c.Request.Context(), w.Markets, w.To)
		answer(c, http.StatusOK, shardproto.HandedV1{Epochs: epochs}, err)
	})
	in.POST("/take-over", func(c *gin.Context) {
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
		answer(c, http.StatusNoContent, nil, ho.TakeOver(c.Request.Context(), w.Markets, w.Epochs))
	})
}

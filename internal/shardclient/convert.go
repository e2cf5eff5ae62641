package shardclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/shardproto"
	"github.com/pmx-dev/pmx/internal/store"
)

// Convert, in the front, sends a conversion to the shard owning the event's markets: the owner of
// its first outcome's market, which refuses unless it owns them all (the operator schedules an
// event's markets together). A market that is not OPEN is the event's not being open.
func (r *Router) Convert(ctx context.Context, req exchange.ConvertRequest) (records.Conversion, error) {
	e, err := r.Store.Event(ctx, req.Event)
	if errors.Is(err, store.ErrNotFound) {
		return records.Conversion{}, domain.ErrEventNotFound
	} else if err != nil {
		return records.Conversion{}, err
	}
	w := shardproto.ConvertV1{Account: req.Account, Event: req.Event, Outcomes: req.Outcomes, Quantity: req.Quantity,
		ClientRequestID: req.ClientRequestID}
	var out shardproto.ConversionV1
	err = r.onOwner(ctx, e.Outcomes[0].MarketID, false, domain.ErrEventNotOpen, func(rt route) error {
		out = shardproto.ConversionV1{}
		return rt.client.call(ctx, http.MethodPost, shardproto.PathConvert, w, &out)
	})
	if errors.Is(err, shardproto.ErrOlderPeer) {
		return records.Conversion{}, fmt.Errorf("the event's shard cannot convert yet: %w: %w", exchange.ErrUnavailable, err)
	}
	if err != nil {
		return records.Conversion{}, err
	}
	return out.Conversion(), nil
}

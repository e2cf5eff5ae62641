package feed

import (
	"context"
	"fmt"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// A market's topic: its key is the market's id, its view the book (rebuilt from the events) and
// the ticker, its channels book, trades and ticker; its events are read from Postgres with
// Log.EventsAfter and Log.FirstEvent, and a topic starts from the market's whole book (Log.Book).

// markets is the market kind of topic.
type markets struct{ log Log }

func (k markets) load(ctx context.Context, id uuid.UUID) (view[Event], int64, error) {
	book, err := k.log.Book(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	v := &marketView{id: id, book: book}
	v.ticker = v.tick()
	return v, book.Seq, nil
}

func (k markets) first(ctx context.Context, id uuid.UUID) (int64, error) {
	return k.log.FirstEvent(ctx, id)
}

func (k markets) read(ctx context.Context, id uuid.UUID, after int64, limit int) ([]Event, error) {
	batches, err := k.log.EventsAfter(ctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	return MarketPage(batches, after, limit)
}

func (markets) decode(b Batch) ([]Event, error) { return Decode(b.Events) }

func (markets) resumes(channel string) bool { return channel != ChannelTicker }

func (markets) lost(id uuid.UUID) string {
	return "the feed of market " + id.String() + " was interrupted: reconnect and resume from your last seq"
}

// message carries a market's events on the book channel, or its trades on the trades channel.
func (markets) message(id uuid.UUID, channel string, events []Event) []byte {
	switch channel {
	case ChannelBook:
	case ChannelTrades:
		events = tradesOf(events)
	default:
		return nil
	}
	if len(events) == 0 {
		return nil
	}
	return encode(EventsMessage{Type: "events", Channel: channel, MarketID: id, Events: events})
}

// marketView is a market's book and ticker as of the topic's seq.
type marketView struct {
	id            uuid.UUID
	book          Book
	ticker        TickerMessage
	tickerChanged bool // by the last events applied
}

func (v *marketView) apply(events []Event) {
	for _, e := range events {
		v.book.apply(e)
	}
	ticker := v.tick()
	v.tickerChanged = ticker.BestBid != v.ticker.BestBid || ticker.BestAsk != v.ticker.BestAsk || ticker.LastPrice != v.ticker.LastPrice
	if v.tickerChanged {
		v.ticker = ticker
	} else {
		v.ticker.Seq = ticker.Seq
	}
}

func (v *marketView) live(channel string, events []Event) []byte {
	if channel == ChannelTicker {
		if !v.tickerChanged {
			return nil
		}
		return encode(v.ticker)
	}
	return markets{}.message(v.id, channel, events)
}

func (v *marketView) start(channel string) []byte {
	switch channel {
	case ChannelBook:
		return encode(v.snapshot())
	case ChannelTicker:
		return encode(v.ticker)
	}
	return nil
}

// tick is the ticker message now.
func (v *marketView) tick() TickerMessage {
	bid, ask := v.book.Best()
	return TickerMessage{Type: "ticker", Channel: ChannelTicker, MarketID: v.id, Seq: v.book.Seq,
		BestBid: optionalPrice(bid), BestAsk: optionalPrice(ask), LastPrice: optionalPrice(v.book.LastPrice)}
}

// snapshot is the book channel's first message.
func (v *marketView) snapshot() SnapshotMessage {
	b := &v.book
	m := SnapshotMessage{Type: "snapshot", Channel: ChannelBook, MarketID: v.id, Seq: b.Seq, Status: b.Status,
		Bids: []Level{}, Asks: []Level{}, LastPrice: optionalPrice(b.LastPrice)}
	for p := len(b.Levels[0]) - 1; p > 0; p-- {
		if q := b.Levels[0][p]; q > 0 {
			m.Bids = append(m.Bids, Level{Price: p, Quantity: q})
		}
	}
	for p := 1; p < len(b.Levels[1]); p++ {
		if q := b.Levels[1][p]; q > 0 {
			m.Asks = append(m.Asks, Level{Price: p, Quantity: q})
		}
	}
	return m
}

// apply changes the book by one event.
func (b *Book) apply(e Event) {
	b.Seq = e.Seq
	switch e.Type {
	case TypeLevel:
		side := 0
		if e.Side == "ask" {
			side = 1
		}
		if e.Price > 0 && e.Price < len(b.Levels[side]) {
			b.Levels[side][e.Price] = e.Quantity
		}
	case TypeTrade:
		b.LastPrice = e.Price
	case TypeStatus:
		b.Status = e.Status
	}
}

// Best returns the best bid and ask (0: none).
func (b *Book) Best() (bid, ask int) {
	for p := len(b.Levels[0]) - 1; p > 0; p-- {
		if b.Levels[0][p] > 0 {
			bid = p
			break
		}
	}
	for p := 1; p < len(b.Levels[1]); p++ {
		if b.Levels[1][p] > 0 {
			ask = p
			break
		}
	}
	return bid, ask
}

func tradesOf(events []Event) []Event {
	var out []Event
	for _, e := range events {
		if e.Type == TypeTrade {
			out = append(out, e)
		}
	}
	return out
}

// encode writes a message; the messages are plain structs, which always encode.
func encode(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("feed: encoding %T: %v", v, err))
	}
	return raw
}

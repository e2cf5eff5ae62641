package apiserver

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/kit/httpkit"
)

// wsRequest is a client's message on the feed, as parseRequest reads it.
type wsRequest struct {
	Op         string // subscribe, unsubscribe or ping
	ID         int64
	Channel    string
	MarketID   string      // as the client sent it
	Market     uuid.UUID   // MarketID's, on the book, trades and ticker channels
	ResumeFrom *int64      // on the book and trades channels: the seq to resume from
	Cursor     feed.Cursor // on the orders and fills channels: the cursor to resume from (nil: none)
}

// wsFields are the keys a message of each op may have: asyncapi.yaml's Subscribe, Unsubscribe
// and Ping, which allow no others.
var wsFields = map[string][]string{
	"subscribe":   {"op", "id", "channel", "marketId", "resumeFrom"},
	"unsubscribe": {"op", "id", "channel", "marketId"},
	"ping":        {"op", "id"},
}

// parseRequest reads a client's message and checks all of it that does not depend on the
// connection's subscriptions: a text message holding one JSON object, each key once, spelt as
// documented and taken by its op, with a channel its fields suit. The rules are the REST
// bodies' (decodeObject, parseUUID): a repeated key is refused, not left to the last one, a
// marketId is a UUID in its canonical form, and null counts as absent. public is whether the
// connection has no key, which rules out the account's channels. A refusal is the error to
// answer, with the message's id where it could be read.
func parseRequest(text bool, raw []byte, public bool) (wsRequest, *wsReply) {
	var req wsRequest
	refuse := func(code, message string) (wsRequest, *wsReply) {
		return req, &wsReply{Type: "error", ID: req.ID, Channel: req.Channel, MarketID: req.MarketID, Code: code, Message: message}
	}
	if !text {
		return refuse("invalid_message", `send JSON text messages like {"op":"subscribe","id":1,"channel":"book","marketId":"..."}`)
	}
	o, err := decodeObject(raw)
	var e *httpkit.Error
	switch {
	case errors.As(err, &e) && e.Code == "duplicate_key":
		return refuse("invalid_message", e.Message)
	case err != nil:
		return refuse("invalid_message", `send one JSON object a message, like {"op":"subscribe","id":1,"channel":"book","marketId":"..."}`)
	}
	// What can be read first, for the refusal to answer with.
	if o.has("id") {
		if req.ID, err = o.integer("id", math.MinInt64, math.MaxInt64); err != nil {
			req.ID = 0
			return refuse("invalid_message", "id must be a whole number, echoed in the answer")
		}
	}
	req.Op, _ = o.string("op")
	if o.has("channel") {
		req.Channel, _ = o.string("channel")
	}
	if o.has("marketId") {
		req.MarketID, _ = o.string("marketId")
	}
	fields, ok := wsFields[req.Op]
	if !ok {
		return refuse("invalid_message", "op must be subscribe, unsubscribe or ping")
	}
	for _, key := range slices.Sorted(maps.Keys(o)) {
		if !slices.Contains(fields, key) {
			return refuse("invalid_message", "op "+req.Op+" takes only the keys "+strings.Join(fields, ", ")+": send no "+key)
		}
	}
	for _, key := range []string{"channel", "marketId"} {
		if _, err := o.string(key); o.has(key) && err != nil {
			return refuse("invalid_message", key+" must be a string")
		}
	}
	if req.Op == "ping" {
		return req, nil
	}
	switch req.Channel {
	case feed.ChannelBook, feed.ChannelTrades, feed.ChannelTicker:
		id, err := parseUUID("marketId", req.MarketID)
		if err != nil {
			return refuse("invalid_market_id", "marketId must be a market's id, a UUID like 123e4567-e89b-12d3-a456-426614174000")
		}
		req.Market = id
	case feed.ChannelLifecycle:
		if o.has("marketId") || o.has("resumeFrom") {
			return refuse("invalid_message", "the lifecycle channel covers every market and is live only: send no marketId and no resumeFrom")
		}
	case feed.ChannelOrders, feed.ChannelFills:
		if public {
			return refuse("key_required", "the orders and fills channels are an account's own: connect to /api/v1/ws with the account's API key")
		}
		if o.has("marketId") {
			return refuse("invalid_message", "the orders and fills channels are your account's, in every market: send no marketId")
		}
	default:
		return refuse("unknown_channel", "channel must be book, trades, ticker, lifecycle, orders or fills")
	}
	if o.has("resumeFrom") && (req.Channel == feed.ChannelOrders || req.Channel == feed.ChannelFills) {
		c, err := resumeCursor(o)
		if err != nil {
			return refuse(err.Code, err.Message)
		}
		req.Cursor = c
	} else if o.has("resumeFrom") {
		seq, err := o.integer("resumeFrom", 0, math.MaxInt64)
		if errors.As(err, &e) && e.Code == "invalid_type" {
			return refuse("invalid_message", "resumeFrom must be a number: the last seq you applied")
		}
		if err != nil || req.Channel == feed.ChannelTicker {
			return refuse("invalid_resume_from", "resumeFrom is a seq you have seen (0 or more), on the book, trades, orders and fills channels")
		}
		req.ResumeFrom = &seq
	}
	return req, nil
}

// resumeCursor reads the resumeFrom of an account's channel: a cursor (feed.ParseCursor), or 0,
// the start in the feed's first form (a seq above 0 of that form is outdated_cursor, anything
// else not a cursor invalid_resume_from, the feed's code of a resumeFrom it cannot take).
func resumeCursor(o object) (feed.Cursor, *httpkit.Error) {
	if s, err := o.string("resumeFrom"); err == nil {
		c, refused := parseCursor("resumeFrom", s)
		if refused != nil && refused.Code == "invalid_cursor" {
			refused.Code = "invalid_resume_from"
		}
		return c, refused
	}
	seq, err := o.integer("resumeFrom", 0, math.MaxInt64)
	if err != nil {
		return nil, &httpkit.Error{Code: "invalid_message", Field: "resumeFrom",
			Message: "resumeFrom must be a string on the orders and fills channels: the cursor of the last accountEvents message you applied, or of the subscription's confirmation"}
	}
	return parseCursor("resumeFrom", strconv.FormatInt(seq, 10))
}

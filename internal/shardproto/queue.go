package shardproto

import (
	"slices"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// PathQueuePositions reads where an account's resting orders of one market stand in its book's
// queue (exchange.QueueReader). It is new in version 1, as an optional call: a shard of the
// release before answers 404, which the front answers as unavailable.
const PathQueuePositions = "/internal/v1/queue-positions"

// QueuePositionsV1 asks for the queue positions of an account's orders of one market, by their
// numbers there, with the epoch Postgres records for the market's owner: a shard that holds the
// market under another epoch has not yet noticed a move, and answers not_owner for each order,
// as GET /internal/v1/book does.
type QueuePositionsV1 struct {
	Account int64     `json:"account"`
	Market  uuid.UUID `json:"market"`
	Epoch   int64     `json:"epoch"`
	Seqs    []int64   `json:"seqs"`
}

// QueueResultV1 answers one order of a queue-positions call, in the request's order: its
// position, or the error that refused it.
type QueueResultV1 struct {
	Position *QueuePositionV1 `json:"position,omitempty"`
	Error    *ErrorV1         `json:"error,omitempty"`
}

// QueuePositionV1 is exchange.QueuePosition, its side and outcome spelt as the public API spells
// them.
type QueuePositionV1 struct {
	Side    string `json:"side"`
	Outcome string `json:"outcome"`
	Price   int    `json:"price"`
	Ahead   int64  `json:"ahead"`
	Level   int64  `json:"level"`
	Epoch   int64  `json:"epoch"`
}

func QueuePositionToV1(p exchange.QueuePosition) QueuePositionV1 {
	return QueuePositionV1{Side: p.Side.String(), Outcome: p.Outcome.String(), Price: p.Price, Ahead: p.Ahead,
		Level: p.Level, Epoch: p.Epoch}
}

// QueuePosition converts the answer back; a side or outcome it cannot read is false.
func (w *QueuePositionV1) QueuePosition() (exchange.QueuePosition, bool) {
	side, ok1 := engine.ParseSide(w.Side)
	outcome, ok2 := engine.ParseOutcome(w.Outcome)
	return exchange.QueuePosition{Side: side, Outcome: outcome, Price: w.Price, Ahead: w.Ahead, Level: w.Level,
		Epoch: w.Epoch}, ok1 && ok2
}

// CheckQueuePositions checks a queue-positions call: an account, a market, its epoch, and from 1
// to MaxMany order numbers, none twice.
func CheckQueuePositions(w *QueuePositionsV1) *domain.Error {
	switch {
	case w.Account <= 0:
		return Invalid("account", "account must be an account's id")
	case w.Epoch < 0:
		return Invalid("epoch", "epoch must be the market's epoch, a whole number from 0")
	case len(w.Seqs) == 0 || len(w.Seqs) > MaxMany:
		return Invalid("seqs", "name from 1 to %d orders", MaxMany)
	}
	if e := checkMarket("market", w.Market); e != nil {
		return e
	}
	for i, seq := range w.Seqs {
		if seq <= 0 {
			return Invalid("seqs", "each order must be named by its sequence number, from 1")
		}
		if slices.Contains(w.Seqs[:i], seq) {
			return Invalid("seqs", "order %d is named twice", seq)
		}
	}
	return nil
}

package shardproto

import (
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
)

// The planned handoff (docs/architecture.md §6) adds two optional calls to version 1, which the
// operator sends: POST /internal/v1/handoff to the old owner, which hands the markets over in its
// batch loop (exchange.Handoff) and answers their new epochs, then POST /internal/v1/take-over to
// the new owner, which loads them at once. A shard of the release before answers 404 to both: the
// operator then moves the markets as before the handoff existed (store.Move, fenced like a
// failover), and a new owner of that release loads them on first use. A command the old owner
// refuses after the handoff answers not_owner, as a shard that lost a market always has, with
// "handedOver": true, which a front of the release before ignores.
const (
	PathHandoff  = "/internal/v1/handoff"
	PathTakeOver = "/internal/v1/take-over"
)

// HandoffV1 asks the owner of markets to hand them to the shard named To.
type HandoffV1 struct {
	Markets []uuid.UUID `json:"markets"`
	To      string      `json:"to"`
}

// HandedV1 answers a handoff: each market's epoch under its new owner, in the request's order.
type HandedV1 struct {
	Epochs []int64 `json:"epochs"`
}

// TakeOverV1 tells the new owner of markets to load them under their epochs.
type TakeOverV1 struct {
	Markets []uuid.UUID `json:"markets"`
	Epochs  []int64     `json:"epochs"`
}

// MaxShardName bounds a shard's name as a handoff names it (a StatefulSet pod's name is at most
// 63 characters).
const MaxShardName = 253

// CheckMarkets checks the markets a handoff names: from 1 to MaxMany, none the nil id, none twice.
func CheckMarkets(markets []uuid.UUID) *domain.Error {
	if len(markets) == 0 || len(markets) > MaxMany {
		return Invalid("markets", "name from 1 to %d markets", MaxMany)
	}
	seen := make(map[uuid.UUID]bool, len(markets))
	for _, id := range markets {
		if id == uuid.Nil || seen[id] {
			return Invalid("markets", "each market is a market's id, a UUID, named once")
		}
		seen[id] = true
	}
	return nil
}

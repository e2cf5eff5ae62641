package shard

import (
	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

type commandKind uint8

const (
	cmdPlace commandKind = iota + 1
	cmdCancel
	cmdCancelAll
	cmdTransition
	cmdLoad   // only loads the market
	cmdCheck  // compares the books with Postgres
	cmdSync   // loads and drops markets to match their recorded owners
	cmdExpire // cancels the GTD orders whose time has come
	cmdAmend
	cmdGroup      // commands that join one batch together, in order (command.group)
	cmdGroupSweep // cancels the resting orders of order groups triggered elsewhere (groups.go)
	cmdConvert    // converts an event's shares (convert.go)
	cmdHandoff    // hands markets to another shard, alone in its turn (handoff.go)
	cmdTakeOver   // loads markets handed to this shard (handoff.go)
	cmdQueue      // reads a resting order's place in its level's queue (queue.go)
	cmdReturn     // gives back the cash of accounts the shard has not needed for a while (allocations.go)
)

func (k commandKind) String() string {
	switch k {
	case cmdPlace:
		return "place"
	case cmdCancel:
		return "cancel"
	case cmdCancelAll:
		return "cancel-all"
	case cmdTransition:
		return "transition"
	case cmdLoad:
		return "load"
	case cmdCheck:
		return "check"
	case cmdSync:
		return "sync"
	case cmdExpire:
		return "expire"
	case cmdAmend:
		return "amend"
	case cmdGroup:
		return "group"
	case cmdGroupSweep:
		return "group-sweep"
	case cmdConvert:
		return "convert"
	case cmdHandoff:
		return "handoff"
	case cmdTakeOver:
		return "take-over"
	case cmdQueue:
		return "queue-position"
	case cmdReturn:
		return "return"
	}
	return "unknown"
}

// command is one request to the shard's loop. The loop fills in the answer fields, then sends on
// reply (nil or the error) once the batch holding it has committed.
type command struct {
	kind    commandKind
	market  uuid.UUID
	place   exchange.PlaceRequest
	cancel  exchange.CancelRequest // cmdCancel
	amend   exchange.AmendRequest  // cmdAmend
	group   []*command             // cmdGroup: joins the batch in its place, each answered on its own
	account int64                  // cmdCancelAll
	markets []uuid.UUID            // cmdCancelAll, cmdHandoff, cmdTakeOver
	action  domain.MarketAction    // cmdTransition
	groups  []uuid.UUID            // cmdGroupSweep: the order groups found triggered
	event   *eventMove             // cmdTransition of an event's market, as part of the event's move
	convert *conversion            // cmdConvert
	queue   *queueRead             // cmdQueue
	to      string                 // cmdHandoff: the new owner
	epochs  []int64                // cmdHandoff's answer, cmdTakeOver's request: the markets' new epochs
	reply   chan error

	err      error               // set while the batch runs; sent once it commits
	placed   records.PlacedOrder // cmdPlace; cmdAmend: only its trades
	keys     []orderKey          // cmdCancel, cmdCancelAll: orders to answer with once written
	orders   []records.Order
	checkErr error             // cmdCheck
	owned    []store.Ownership // cmdSync
	readAt   int64             // cmdSync: Shard.loads when owned was read; 0 drops every market
}

// reset clears what a previous attempt at the command's batch left in it.
func (c *command) reset() {
	c.err, c.checkErr = nil, nil
	c.placed = records.PlacedOrder{}
	c.keys, c.orders = c.keys[:0], nil
}

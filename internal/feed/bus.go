package feed

import (
	"context"
	"sync"

	json "github.com/goccy/go-json"
	"github.com/google/uuid"
)

// Batch is what one committed batch of the shard did to one market: its events, numbered First to
// Last, as a JSON array (Encode), exactly as they are kept in Postgres.
//
// A batch of an account's feed names the account (its id within the exchange), the holder whose
// stream it is in, and no market; its events are AccountEvents, without their numbers
// (EncodeAccount), numbered First to Last in the holder's stream.
type Batch struct {
	Account int64           `json:"account,omitempty"`
	Holder  string          `json:"holder,omitempty"`
	Market  uuid.UUID       `json:"marketId"`
	First   int64           `json:"first"`
	Last    int64           `json:"last"`
	Status  string          `json:"status,omitempty"` // the market's new status, when the batch changed it
	Events  json.RawMessage `json:"events"`
	// Epochs, on an account's batch as its shard publishes it, is the ownership epoch under which
	// the shard held each market of its events: how the hub tells a market that moved away and
	// back from one that stayed (accounttopic.go). A market left out (and a conversion's event)
	// is read as moved. Not kept in Postgres: the reads merge the streams by position instead.
	Epochs map[uuid.UUID]int64 `json:"epochs,omitempty"`
	// wire is the batch's encoding for a shard's internal feed stream, made once for all the
	// fronts that follow it (Wire); Publish sets it, so that the copies its followers get share it.
	wire *wire
}

type wire struct {
	once sync.Once
	line []byte
	err  error
}

// Wire returns encode(b), called once for all the copies of a batch that Publish handed to more
// than one follower: a shard that several fronts follow encodes each batch for them once. The
// bytes are shared: read them, never change them.
func (b Batch) Wire(encode func(Batch) ([]byte, error)) ([]byte, error) {
	if b.wire == nil {
		return encode(b)
	}
	b.wire.once.Do(func() { b.wire.line, b.wire.err = encode(b) })
	return b.wire.line, b.wire.err
}

// Bus carries a shard's committed batches to whoever follows them live: the front's hub in the
// same process, or a front replica's stream over the shard's internal API. Publishing never
// waits: each follower has a buffer of its own, and a follower whose buffer is full is dropped
// (its Sub's Lost closes), to catch up from Postgres, rather than hold up the shard's commits.
type Bus struct {
	mu   sync.Mutex
	subs map[*Sub]struct{}
}

// Sub is one follower of a Bus.
type Sub struct {
	bus  *Bus
	c    chan Batch
	lost chan struct{}
	once sync.Once
}

// C delivers the batches, in commit order.
func (s *Sub) C() <-chan Batch { return s.c }

// Lost is closed when the follower was dropped, because it fell behind by a full buffer or
// unsubscribed; batches already in C remain to be read.
func (s *Sub) Lost() <-chan struct{} { return s.lost }

// Close stops following.
func (s *Sub) Close() { s.bus.drop(s) }

// Subscribe follows the batches published from now on, with room for buffer of them.
func (b *Bus) Subscribe(buffer int) *Sub {
	s := &Sub{bus: b, c: make(chan Batch, buffer), lost: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs == nil {
		b.subs = map[*Sub]struct{}{}
	}
	b.subs[s] = struct{}{}
	return s
}

func (b *Bus) drop(s *Sub) {
	b.mu.Lock()
	delete(b.subs, s)
	b.mu.Unlock()
	s.once.Do(func() { close(s.lost) })
}

// Publish hands committed batches to every follower, in order, without waiting. With more than
// one follower it gives each batch in batches the encoding its copies share (Wire): the caller
// fills the slice afresh for its next batches.
func (b *Bus) Publish(batches []Batch) {
	if b == nil || len(batches) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.subs) > 1 {
		for i := range batches {
			batches[i].wire = &wire{}
		}
	}
	for s := range b.subs {
		for _, batch := range batches {
			select {
			case s.c <- batch:
				continue
			default:
			}
			delete(b.subs, s)
			s.once.Do(func() { close(s.lost) })
			break
		}
	}
}

// followBuffer is how many batches a follower of a Bus may fall behind before it is dropped.
const followBuffer = 4096

// Follow hands every batch published on bus to the hub until ctx ends: how a process that runs
// shards and the front together (pmx dev) feeds its hub. Dropped for falling behind, it follows
// again at once; the hub fills what it missed from Postgres.
func Follow(ctx context.Context, bus *Bus, hub *Hub) {
	for ctx.Err() == nil {
		sub := bus.Subscribe(followBuffer)
		func() {
			defer sub.Close()
			for {
				select {
				case b := <-sub.C():
					hub.Ingest(ctx, b)
				case <-sub.Lost():
					for {
						select {
						case b := <-sub.C():
							hub.Ingest(ctx, b)
						default:
							return
						}
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
}

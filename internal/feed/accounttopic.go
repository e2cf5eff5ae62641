package feed

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"
)

// An account's topic: for each account with a subscription on this front (the orders and fills
// channels of its connections) a topic follows the account's feed, where a Cursor says it stands,
// and delivers each event once to each subscriber, each stream's in seq order. An account's events
// are few beside a market's: no ring (a resume reads Postgres), no topic kept after its last
// subscription.
//
// The feed is one stream per holder (account.go), and the shards' streams reach a front each on
// its own connection, so batches of different holders arrive in any order. That is right for
// events of different markets; for one market that moved from holder A to holder B, B's events
// must not reach a subscriber before A's earlier ones. The rule that keeps it: the topic remembers,
// for each market, the tenure it last delivered the market's events under — the holder and the
// ownership epoch the holder held the market with (Batch.Epochs; a move, a failover and a move
// back each take a new epoch) — and delivers a batch as it arrives only when it follows on from
// its stream's last seq and every market of its events is still in the tenure it last delivered
// the market under. Then no other stream holds an event of those markets between the last one
// delivered and the batch's. Any other batch (one after a gap, one with a market the topic has
// not seen yet, a market in another tenure, a conversion, which names no market) is delivered by
// a catch-up instead: every stream of the account read from Postgres to its end, merged by
// position. The batch has committed, so Postgres holds it and everything committed before it,
// the old holder's last batch of a moved market among them, and the merged read puts the old
// holder's events of the market before the new one's; the batch itself is then skipped as seen,
// its tenures noted. What the catch-up costs is a read per market a topic first sees, per move
// and per gap (and per conversion), never per event. Holder and seq alone would not do: a market
// that moves from A to B and back to A has A's new events follow on from A's last, while B's
// between them may still be on B's connection.

// AccountLog is where the hub reads what it did not see live of accounts' feeds.
type AccountLog interface {
	// AccountEventsAfter returns the batches holding an account's events after the cursor, in the
	// order of their positions, with at least limit events unless fewer are kept; with upTo, of
	// its streams only, each up to its seq there.
	AccountEventsAfter(ctx context.Context, account int64, after Cursor, limit int, upTo Cursor) ([]Batch, error)
	// AccountFeed returns where each stream of an account's feed stands.
	AccountFeed(ctx context.Context, account int64) ([]AccountStream, error)
	// AccountSeqs returns the last seq of each stream of each account.
	AccountSeqs(ctx context.Context, accounts []int64) (map[int64]Cursor, error)
}

// AccountStream is where one stream of an account's feed stands: its holder, the first seq still
// kept (0: none is) and the last.
type AccountStream struct {
	Holder      string
	First, Last int64
}

// FeedEnd is the cursor at the end of every stream.
func FeedEnd(streams []AccountStream) Cursor {
	c := Cursor{}
	for _, st := range streams {
		c.Advance(st.Holder, st.Last)
	}
	return c
}

// OldestKept is the cursor just before the oldest event each stream still keeps (at the end of a
// stream that keeps none).
func OldestKept(streams []AccountStream) Cursor {
	c := Cursor{}
	for _, st := range streams {
		if st.First > 0 {
			c.Advance(st.Holder, st.First-1)
		} else {
			c.Advance(st.Holder, st.Last)
		}
	}
	return c
}

// CheckKept says whether every event after the cursor after is still kept: ErrResyncRequired when
// a stream has events after it that are not.
func CheckKept(streams []AccountStream, after Cursor) error {
	for _, st := range streams {
		if seen := after[st.Holder]; seen < st.Last && (st.First == 0 || seen+1 < st.First) {
			return ErrResyncRequired
		}
	}
	return nil
}

// accountTopics are the account topics a hub follows, by account.
type accountTopics struct {
	log    AccountLog
	logger *slog.Logger
	page   int // events per replay message and per read of Postgres

	mu sync.Mutex
	m  map[int64]*accountTopic
}

// accountTopic is one account someone follows.
type accountTopic struct {
	r    *accountTopics
	id   int64
	refs int // subscriptions, subscriptions being made and sweeps; under r.mu

	mu     sync.Mutex
	err    error  // set when loading or following failed
	cur    Cursor // what the topic has delivered
	lastOf map[uuid.UUID]delivered
	subs   map[*Subscription]struct{}
}

// delivered is the last event of a market a topic delivered: its stream and seq, and the epoch
// its holder held the market with, when the topic knows it (a live batch's).
type delivered struct {
	holder string
	seq    int64
	epoch  int64
	known  bool
}

// Market is what the order of an account's events is kept by: the market of an order, fill or
// settlement, the event of a conversion (zero: none).
func (e *AccountEvent) Market() uuid.UUID {
	switch {
	case e.Order != nil:
		return e.Order.MarketID
	case e.Fill != nil:
		return e.Fill.MarketID
	case e.Settlement != nil:
		return e.Settlement.MarketID
	case e.Conversion != nil:
		return e.Conversion.EventID
	}
	return uuid.Nil
}

// acquire returns the account's topic, loading it on first use; release it when done.
func (r *accountTopics) acquire(ctx context.Context, id int64) (*accountTopic, error) {
	r.mu.Lock()
	t, ok := r.m[id]
	if ok {
		t.refs++
		r.mu.Unlock()
		t.mu.Lock() // waits for the topic to load
		err := t.err
		t.mu.Unlock()
		if err != nil {
			r.release(t)
			return nil, err
		}
		return t, nil
	}
	t = &accountTopic{r: r, id: id, refs: 1, lastOf: map[uuid.UUID]delivered{}, subs: map[*Subscription]struct{}{}}
	t.mu.Lock()
	r.m[id] = t
	r.mu.Unlock()
	defer t.mu.Unlock()
	streams, err := r.log.AccountFeed(ctx, id)
	if err != nil {
		t.err = err
		r.release(t) // forgotten at once: the next subscription tries again
		return nil, err
	}
	t.cur = FeedEnd(streams)
	return t, nil
}

// release gives a topic up; the last one out forgets it.
func (r *accountTopics) release(t *accountTopic) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.refs--
	if t.refs == 0 && r.m[t.id] == t {
		delete(r.m, t.id)
	}
}

// ingest takes a committed batch of an account's feed.
func (r *accountTopics) ingest(ctx context.Context, b Batch) {
	r.mu.Lock()
	t := r.m[b.Account]
	r.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil || b.Last <= t.cur[b.Holder] {
		return
	}
	events, err := DecodeAccount(b.Events, b.Holder, b.First, b.Last)
	if err != nil {
		t.fail(fmt.Errorf("while reading the events %d to %d of stream %q: %w", b.First, b.Last, b.Holder, err))
		return
	}
	if b.First == t.cur[b.Holder]+1 && t.follows(&b, events) {
		t.apply(events)
	} else if err := t.catchUp(ctx); err != nil {
		t.fail(err)
		return
	}
	// The batch's markets' last events delivered are its, or later ones: note its tenures.
	for i := range events {
		m := events[i].Market()
		if epoch, ok := b.Epochs[m]; ok && t.lastOf[m].holder == b.Holder && t.lastOf[m].seq == events[i].Seq {
			t.lastOf[m] = delivered{holder: b.Holder, seq: events[i].Seq, epoch: epoch, known: true}
		}
	}
}

// follows says whether every market of a batch's events is in the tenure the topic last delivered
// it under. Under t.mu.
func (t *accountTopic) follows(b *Batch, events []AccountEvent) bool {
	for i := range events {
		m := events[i].Market()
		epoch, ok := b.Epochs[m]
		if last := t.lastOf[m]; m == uuid.Nil || !ok || !last.known || last.holder != b.Holder || last.epoch != epoch {
			return false
		}
	}
	return true
}

// catchUp delivers every stream of the account up to what Postgres holds now, merged by position.
// Under t.mu.
func (t *accountTopic) catchUp(ctx context.Context) error {
	for {
		events, _, err := t.r.read(ctx, t.id, t.cur, nil)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		t.apply(events)
		if t.err != nil {
			return t.err
		}
	}
}

// read returns up to a page of the account's events after the cursor after (and up to upTo, when
// set) from Postgres, and the cursor after them.
func (r *accountTopics) read(ctx context.Context, id int64, after Cursor, upTo Cursor) ([]AccountEvent, Cursor, error) {
	batches, err := r.log.AccountEventsAfter(ctx, id, after, r.page, upTo)
	if err != nil {
		return nil, nil, fmt.Errorf("while reading the events after cursor %s: %w", after, err)
	}
	return AccountPage(batches, after, r.page, upTo)
}

// apply takes events in the order they are to be delivered (each stream's in seq order; those
// already delivered are skipped) and fans them out. Under t.mu.
func (t *accountTopic) apply(events []AccountEvent) {
	fresh := events[:0:0]
	for i := range events {
		e := &events[i]
		switch seen := t.cur[e.Stream]; {
		case e.Seq <= seen:
			continue
		case e.Seq != seen+1:
			// Cannot happen with batches as the shards write them; a topic that skipped would be
			// wrong for good, so it ends.
			t.fail(fmt.Errorf("event %d of stream %q follows %d", e.Seq, e.Stream, seen))
			return
		}
		t.cur[e.Stream] = e.Seq
		if m := e.Market(); m != uuid.Nil {
			t.lastOf[m] = delivered{holder: e.Stream, seq: e.Seq} // its tenure noted by ingest
		}
		fresh = append(fresh, *e)
	}
	if len(fresh) == 0 {
		return
	}
	cursor := t.cur.String()
	msgs := map[string][]byte{}
	for s := range t.subs {
		msg, made := msgs[s.Channel]
		if !made {
			msg = accountMessage(s.Channel, fresh, cursor)
			msgs[s.Channel] = msg
		}
		if len(msg) > 0 {
			s.Out.Send(msg)
		}
	}
}

// fail ends a topic that could not follow its feed: its connections are closed, for their
// clients to resume. Under t.mu.
func (t *accountTopic) fail(err error) {
	if t.err != nil {
		return // failed already, its subscribers told
	}
	t.r.logger.Warn("lost the thread of a feed; its subscribers are disconnected to resume",
		"account", t.id, "cursor", t.cur.String(), "err", err)
	t.err = err
	for s := range t.subs {
		s.Out.Drop("your account's feed was interrupted: reconnect and resume from your last cursor")
	}
	clear(t.subs)
	t.r.mu.Lock()
	if t.r.m[t.id] == t {
		delete(t.r.m, t.id)
	}
	t.r.mu.Unlock()
}

// catchUpAll brings every topic up to the last seqs of its account's streams, as a sweep.
func (r *accountTopics) catchUpAll(ctx context.Context) error {
	r.mu.Lock()
	held := make([]*accountTopic, 0, len(r.m))
	ids := make([]int64, 0, len(r.m))
	for id, t := range r.m {
		t.refs++
		held, ids = append(held, t), append(ids, id)
	}
	r.mu.Unlock()
	defer func() {
		for _, t := range held {
			r.release(t)
		}
	}()
	if len(ids) == 0 {
		return nil
	}
	seqs, err := r.log.AccountSeqs(ctx, ids)
	if err != nil {
		return err
	}
	for _, t := range held {
		t.mu.Lock()
		if t.err == nil && !t.cur.Covers(seqs[t.id]) {
			if err := t.catchUp(ctx); err != nil {
				t.fail(err)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// subscribe starts a subscription of an account's channel (see Hub.SubscribeAccount).
func (r *accountTopics) subscribe(ctx context.Context, s *Subscription, resume Cursor, ack func(Cursor) []byte) error {
	t, err := r.acquire(ctx, s.Account)
	if err != nil {
		return err
	}
	if err := t.subscribe(ctx, s, resume, ack); err != nil {
		r.release(t)
		return err
	}
	return nil
}

func (t *accountTopic) subscribe(ctx context.Context, s *Subscription, resume Cursor, ack func(Cursor) []byte) error {
	r := t.r
	if resume == nil {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.err != nil {
			return t.err
		}
		s.Out.Send(ack(t.cur.Clone()))
		t.subs[s] = struct{}{}
		return nil
	}
	after := resume.Clone()
	acked := false
	// send queues replayed events, waiting for room, after the confirmation if it has not gone yet.
	send := func(events []AccountEvent, next Cursor, wait bool) error {
		out := func(msg []byte) bool { s.Out.Send(msg); return true } // a full queue closes the connection
		if wait {
			out = func(msg []byte) bool { return s.Out.SendWait(ctx, msg) == nil }
		}
		if !acked {
			if !out(ack(after)) {
				return ctx.Err()
			}
			acked = true
		}
		if msg := accountMessage(s.Channel, events, next.String()); msg != nil && !out(msg) {
			return ctx.Err()
		}
		return nil
	}
	for page := 0; ; {
		t.mu.Lock()
		if t.err != nil {
			t.mu.Unlock()
			return t.err
		}
		if !t.cur.Covers(after) {
			// The client has seen events this topic has not yet: they came through another front,
			// or a stream this one has not read yet. They are in Postgres if they are real.
			if err := t.catchUp(ctx); err != nil {
				t.fail(err)
				t.mu.Unlock()
				return err
			}
			if !t.cur.Covers(after) {
				t.mu.Unlock()
				return ErrAhead
			}
		}
		behind := int64(0)
		for h, seq := range t.cur {
			behind += seq - after[h]
		}
		if behind <= int64(r.page) {
			// The last page, read under the lock up to what the topic has delivered, queued and
			// joined to the live events.
			events, next, err := r.read(ctx, t.id, after, t.cur)
			if err == nil && int64(len(events)) != behind {
				err = ErrResyncRequired // delivered live, and pruned since
			}
			if err == nil {
				err = send(events, next, false)
			}
			if err == nil {
				t.subs[s] = struct{}{}
			}
			t.mu.Unlock()
			return err
		}
		t.mu.Unlock()
		// More than a page behind: a page at a time from Postgres, without the lock.
		if s.ReadPage != nil {
			if err := s.ReadPage(ctx, page); err != nil {
				return err
			}
		}
		page++
		streams, err := r.log.AccountFeed(ctx, t.id)
		if err != nil {
			return err
		}
		if err := CheckKept(streams, after); err != nil {
			return err
		}
		events, next, err := r.read(ctx, t.id, after, nil)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return ErrResyncRequired
		}
		if err := send(events, next, true); err != nil {
			return err
		}
		after = next
	}
}

// unsubscribe ends a subscription of an account's feed.
func (r *accountTopics) unsubscribe(id int64, s *Subscription) {
	r.mu.Lock()
	t := r.m[id]
	r.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	_, ok := t.subs[s]
	delete(t.subs, s)
	t.mu.Unlock()
	if ok {
		r.release(t)
	}
}

// accountMessage carries an account's events on the orders channel, or its fills on the fills
// channel, and the cursor after them (nil when there is nothing to carry).
func accountMessage(channel string, events []AccountEvent, cursor string) []byte {
	switch channel {
	case ChannelOrders:
	case ChannelFills:
		events = fillsOf(events)
	default:
		return nil
	}
	if len(events) == 0 {
		return nil
	}
	return encode(AccountEventsMessage{Type: "accountEvents", Channel: channel, Events: events, Cursor: cursor})
}

func fillsOf(events []AccountEvent) []AccountEvent {
	var out []AccountEvent
	for _, e := range events {
		if e.Type == AccountFill {
			out = append(out, e)
		}
	}
	return out
}

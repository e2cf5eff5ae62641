package feed

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A topic of one gapless sequence: a market's feed (its book, trades and ticker channels) is
// followed, resumed and swept through it, what sets it apart passed in as a kind: the key, how a
// topic starts and reads Postgres, and the messages its channels carry. (An account's feed, one
// stream per holder, is followed by its own topic: accounttopic.go.) A topic's sequence is gapless: a batch that does not follow on
// from the topic's last seq first brings the topic up to date from Postgres (fill), one already
// seen is skipped, and one that cannot be followed ends the topic, its subscribers being dropped
// to resume (fail). A subscription that resumes is replayed from the topic's ring, or from
// Postgres a page at a time without the topic's lock when the ring no longer holds it, and joins
// the live fan-out under the lock: no gap, no duplicate.

// numbered is an event of a gapless feed.
type numbered interface{ number() int64 }

func (e Event) number() int64 { return e.Seq }

// kind is what sets the topics of one kind of feed apart.
type kind[K comparable, E numbered] interface {
	// load starts following key: its view and last seq now.
	load(ctx context.Context, key K) (view[E], int64, error)
	// first returns the first seq of key's feed Postgres still keeps (0: none).
	first(ctx context.Context, key K) (int64, error)
	// read returns up to limit of key's events after seq from Postgres, in order.
	read(ctx context.Context, key K, after int64, limit int) ([]E, error)
	// decode reads a committed batch's events, numbered.
	decode(b Batch) ([]E, error)
	// message carries events on a channel (nil when none of them are the channel's).
	message(key K, channel string, events []E) []byte
	// resumes says whether a channel replays from a seq (the ticker starts afresh).
	resumes(channel string) bool
	// lost is what a dropped subscriber is told when its topic loses the thread.
	lost(key K) string
}

// view is what one topic keeps beyond its seq for its channels: a market's book and ticker, or
// nothing. Under the topic's lock.
type view[E numbered] interface {
	// apply folds in the events that follow on from the topic's seq.
	apply(events []E)
	// live is a channel's message for the events just applied (nil: none).
	live(channel string, events []E) []byte
	// start is what a subscription that does not resume receives after its confirmation (nil: nothing).
	start(channel string) []byte
}

// topics are the topics of one kind a hub follows, by key.
type topics[K comparable, E numbered] struct {
	kind   kind[K, E]
	name   string // the logs' attribute: market or account
	logger *slog.Logger
	ring   int // events a topic keeps for resumes (0: none, resumes read Postgres)
	page   int // events per replay message and per read of Postgres
	keep   int // topics kept without subscriptions, each for keepFor (0: none)

	loads atomic.Int64 // kind.load calls

	mu   sync.Mutex
	m    map[K]*topic[K, E]
	kept map[*topic[K, E]]struct{} // topics without subscriptions, kept for a while
}

func newTopics[K comparable, E numbered](k kind[K, E], name string, logger *slog.Logger, ring, keep int) *topics[K, E] {
	return &topics[K, E]{kind: k, name: name, logger: logger, ring: ring, page: pageEvents, keep: keep,
		m: map[K]*topic[K, E]{}, kept: map[*topic[K, E]]struct{}{}}
}

// topic is one market or account someone follows.
type topic[K comparable, E numbered] struct {
	r    *topics[K, E]
	key  K
	refs int       // subscriptions, subscriptions being made and sweeps; under r.mu
	idle time.Time // when refs last fell to 0, while kept; under r.mu

	mu   sync.Mutex
	err  error // set when loading or following failed
	seq  int64
	view view[E]
	ring []E // the last events, up to seq, gapless
	subs map[*Subscription]struct{}
}

// acquire returns key's topic, loading it on first use; release it when done.
func (r *topics[K, E]) acquire(ctx context.Context, key K) (*topic[K, E], error) {
	r.mu.Lock()
	t, ok := r.m[key]
	if ok {
		t.refs++
		delete(r.kept, t)
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
	t = &topic[K, E]{r: r, key: key, refs: 1, subs: map[*Subscription]struct{}{}}
	t.mu.Lock()
	r.m[key] = t
	r.mu.Unlock()
	defer t.mu.Unlock()
	r.loads.Add(1)
	t.view, t.seq, t.err = r.kind.load(ctx, key)
	if t.err != nil {
		// Forgotten at once, not kept: the next subscription tries again.
		r.mu.Lock()
		t.refs--
		if r.m[key] == t {
			delete(r.m, key)
		}
		r.mu.Unlock()
		return nil, t.err
	}
	return t, nil
}

// release gives a topic up; the last one out leaves it kept for keepFor.
func (r *topics[K, E]) release(t *topic[K, E]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.refs--
	if t.refs > 0 || r.m[t.key] != t {
		return
	}
	if _, kept := r.kept[t]; kept {
		return // the sweep's own hold ended: still idle since it was
	}
	t.idle = time.Now()
	r.kept[t] = struct{}{}
	if len(r.kept) > r.keep {
		var oldest *topic[K, E]
		for k := range r.kept {
			if oldest == nil || k.idle.Before(oldest.idle) {
				oldest = k
			}
		}
		r.forget(oldest)
	}
}

// forget drops a kept topic. Under r.mu.
func (r *topics[K, E]) forget(t *topic[K, E]) {
	delete(r.kept, t)
	if t.refs == 0 && r.m[t.key] == t {
		delete(r.m, t.key)
	}
}

// dropIdle forgets the topics kept longer than keepFor.
func (r *topics[K, E]) dropIdle(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for t := range r.kept {
		if t.refs == 0 && now.Sub(t.idle) >= keepFor {
			r.forget(t)
		}
	}
}

// len is how many topics are followed, those kept without subscriptions included.
func (r *topics[K, E]) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// ingest takes a committed batch of key's feed.
func (r *topics[K, E]) ingest(ctx context.Context, key K, b Batch) {
	r.mu.Lock()
	t := r.m[key]
	r.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil || b.Last <= t.seq {
		return
	}
	if b.First > t.seq+1 {
		if err := t.fill(ctx, b.First-1); err != nil {
			t.fail(err)
			return
		}
	}
	events, err := r.kind.decode(b)
	if err != nil {
		t.fail(fmt.Errorf("while reading the events %d to %d: %w", b.First, b.Last, err))
		return
	}
	t.apply(events)
}

// catchUp brings every topic up to the last seq last gives for it (none: up to date), as a sweep.
func (r *topics[K, E]) catchUp(ctx context.Context, last func(keys []K) (map[K]int64, error)) error {
	r.mu.Lock()
	held := make([]*topic[K, E], 0, len(r.m))
	keys := make([]K, 0, len(r.m))
	for key, t := range r.m {
		t.refs++
		held, keys = append(held, t), append(keys, key)
	}
	r.mu.Unlock()
	defer func() {
		for _, t := range held {
			r.release(t)
		}
	}()
	if len(keys) == 0 {
		return nil
	}
	seqs, err := last(keys)
	if err != nil {
		return err
	}
	for _, t := range held {
		t.mu.Lock()
		if seq, ok := seqs[t.key]; ok && t.err == nil && t.seq < seq {
			if err := t.fill(ctx, seq); err != nil {
				t.fail(err)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// read returns up to a page of the topic's events after seq from Postgres.
func (t *topic[K, E]) read(ctx context.Context, after int64) ([]E, error) {
	events, err := t.r.kind.read(ctx, t.key, after, t.r.page)
	if err != nil {
		return nil, fmt.Errorf("while reading the events after %d: %w", after, err)
	}
	return events, nil
}

// fill brings the topic up to at least seq from Postgres. Under t.mu.
func (t *topic[K, E]) fill(ctx context.Context, seq int64) error {
	for t.seq < seq {
		before := t.seq
		events, err := t.read(ctx, before)
		if err != nil {
			return err
		}
		t.apply(events)
		if t.err != nil {
			return t.err
		}
		if t.seq == before {
			return fmt.Errorf("the events after %d up to %d are not kept", before, seq)
		}
	}
	return nil
}

// fail ends a topic that could not follow its feed: its connections are closed, for their
// clients to resume. Under t.mu.
func (t *topic[K, E]) fail(err error) {
	if t.err != nil {
		return // failed already, its subscribers told
	}
	t.r.logger.Warn("lost the thread of a feed; its subscribers are disconnected to resume",
		t.r.name, t.key, "seq", t.seq, "err", err)
	t.err = err
	for s := range t.subs {
		s.Out.Drop(t.r.kind.lost(t.key))
	}
	clear(t.subs)
	t.r.mu.Lock()
	if t.r.m[t.key] == t {
		delete(t.r.m, t.key)
	}
	delete(t.r.kept, t)
	t.r.mu.Unlock()
}

// apply takes events in order (those already applied are skipped) and fans them out. Under t.mu.
func (t *topic[K, E]) apply(events []E) {
	i := 0
	for i < len(events) && events[i].number() <= t.seq {
		i++
	}
	events = events[i:]
	if len(events) == 0 {
		return
	}
	for i, e := range events {
		if e.number() != t.seq+1+int64(i) {
			// Cannot happen with batches as the shards write them; a topic that skipped would
			// be wrong for good, so it ends.
			t.fail(fmt.Errorf("event %d follows %d", e.number(), t.seq+int64(i)))
			return
		}
	}
	t.view.apply(events)
	t.seq = events[len(events)-1].number()
	if n := t.r.ring; n > 0 {
		t.ring = append(t.ring, events...)
		if len(t.ring) > 2*n {
			t.ring = append(t.ring[:0], t.ring[len(t.ring)-n:]...)
		}
	}
	// Each channel's message is made once, for the first of its subscribers.
	type made struct {
		channel string
		msg     []byte
	}
	var msgs []made
	for s := range t.subs {
		var msg []byte
		found := false
		for _, m := range msgs {
			if m.channel == s.Channel {
				msg, found = m.msg, true
				break
			}
		}
		if !found {
			msg = t.view.live(s.Channel, events)
			msgs = append(msgs, made{s.Channel, msg})
		}
		if len(msg) > 0 {
			s.Out.Send(msg)
		}
	}
}

// subscribe starts a subscription of key's feed (see Hub.Subscribe).
func (r *topics[K, E]) subscribe(ctx context.Context, key K, s *Subscription, resume *int64, ack func(seq *int64) []byte) error {
	t, err := r.acquire(ctx, key)
	if err != nil {
		return err
	}
	if err := t.subscribe(ctx, s, resume, ack); err != nil {
		r.release(t)
		return err
	}
	return nil
}

func (t *topic[K, E]) subscribe(ctx context.Context, s *Subscription, resume *int64, ack func(seq *int64) []byte) error {
	r := t.r
	if resume == nil || !r.kind.resumes(s.Channel) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.err != nil {
			return t.err
		}
		s.Out.Send(ack(nil))
		if msg := t.view.start(s.Channel); msg != nil {
			s.Out.Send(msg)
		}
		t.subs[s] = struct{}{}
		return nil
	}
	after := *resume
	acked := false
	// sendPage queues a page of the replay, waiting for room, after the confirmation if it has
	// not gone yet; it returns the seq the replay has reached.
	sendPage := func(events []E) (int64, error) {
		if !acked {
			if err := s.Out.SendWait(ctx, ack(nil)); err != nil {
				return 0, err
			}
			acked = true
		}
		if msg := r.kind.message(t.key, s.Channel, events); msg != nil {
			if err := s.Out.SendWait(ctx, msg); err != nil {
				return 0, err
			}
		}
		return events[len(events)-1].number(), nil
	}
	for page := 0; ; {
		t.mu.Lock()
		if t.err != nil {
			t.mu.Unlock()
			return t.err
		}
		if after > t.seq {
			// The client has seen events this topic has not yet: they came through another
			// front, or a stream this one has not read yet. They are in Postgres if they are real.
			if err := t.fill(ctx, after); err != nil {
				t.mu.Unlock()
				return ErrAhead
			}
		}
		oldest := t.seq - int64(len(t.ring)) // the ring holds the events after it
		if after >= oldest {
			rest := t.ring[after-oldest:]
			if len(rest) <= r.page {
				// The last page, queued and joined to the live events under the lock.
				if !acked {
					s.Out.Send(ack(nil))
				}
				if len(rest) > 0 {
					if msg := r.kind.message(t.key, s.Channel, rest); msg != nil {
						s.Out.Send(msg)
					}
				}
				t.subs[s] = struct{}{}
				t.mu.Unlock()
				return nil
			}
			// More than a page behind: a page at a time, each waiting for room in the
			// connection's queue without the lock, as from Postgres.
			events := slices.Clone(rest[:r.page])
			t.mu.Unlock()
			var err error
			if after, err = sendPage(events); err != nil {
				return err
			}
			continue
		}
		t.mu.Unlock()
		// Too far behind for the ring: read a page from Postgres, without the lock.
		if s.ReadPage != nil {
			if err := s.ReadPage(ctx, page); err != nil {
				return err
			}
		}
		page++
		first, err := r.kind.first(ctx, t.key)
		if err != nil {
			return err
		}
		if first == 0 || after+1 < first {
			return ErrResyncRequired
		}
		events, err := t.read(ctx, after)
		if err != nil {
			return err
		}
		if len(events) == 0 || events[0].number() != after+1 {
			return ErrResyncRequired
		}
		if after, err = sendPage(events); err != nil {
			return err
		}
	}
}

// unsubscribe ends a subscription of key's feed.
func (r *topics[K, E]) unsubscribe(key K, s *Subscription) {
	r.mu.Lock()
	t := r.m[key]
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

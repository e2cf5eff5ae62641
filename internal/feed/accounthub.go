package feed

import (
	"context"
	"fmt"
	"sync"
)

// The hub's side of the account feeds: for each account with a subscription on this front (the
// orders and fills channels of its connections), a topic follows the account's last seq. As for
// markets, a batch that does not follow on from the topic's last seq first brings it up to date
// from Postgres, the sweep compares every topic with the account's last seq once a second, and a
// resume replays from Postgres (an account's events are few beside a market's: no ring) and then
// joins the live fan-out under the topic's lock.

// AccountLog is where the hub reads what it did not see live of accounts' feeds.
type AccountLog interface {
	// AccountEventsAfter returns the batches holding an account's events after seq, oldest first,
	// with at least limit events unless fewer are kept.
	AccountEventsAfter(ctx context.Context, account int64, after int64, limit int) ([]Batch, error)
	// AccountFeed returns the first seq of an account's feed still kept (0: none) and its last.
	AccountFeed(ctx context.Context, account int64) (first, last int64, err error)
	// AccountSeqs returns the last seq of each account.
	AccountSeqs(ctx context.Context, accounts []int64) (map[int64]int64, error)
}

// accountTopic is one account someone follows.
type accountTopic struct {
	hub  *Hub
	id   int64
	refs int // under hub.mu

	mu   sync.Mutex
	err  error
	seq  int64
	subs map[*Subscription]struct{}
}

// acquireAccount returns the account's topic, loading it on first use; release it when done.
func (h *Hub) acquireAccount(ctx context.Context, id int64) (*accountTopic, error) {
	h.mu.Lock()
	t, ok := h.accounts[id]
	if ok {
		t.refs++
		h.mu.Unlock()
		t.mu.Lock()
		err := t.err
		t.mu.Unlock()
		if err != nil {
			h.releaseAccount(t)
			return nil, err
		}
		return t, nil
	}
	t = &accountTopic{hub: h, id: id, refs: 1, subs: map[*Subscription]struct{}{}}
	t.mu.Lock()
	h.accounts[id] = t
	h.mu.Unlock()
	defer t.mu.Unlock()
	_, t.seq, t.err = h.log.AccountFeed(ctx, id)
	if t.err != nil {
		err := t.err
		h.releaseAccount(t)
		return nil, err
	}
	return t, nil
}

func (h *Hub) releaseAccount(t *accountTopic) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t.refs--
	if t.refs == 0 && h.accounts[t.id] == t {
		delete(h.accounts, t.id)
	}
}

// ingestAccount takes a committed batch of an account's feed.
func (h *Hub) ingestAccount(ctx context.Context, b Batch) {
	h.mu.Lock()
	t := h.accounts[b.Account]
	h.mu.Unlock()
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
	events, err := DecodeAccount(b.Events, b.First, b.Last)
	if err != nil {
		t.fail(fmt.Errorf("while reading the events %d to %d: %w", b.First, b.Last, err))
		return
	}
	t.apply(events)
}

// fill brings the topic up to at least seq from Postgres. Under t.mu.
func (t *accountTopic) fill(ctx context.Context, seq int64) error {
	for t.seq < seq {
		before := t.seq
		events, err := t.read(ctx, before)
		if err != nil {
			return err
		}
		t.apply(events)
		if t.seq == before {
			return fmt.Errorf("the events after %d up to %d are not kept", before, seq)
		}
	}
	return nil
}

// read returns up to a page of the account's events after seq from Postgres.
func (t *accountTopic) read(ctx context.Context, after int64) ([]AccountEvent, error) {
	batches, err := t.hub.log.AccountEventsAfter(ctx, t.id, after, pageEvents)
	if err != nil {
		return nil, fmt.Errorf("while reading the events after %d: %w", after, err)
	}
	return AccountPage(batches, after, pageEvents)
}

// fail ends a topic that could not follow its account: its connections are closed, to resume.
// Under t.mu.
func (t *accountTopic) fail(err error) {
	t.hub.logger.Warn("lost the thread of an account's feed; its subscribers are disconnected to resume",
		"account", t.id, "seq", t.seq, "err", err)
	t.err = err
	for s := range t.subs {
		s.Out.Drop("your account's feed was interrupted: reconnect and resume from your last seq")
	}
	clear(t.subs)
	t.hub.mu.Lock()
	if t.hub.accounts[t.id] == t {
		delete(t.hub.accounts, t.id)
	}
	t.hub.mu.Unlock()
}

// apply takes events in order (those already applied are skipped) and fans them out. Under t.mu.
func (t *accountTopic) apply(events []AccountEvent) {
	i := 0
	for i < len(events) && events[i].Seq <= t.seq {
		i++
	}
	events = events[i:]
	if len(events) == 0 {
		return
	}
	for _, e := range events {
		if e.Seq != t.seq+1 {
			t.fail(fmt.Errorf("event %d follows %d", e.Seq, t.seq))
			return
		}
		t.seq = e.Seq
	}
	var orders, fills []byte
	for s := range t.subs {
		var msg []byte
		switch s.Channel {
		case ChannelOrders:
			if orders == nil {
				orders = encode(AccountEventsMessage{Type: "accountEvents", Channel: ChannelOrders, Events: events})
			}
			msg = orders
		case ChannelFills:
			if fills == nil {
				fills = []byte{}
				if f := fillsOf(events); len(f) > 0 {
					fills = encode(AccountEventsMessage{Type: "accountEvents", Channel: ChannelFills, Events: f})
				}
			}
			msg = fills
		}
		if len(msg) > 0 {
			s.Out.Send(msg)
		}
	}
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

// SubscribeAccount starts a subscription of an account's channel (orders or fills). With resume,
// the events after *resume are replayed first; either way the live events follow with no gap and
// no duplicate. ack(seq) is the confirmation, queued first, given the seq the live events follow.
func (h *Hub) SubscribeAccount(ctx context.Context, s *Subscription, resume *int64, ack func(seq int64) []byte) error {
	t, err := h.acquireAccount(ctx, s.Account)
	if err != nil {
		return err
	}
	if err := t.subscribe(ctx, s, resume, ack); err != nil {
		h.releaseAccount(t)
		return err
	}
	return nil
}

func (t *accountTopic) subscribe(ctx context.Context, s *Subscription, resume *int64, ack func(seq int64) []byte) error {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return t.err
	}
	if resume == nil {
		defer t.mu.Unlock()
		s.Out.Send(ack(t.seq))
		t.subs[s] = struct{}{}
		return nil
	}
	t.mu.Unlock()
	after := *resume
	acked := false
	for page := 0; ; page++ {
		t.mu.Lock()
		if t.err != nil {
			t.mu.Unlock()
			return t.err
		}
		if after > t.seq {
			// Events this topic has not seen yet, through another front or a stream not read
			// yet: in Postgres if they are real.
			if err := t.fill(ctx, after); err != nil {
				t.mu.Unlock()
				return ErrAhead
			}
		}
		if after == t.seq {
			if !acked {
				s.Out.Send(ack(after))
			}
			t.subs[s] = struct{}{}
			t.mu.Unlock()
			return nil
		}
		t.mu.Unlock()
		// Behind the topic: read a page from Postgres, without the lock.
		if s.ReadPage != nil {
			if err := s.ReadPage(ctx, page); err != nil {
				return err
			}
		}
		first, _, err := t.hub.log.AccountFeed(ctx, t.id)
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
		if len(events) == 0 || events[0].Seq != after+1 {
			return ErrResyncRequired
		}
		if !acked {
			if err := s.Out.SendWait(ctx, ack(after)); err != nil {
				return err
			}
			acked = true
		}
		send := events
		if s.Channel == ChannelFills {
			send = fillsOf(events)
		}
		if len(send) > 0 {
			if err := s.Out.SendWait(ctx, encode(AccountEventsMessage{Type: "accountEvents", Channel: s.Channel, Events: send})); err != nil {
				return err
			}
		}
		after = events[len(events)-1].Seq
	}
}

// UnsubscribeAccount ends an account subscription.
func (h *Hub) UnsubscribeAccount(s *Subscription) {
	h.mu.Lock()
	t := h.accounts[s.Account]
	h.mu.Unlock()
	if t == nil {
		return
	}
	t.mu.Lock()
	_, ok := t.subs[s]
	delete(t.subs, s)
	t.mu.Unlock()
	if ok {
		t.hub.releaseAccount(t)
	}
}

// sweepAccounts brings every followed account up to its last seq in Postgres.
func (h *Hub) sweepAccounts(ctx context.Context) error {
	h.mu.Lock()
	topics := make([]*accountTopic, 0, len(h.accounts))
	ids := make([]int64, 0, len(h.accounts))
	for id, t := range h.accounts {
		t.refs++
		topics, ids = append(topics, t), append(ids, id)
	}
	h.mu.Unlock()
	defer func() {
		for _, t := range topics {
			h.releaseAccount(t)
		}
	}()
	if len(ids) == 0 {
		return nil
	}
	seqs, err := h.log.AccountSeqs(ctx, ids)
	if err != nil {
		return err
	}
	for _, t := range topics {
		t.mu.Lock()
		if seq := seqs[t.id]; t.err == nil && t.seq < seq {
			if err := t.fill(ctx, seq); err != nil {
				t.fail(err)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

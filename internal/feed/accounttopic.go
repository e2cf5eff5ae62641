package feed

import (
	"context"
)

// An account's topic: its key is the account's id, its channels orders and fills; for each account
// with a subscription on this front (the orders and fills channels of its connections) a topic
// follows the account's last seq. An account's events are few beside a market's: no ring (a
// resume reads Postgres), no view beyond the seq, no topic kept after its last subscription.

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

// accounts is the account kind of topic.
type accounts struct{ log AccountLog }

func (k accounts) load(ctx context.Context, id int64) (view[AccountEvent], int64, error) {
	_, last, err := k.log.AccountFeed(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	return accountView{}, last, nil
}

func (k accounts) first(ctx context.Context, id int64) (int64, error) {
	first, _, err := k.log.AccountFeed(ctx, id)
	return first, err
}

func (k accounts) read(ctx context.Context, id int64, after int64, limit int) ([]AccountEvent, error) {
	batches, err := k.log.AccountEventsAfter(ctx, id, after, limit)
	if err != nil {
		return nil, err
	}
	return AccountPage(batches, after, limit)
}

func (accounts) decode(b Batch) ([]AccountEvent, error) {
	return DecodeAccount(b.Events, b.First, b.Last)
}

func (accounts) resumes(string) bool { return true }

func (accounts) lost(int64) string {
	return "your account's feed was interrupted: reconnect and resume from your last seq"
}

// message carries an account's events on the orders channel, or its fills on the fills channel.
func (accounts) message(_ int64, channel string, events []AccountEvent) []byte {
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
	return encode(AccountEventsMessage{Type: "accountEvents", Channel: channel, Events: events})
}

// accountView is nothing: an account's channels carry its events and nothing else.
type accountView struct{}

func (accountView) apply([]AccountEvent) {}

func (accountView) live(channel string, events []AccountEvent) []byte {
	return accounts{}.message(0, channel, events)
}

func (accountView) start(string) []byte { return nil }

func fillsOf(events []AccountEvent) []AccountEvent {
	var out []AccountEvent
	for _, e := range events {
		if e.Type == AccountFill {
			out = append(out, e)
		}
	}
	return out
}

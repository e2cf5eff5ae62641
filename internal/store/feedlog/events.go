package feedlog

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/feed"
	"github.com/pmx-dev/pmx/internal/store/db"
)

// The event batches of one market, or of one stream of an account's feed ($1, and $5 the
// stream's holder), that hold events after seq $2, oldest first, until they hold at least $3 of
// them. A key's batches hold contiguous, non-overlapping ranges of seqs, so these are the one that
// began at or before $2 if it holds $2 + 1, then those that begin after it, of which the ones
// beginning by $4 = $2 + $3 (the head) are all needed when there is no gap, and those beyond only
// when the head holds fewer than $3 events (a gap: never in a kept feed, but a page must not
// depend on it). Each part is a range of the primary key bounded by $3 rows, so a page costs the
// same whether the feed keeps a hundred batches or a million; a filter on last_seq, which no
// index orders, would read every batch after $2 (issue 34). The running count then keeps the
// batches up to the one that brings the count to $3, as before.
var (
	marketEventsAfter  = eventsAfterSQL("market_events", "market_id = $1", "market_id, first_seq, last_seq, events")
	accountStreamAfter = eventsAfterSQL("account_events", "account_id = $1 and holder = $5",
		"account_id, holder, position, first_seq, last_seq, events")
)

func eventsAfterSQL(table, match, cols string) string {
	// n: how many of a batch's events are after $2; written so that no seq near 2^63 overflows.
	const n = `last_seq - greatest(first_seq - 1, $2)`
	return `with head as (
		  (select ` + cols + ` from ` + table + ` where ` + match + ` and first_seq <= $2
		   order by first_seq desc limit 1)
		  union all
		  (select ` + cols + ` from ` + table + ` where ` + match + ` and first_seq > $2 and first_seq <= $4
		   order by first_seq)
		), kept as (
		  select * from head where last_seq > $2
		  union all
		  (select ` + cols + ` from ` + table + ` where ` + match + ` and first_seq > $4
		     and (select coalesce(sum(` + n + `), 0) from head where last_seq > $2) < $3
		   order by first_seq limit $3)
		)
		select ` + cols + ` from (
		  select *, sum(` + n + `) over (order by first_seq) - (` + n + `) as before from kept) e
		where before < $3 order by first_seq`
}

// eventsAfter runs one of the queries above.
func (s *Log) eventsAfter(ctx context.Context, query string, key any, after int64, limit int) (pgx.Rows, error) {
	return s.Pool.Query(ctx, query, eventsAfterArgs(key, after, limit)...)
}

// eventsAfterArgs are the queries' parameters: a limit below 1 reads as 0, which needs no batch.
func eventsAfterArgs(key any, after int64, limit int) []any {
	limit = max(limit, 0)
	head := after + int64(limit)
	if head < after { // past the last seq there can be
		head = math.MaxInt64
	}
	return []any{key, after, limit, head}
}

// EventsAfter returns a market's event batches that hold events after seq, oldest first, until
// they hold at least limit of them.
func (s *Log) EventsAfter(ctx context.Context, market uuid.UUID, after int64, limit int) ([]db.EventBatch, error) {
	rows, err := s.eventsAfter(ctx, marketEventsAfter, market, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.EventBatch, error) {
		var b db.EventBatch
		err := r.Scan(&b.Market, &b.First, &b.Last, &b.Events)
		return b, err
	})
}

// Where a feed starts: the first key of the primary key's range, one index entry however many
// batches the feed keeps.
const firstEventSQL = `select min(first_seq) from market_events where market_id = $1`

// The streams of accounts' feeds and their last numbers: the stream of holder ” numbered on the
// account's row (every feed's first stream), each other holder's on its allocation (migration
// 032). streamsSQL reads them for accounts $1; accountFeedSQL for account $1, with each stream's
// first seq kept: one index entry each, however many batches the streams keep.
const (
	streamsSQL = `select id, '', event_seq from accounts where id = any($1)
		union all select account_id, holder, event_seq from allocations where account_id = any($1)`
	accountFeedSQL = `select s.holder, s.last,
		  coalesce((select min(first_seq) from account_events e where e.account_id = $1 and e.holder = s.holder), 0)
		from (select '' as holder, event_seq as last from accounts where id = $1
		      union all select holder, event_seq from allocations where account_id = $1) s`
)

// FirstEvent returns the first sequence number of a market's feed still kept: 0 when none is.
func (s *Log) FirstEvent(ctx context.Context, market uuid.UUID) (int64, error) {
	var first *int64
	err := s.Pool.QueryRow(ctx, firstEventSQL, market).Scan(&first)
	if err != nil || first == nil {
		return 0, err
	}
	return *first, nil
}

// PruneEvents deletes the event batches, of markets and of accounts, written before cutoff, and
// says how many. Before it deletes an account's batch it keeps what the audit needs of it in
// order_terms (pruneAccountEvents).
func (s *Log) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `delete from market_events where created_at < $1`, cutoff)
	if err != nil {
		return 0, err
	}
	n := tag.RowsAffected()
	for {
		got, err := s.pruneAccountEvents(ctx, cutoff, pruneChunk)
		n += got
		if err != nil || got < pruneChunk {
			return n, err
		}
	}
}

// pruneChunk is how many account event batches one transaction of the pruning deletes: what it
// holds in memory is their orders' terms events.
const pruneChunk = 5000

// The account event batches written before $1, at most $2, that no other transaction is deleting,
// deleted.
const pruneAccountEventsSQL = `delete from account_events e
	using (select account_id, holder, first_seq from account_events where created_at < $1
	       limit $2 for update skip locked) d
	where e.account_id = d.account_id and e.holder = d.holder and e.first_seq = d.first_seq
	returning e.account_id, e.holder, e.first_seq, e.last_seq, e.position, e.events`

// pruneAccountEvents deletes up to limit account event batches written before cutoff, and, in the
// same transaction, copies into order_terms (migration 037) their "accepted" and "amended" events
// (feed.TermsOf) of every order an amend moved (its priority is set) or still may (it rests): what
// pmx audit needs to replay such an order once the batches are gone. An order that no longer rests
// and was never moved never will be, and its row is all the audit needs.
//
// It never deletes what it cannot read: a batch whose events do not decode stops the pruning, with
// an error naming it, rather than lose the terms it may hold.
//
// Safe against a crash (the copy and the delete commit together) and against other sweepers:
// each takes the batches no other holds (skip locked), and a copy made twice is one row (the key
// is the order and the event's number in its stream).
func (s *Log) pruneAccountEvents(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tx, err := s.Pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit, nothing
	rows, err := tx.Query(ctx, pruneAccountEventsSQL, cutoff, limit)
	if err != nil {
		return 0, err
	}
	var terms []feed.Terms
	n := int64(0)
	for rows.Next() {
		n++
		var holder string
		var account, first, last, position int64
		if err := rows.Scan(&account, &holder, &first, &last, &position, nil); err != nil {
			rows.Close()
			return 0, err
		}
		got, err := feed.TermsOf(rows.RawValues()[5], holder, first, last, position)
		if err != nil {
			rows.Close()
			return 0, fmt.Errorf("account_events row (account_id, holder, first_seq) = (%d, '%s', %d) does not read, so the orders' terms it holds cannot be kept: "+
				"no batch is pruned until it is mended or deleted by hand: %w", account, holder, first, err)
		}
		terms = append(terms, got...)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(terms) > 0 {
		if err := keepTerms(ctx, tx, terms); err != nil {
			return 0, err
		}
	}
	return n, tx.Commit(ctx)
}

// keepTerms writes into order_terms the terms events of the orders an amend moved or may still
// move, with the number each move took where its event tells it (migration 039).
func keepTerms(ctx context.Context, tx pgx.Tx, terms []feed.Terms) error {
	ids := make([]uuid.UUID, 0, len(terms))
	for i := range terms {
		ids = append(ids, terms[i].Order)
	}
	rows, err := tx.Query(ctx, `select id from orders where id = any ($1)
		and (priority is not null or status in ('OPEN', 'PARTIALLY_FILLED'))`, ids)
	if err != nil {
		return err
	}
	keep, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return err
	}
	if len(keep) == 0 {
		return nil
	}
	kept := make(map[uuid.UUID]bool, len(keep))
	for _, id := range keep {
		kept[id] = true
	}
	var cols struct {
		order                    []uuid.UUID
		holder                   []string
		seq, position, q, filled []int64
		priority                 []*int64 // null: no number told
		amended                  []bool
		price                    []int32
		at                       []time.Time
	}
	for _, t := range terms {
		if !kept[t.Order] {
			continue
		}
		cols.order, cols.holder, cols.seq, cols.position = append(cols.order, t.Order), append(cols.holder, t.Holder), append(cols.seq, t.Seq), append(cols.position, t.Position)
		cols.amended, cols.price, cols.q, cols.filled, cols.at = append(cols.amended, t.Amended), append(cols.price, int32(t.Price)), append(cols.q, t.Quantity), append(cols.filled, t.Filled), append(cols.at, t.At)
		var priority *int64
		if t.Priority != 0 {
			priority = &t.Priority
		}
		cols.priority = append(cols.priority, priority)
	}
	_, err = tx.Exec(ctx, `insert into order_terms (order_id, holder, seq, position, amended, price, quantity, filled, at, priority)
		select * from unnest($1::uuid[], $2::text[], $3::bigint[], $4::bigint[], $5::boolean[], $6::smallint[], $7::bigint[], $8::bigint[], $9::timestamptz[], $10::bigint[])
		on conflict do nothing`,
		cols.order, cols.holder, cols.seq, cols.position, cols.amended, cols.price, cols.q, cols.filled, cols.at, cols.priority)
	return err
}

// AccountEventsAfter returns the batches of an account's feed that hold events after the cursor
// after (the last seq seen of each stream, by holder: a missing one is at 0), merged across its
// streams in the order of their positions, until they hold at least limit of them; a stream's
// first batch may begin before its seq in after, and the last one hold more than the page needs
// (feed.AccountPage keeps the page's events). With upTo, only the streams it names are read, each
// up to its seq there; without, every stream of the account's feed (AccountFeed) and of after.
//
// A page costs the same however long the feed: each stream's part is the bounded read of one
// market's feed (eventsAfterSQL), one round trip for them all. The merge by position is what keeps
// a market that moved from one holder to another in commit order: the old holder's last batch of
// it committed before the new one's first took its position.
func (s *Log) AccountEventsAfter(ctx context.Context, account int64, after map[string]int64, limit int, upTo map[string]int64) ([]db.AccountEvents, error) {
	type part struct {
		holder string
		limit  int
	}
	var parts []part
	if upTo != nil {
		for h, last := range upTo {
			if n := min(int64(limit), last-after[h]); n > 0 {
				parts = append(parts, part{h, int(n)})
			}
		}
	} else {
		streams, err := s.AccountFeed(ctx, account)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, st := range streams {
			if st.Last > after[st.Holder] {
				parts, seen[st.Holder] = append(parts, part{st.Holder, limit}), true
			}
		}
		for h := range after {
			if !seen[h] {
				parts = append(parts, part{h, limit})
			}
		}
	}
	if len(parts) == 0 || limit <= 0 {
		return []db.AccountEvents{}, nil
	}
	var q pgx.Batch
	var out []db.AccountEvents
	for _, p := range parts {
		q.Queue(accountStreamAfter, append(eventsAfterArgs(account, after[p.holder], p.limit), p.holder)...).
			Query(func(rows pgx.Rows) error {
				got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.AccountEvents, error) {
					var b db.AccountEvents
					err := r.Scan(&b.Account, &b.Holder, &b.Position, &b.First, &b.Last, &b.Events)
					return b, err
				})
				out = append(out, got...)
				return err
			})
	}
	if err := s.Pool.SendBatch(ctx, &q).Close(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b db.AccountEvents) int { return cmp.Compare(a.Position, b.Position) })
	// The batches up to the one that brings the page's events to limit.
	held := int64(0)
	for i, b := range out {
		if held >= int64(limit) {
			return out[:i], nil
		}
		last := b.Last
		if upTo != nil {
			last = min(last, upTo[b.Holder])
		}
		held += max(0, last-max(b.First-1, after[b.Holder]))
	}
	return out, nil
}

// AccountFeed is where each stream of an account's feed stands, its holders in order: a stream
// that has numbered no event is left out.
func (s *Log) AccountFeed(ctx context.Context, account int64) ([]db.AccountStream, error) {
	rows, err := s.Pool.Query(ctx, accountFeedSQL, account)
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (db.AccountStream, error) {
		var st db.AccountStream
		err := r.Scan(&st.Holder, &st.Last, &st.First)
		return st, err
	})
	if err != nil {
		return nil, err
	}
	// Holder '' could be on both rows: the account's and an allocation's, when a shard holds as
	// ''; its last number is then the greater.
	slices.SortFunc(got, func(a, b db.AccountStream) int {
		return cmp.Or(cmp.Compare(a.Holder, b.Holder), cmp.Compare(b.Last, a.Last))
	})
	got = slices.CompactFunc(got, func(a, b db.AccountStream) bool { return a.Holder == b.Holder })
	return slices.DeleteFunc(got, func(st db.AccountStream) bool { return st.Last == 0 }), nil
}

// AccountSeqs returns the last number of each stream of each of the accounts' feeds, by holder
// (streams that numbered nothing left out).
func (s *Log) AccountSeqs(ctx context.Context, accounts []int64) (map[int64]map[string]int64, error) {
	rows, err := s.Pool.Query(ctx, streamsSQL, accounts)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make(map[int64]map[string]int64, len(accounts))
	for rows.Next() {
		var id, seq int64
		var holder string
		if err := rows.Scan(&id, &holder, &seq); err != nil {
			return nil, err
		}
		if seq == 0 {
			continue
		}
		if out[id] == nil {
			out[id] = map[string]int64{}
		}
		out[id][holder] = max(out[id][holder], seq)
	}
	return out, rows.Err()
}

// MarketSeq is a market's status and the last number of its feed.
type MarketSeq struct {
	ID        uuid.UUID
	Status    string
	EventSeq  int64
	UpdatedAt time.Time
	Event     *uuid.UUID // the event whose outcome the market answers; nil for a market of its own
	// Paused is what pauses the market apart from the exchange's halt (migration 033): "market",
	// "event" (its event's pause, the wider) or "".
	Paused string
}

// MarketsChanged returns the markets updated after since (every market for the zero time): what
// the live feed compares itself with (package feed's sweep).
func (s *Log) MarketsChanged(ctx context.Context, since time.Time) ([]MarketSeq, error) {
	rows, err := s.Pool.Query(ctx, `select m.id, m.status, m.event_seq, m.updated_at, m.event_id,
		  case when coalesce((select e.paused from events e where e.id = m.event_id), false) then 'event'
		       when m.paused then 'market' else '' end
		from markets m where m.updated_at > $1`, since)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (MarketSeq, error) {
		var m MarketSeq
		err := r.Scan(&m.ID, &m.Status, &m.EventSeq, &m.UpdatedAt, &m.Event, &m.Paused)
		return m, err
	})
}

// ExchangeHalted says whether trading on the whole exchange is halted (migration 033).
func (s *Log) ExchangeHalted(ctx context.Context) (bool, error) {
	var halted bool
	err := s.Pool.QueryRow(ctx, `select exchange from halts where id`).Scan(&halted)
	return halted, err
}

-- Fewer indexes on orders, the table every order writes to at least once and every fill or cancel
-- rewrites (a non-HOT update, since the status is in a partial index's predicate, so each update
-- writes an entry in every index whose predicate the new row meets).
--
-- The unique (market_id, seq) index served three things, each now served otherwise:
--   * the batch's updates of resting orders, by (market_id, seq): orders_resting covers them
--     (only resting orders are ever updated, and the update says so);
--   * the next sequence number when a shard loads a market (max(seq)): markets.order_seq holds it,
--     advanced by every batch that places orders, through update_markets below;
--   * catching two processes writing orders to one market: update_markets advances order_seq only
--     from the value the shard last saw, and fails the batch otherwise.
-- orders_account_resting served only cancel-everything, which now finds the markets where an
-- account rests orders through orders_resting, over the OPEN markets (see store.RestingMarkets).

alter table markets add column order_seq bigint not null default 0; -- the last order sequence number used
update markets m set order_seq = coalesce((select max(o.seq) from orders o where o.market_id = m.id), 0);

alter table orders drop constraint orders_market_id_seq_key;
drop index orders_account_resting;

-- update_markets applies one batch's changes to its markets: the new last order sequence number
-- (p_next, from p_prev: null leaves it), last trade price and OPEN/CLOSED status (null leaves
-- each). It raises a serialization failure (40001, which a shard retries on reloaded books) if
-- a market's order_seq is not p_prev any more: some other process placed orders in it.
create function update_markets(p_ids uuid[], p_prev bigint[], p_next bigint[], p_last smallint[],
                               p_status text[], p_now timestamptz) returns void
language plpgsql as $$
declare
    n bigint;
begin
    update markets m
       set order_seq = coalesce(d.next, m.order_seq),
           last_trade_price = coalesce(d.last, m.last_trade_price),
           status = coalesce(d.status, m.status),
           updated_at = p_now
      from unnest(p_ids, p_prev, p_next, p_last, p_status) as d(id, prev, next, last, status)
     where m.id = d.id and (d.prev is null or m.order_seq = d.prev);
    get diagnostics n = row_count;
    if n <> cardinality(p_ids) then
        raise exception 'the order sequence of a market moved under this batch: another process placed orders in it'
            using errcode = '40001';
    end if;
end $$;

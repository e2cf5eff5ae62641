-- Cheaper writes to the tables every batch writes (orders, trades, positions). Each change below
-- was measured with pg_stat_statements under `pmx loadgen --bots 64` (see docs/performance.md).

-- A position's quantity changes with nearly every fill. The partial index positions_market
-- (market_id) where quantity > 0 named quantity in its predicate, which made every such update a
-- non-HOT one: a new heap tuple plus an entry in each of the table's three indexes (~100 WAL
-- records and ~0.8 ms of the batch backend per batch). With a plain index on market_id no index
-- covers a column an update changes, so updates stay HOT on the page room that fillfactor 70
-- leaves. Settlement, the index's only user, filters quantity > 0 itself over one market's rows.
create index positions_by_market on positions (market_id);
drop index positions_market;

-- Foreign keys from the hot tables to accounts and markets cost a trigger, an index probe and a
-- row lock (FOR KEY SHARE, itself a WAL record) per reference: two per order row, three per
-- trade, two per position, about 16 µs of the batch backend per order row. Only the shard's
-- batch writes these tables, and it writes only the account it authenticated and the market it
-- holds; no code path deletes an account or a market. Referential integrity is checked instead
-- by the exchange's invariant checks (internal/exchangetest), with every other invariant.
alter table orders drop constraint orders_account_id_fkey, drop constraint orders_market_id_fkey;
alter table trades drop constraint trades_market_id_fkey, drop constraint trades_taker_account_id_fkey,
    drop constraint trades_maker_account_id_fkey;
alter table positions drop constraint positions_account_id_fkey, drop constraint positions_market_id_fkey;

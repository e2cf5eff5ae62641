-- Shards report their load (issue 41): each shard process writes, every few heartbeats, the orders
-- per second each market it serves took over its recent window, as a JSON object from market id
-- to rate (store.ReportLoad). The operator spreads markets by it once every live shard reports
-- (controllers, planRebalance). Null until a shard reports: the release before never does, and
-- reads and writes every other column as before.
alter table shards add column market_load jsonb;

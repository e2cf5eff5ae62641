-- market_events only grows at the end of time (each row's created_at is its batch's time), and is
-- read by time only to prune it: a BRIN index, a few pages for the whole table and next to free to
-- keep up, serves that as well as the b-tree of migration 010 did at a cost on every batch.
drop index market_events_created;
create index market_events_created on market_events using brin (created_at);

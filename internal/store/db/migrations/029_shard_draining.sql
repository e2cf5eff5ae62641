-- A stopping shard drains (issue 41): on SIGTERM it marks itself here, then hands its markets to
-- the other live shards. It still beats and serves meanwhile, so it stays the live owner of what it
-- has not handed over yet, but nothing must be moved onto it: the operator neither schedules nor
-- rebalances onto a draining shard (and does not rebalance at all while one drains), and a stopping
-- shard hands nothing to another that drains. A new process under the name (store.Register)
-- clears it. Null for every shard of the release before, which never drains, and whose operator
-- reads and writes every other column as before.
alter table shards add column draining_since timestamptz;

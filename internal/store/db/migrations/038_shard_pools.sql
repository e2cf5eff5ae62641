-- Shard pools and dedicated markets (issue 56): each shard process belongs to one pool (the
-- ShardPool whose StatefulSet runs it, `pmx shard --pool`), and each market is placed within one
-- pool, alone on a shard of its own when dedicated. The operator writes a market's pool and
-- dedication from its Market's (or Event's) spec; the operator, the rebalancer and a stopping
-- shard's handoffs move a market only onto a shard of its pool that may take it
-- (internal/placement).
--
-- Every existing shard and market is in the default pool, shared, as before. The release before
-- reads and writes none of this: its shards register without a pool (the default) and its operator
-- places every market on any live shard, as it did.
alter table shards add column pool text not null default 'default';
alter table markets add column pool text not null default 'default',
    add column dedicated boolean not null default false;

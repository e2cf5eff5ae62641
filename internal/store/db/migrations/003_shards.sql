-- Distributed mode: matching shards register here with a heartbeat, and each OPEN market records
-- the shard that owns it with an epoch. The operator moves a market by giving it a new owner and
-- epoch + 1; every shard commit checks owner and epoch in its own transaction (a fencing token),
-- so a shard that lost a market can never commit for it again.

create table shards (
    name          text primary key,
    address       text not null,   -- where the front API reaches its internal HTTP API
    started_at    timestamptz not null,
    heartbeat_at  timestamptz not null
);

alter table markets add column shard text;                        -- the owner; null when none
alter table markets add column epoch bigint not null default 0;   -- bumped at every change of owner
create index markets_shard on markets (shard) where shard is not null;

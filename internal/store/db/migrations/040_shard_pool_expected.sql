-- The shards each ShardPool is to run: the operator records here, at each look at a pool, the names
-- of the shards its StatefulSet is to run now (`<pool>-shard-<ordinal>`, the ordinals below the
-- replicas it wants: those a scale-down removes are not among them), and removes the row when the
-- pool is deleted (controllers.ShardPoolReconciler, store.ExpectShards). A stopping shard reads it
-- (store.Successors): when no live shard of its pool can take its markets, it waits, bounded, for
-- the shards its pool expects that are not live yet (a ShardPool that replaces the chart's own
-- shards, whose pods start as the old ones stop) and hands its markets to the first of them by the
-- planned handoff, rather than releasing them (docs/architecture.md §6, "The planned handoff").
--
-- The release before reads and writes none of it: its shards release what finds no live shard of
-- its pool as before, and its operator records no expectation, so a shard of this release waits
-- for nothing under it.
--
-- name: the ShardPool's metadata.name, the pool its shards register in (shards.pool). shards: the
-- names, in ordinal order; never empty (no expectation is no row). updated_at: when they last
-- changed.
create table shard_pools (
    name        text primary key,
    shards      text[] not null check (cardinality(shards) > 0),
    updated_at  timestamptz not null default now()
);

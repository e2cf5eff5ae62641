-- A shard process's incarnation: a fresh id each time a process registers under a shard's name
-- (store.Register). A StatefulSet's pod deleted by force comes back under its own name while the
-- old container may still run; the old process, whose id is no longer the name's, loads no market
-- and its heartbeat fails, so it stops. Null for shards registered by the older heartbeat alone.
alter table shards add column incarnation uuid;

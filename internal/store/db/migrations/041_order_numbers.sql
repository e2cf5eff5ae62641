-- An amend that moves an order gives it the next number of its market's order sequence (migration
-- 011), which no order may take after it, even once the moved order has ended. A shard that loads
-- a market (at its start, on a handoff or a failover) continues the sequence after the highest
-- number any order of the market took: the highest seq, or the highest priority, ended orders
-- included (markets.Rows.Sequences). The release before counted only the priorities of resting
-- orders, which the index orders_resting finds, so the number of an amended order that had ended
-- could be taken again by the market's next order once it changed shards: a number held twice,
-- which pmx audit reports (a "numbering" difference) and cannot replay. This index finds the
-- highest priority of a market's moved orders, which are few, without reading its other orders.
create index orders_moved on orders (market_id, priority) where priority is not null;

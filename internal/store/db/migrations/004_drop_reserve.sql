-- Reservations are decided by the shard against rows it locks at the start of its batch
-- (store.BeginBatch), so the row-by-row reserve() function is gone.
drop function reserve(bigint[], uuid[], text[], bigint[], bigint[], timestamptz);

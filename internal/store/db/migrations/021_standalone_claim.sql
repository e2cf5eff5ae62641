-- The standalone exchange's fencing token (store/standalone.go). A pmx dev that claims the
-- database raises token by one, while it holds the standalone batches' mark exclusively, and its
-- batches carry the token it got: standalone_batch, the first thing each runs, takes the mark
-- shared and fails the batch, with SQLSTATE PX002, unless the token is still the database's.
-- So a pmx dev that lost its hold on the database without noticing (its session ended when
-- Postgres restarted, and another pmx dev claimed the database) writes nothing more.
create table standalone_claim (
    id    boolean primary key default true check (id),
    token bigint not null
);

-- standalone_batch takes the mark (p_space, p_key: the advisory lock's two keys, which the
-- claim's code owns) and then checks the token. The check is a statement of its own, in a function
-- that is volatile, so it reads the token as committed after the mark was granted: a batch that
-- waited for a new claim to raise the token sees the new one.
-- The token is read by the primary key: a batch turns sequential scans off (store.queueTxStart),
-- and a scan planned at that cost is JIT-compiled on every call, 10 ms a batch.
create function standalone_batch(p_space int, p_key int, p_token bigint) returns void
language plpgsql as $$
begin
    perform pg_advisory_xact_lock_shared(p_space, p_key);
    if not exists (select 1 from standalone_claim where id = true and token = p_token) then
        raise exception 'another pmx dev has claimed this database since this one did (fencing token %)', p_token
            using errcode = 'PX002';
    end if;
end $$;

-- Order groups (issue 37; internal/shard/groups.go owns the rule, docs/architecture.md §3 "Order
-- groups" states the bound).
--
-- A group belongs to one account. Its orders (orders.order_group_id) may rest in any markets, on
-- any shards. When the shares its orders fill within a rolling window of window_seconds reach
-- fill_limit, the group is triggered (triggered_at): every resting order of it is cancelled and it
-- refuses new orders until it is reset, which also forgets the fills before it (counted_from).
--
-- The shard decides all of it, from what it read of the group at the start of its batch
-- (store.BeginBatch): the row and the sum of order_group_fills within the window. The database
-- holds at commit what it decided, as migration 024 holds the risk limits, so that every shard
-- sees every other shard's fills: a batch that filled a group's orders (or triggered it) commits
-- only if the group's version is still the one it read, and raises it; a batch that only placed
-- orders into it commits only if it is still not triggered. Otherwise the batch fails as a
-- check_violation, and the shard runs it again from what it reads (store.Refused).
create table order_groups (
    id             uuid primary key,
    account_id     bigint not null references accounts (id),
    fill_limit     bigint not null check (fill_limit > 0),
    window_seconds integer not null check (window_seconds > 0),
    version        bigint not null default 0,
    triggered_at   timestamptz,
    counted_from   timestamptz not null,
    created_at     timestamptz not null
);
create index order_groups_by_account on order_groups (account_id, created_at);

-- The shares a group's orders filled, one row per group per batch that filled them, at the
-- batch's time. Rows older than the window are deleted by the batches that add to the group.
create table order_group_fills (
    group_id uuid not null references order_groups (id),
    at       timestamptz not null,
    quantity bigint not null check (quantity > 0)
);
create index order_group_fills_by_group on order_group_fills (group_id, at);

-- Null for an order in no group (every order of the release before).
alter table orders add column order_group_id uuid;

-- A group's trigger cancels its orders with reason ORDER_GROUP. The release before never writes it
-- and reads cancel_reason as text, so it serves on this domain.
alter domain cancel_reason drop constraint cancel_reason_check;
alter domain cancel_reason add constraint cancel_reason_check
    check (value in ('USER', 'IOC', 'FOK', 'EXPIRED', 'SELF_TRADE', 'MARKET_CLOSED', 'HEARTBEAT', 'ORDER_GROUP'));

-- order_groups_commit writes what a batch did to groups (store.Batch.Groups), guarded as above.
create function order_groups_commit(batch_at timestamptz, ids uuid[], decided bigint[], fills bigint[],
                                    trig boolean[]) returns void language plpgsql as $$
declare
    i integer;
begin
    for i in 1 .. coalesce(array_length(ids, 1), 0) loop
        if fills[i] > 0 or trig[i] then
            update order_groups g
               set version = g.version + 1,
                   triggered_at = case when trig[i] then coalesce(g.triggered_at, batch_at) else g.triggered_at end
             where g.id = ids[i] and g.version = decided[i];
            if not found then
                raise exception 'order group % changed since the batch read it (version %)', ids[i], decided[i]
                    using errcode = 'check_violation';
            end if;
            if fills[i] > 0 then
                insert into order_group_fills (group_id, at, quantity) values (ids[i], batch_at, fills[i]);
                delete from order_group_fills f using order_groups g
                 where g.id = ids[i] and f.group_id = g.id
                   and f.at <= batch_at - make_interval(secs => g.window_seconds);
            end if;
        else
            perform 1 from order_groups g where g.id = ids[i] and g.triggered_at is null for share;
            if not found then
                raise exception 'order group % was triggered since the batch read it', ids[i]
                    using errcode = 'check_violation';
            end if;
        end if;
    end loop;
end $$;

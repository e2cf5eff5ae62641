-- Bounds on order groups (issue 51; README "Order groups"). An account keeps at most a number of
-- groups (the front's --max-order-groups, store.CreateOrderGroup), and a group that has no open
-- order and in which nothing happened for a day is deleted (expire_order_groups, which every front
-- calls), so that what an account keeps, and what GET /order-groups reads, stay bounded.
--
-- active_at is when something last happened in the group: it was made or reset, an order of it
-- filled, it was triggered, an order was placed into it, or a sweep found an order of it open. A
-- placement moves it only when it is an hour or more old, so that a busy group's row is written at
-- most once an hour by its placements. The release before neither writes nor reads it: its rows start from the latest of
-- what they hold.
alter table order_groups add column active_at timestamptz;
update order_groups g set active_at = greatest(g.created_at, g.counted_from, g.triggered_at,
    (select max(f.at) from order_group_fills f where f.group_id = g.id));
alter table order_groups alter column active_at set default now();
alter table order_groups alter column active_at set not null;
create index order_groups_by_activity on order_groups (active_at);

-- order_groups_commit as migration 027 made it, which also moves active_at.
create or replace function order_groups_commit(batch_at timestamptz, ids uuid[], decided bigint[], fills bigint[],
                                               trig boolean[]) returns void language plpgsql as $$
declare
    i integer;
begin
    for i in 1 .. coalesce(array_length(ids, 1), 0) loop
        if fills[i] > 0 or trig[i] then
            update order_groups g
               set version = g.version + 1,
                   triggered_at = case when trig[i] then coalesce(g.triggered_at, batch_at) else g.triggered_at end,
                   active_at = greatest(g.active_at, batch_at)
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
            -- A placement into an untriggered group. The version stays: the shards that counted
            -- its fills need not count them again for it.
            update order_groups g set active_at = batch_at
             where g.id = ids[i] and g.triggered_at is null and g.active_at < batch_at - interval '1 hour';
            perform 1 from order_groups g where g.id = ids[i] and g.triggered_at is null for share;
            if not found then
                raise exception 'order group % was triggered since the batch read it', ids[i]
                    using errcode = 'check_violation';
            end if;
        end if;
    end loop;
end $$;

-- expire_order_groups deletes at most max_rows groups in which nothing happened since cutoff and
-- that have no open order, and answers how many. Each group is locked first (skipping one a batch
-- holds) and its open orders looked for after, by a statement of its own, which sees every order
-- a batch that held the group committed: so a group is never deleted under an order placed into
-- it, and a batch that read the group before it was deleted fails at commit (order_groups_commit
-- finds no row), runs again, and refuses its placement as naming no group.
create function expire_order_groups(cutoff timestamptz, max_rows integer) returns integer language plpgsql as $$
declare
    g record;
    n integer := 0;
begin
    for g in select id, account_id from order_groups where active_at < cutoff
              order by active_at limit max_rows for update skip locked loop
        if not exists (select 1 from orders o
                        where o.account_id = g.account_id and o.status in ('OPEN', 'PARTIALLY_FILLED')
                          and o.order_group_id = g.id) then
            delete from order_group_fills where group_id = g.id;
            delete from order_groups where id = g.id;
            n := n + 1;
        else
            -- An open order keeps the group alive: it is not looked at again for a while, so that
            -- groups with long-resting orders never crowd out of max_rows those to delete.
            update order_groups set active_at = now() where id = g.id;
        end if;
    end loop;
    return n;
end $$;

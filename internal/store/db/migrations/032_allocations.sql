-- pmx: the previous release cannot run beside this migration
-- (its shards write accounts.locked and call settle(), which go below; its fronts read them: roll
-- every process together, docs/architecture.md §9)
--
-- Shards that scale (docs/architecture.md §11): on the order path, no row is written by two
-- shards. Two changes make room for it; the code that writes them comes with them.
--
-- allocations: what one holder (a shard, by its holder name) holds of an account. `available` is
-- free cash the holder may lock or pay out without asking anyone; `room`, under a max_locked_cash,
-- what more it may lock (Σ room + what open BUY orders lock ≤ max_locked_cash); `event_seq` the
-- last number of the account's feed stream this holder writes; `risk_version`/`risk_checked` the
-- guard that a batch decided under the account's current limits (as on accounts, migration 024).
-- The holder's batches write its rows as deltas; the rare other writers (an acquire taking another
-- holder's free cash, a change of the limits) only take from them, and the checks below make a
-- holder that decided on a view since made too high fail and run again.
create table allocations (
    account_id   bigint not null,
    holder       text not null,
    available    bigint not null default 0 check (available >= 0),
    room         bigint not null default 0 check (room >= 0),
    event_seq    bigint not null default 0 check (event_seq >= 0),
    risk_version bigint not null default 0,
    risk_checked bigint not null default 0,
    primary key (account_id, holder)
);

create function refuse_allocation_risk() returns trigger language plpgsql as $$
begin
    raise exception 'the risk limits of account % changed (version % decided by, % now)',
        new.account_id, new.risk_checked, new.risk_version using errcode = 'check_violation';
end $$;

create trigger allocations_risk_limits before update of risk_checked on allocations for each row
    when (new.risk_checked <> new.risk_version)
    execute function refuse_allocation_risk();

-- The account feed becomes one stream per (account, holder): each holder numbers the events it
-- commits for an account in a gapless sequence of its own (allocations.event_seq), so no counter is
-- written by two shards. `position` orders the streams' rows for a merged read: per holder it
-- grows in commit order (a holder's batches commit one after another), and a market handed from
-- one holder to another has the old holder's last batch committed before the new one's first
-- takes its value, so a market's events keep their commit order across streams. The rows written
-- before this migration form the stream of holder '' and keep their order.
create sequence account_events_position;

alter table account_events add column holder text not null default '',
                           add column position bigint;
update account_events e set position = o.r
  from (select account_id, first_seq, row_number() over (order by account_id, first_seq) as r from account_events) o
 where o.account_id = e.account_id and o.first_seq = e.first_seq;
select setval('account_events_position', coalesce((select max(position) from account_events), 0) + 1, false);
alter table account_events alter column position set default nextval('account_events_position'),
                           alter column position set not null,
                           drop constraint account_events_pkey,
                           add primary key (account_id, holder, first_seq);
create index account_events_by_position on account_events (account_id, position);

-- A new allocation row takes the account's current limits' version (the batch that inserts one
-- never decides by limits: deciding needs cash the row would already hold); the guard fires on an
-- insert as on an update.
drop trigger allocations_risk_limits on allocations;
create trigger allocations_risk_limits before insert or update of risk_checked on allocations for each row
    when (new.risk_checked <> new.risk_version)
    execute function refuse_allocation_risk();

-- An account's locked cash is no longer a column a batch writes: it is what its open BUY orders
-- lock, Σ price × (quantity − filled_quantity), which every batch already writes in the orders
-- themselves (it was kept equal to that, an invariant the tests checked). So a market handed to
-- another shard takes its locks with it and nothing else moves. accounts.available is now the
-- wallet: the account's cash no holder holds.
drop trigger accounts_risk_limits on accounts;
drop function refuse_risk_limit();
alter table accounts drop column locked, drop column risk_checked;

-- settle_holder is settle_paying (migration 026) for a holder: the payouts are credited to the
-- settling shard's allocation of each account and numbered in the account's stream from that
-- holder. settle and settle_paying go: they credited the accounts' rows.
drop function settle(uuid, text, timestamptz);
drop function settle_paying(uuid, text, bigint, bigint, timestamptz);
create function settle_holder(p_holder text, p_market uuid, p_outcome text, p_yes bigint, p_no bigint, p_now timestamptz)
returns table (account_id bigint, outcome text, quantity bigint, payout bigint, last_seq bigint)
language plpgsql as $$
#variable_conflict use_column
begin
    update markets
       set status = case when p_outcome is null then 'CANCELED' else 'RESOLVED' end,
           outcome = p_outcome, settled_at = p_now, updated_at = p_now
     where id = p_market and status in ('OPEN', 'CLOSED');
    if not found then
        return;
    end if;
    if exists (select 1 from orders o where o.market_id = p_market and o.status in ('OPEN', 'PARTIALLY_FILLED')) then
        raise exception 'market % still has resting orders', p_market;
    end if;
    insert into settlements (market_id, account_id, outcome, quantity, amount, created_at)
    select p.market_id, p.account_id, p.outcome, p.quantity,
           p.quantity * case when p_outcome is null then (case when p.outcome = 'YES' then p_yes else p_no end)
                             when p.outcome = p_outcome then 100 else 0 end,
           p_now
      from positions p
     where p.market_id = p_market and p.quantity > 0;
    return query
    with paid as (
        -- amounts and counts are never negative, so the proposed row of an upsert passes the checks
        insert into allocations as al (account_id, holder, available, event_seq, risk_version, risk_checked)
        select s.account_id, p_holder, s.amount, s.n, a.risk_version, a.risk_version
          from (select st.account_id, sum(st.amount) as amount, count(*) as n from settlements st
                 where st.market_id = p_market group by st.account_id order by st.account_id) s
          join accounts a on a.id = s.account_id
        on conflict (account_id, holder) do update
           set available = al.available + excluded.available, event_seq = al.event_seq + excluded.event_seq
        returning al.account_id as id, al.event_seq)
    select st.account_id, st.outcome, st.quantity, st.amount, paid.event_seq
      from settlements st join paid on paid.id = st.account_id
     where st.market_id = p_market
     order by st.account_id, st.outcome;
    update positions p set quantity = 0, locked_quantity = 0, updated_at = p_now
     where p.market_id = p_market and p.quantity > 0;
end $$;

-- acquire_cash moves free cash and room to holder p_holder's allocation of each account in
-- p_accounts (ascending), so that it holds at least p_cash[i] available and, under a
-- max_locked_cash, p_room[i] room, when the account has that much free: first from the wallet,
-- taking besides what is needed a share of what is left (the rest divided by p_spread, the
-- live holders), then from the other holders' free cash (or room), largest first. It returns each
-- account's allocation as it leaves it, with the limits. An account whose wallet the holder does
-- not need is not locked: the common case, a holder reading its own rows, waits for nobody.
--
-- The wallet's row is locked before anything is taken, so acquires of one account (and changes of
-- its limits) take turns; a holder's batches lock only their own rows, so nothing waits in a
-- circle. What it takes from another holder is gone from that holder's row at once; the holder's
-- view is then too high, and its next batch that spends it fails the row's check and runs again
-- from a read (internal/shard/views.go).
--
-- Room is what a holder may still lock under the limit L: free room is L less every holder's room
-- less what the account's open BUY orders lock, read in one statement (one snapshot: a batch
-- moves room and locks together, so their sum never changes under it).
create function acquire_cash(p_holder text, p_accounts bigint[], p_cash bigint[], p_room bigint[], p_spread int)
returns table (account_id bigint, available bigint, room bigint, max_position bigint, max_locked_cash bigint, risk_version bigint)
language plpgsql as $$
#variable_conflict use_column
declare
    i int;
    a bigint;
    w record;
    mine record;
    need bigint;
    take bigint;
    free bigint;
    r record;
begin
    for i in 1 .. coalesce(array_length(p_accounts, 1), 0) loop
        a := p_accounts[i];
        select al.available, al.room into mine from allocations al where al.account_id = a and al.holder = p_holder;
        if found and mine.available >= p_cash[i] and (p_room[i] <= mine.room
                or (select ac.max_locked_cash is null from accounts ac where ac.id = a)) then
            return query select al.account_id, al.available, al.room, coalesce(ac.max_position, -1),
                                coalesce(ac.max_locked_cash, -1), al.risk_version
                           from allocations al join accounts ac on ac.id = al.account_id
                          where al.account_id = a and al.holder = p_holder;
            continue;
        end if;
        select ac.available, ac.max_locked_cash, ac.risk_version into w from accounts ac where ac.id = a for update;
        if not found then
            continue;
        end if;
        insert into allocations (account_id, holder, risk_version, risk_checked)
        values (a, p_holder, w.risk_version, w.risk_version) on conflict do nothing;
        select al.available, al.room into mine from allocations al where al.account_id = a and al.holder = p_holder for update;

        -- Cash: from the wallet, then from the other holders.
        need := p_cash[i] - mine.available;
        if need > 0 then
            take := least(w.available, need + greatest(w.available - need, 0) / greatest(p_spread, 1));
            if take > 0 then
                update accounts set available = available - take where id = a;
                update allocations set available = available + take where account_id = a and holder = p_holder;
                need := need - take;
            end if;
            for r in select al.holder, al.available from allocations al
                      where al.account_id = a and al.holder <> p_holder and al.available > 0
                      order by al.available desc for update loop
                exit when need <= 0;
                take := least(r.available, need);
                update allocations set available = available - take where account_id = a and holder = r.holder;
                update allocations set available = available + take where account_id = a and holder = p_holder;
                need := need - take;
            end loop;
        end if;

        -- Room, under a limit: from what no holder has, then from the other holders.
        need := p_room[i] - mine.room;
        if w.max_locked_cash is not null and need > 0 then
            select w.max_locked_cash
                   - (select coalesce(sum(al.room), 0) from allocations al where al.account_id = a)
                   - (select coalesce(sum(o.price::bigint * (o.quantity - o.filled_quantity)), 0) from orders o
                       where o.account_id = a and o.side = 'BUY' and o.status in ('OPEN', 'PARTIALLY_FILLED'))
              into free;
            take := least(greatest(free, 0), need + greatest(free - need, 0) / greatest(p_spread, 1));
            if take > 0 then
                update allocations set room = room + take where account_id = a and holder = p_holder;
                need := need - take;
            end if;
            for r in select al.holder, al.room from allocations al
                      where al.account_id = a and al.holder <> p_holder and al.room > 0
                      order by al.room desc for update loop
                exit when need <= 0;
                take := least(r.room, need);
                update allocations set room = room - take where account_id = a and holder = r.holder;
                update allocations set room = room + take where account_id = a and holder = p_holder;
                need := need - take;
            end loop;
        end if;

        return query select al.account_id, al.available, al.room, coalesce(ac.max_position, -1),
                            coalesce(ac.max_locked_cash, -1), al.risk_version
                       from allocations al join accounts ac on ac.id = al.account_id
                      where al.account_id = a and al.holder = p_holder;
    end loop;
end $$;

-- return_cash gives back to the wallets what holder p_holder holds of each account in p_accounts
-- (all of its accounts when null): its free cash, and its room, which then is no holder's. A
-- holder returns what it has not needed for a while, and everything when it stops.
create function return_cash(p_holder text, p_accounts bigint[]) returns bigint
language plpgsql as $$
declare
    total bigint;
begin
    -- the wallets first, in id order, as an acquire locks them: the two cannot wait in a circle
    perform 1 from accounts a
      where a.id in (select al.account_id from allocations al
                      where al.holder = p_holder and (p_accounts is null or al.account_id = any(p_accounts))
                        and (al.available > 0 or al.room > 0))
      order by a.id for update;
    with taken as (
        update allocations al set available = 0, room = 0
          from (select account_id, available from allocations
                 where holder = p_holder and (p_accounts is null or account_id = any(p_accounts))
                   and (available > 0 or room > 0)
                 order by account_id for update) old
         where al.account_id = old.account_id and al.holder = p_holder
        returning al.account_id, old.available),
    credited as (
        update accounts a set available = a.available + t.available from taken t
         where a.id = t.account_id and t.available > 0
        returning t.available)
    select coalesce(sum(available), 0) into total from credited;
    return total;
end $$;

-- What an account has, in one place for every reader (GET /account, the risk limits, the
-- invariants, the audit): its available cash is its wallet and what every holder holds of it
-- free; its locked cash, what its open BUY orders lock. A read of one account computes only its
-- own sums (the subqueries run per row kept), from one snapshot.
create view account_balances as
select a.id,
       (a.available + (select coalesce(sum(al.available), 0) from allocations al where al.account_id = a.id))::bigint as available,
       (select coalesce(sum(o.price::bigint * (o.quantity - o.filled_quantity)), 0) from orders o
         where o.account_id = a.id and o.side = 'BUY' and o.status in ('OPEN', 'PARTIALLY_FILLED'))::bigint as locked
  from accounts a;

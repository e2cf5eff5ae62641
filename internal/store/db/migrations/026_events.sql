-- Events (issue 36; package internal/event owns the rules, docs/architecture.md §3 the ledger): a
-- question of 2 to 50 mutually exclusive outcomes, each traded as its own YES/NO market whose YES
-- means "this outcome wins".
--
-- Everything here is additive, so the previous release keeps working on this schema (§9): its
-- markets have no event_id and it never reads the new tables. A market of an event is an ordinary
-- market to that release, which is why events are created only once every process is upgraded.
--
-- outcomes: the event's outcomes in order, [{"key", "label"}], keys fixed once created.
-- resolution: the winning outcome's key, set with status RESOLVED.
create table events (
    id           uuid primary key,
    name         text not null unique, -- metadata.name of the Event resource, or an admin-chosen name
    question     text not null,
    category     text not null,
    description  text,
    url          text,
    outcomes     jsonb not null check (jsonb_typeof(outcomes) = 'array'
                     and jsonb_array_length(outcomes) between 2 and 50),
    status       text not null check (status in ('OPEN', 'CLOSED', 'RESOLVED', 'CANCELED')),
    resolution   text,
    closes_at    timestamptz,
    resolves_at  timestamptz,
    created_at   timestamptz not null,
    updated_at   timestamptz not null,
    check ((status = 'RESOLVED') = (resolution is not null))
);
create index events_created on events (created_at desc, id desc);

-- A market of an event answers one of its outcomes; a market of no event has neither column.
alter table markets
    add column event_id uuid references events (id),
    add column outcome_key text,
    add constraint markets_event_outcome check ((event_id is null) = (outcome_key is null));
create unique index markets_event_outcome_key on markets (event_id, outcome_key) where event_id is not null;

-- conversions records every conversion (event.Conversion): what was converted and the cash it
-- paid, so that a retry with the same client_request_id answers the same and changes nothing.
create table conversions (
    id                 uuid primary key,
    event_id           uuid not null references events (id),
    account_id         bigint not null references accounts (id),
    client_request_id  text,
    outcomes           text[] not null check (cardinality(outcomes) >= 1),
    quantity           bigint not null check (quantity >= 1),
    cash               bigint not null check (cash >= 0),
    created_at         timestamptz not null
);
create unique index conversions_client_request_id on conversions (account_id, client_request_id)
    where client_request_id is not null;
create index conversions_event on conversions (event_id);

-- exchange_remainders is the exchange's own account: what a cancelled event's collateral leaves
-- after the void pays ⌊100/n⌋ per YES and (n − 1)·⌊100/n⌋ per NO (event.Totals.Void), one row per
-- event, never negative (§3 proves it), so that every cent of play money is accounted for.
create table exchange_remainders (
    event_id    uuid primary key references events (id),
    amount      bigint not null check (amount >= 0),
    created_at  timestamptz not null
);

-- settle_paying is settle (migration 017) with a void's payouts as arguments: a cancelled market
-- (p_outcome null) pays p_yes per YES share and p_no per NO share — a cancelled event's markets
-- ⌊100/n⌋ and (n − 1)·⌊100/n⌋ (event.VoidPayout). settle keeps its signature and answers, for
-- the previous release's shards, and is now this at 50 and 50: one body for both.
create function settle_paying(p_market uuid, p_outcome text, p_yes bigint, p_no bigint, p_now timestamptz)
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
        update accounts a
           set available = a.available + s.amount, event_seq = a.event_seq + s.n,
               updated_at = case when s.amount > 0 then p_now else a.updated_at end
          from (select st.account_id, sum(st.amount) as amount, count(*) as n from settlements st
                 where st.market_id = p_market group by st.account_id order by st.account_id) s
         where a.id = s.account_id
        returning a.id, a.event_seq)
    select st.account_id, st.outcome, st.quantity, st.amount, paid.event_seq
      from settlements st join paid on paid.id = st.account_id
     where st.market_id = p_market
     order by st.account_id, st.outcome;
    update positions p set quantity = 0, locked_quantity = 0, updated_at = p_now
     where p.market_id = p_market and p.quantity > 0;
end $$;

create or replace function settle(p_market uuid, p_outcome text, p_now timestamptz)
returns table (account_id bigint, outcome text, quantity bigint, payout bigint, last_seq bigint)
language sql as $$
    select * from settle_paying(p_market, p_outcome, 50, 50, p_now)
$$;

-- record_void_remainder keeps on the exchange's account what cancelling an event leaves of its
-- collateral: the collateral (what the exchange pays whichever outcome wins, equal for every
-- outcome by the event's ledger rule) less what the void pays at p_yes and p_no per share. Run
-- before the event's markets are settled, while their positions still stand. The check on
-- exchange_remainders.amount fails the transaction should it ever be negative.
create function record_void_remainder(p_event uuid, p_yes bigint, p_no bigint, p_now timestamptz) returns void
language sql as $$
    with held as (
        select m.outcome_key,
               coalesce(sum(p.quantity) filter (where p.outcome = 'YES'), 0) as yes,
               coalesce(sum(p.quantity) filter (where p.outcome = 'NO'), 0) as no
          from markets m left join positions p on p.market_id = m.id
         where m.event_id = p_event group by m.outcome_key)
    insert into exchange_remainders (event_id, amount, created_at)
    select p_event, 100 * (max(yes - no) + sum(no)) - sum(p_yes * yes + p_no * no), p_now from held
$$;

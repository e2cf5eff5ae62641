-- Each account's private feed (package feed): its orders accepted, amended and cancelled, its
-- fills and its settlements, numbered by the account's own gapless sequence, whose last number is
-- event_seq. A batch bumps it in the same update that changes the account's cash (the row is
-- locked there, in key order, by whichever shard's batch commits), so numbers follow commit order
-- across shards; its events are one row per account per batch: a JSON array of the events in
-- order, without their numbers, which are first_seq to last_seq. Rows older than the retention
-- are deleted with the market events.
alter table accounts add column event_seq bigint not null default 0;

create table account_events (
    account_id  bigint not null,
    first_seq   bigint not null,
    last_seq    bigint not null,
    created_at  timestamptz not null,
    events      bytea not null, -- a JSON array of feed.AccountEvent, seq left out
    primary key (account_id, first_seq),
    check (last_seq >= first_seq)
);
create index account_events_created on account_events using brin (created_at);

-- settle now numbers the settlement of each holding in its holder's feed: it returns one row per
-- settled holding, by account and outcome, with the account's last seq after the settlement, for
-- the shard to write their events (the holdings of an account are numbered last_seq - n + 1 to
-- last_seq, n being how many it has). Otherwise as before (001_schema.sql).
drop function settle(uuid, text, timestamptz);
create function settle(p_market uuid, p_outcome text, p_now timestamptz)
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
           p.quantity * case when p_outcome is null then 50 when p.outcome = p_outcome then 100 else 0 end,
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

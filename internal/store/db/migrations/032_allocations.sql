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

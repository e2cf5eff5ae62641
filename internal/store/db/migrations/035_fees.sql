-- Fees and maker rebates (issue 55, part 1; package engine owns the rule, engine.Fees): a market
-- or an event may have a fee schedule, a taker and a maker rate in basis points of P × (1 − P) per
-- share (a negative maker rate is a rebate). A market's own schedule wins over its event's; with
-- neither, trading is free, as before.
--
-- A schedule is one of the trading rules the shards read with the halts (migration 033): a change
-- runs change_halts in its transaction, so every batch that placed an order under the schedule it
-- replaces commits before it, and every later placement carries the new one. Each order keeps the
-- schedule it was placed under (orders.taker_fee_bps, maker_fee_bps) for all its fills, so what a
-- resting BUY locks for its maker fee stays enough whatever changes after it.
--
-- Fees go to the exchange's own account (the account named 'pmx:exchange', a name no one can
-- open: account names start with a letter or a digit), rebates come out of it, each shard
-- crediting its own allocation of it like any account's; no fill pays a rebate larger than its
-- taker's fee, so that account never goes negative. The ledger's invariant holds as before with it
-- among the accounts: Σ wallets + Σ allocations + 100 × pairs = Σ grants.
--
-- Everything here is additive, so the previous release keeps working on this schema (§9): it
-- neither reads nor writes a schedule, its orders are written with no fee, and it charges none
-- until it is replaced.
alter table markets add column taker_fee_bps integer, add column maker_fee_bps integer,
    add constraint markets_fees check ((taker_fee_bps is null) = (maker_fee_bps is null)
        and taker_fee_bps between 0 and 10000 and maker_fee_bps between -taker_fee_bps and taker_fee_bps);
alter table events add column taker_fee_bps integer, add column maker_fee_bps integer,
    add constraint events_fees check ((taker_fee_bps is null) = (maker_fee_bps is null)
        and taker_fee_bps between 0 and 10000 and maker_fee_bps between -taker_fee_bps and taker_fee_bps);
create index markets_fees on markets (id) where taker_fee_bps is not null;
create index events_fees on events (id) where taker_fee_bps is not null;

alter table orders add column taker_fee_bps smallint not null default 0,
                   add column maker_fee_bps smallint not null default 0;
alter table trades add column taker_fee bigint not null default 0, -- cents the taker paid
                   add column maker_fee bigint not null default 0; -- cents the maker paid: negative for a rebate
-- GET /account/fees sums an account's fills by time through the fills' indexes (migration 016).

insert into accounts (uid, name, available, granted, created_at, updated_at)
values ('00000000-0000-4000-8000-00000000fee5', 'pmx:exchange', 0, 0, now(), now());

-- A resting BUY locks, beside its price, the most its maker fee can take per share:
-- ⌈rate × price × (100 − price) / 10⁶⌉ for a positive rate (engine.OrderState.Lock).
create or replace view account_balances as
select a.id,
       (a.available + (select coalesce(sum(al.available), 0) from allocations al where al.account_id = a.id))::bigint as available,
       (select coalesce(sum((o.price::bigint
                             + case when o.maker_fee_bps > 0
                                    then (o.maker_fee_bps::bigint * o.price * (100 - o.price) + 999999) / 1000000
                                    else 0 end)
                            * (o.quantity - o.filled_quantity)), 0) from orders o
         where o.account_id = a.id and o.side = 'BUY' and o.status in ('OPEN', 'PARTIALLY_FILLED'))::bigint as locked
  from accounts a;

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

-- Its id is fixed, far above any the identity hands out, so that the accounts people open keep
-- theirs (1, 2, ... on a new database) and no test's or tool's numbering meets it.
insert into accounts (id, uid, name, available, granted, created_at, updated_at) overriding system value
values (4611686018427387904, '00000000-0000-4000-8000-00000000fee5', 'pmx:exchange', 0, 0, now(), now());

-- What an account's open BUY orders lock (engine.OrderState.Lock): price × remaining and, beside
-- it, the most the order's maker fee can take per share, ⌈rate × price × (100 − price) / 10⁶⌉ for a
-- positive rate. The one SQL form of the rule: account_balances and acquire_cash's room both read
-- it.
create function open_buy_locks(p_account bigint) returns bigint
language sql stable as $$
    select coalesce(sum((o.price::bigint
                         + case when o.maker_fee_bps > 0
                                then (o.maker_fee_bps::bigint * o.price * (100 - o.price) + 999999) / 1000000
                                else 0 end)
                        * (o.quantity - o.filled_quantity)), 0)::bigint
      from orders o
     where o.account_id = p_account and o.side = 'BUY' and o.status in ('OPEN', 'PARTIALLY_FILLED')
$$;

create or replace view account_balances as
select a.id,
       (a.available + (select coalesce(sum(al.available), 0) from allocations al where al.account_id = a.id))::bigint as available,
       open_buy_locks(a.id) as locked
  from accounts a;

-- acquire_cash as migration 032 made it, its free room now less what open_buy_locks says the
-- account's open BUY orders lock, fee reserves included.
create or replace function acquire_cash(p_holder text, p_accounts bigint[], p_cash bigint[], p_room bigint[], p_spread int)
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
                   - open_buy_locks(a)
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

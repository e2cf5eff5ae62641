-- acquire_cash (migrations 032 and 035) shares an account's free cash and room out among the
-- holders that trade it. It used to share the wallet by p_spread alone, the shards of the
-- caller's own process, and take from another holder exactly what was needed.
--
-- Two shard processes of one matching loop each (pmx shard --shards 1, as on a pod limited to one
-- core) both passed p_spread 1. The first to meet an account took its whole wallet; the other,
-- short, then took from it exactly what each of its batches needed, so about half of its batches
-- began with an acquire, and the first shard's views kept going out of date (the distributed
-- bench, two such shards: 45–52% of the batches acquired). Now:
--
-- - a share is 1/shares of what is left, shares being p_spread or the number of holders with a row
--   of the account (the caller's own among them), whichever is more;
-- - from the other holders, largest first, it takes what is needed and, from the first of them,
--   a share of what that holder has beyond it as well: two holders short of each other's cash
--   settle at about half each, and each acquires again only when its half runs out.
--
-- What an acquire may take is unchanged (never more than the wallet and the other holders hold;
-- every row non-negative), and so are the invariants (docs/architecture.md §11): only how much of
-- what is there it takes. So is the signature: the release before runs on this schema as it is.
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
    shares bigint;
    first boolean;
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
        select greatest(p_spread, count(*)) into shares from allocations al where al.account_id = a;

        -- Cash: from the wallet, then from the other holders.
        need := p_cash[i] - mine.available;
        if need > 0 then
            take := least(w.available, need + greatest(w.available - need, 0) / shares);
            if take > 0 then
                update accounts set available = available - take where id = a;
                update allocations set available = available + take where account_id = a and holder = p_holder;
                need := need - take;
            end if;
            first := true;
            for r in select al.holder, al.available from allocations al
                      where al.account_id = a and al.holder <> p_holder and al.available > 0
                      order by al.available desc for update loop
                exit when need <= 0;
                take := least(r.available, need + case when first then greatest(r.available - need, 0) / shares else 0 end);
                first := false;
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
            take := least(greatest(free, 0), need + greatest(free - need, 0) / shares);
            if take > 0 then
                update allocations set room = room + take where account_id = a and holder = p_holder;
                need := need - take;
            end if;
            first := true;
            for r in select al.holder, al.room from allocations al
                      where al.account_id = a and al.holder <> p_holder and al.room > 0
                      order by al.room desc for update loop
                exit when need <= 0;
                take := least(r.room, need + case when first then greatest(r.room - need, 0) / shares else 0 end);
                first := false;
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

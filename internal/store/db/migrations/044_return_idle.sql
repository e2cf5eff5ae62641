-- The return sweep (a shard giving back what it holds of the accounts idle on it) no longer waits
-- for the wallets other transactions hold. It runs on the shard's own connection, between its
-- batches, so the shard's loop waited as long as it did: return_cash locks the wallets first, and
-- another shard's acquire (or a change of the limits) holds a wallet until it commits. With 1,024
-- bots at 1,000 orders/s over 8 shards, a sweep took 1.7-34 ms, 14 ms at the median, and 1.1-20 ms,
-- 4.8 ms at the median, without the waits (docs/performance.md, "The return sweep").
--
-- return_idle gives back, from holder p_holder's allocations of the accounts p_accounts, what
-- return_cash does, but only for the accounts whose wallets no other transaction holds now
-- (SKIP LOCKED); it returns the others, which hold something and were left for a later sweep.
-- With the wallet held, nothing else writes the holder's allocation of the account (every other
-- writer takes the wallet first; the holder's own batches run on the connection calling this), so
-- the rest waits for no one. return_cash stays, for a shard that stops and gives back everything.
create function return_idle(p_holder text, p_accounts bigint[]) returns setof bigint
language plpgsql as $$
declare
    held bigint[];    -- the accounts the holder holds something of
    locked bigint[];  -- of those, the ones whose wallets this transaction now holds
begin
    select array_agg(al.account_id order by al.account_id) into held
      from allocations al
     where al.account_id = any(p_accounts) and al.holder = p_holder and (al.available > 0 or al.room > 0);
    if held is null then
        return;
    end if;
    select array_agg(w.id order by w.id) into locked
      from (select a.id from accounts a where a.id = any(held) order by a.id for update skip locked) w;
    with taken as (
        update allocations al set available = 0, room = 0
          from (select account_id, available from allocations
                 where account_id = any(locked) and holder = p_holder
                 order by account_id for update) old
         where al.account_id = old.account_id and al.holder = p_holder
        returning al.account_id, old.available)
    update accounts a set available = a.available + t.available from taken t
     where a.id = t.account_id and t.available > 0;
    return query select h from unnest(held) h where h <> all(coalesce(locked, '{}'));
end $$;

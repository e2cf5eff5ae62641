-- fence_markets is the fencing check of a named shard's batch that did not read its markets'
-- ownership when it began (store.Batch.Unlocked): run in the batch's own transaction before its
-- writes, it locks the ownership rows of the markets the batch touched (FOR SHARE, so that no move
-- can slip in before the commit) and fails the transaction, with SQLSTATE PX001, unless the shard
-- still owns every one of them under the epoch it loaded it with. The shard then runs the batch
-- again, reading ownership first, which fails the commands of the markets it lost.
create function fence_markets(p_shard text, p_markets uuid[], p_epochs bigint[]) returns void
language plpgsql as $$
declare
    owned int;
begin
    select count(*) into owned from (
        select 1 from markets m
        join unnest(p_markets, p_epochs) as f(id, epoch) on m.id = f.id
        where m.shard = p_shard and m.epoch = f.epoch
        order by m.id
        for share of m) as rows;
    if owned <> cardinality(p_markets) then
        raise exception 'shard % no longer owns every market its batch wrote for', p_shard
            using errcode = 'PX001';
    end if;
end $$;

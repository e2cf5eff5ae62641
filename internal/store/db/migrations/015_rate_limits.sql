-- Rate limits (package ratelimit): one token bucket per account and kind of request, shared by
-- every front replica. A front takes tokens from it in small leases (rate_take), so Postgres
-- sees one call per lease rather than one per request.
create table rate_buckets (
    account_id  bigint not null references accounts (id),
    kind        text not null check (kind in ('read', 'write')),
    tokens      double precision not null,
    updated_at  timestamptz not null,
    primary key (account_id, kind)
);

-- rate_take refills a bucket for the time since it was last touched (at most burst), then takes
-- between need and want tokens from it: want if it holds that many, need at least, or none if it
-- holds fewer than need. It returns what it took and what is left.
create function rate_take(p_account bigint, p_kind text, p_rate double precision, p_burst double precision,
                          p_need double precision, p_want double precision,
                          out taken double precision, out remaining double precision)
language plpgsql as $$
declare
    t double precision;
begin
    insert into rate_buckets as b (account_id, kind, tokens, updated_at)
    values (p_account, p_kind, p_burst, clock_timestamp())
    on conflict (account_id, kind) do update
       set tokens = least(p_burst, b.tokens + p_rate * extract(epoch from clock_timestamp() - b.updated_at)),
           updated_at = clock_timestamp()
    returning tokens into t;
    if t >= p_need then
        taken := least(t, greatest(p_need, p_want));
    else
        taken := 0;
    end if;
    remaining := t - taken;
    if taken > 0 then
        update rate_buckets set tokens = remaining where account_id = p_account and kind = p_kind;
    end if;
end $$;

-- Self-set risk limits per account (issue 37; internal/shard/risk.go owns the rule).
--
-- max_position: the most shares of one outcome of one market the account may hold once every open
-- BUY order of its in that market fills; max_locked_cash: the most cash its open orders may lock,
-- across all markets. Null for no limit.
--
-- The shard decides every refusal, from what it read of these columns with the account's cash
-- (store.BeginBatch) or from its view of them. Its view may be out of date, so two guards here
-- hold at commit what it decided:
--
--   - risk_version counts the changes of the limits; a batch that placed (or amended up) an order
--     of the account writes into risk_checked the version it decided by, and a batch that did not
--     writes the current one. A batch decided under limits since changed fails (check_violation),
--     and the shard runs it again from what it reads (store.Refused): a change takes effect for
--     every order decided after it commits.
--   - locked may only grow while it stays within max_locked_cash. A batch of another shard that
--     locked the same account's cash meanwhile fails the same way; so the limit holds across
--     shards with no overshoot. Lowering the limit below what is locked is allowed: locked may then
--     fall (cancels, fills) but not grow until it is within the limit again.
alter table accounts
    add column max_position bigint check (max_position >= 0),
    add column max_locked_cash bigint check (max_locked_cash >= 0),
    add column risk_version bigint not null default 0,
    add column risk_checked bigint not null default 0;

create function refuse_risk_limit() returns trigger language plpgsql as $$
begin
    if new.risk_checked <> new.risk_version then
        raise exception 'the risk limits of account % changed (version % decided by, % now)',
            new.id, new.risk_checked, new.risk_version using errcode = 'check_violation';
    end if;
    raise exception 'account % would lock % cents, over its max_locked_cash of %',
        new.id, new.locked, new.max_locked_cash using errcode = 'check_violation';
end $$;

-- The WHEN clause is evaluated without calling the function: a batch pays for the guard only when
-- it refuses.
create trigger accounts_risk_limits before update of locked, risk_checked on accounts for each row
    when (new.risk_checked <> new.risk_version
          or (new.max_locked_cash is not null and new.locked > old.locked and new.locked > new.max_locked_cash))
    execute function refuse_risk_limit();

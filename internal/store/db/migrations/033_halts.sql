-- Halts (issue 55): trading paused in one market, in every market of one event, or in the whole
-- exchange, without closing anything. A halted market refuses placements and amends; cancels, GTD
-- expiries and dead-man switches go on (docs/architecture.md §4, "Halts").
--
-- A market's own pause and an event's are columns of their rows; the exchange's is the one row of
-- halts. Every change of any of them, in the transaction that makes it (change_halts), raises
-- halts.version while it holds the halts' mark exclusively. A shard decides placements and amends
-- under the halts of one version it read, and every batch that decided one ends with halt_check of
-- that version, which takes the mark shared and fails the batch with SQLSTATE PX003 if the version
-- moved: so no placement commits after a halt that refuses it has committed, and none is refused
-- under a halt already lifted. The shard then reads the halts again and runs the batch again.
--
-- The release before reads and writes none of this: its shards decide placements without halts.
alter table markets add column paused boolean not null default false;
alter table events add column paused boolean not null default false;
create index markets_paused on markets (id) where paused;
create index events_paused on events (id) where paused;

create table halts (
    id         boolean primary key default true check (id),
    exchange   boolean not null default false, -- the whole exchange is halted
    changed_at timestamptz not null default now(), -- when exchange last changed
    version    bigint not null default 0 -- raised by every change of a market's, event's or the exchange's halt
);
insert into halts default values;

-- change_halts takes the halts' mark (an advisory transaction lock, "pmxh" 1) exclusively, which
-- waits for every batch checking the version to end, and raises the version: a change of a halt
-- calls it first in its transaction. It returns the new version.
create function change_halts() returns bigint
language plpgsql as $$
declare
    v bigint;
begin
    perform pg_advisory_xact_lock(1886222440, 1);
    update halts set version = version + 1 where id = true returning version into v;
    return v;
end $$;

-- halt_check takes the mark shared, then checks the version as committed after the mark was
-- granted (a statement of its own in a volatile function: a batch that waited for a change sees it).
create function halt_check(p_version bigint) returns void
language plpgsql as $$
begin
    perform pg_advisory_xact_lock_shared(1886222440, 1);
    if not exists (select 1 from halts where id = true and version = p_version) then
        raise exception 'the halts changed since this batch read them (version %)', p_version
            using errcode = 'PX003';
    end if;
end $$;

-- A batch's accounts' statement as cheap as the accounts' row was (issue 53): measured at 1,000
-- orders/s, the statement that writes a batch's allocations and account events took 117 µs a call
-- against the 77 µs the accounts' update took before the allocations, and every batch that decided
-- a placement ended with a statement more, halt_check (docs/performance.md).
--
-- account_events_by_position (migration 032) is read by no query: a feed's page reads each
-- stream by its primary key and merges the streams by position in the reader. It cost every event
-- row an index entry and its WAL.
drop index account_events_by_position;

-- batch_checks is the last guard of a batch's accounts' statement, evaluated once before the
-- statement returns a row: with p_halts, the halts' check of that version (halt_check), so that a
-- batch needs no statement of its own for it; with p_expected, that the statement's update wrote
-- p_expected allocation rows. A shard that has seen its allocation rows of a batch's accounts
-- committed writes them by an update alone, with no insert for a missing row (allocation rows are
-- never deleted); should one be missing all the same, the batch fails with SQLSTATE PX004 rather
-- than lose the cash, and the shard writes it again with the insert.
--
-- Additive: the previous release neither calls it nor depends on the index.
create function batch_checks(p_written bigint, p_expected bigint, p_halts bigint) returns boolean
language plpgsql as $$
begin
    if p_halts is not null then
        perform halt_check(p_halts);
    end if;
    if p_expected is not null and p_written is distinct from p_expected then
        raise exception 'the batch updated % of its % allocation rows: a row it took as written is missing', p_written, p_expected
            using errcode = 'PX004';
    end if;
    return true;
end $$;

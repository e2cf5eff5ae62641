-- The guard that a batch decided an account's orders under the account's current risk limits
-- (migration 032) becomes a table check, risk_checked = risk_version, instead of a BEFORE row
-- trigger. Before it updates a row, Postgres locks the row for a BEFORE UPDATE trigger (a WAL
-- record and a write of the row's page more) and evaluates the trigger's WHEN; every batch updates
-- its holder's allocation of each account it moves, so that was one lock more for each, 2.4% of
-- the WAL a closed loop wrote (docs/performance.md, "A batch read every allocation its shard
-- held").
--
-- The check states the same rule for every row: each writer keeps the two equal. SetRiskLimits
-- writes the new version to both; a new row takes the account's version for both (an acquire) or
-- the version its batch decided by (which must be the account's); a batch writes the version it
-- decided by, or the row's own when it decided nothing by the limits. A batch that decided by a
-- version a change of the limits has since replaced fails the check, check_violation as the
-- trigger's exception was, so it is refused and runs again as before (store.Refused).
--
-- No row can differ today (the trigger refused every write that would have made one differ and
-- every other write set both); the update below makes sure of it before the check is validated,
-- which reads the table and writes nothing.
update allocations set risk_checked = risk_version where risk_checked <> risk_version;
drop trigger allocations_risk_limits on allocations;
drop function refuse_allocation_risk();
alter table allocations add constraint allocations_risk_checked check (risk_checked = risk_version);

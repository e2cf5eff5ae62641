-- Placeholder for migration 024, which branch i3x-risk writes (account risk limits). Tern needs the
-- numbers without a gap, and this branch's 025 follows it. DELETE THIS FILE WHEN MERGING i3x-risk.
select 1;

-- The number each move took (issue 54's audit): an amend that moves an order to the back of its
-- price takes the next number of its market's order sequence, and orders.priority keeps only the
-- last. The shards now tell each move's number in its "amended" event of the account's feed, as
-- the batch keeps it (the event's "priority", never sent to a client), and pmx audit replays every
-- move at its number; the pruning copies it here with the event's terms (feed.TermsOf,
-- feedlog.PruneEvents). Null: an amend that kept its place, the terms accepted, and every event
-- written before this release, which told no number: for those the audit deduces it, as before
-- (docs/operations.md, "Auditing the record"). Nothing writes this column but the sweeper, and
-- adding a nullable column rewrites nothing.
alter table order_terms add column priority bigint;

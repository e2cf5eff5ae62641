-- The archive the audit reads (issue 54): the terms of every order an amend may move, kept for
-- ever once the account's feed that told them is pruned. pmx audit replays an order an amend
-- moved from its terms when accepted and every amend of it (the orders row keeps only the last);
-- those are the "accepted" and "amended" events of its account's feed (account_events), which the
-- shards delete after --event-retention. Before it deletes a batch of account events, the pruning
-- sweeper (feedlog.PruneEvents) copies those events of the orders that an amend moved or still
-- may (priority set, or still resting) into this table, in the transaction of the delete: one row
-- per event, keyed by the order and the event's number in its account's stream, so that a copy
-- made twice is one row. Only the sweeper writes it, never a batch: the order path is unchanged.
--
-- A row: the order, the event's stream (holder) and number (seq), its batch's position (the order
-- of an order's events across streams, account_events.position), whether it is an amend (else the
-- terms accepted), the order's price and quantity after it, how much had filled when it ran, and
-- its batch's time.
create table order_terms (
    order_id  uuid not null,
    holder    text not null,
    seq       bigint not null,
    position  bigint not null,
    amended   boolean not null,
    price     smallint not null,
    quantity  bigint not null,
    filled    bigint not null,
    at        timestamptz not null,
    primary key (order_id, holder, seq)
);

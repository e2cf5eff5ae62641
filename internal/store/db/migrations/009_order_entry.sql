-- Order entry of a serious venue: time in force, post-only, self-trade prevention, client order
-- ids that make a placement safe to retry, why an order was cancelled, and the dead-man switch.
--
-- The new columns have constant defaults (or none), so adding them rewrites nothing; their checks
-- are added NOT VALID, which skips a scan of the existing rows: every one of them holds the
-- default, which passes. New rows are checked as usual.
alter table orders
    add column time_in_force   text not null default 'GTC',
    add column expires_at      timestamptz, -- GTD only
    add column post_only       boolean not null default false,
    add column self_trade      text not null default 'CANCEL_RESTING',
    add column client_order_id text,
    -- The placement's parameters as the client sent them (market, side, outcome, price, quantity,
    -- time in force, expiry, post-only, self-trade mode), for orders with a client order id: a
    -- retry must repeat them to be answered with the order, and an amend changes the order's own
    -- price and quantity, so those cannot be compared instead.
    add column placement       text,
    add column cancel_reason   text;
alter table orders
    add constraint orders_time_in_force check (time_in_force in ('GTC', 'IOC', 'FOK', 'GTD')) not valid,
    add constraint orders_expires_at check ((time_in_force = 'GTD') = (expires_at is not null)) not valid,
    add constraint orders_self_trade check (self_trade in ('CANCEL_RESTING', 'CANCEL_INCOMING')) not valid,
    add constraint orders_client_order_id check ((client_order_id is null) = (placement is null)) not valid,
    add constraint orders_cancel_reason check (cancel_reason in
        ('USER', 'IOC', 'FOK', 'EXPIRED', 'SELF_TRADE', 'MARKET_CLOSED', 'HEARTBEAT')) not valid;
-- A client order id is the account's for ever: unique per account, whatever became of its order.
create unique index orders_client_order_id on orders (account_id, client_order_id) where client_order_id is not null;

-- The dead-man switch: each account's deadline while armed, and the latest deadline that passed
-- (tripped). Every open order an account placed at or before its latest passed deadline is
-- cancelled by the shard that holds it: kept here rather than acted on once, so that re-arming or
-- disarming after a deadline passed cannot spare an order in a market whose shard was restarting.
-- A table of its own rather than columns of accounts, so that a heartbeat never waits on the row
-- lock a batch holds on the account (nor a batch on a heartbeat), and so that the accounts row,
-- updated by nearly every batch, gains no index on a column that changes.
create table heartbeats (
    account_id  bigint primary key,
    deadline    timestamptz,
    tripped     timestamptz
);
create index heartbeats_due on heartbeats (deadline);

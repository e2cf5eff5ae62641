-- The single-column checks of the tables every batch writes become domains.
--
-- Postgres parses a table's check constraints from their stored text again for every statement
-- that writes the table, and plans each one: with 25 of them on orders, trades, markets, positions
-- and accounts, that was 11.6% of the Postgres backends' CPU at 1,000 orders/s (perf; see
-- docs/performance.md, "What Postgres spends on a small batch"). A domain's check is parsed and
-- planned once per connection and kept in its type cache: 5.4-6.3% after, for the checks that stay.
-- A domain's check fails as a table's did (check_violation), so the balances and holdings that
-- refuse a batch which reserved too much (store.Refused) refuse it as before. The checks that
-- compare two columns stay on their tables.
--
-- Nothing is rewritten: each column first becomes a domain without a check, which is binary
-- compatible with its type, and the old table check that guaranteed the same rule is dropped;
-- the domain's check is then added and validated, which reads the columns but writes nothing.

create domain side as text;
create domain outcome as text;
create domain price_cents as smallint;
create domain positive_quantity as bigint;
create domain nonnegative as bigint;
create domain order_status as text;
create domain time_in_force as text;
create domain self_trade as text;
create domain cancel_reason as text;
create domain trade_kind as text;
create domain market_status as text;

alter table orders
    alter column side type side,
    alter column outcome type outcome,
    alter column price type price_cents,
    alter column quantity type positive_quantity,
    alter column status type order_status,
    alter column time_in_force type time_in_force,
    alter column self_trade type self_trade,
    alter column cancel_reason type cancel_reason,
    drop constraint orders_side_check,
    drop constraint orders_outcome_check,
    drop constraint orders_price_check,
    drop constraint orders_quantity_check,
    drop constraint orders_status_check,
    drop constraint orders_time_in_force,
    drop constraint orders_self_trade,
    drop constraint orders_cancel_reason;
alter table trades
    alter column kind type trade_kind,
    alter column yes_price type price_cents,
    alter column quantity type positive_quantity,
    drop constraint trades_kind_check,
    drop constraint trades_yes_price_check,
    drop constraint trades_quantity_check;
alter table markets
    alter column status type market_status,
    alter column outcome type outcome,
    alter column last_trade_price type price_cents,
    drop constraint markets_status_check,
    drop constraint markets_outcome_check,
    drop constraint markets_last_trade_price_check;
alter table positions
    alter column outcome type outcome,
    alter column quantity type nonnegative,
    drop constraint positions_outcome_check,
    drop constraint positions_quantity_check;
alter table accounts
    alter column available type nonnegative,
    alter column locked type nonnegative,
    alter column granted type nonnegative,
    drop constraint accounts_available_check,
    drop constraint accounts_locked_check,
    drop constraint accounts_granted_check;

alter domain side add constraint side_check check (value in ('BUY', 'SELL')) not valid;
alter domain outcome add constraint outcome_check check (value in ('YES', 'NO')) not valid;
alter domain price_cents add constraint price_cents_check check (value between 1 and 99) not valid;
alter domain positive_quantity add constraint positive_quantity_check check (value > 0) not valid;
alter domain nonnegative add constraint nonnegative_check check (value >= 0) not valid;
alter domain order_status add constraint order_status_check
    check (value in ('OPEN', 'PARTIALLY_FILLED', 'FILLED', 'CANCELLED', 'PARTIALLY_FILLED_CANCELLED')) not valid;
alter domain time_in_force add constraint time_in_force_check check (value in ('GTC', 'IOC', 'FOK', 'GTD')) not valid;
alter domain self_trade add constraint self_trade_check check (value in ('CANCEL_RESTING', 'CANCEL_INCOMING')) not valid;
alter domain cancel_reason add constraint cancel_reason_check
    check (value in ('USER', 'IOC', 'FOK', 'EXPIRED', 'SELF_TRADE', 'MARKET_CLOSED', 'HEARTBEAT')) not valid;
alter domain trade_kind add constraint trade_kind_check check (value in ('TRANSFER_YES', 'TRANSFER_NO', 'MINT', 'BURN')) not valid;
alter domain market_status add constraint market_status_check check (value in ('OPEN', 'CLOSED', 'RESOLVED', 'CANCELED')) not valid;

alter domain side validate constraint side_check;
alter domain outcome validate constraint outcome_check;
alter domain price_cents validate constraint price_cents_check;
alter domain positive_quantity validate constraint positive_quantity_check;
alter domain nonnegative validate constraint nonnegative_check;
alter domain order_status validate constraint order_status_check;
alter domain time_in_force validate constraint time_in_force_check;
alter domain self_trade validate constraint self_trade_check;
alter domain cancel_reason validate constraint cancel_reason_check;
alter domain trade_kind validate constraint trade_kind_check;
alter domain market_status validate constraint market_status_check;

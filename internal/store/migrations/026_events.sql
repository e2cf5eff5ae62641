-- Events (issue 36; package internal/event owns the rules, docs/architecture.md §3 the ledger): a
-- question of 2 to 50 mutually exclusive outcomes, each traded as its own YES/NO market whose YES
-- means "this outcome wins".
--
-- Everything here is additive, so the previous release keeps working on this schema (§9): its
-- markets have no event_id and it never reads the new tables. A market of an event is an ordinary
-- market to that release, which is why events are created only once every process is upgraded.
--
-- outcomes: the event's outcomes in order, [{"key", "label"}], keys fixed once created.
-- resolution: the winning outcome's key, set with status RESOLVED.
create table events (
    id           uuid primary key,
    name         text not null unique, -- metadata.name of the Event resource, or an admin-chosen name
    question     text not null,
    category     text not null,
    description  text,
    url          text,
    outcomes     jsonb not null check (jsonb_typeof(outcomes) = 'array'
                     and jsonb_array_length(outcomes) between 2 and 50),
    status       text not null check (status in ('OPEN', 'CLOSED', 'RESOLVED', 'CANCELED')),
    resolution   text,
    closes_at    timestamptz,
    resolves_at  timestamptz,
    created_at   timestamptz not null,
    updated_at   timestamptz not null,
    check ((status = 'RESOLVED') = (resolution is not null))
);
create index events_created on events (created_at desc, id desc);

-- A market of an event answers one of its outcomes; a market of no event has neither column.
alter table markets
    add column event_id uuid references events (id),
    add column outcome_key text,
    add constraint markets_event_outcome check ((event_id is null) = (outcome_key is null));
create unique index markets_event_outcome_key on markets (event_id, outcome_key) where event_id is not null;

-- conversions records every conversion (event.Conversion): what was converted and the cash it
-- paid, so that a retry with the same client_request_id answers the same and changes nothing.
create table conversions (
    id                 uuid primary key,
    event_id           uuid not null references events (id),
    account_id         bigint not null references accounts (id),
    client_request_id  text,
    outcomes           text[] not null check (cardinality(outcomes) >= 1),
    quantity           bigint not null check (quantity >= 1),
    cash               bigint not null check (cash >= 0),
    created_at         timestamptz not null
);
create unique index conversions_client_request_id on conversions (account_id, client_request_id)
    where client_request_id is not null;
create index conversions_event on conversions (event_id);

-- exchange_remainders is the exchange's own account: what a cancelled event's collateral leaves
-- after the void pays ⌊100/n⌋ per YES and (n − 1)·⌊100/n⌋ per NO (event.Totals.Void), one row per
-- event, never negative (§3 proves it), so that every cent of play money is accounted for.
create table exchange_remainders (
    event_id    uuid primary key references events (id),
    amount      bigint not null check (amount >= 0),
    created_at  timestamptz not null
);

-- The sequenced market feed (package feed). Each market numbers its changes (book levels, trades,
-- status) with a gapless sequence, the last number used kept in event_seq; each batch writes the
-- events it made as one row per market, in its own transaction. Rows older than the retention are
-- deleted by the shards.
alter table markets add column event_seq bigint not null default 0;

create table market_events (
    market_id   uuid not null,
    first_seq   bigint not null,
    last_seq    bigint not null,
    created_at  timestamptz not null,
    events      bytea not null, -- a JSON array of feed.Event, as the API shows them
    primary key (market_id, first_seq),
    check (last_seq >= first_seq)
);
create index market_events_created on market_events (created_at);

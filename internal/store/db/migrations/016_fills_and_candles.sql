-- GET /fills lists an account's fills newest first, as taker and as maker: an index for each
-- role serves a page from where the last one ended, however many trades there are.
-- The same by market, for ?marketId=: an account's fills in one market are found directly
-- rather than among all of its fills.
create index trades_taker on trades (taker_account_id, created_at desc, id desc);
create index trades_maker on trades (maker_account_id, created_at desc, id desc);
create index trades_taker_market on trades (taker_account_id, market_id, created_at desc, id desc);
create index trades_maker_market on trades (maker_account_id, market_id, created_at desc, id desc);

-- Candles are kept rolled up, per market, by minute and by hour, as each batch writes its trades
-- (store.applyStatement): GET /market/candles reads 1m and 5m candles from the minutes and 1h and
-- 1d candles from the hours, never the trades themselves. first_seq and last_seq (the trades'
-- numbers) decide open and close when a batch adds to an interval.
create table candles_1m (
    market_id  uuid not null references markets (id),
    start      timestamptz not null,
    open       smallint not null,
    high       smallint not null,
    low        smallint not null,
    close      smallint not null,
    volume     bigint not null,
    trades     bigint not null,
    first_seq  bigint not null,
    last_seq   bigint not null,
    primary key (market_id, start)
);
create table candles_1h (like candles_1m including all);

insert into candles_1m
select market_id, date_bin('1 minute', created_at, timestamptz '2000-01-01 00:00:00+00'),
       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price), (array_agg(yes_price order by seq desc))[1],
       sum(quantity), count(*), min(seq), max(seq)
from trades group by 1, 2;
insert into candles_1h
select market_id, date_bin('1 hour', created_at, timestamptz '2000-01-01 00:00:00+00'),
       (array_agg(yes_price order by seq))[1], max(yes_price), min(yes_price), (array_agg(yes_price order by seq desc))[1],
       sum(quantity), count(*), min(seq), max(seq)
from trades group by 1, 2;

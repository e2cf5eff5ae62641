-- GET /fills lists an account's fills newest first, as taker and as maker: an index for each
-- role serves a page from where the last one ended, however many trades there are.
create index trades_taker on trades (taker_account_id, created_at desc, id desc);
create index trades_maker on trades (maker_account_id, created_at desc, id desc);
-- GET /market/candles reads one market's trades over a window of time, from the index alone.
create index trades_market_time on trades (market_id, created_at) include (seq, yes_price, quantity);

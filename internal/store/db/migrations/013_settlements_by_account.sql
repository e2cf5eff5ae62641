-- GET /settlements lists an account's settlements newest first, in pages: this index serves each
-- page from where the last one ended, whatever the number of settlements.
create index settlements_account on settlements (account_id, created_at desc, market_id desc, outcome desc);

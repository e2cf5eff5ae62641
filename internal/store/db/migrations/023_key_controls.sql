-- What a key may do, until when, and from where (issue 37; internal/kit/auth owns the rules).
--
-- scope: read, cancel or trade (auth.Scope). Every key made before scopes could do everything,
-- so existing rows are trade, and so is a key made without one: during a rolling upgrade the
-- previous release's fronts, which know no scopes, still open accounts with keys (every migration
-- leaves the schema usable by the release before it; docs/architecture.md §9).
-- expires_at: when the key stops working; null for never. At most a year after created_at, which
-- the API checks when a key is made (auth.CheckExpiry: a calendar year, Go's AddDate); the check
-- here keeps a bug from making a key that outlives the rule by more. It allows 366 days, not
-- Postgres's '1 year', which ends a day earlier than Go's year from 29 February.
-- ip_allowlist: the address ranges a request with the key may come from; null for anywhere.
alter table api_keys
    add column scope text not null default 'trade' check (scope in ('read', 'cancel', 'trade')),
    add column expires_at timestamptz check (expires_at <= created_at + interval '366 days'),
    add column ip_allowlist cidr[];

-- A ws-token connects with the rights of the key that fetched it, checked when it is used: the
-- key's scope, expiry, allowlist and revocation. Tokens fetched before this migration have no key
-- and keep their account's full rights for the minute they live.
alter table ws_tokens add column key_id uuid references api_keys (id);

-- Sign-ups from the settings pages, for rate limiting them by client address: each costs the
-- server a 64 MiB argon2id hash and opens an account with play money. A sign-up is recorded before
-- its password is hashed, so concurrent ones count; one refused for the limit is deleted again.
-- Rows older than the window are deleted as new sign-ups come in.
create table sign_ups (
    id      bigint generated always as identity primary key,
    client  text not null, -- the client's IP address (an IPv6 client's /64)
    at      timestamptz not null
);
create index sign_ups_client on sign_ups (client, at);
create index sign_ups_at on sign_ups (at);

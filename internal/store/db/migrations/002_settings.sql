-- The developer settings pages: passwords, browser sessions, sign-in attempts and the key that signs
-- the anonymous forms' CSRF tokens. Everything lives in Postgres so that any number of API replicas
-- share it.

-- An argon2id hash in the PHC string format ($argon2id$v=19$m=...,t=...,p=...$salt$hash). Null for
-- accounts opened through the admin API: they have no web sign-in.
alter table accounts add column password_hash text;

-- A browser session. The cookie holds a random token; only its SHA-256 is stored, so a copy of this
-- table signs no one in.
create table sessions (
    token_hash  bytea primary key,
    account_id  bigint not null references accounts (id),
    csrf_token  bytea not null, -- the synchronizer token every signed-in form carries
    created_at  timestamptz not null,
    expires_at  timestamptz not null -- slides with use, never past created_at + the absolute lifetime
);
create index sessions_account on sessions (account_id);
create index sessions_expires on sessions (expires_at);

-- Sign-in attempts not (yet) known to have succeeded, for rate limiting by account name and by
-- client address. An attempt is recorded before its password is checked and deleted if it succeeds,
-- so concurrent guesses count against the limit; rows older than the window are deleted as new
-- attempts come in.
create table sign_in_failures (
    id          bigint generated always as identity primary key,
    name        text not null, -- as typed, cut to 64 characters
    client      text not null, -- the client's IP address (an IPv6 client's /64)
    at          timestamptz not null
);
create index sign_in_failures_name on sign_in_failures (name, at);
create index sign_in_failures_client on sign_in_failures (client, at);
create index sign_in_failures_at on sign_in_failures (at);

-- The key that signs the CSRF tokens of the sign-in and sign-up forms (which have no session yet),
-- one for the whole deployment. gen_random_uuid draws from the server's strong random source; two
-- of them give 244 random bits.
create table form_keys (
    id   boolean primary key default true check (id),
    key  bytea not null check (length(key) = 32)
);
insert into form_keys (key)
values (decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex'));

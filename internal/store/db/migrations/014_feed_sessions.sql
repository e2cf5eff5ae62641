-- The live feed's sessions (GET /api/v1/ws).
--
-- ws_tokens: short-lived, single-use tokens a browser connects with (POST /api/v1/ws-token), as
-- it cannot send an Authorization header on a WebSocket; kept as SHA-256 hashes.
create table ws_tokens (
    token_hash  bytea primary key,
    account_id  bigint not null references accounts (id),
    expires_at  timestamptz not null
);
create index ws_tokens_expiry on ws_tokens (expires_at);

-- ws_presence: for each account, each front replica that holds at least one of its connections
-- opened with cancelOnDisconnect, refreshed every few seconds. When an account's last row goes
-- (its last such connection closed, or its front stopped refreshing), its open orders are
-- cancelled through the dead-man switch (heartbeats.tripped): every shard cancels them with
-- cancelReason HEARTBEAT, whatever front or shard is alive.
create table ws_presence (
    account_id  bigint not null references accounts (id),
    front       uuid not null,
    seen_at     timestamptz not null,
    primary key (account_id, front)
);
create index ws_presence_seen on ws_presence (seen_at);

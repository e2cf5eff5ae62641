-- Signed requests (issue 37; internal/kit/auth's signing.go owns the rules).
--
-- public_key: the raw 32 bytes of the Ed25519 public key a key's requests must be signed with;
-- null for a key that does not sign. Chosen when the key is made, never changed: a firm that
-- rotates its signing key makes a new API key.
alter table api_keys add column public_key bytea check (octet_length(public_key) = 32);

-- The signed requests accepted lately, by the SHA-256 of their key and signed message, so that
-- one sent again is refused (replayed_request) by whichever front it reaches: the insert of a
-- digest already here does nothing, and the front refuses. A request is accepted only within
-- 5 s of its timestamp, so a row is needed for 10 s after it is written; the fronts delete rows
-- older than a minute (store.SweepSignedRequests), which leaves room for their clocks to differ.
-- Unlogged: nothing here outlives its minute, so it is not worth the write-ahead log, and after a
-- Postgres crash the table starts empty, which lets a request captured in the 10 s before the
-- crash be replayed once after it (the bound the documents state).
create unlogged table signed_requests (
    digest  bytea primary key,
    seen_at timestamptz not null default now()
);
create index signed_requests_seen_at on signed_requests (seen_at);

-- The pmx schema: accounts and their keys, markets, orders, trades, positions, settlements.
-- Money is integer cents; every balance is checked non-negative by the database itself, so that a
-- bug can fail a transaction but never leave a negative balance behind.

create table accounts (
    id          bigint generated always as identity primary key, -- the matching engine's account id
    uid         uuid not null unique,                            -- the id the API shows
    name        text not null unique,
    available   bigint not null check (available >= 0),
    locked      bigint not null check (locked >= 0),
    granted     bigint not null check (granted >= 0),           -- play money granted, for audits
    created_at  timestamptz not null,
    updated_at  timestamptz not null
);

create table api_keys (
    id            uuid primary key,
    account_id    bigint not null references accounts (id),
    prefix        text not null unique, -- the public part of the key, shown in listings
    hash          bytea not null,       -- SHA-256 of the whole key; the key itself is never stored
    label         text not null default '',
    created_at    timestamptz not null,
    last_used_at  timestamptz,
    revoked_at    timestamptz
);
create index api_keys_account on api_keys (account_id, created_at);

create table markets (
    id                uuid primary key,
    name              text unique, -- metadata.name of the Market manifest it came from, if any
    question          text not null,
    description       text,
    category          text not null,
    url               text,
    label_a           text not null,
    label_b           text not null,
    status            text not null check (status in ('OPEN', 'CLOSED', 'RESOLVED', 'CANCELED')),
    outcome           text check (outcome in ('YES', 'NO')),
    closes_at         timestamptz,
    resolves_at       timestamptz,
    last_trade_price  smallint check (last_trade_price between 1 and 99),
    settled_at        timestamptz,
    created_at        timestamptz not null,
    updated_at        timestamptz not null,
    check ((status = 'RESOLVED') = (outcome is not null)),
    check ((status in ('RESOLVED', 'CANCELED')) = (settled_at is not null))
);
create index markets_created on markets (created_at desc, id desc);

create table orders (
    id               uuid primary key,
    market_id        uuid not null references markets (id),
    seq              bigint not null, -- the engine's order id: time priority within the market
    account_id       bigint not null references accounts (id),
    side             text not null check (side in ('BUY', 'SELL')),
    outcome          text not null check (outcome in ('YES', 'NO')),
    price            smallint not null check (price between 1 and 99),
    quantity         bigint not null check (quantity > 0),
    filled_quantity  bigint not null check (filled_quantity between 0 and quantity),
    status           text not null check (status in ('OPEN', 'PARTIALLY_FILLED', 'FILLED', 'CANCELLED', 'PARTIALLY_FILLED_CANCELLED')),
    created_at       timestamptz not null,
    updated_at       timestamptz not null,
    unique (market_id, seq)
);
create index orders_resting on orders (market_id, seq) where status in ('OPEN', 'PARTIALLY_FILLED');
create index orders_account on orders (account_id, created_at desc, id desc);
create index orders_account_resting on orders (account_id, market_id) where status in ('OPEN', 'PARTIALLY_FILLED');

create table trades (
    id                uuid primary key,
    market_id         uuid not null references markets (id),
    seq               bigint not null, -- execution order within the market
    kind              text not null check (kind in ('TRANSFER_YES', 'TRANSFER_NO', 'MINT', 'BURN')),
    yes_price         smallint not null check (yes_price between 1 and 99),
    quantity          bigint not null check (quantity > 0),
    taker_order_seq   bigint not null,
    maker_order_seq   bigint not null,
    taker_account_id  bigint not null references accounts (id),
    maker_account_id  bigint not null references accounts (id),
    taker_side        text not null,
    taker_outcome     text not null,
    taker_price       smallint not null,
    created_at        timestamptz not null,
    unique (market_id, seq)
);

create table positions (
    account_id       bigint not null references accounts (id),
    market_id        uuid not null references markets (id),
    outcome          text not null check (outcome in ('YES', 'NO')),
    id               uuid not null unique,
    quantity         bigint not null check (quantity >= 0),
    locked_quantity  bigint not null check (locked_quantity between 0 and quantity),
    created_at       timestamptz not null,
    updated_at       timestamptz not null,
    primary key (account_id, market_id, outcome)
);
create index positions_market on positions (market_id) where quantity > 0;

create table settlements (
    market_id   uuid not null references markets (id),
    account_id  bigint not null references accounts (id),
    outcome     text not null,
    quantity    bigint not null,
    amount      bigint not null,
    created_at  timestamptz not null,
    primary key (market_id, account_id, outcome)
);

-- reserve locks what each order of a batch needs, in the batch's order, and says for each whether it
-- could: 0 reserved, 1 not enough cash, 2 not enough unlocked shares. The accounts are locked in id
-- order first, so that writers reserving for overlapping accounts never deadlock.
create function reserve(p_accounts bigint[], p_markets uuid[], p_outcomes text[], p_cash bigint[],
                        p_shares bigint[], p_now timestamptz) returns smallint[]
language plpgsql as $$
declare
    result smallint[] := '{}';
    n int;
begin
    perform 1 from accounts where id = any (p_accounts) order by id for update;
    for i in 1 .. coalesce(array_length(p_accounts, 1), 0) loop
        if p_cash[i] > 0 then
            update accounts set available = available - p_cash[i], locked = locked + p_cash[i], updated_at = p_now
             where id = p_accounts[i] and available >= p_cash[i];
        else
            update positions set locked_quantity = locked_quantity + p_shares[i], updated_at = p_now
             where account_id = p_accounts[i] and market_id = p_markets[i] and outcome = p_outcomes[i]
               and quantity - locked_quantity >= p_shares[i];
        end if;
        get diagnostics n = row_count;
        result := result || (case when n = 1 then 0 when p_cash[i] > 0 then 1 else 2 end)::smallint;
    end loop;
    return result;
end $$;

-- settle moves a market that is OPEN or CLOSED, and has no resting orders, to RESOLVED (p_outcome
-- YES or NO: 100 per winning share) or CANCELED (p_outcome null: 50 per share of either outcome,
-- which returns exactly the collateral of every pair), pays every holder and retires every share.
-- It runs at most once per market: it returns false, changing nothing, when the market was already
-- settled, so a retried settlement is harmless.
create function settle(p_market uuid, p_outcome text, p_now timestamptz) returns boolean
language plpgsql as $$
begin
    update markets
       set status = case when p_outcome is null then 'CANCELED' else 'RESOLVED' end,
           outcome = p_outcome, settled_at = p_now, updated_at = p_now
     where id = p_market and status in ('OPEN', 'CLOSED');
    if not found then
        return false;
    end if;
    if exists (select 1 from orders where market_id = p_market and status in ('OPEN', 'PARTIALLY_FILLED')) then
        raise exception 'market % still has resting orders', p_market;
    end if;
    insert into settlements (market_id, account_id, outcome, quantity, amount, created_at)
    select market_id, account_id, outcome, quantity,
           quantity * case when p_outcome is null then 50 when outcome = p_outcome then 100 else 0 end,
           p_now
      from positions
     where market_id = p_market and quantity > 0;
    update accounts a
       set available = a.available + s.amount, updated_at = p_now
      from (select account_id, sum(amount) as amount from settlements
             where market_id = p_market and amount > 0 group by account_id order by account_id) s
     where a.id = s.account_id;
    update positions set quantity = 0, locked_quantity = 0, updated_at = p_now
     where market_id = p_market and quantity > 0;
    return true;
end $$;

package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pmx-dev/pmx/internal/store/batches"
	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// domainsSeed is a consistent little exchange in the tables whose checks migration 020 moved to
// domains: one market, two orders, one trade between them, and the two positions it made.
const domainsSeed = `
	insert into accounts (id, uid, name, available, granted, created_at, updated_at) overriding system value values
	  (1, gen_random_uuid(), 'a', 920, 1000, now(), now()),
	  (2, gen_random_uuid(), 'b', 880, 1000, now(), now());
	insert into markets (id, question, category, label_a, label_b, status, last_trade_price, created_at, updated_at) values
	  ('00000000-0000-0000-0000-0000000000aa', 'q?', 'c', 'Yes', 'No', 'OPEN', 40, now(), now());
	insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity, filled_quantity, status,
	                    time_in_force, self_trade, cancel_reason, created_at, updated_at) values
	  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 1, 1, 'BUY', 'YES', 40, 2, 2, 'FILLED', 'GTC', 'CANCEL_RESTING', null, now(), now()),
	  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 2, 2, 'BUY', 'NO', 60, 3, 2, 'PARTIALLY_FILLED_CANCELLED', 'IOC', 'CANCEL_INCOMING', 'IOC', now(), now());
	insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
	                    taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at) values
	  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 1, 'MINT', 40, 2, 2, 1, 2, 1, 'BUY', 'NO', 60, now());
	insert into positions (account_id, market_id, outcome, id, quantity, locked_quantity, created_at, updated_at) values
	  (1, '00000000-0000-0000-0000-0000000000aa', 'YES', gen_random_uuid(), 2, 0, now(), now()),
	  (2, '00000000-0000-0000-0000-0000000000aa', 'NO', gen_random_uuid(), 2, 0, now(), now());`

// TestCheckDomains checks that every rule migration 020 moved from a table's check to a domain
// still refuses a row that breaks it, as the same check_violation (SQLSTATE 23514) the table's
// check raised, so that Refused and every caller see what they saw before; and that the checks
// that compare columns, which stayed on their tables, still hold.
func TestCheckDomains(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, domainsSeed); err != nil {
		t.Fatalf("the consistent seed: %v", err)
	}
	cases := []struct{ name, statement, constraint string }{
		{"an order's side", `update orders set side = 'HOLD' where seq = 1`, "side_check"},
		{"an order's outcome", `update orders set outcome = 'MAYBE' where seq = 1`, "outcome_check"},
		{"an order's price below 1", `update orders set price = 0 where seq = 1`, "price_cents_check"},
		{"an order's price above 99", `update orders set price = 100 where seq = 1`, "price_cents_check"},
		{"an order's quantity", `update orders set quantity = 0, filled_quantity = 0 where seq = 1`, "positive_quantity_check"},
		{"an order's status", `update orders set status = 'PENDING' where seq = 1`, "order_status_check"},
		{"an order's time in force", `update orders set time_in_force = 'DAY' where seq = 1`, "time_in_force_check"},
		{"an order's self-trade mode", `update orders set self_trade = 'DECREMENT' where seq = 1`, "self_trade_check"},
		{"an order's cancel reason", `update orders set cancel_reason = 'BORED' where seq = 1`, "cancel_reason_check"},
		{"a trade's kind", `update trades set kind = 'GIFT'`, "trade_kind_check"},
		{"a trade's price", `update trades set yes_price = 100`, "price_cents_check"},
		{"a trade's quantity", `update trades set quantity = 0`, "positive_quantity_check"},
		{"a market's status", `update markets set status = 'PAUSED'`, "market_status_check"},
		{"a market's outcome", `update markets set status = 'RESOLVED', outcome = 'MAYBE', settled_at = now()`, "outcome_check"},
		{"a market's last price", `update markets set last_trade_price = 0`, "price_cents_check"},
		{"a position's outcome", `update positions set outcome = 'MAYBE' where account_id = 1`, "outcome_check"},
		{"an order inserted from arrays, as a batch writes it", `insert into orders (id, market_id, seq, account_id, side,
			outcome, price, quantity, filled_quantity, status, created_at, updated_at)
			select gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 3, 1, s, 'YES', 40, 1, 0, 'OPEN', now(), now()
			from unnest(array['SELL', 'SHORT']::text[]) as s`, "side_check"},
		{"a negative balance", `update accounts set available = -1 where id = 1`, "nonnegative_check"},
		{"a negative grant", `update accounts set granted = -1 where id = 1`, "nonnegative_check"},
		{"a negative holding", `update positions set quantity = -1 where account_id = 1`, "nonnegative_check"},
		// The checks that compare columns, which stayed on their tables.
		{"an order filled beyond its quantity", `update orders set filled_quantity = 3 where seq = 1`, "orders_check"},
		{"a resolved market without an outcome", `update markets set status = 'RESOLVED', settled_at = now()`, "markets_check"},
		{"more shares locked than held", `update positions set locked_quantity = 3 where account_id = 1`, "positions_check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pool.Exec(ctx, c.statement)
			var pg *pgconn.PgError
			if !errors.As(err, &pg) || pg.Code != "23514" || pg.ConstraintName != c.constraint {
				t.Fatalf("%s: %v; want a check_violation of %s", c.statement, err, c.constraint)
			}
			if !batches.Refused(err) {
				t.Errorf("batches.Refused(%v) = false", err)
			}
		})
	}
	var orders int
	if err := pool.QueryRow(ctx, `select count(*) from orders where status = 'FILLED' and side = 'BUY' and price = 40`).Scan(&orders); err != nil || orders != 1 {
		t.Errorf("after the refused statements, %d orders match the seed's first (%v), want 1", orders, err)
	}
}

// TestCheckDomainsMigration runs migration 020 on a database that holds rows, as an upgrade
// does: it keeps every row, leaves every domain's check validated, and rewrites no table (each
// keeps its file), so that it is quick on a large orders table.
func TestCheckDomainsMigration(t *testing.T) {
	ctx := context.Background()
	conn, m := testMigrator(t)
	if err := m.MigrateTo(ctx, 19); err != nil {
		t.Fatal(err)
	}
	// Before migration 032 accounts kept their locked cash in a column.
	seed := strings.Replace(domainsSeed, `(id, uid, name, available, granted, created_at, updated_at)`,
		`(id, uid, name, available, granted, created_at, updated_at, locked)`, 1)
	seed = strings.Replace(seed, `1000, now(), now()),`, `1000, now(), now(), 0),`, 1)
	seed = strings.Replace(seed, `1000, now(), now());`, `1000, now(), now(), 0);`, 1)
	if _, err := conn.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	type state struct{ files, rows map[string]int64 }
	read := func() state {
		s := state{files: map[string]int64{}, rows: map[string]int64{}}
		for _, table := range []string{"orders", "trades", "markets", "positions", "accounts"} {
			var file, rows int64
			if err := conn.QueryRow(ctx, `select pg_relation_filenode($1::regclass)::bigint, (select count(*) from `+
				pgx.Identifier{table}.Sanitize()+`)`, table).Scan(&file, &rows); err != nil {
				t.Fatal(err)
			}
			s.files[table], s.rows[table] = file, rows
		}
		return s
	}
	before := read()
	if err := m.MigrateTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	after := read()
	for table, file := range before.files {
		if after.files[table] != file {
			t.Errorf("the migration rewrote %s (file %d, then %d)", table, file, after.files[table])
		}
		if after.rows[table] != before.rows[table] {
			t.Errorf("%s held %d rows before the migration, %d after", table, before.rows[table], after.rows[table])
		}
	}
	var unvalidated []string
	if err := conn.QueryRow(ctx, `select coalesce(array_agg(conname::text order by conname), '{}') from pg_constraint
		where contypid <> 0 and not convalidated`).Scan(&unvalidated); err != nil {
		t.Fatal(err)
	}
	if len(unvalidated) != 0 {
		t.Errorf("domain checks left unvalidated: %v", unvalidated)
	}
	var domains int
	if err := conn.QueryRow(ctx, `select count(*) from pg_attribute a join pg_type t on t.oid = a.atttypid
		where t.typtype = 'd' and a.attrelid in ('orders'::regclass, 'trades'::regclass, 'markets'::regclass, 'positions'::regclass,
		                                         'accounts'::regclass)
		  and not a.attisdropped`).Scan(&domains); err != nil {
		t.Fatal(err)
	}
	if domains != 19 {
		t.Errorf("%d columns of orders, trades, markets, positions and accounts have a domain type, want 19", domains)
	}
}

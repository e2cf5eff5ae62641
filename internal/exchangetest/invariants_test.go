package exchangetest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestInvariantsCatchViolations shows that each invariant query finds what it is meant to find:
// a consistent little exchange passes them all, and each corruption, made in a transaction that
// is rolled back, is reported under the invariant's name.
func TestInvariantsCatchViolations(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	// Two accounts, one market, and a trade between them that minted 2 pairs at YES 40: A bought 2
	// YES (80), B bought 2 NO (120); A also rests a BUY YES of 3 at 30 (90 locked).
	const seed = `
		insert into accounts (id, uid, name, available, granted, created_at, updated_at) overriding system value values
		  (1, gen_random_uuid(), 'a', 1000 - 80 - 90 - 500, 1000, now(), now()),
		  (2, gen_random_uuid(), 'b', 1000 - 120, 1000, now(), now());
		-- A's open order locks 90; a shard holds 500 of its free cash, and 10 of room under its limit.
		update accounts set max_locked_cash = 100 where id = 1;
		insert into allocations (account_id, holder, available, room) values (1, 'shard-0', 500, 10);
		insert into markets (id, question, category, label_a, label_b, status, created_at, updated_at) values
		  ('00000000-0000-0000-0000-0000000000aa', 'q?', 'c', 'Yes', 'No', 'OPEN', now(), now());
		insert into orders (id, market_id, seq, account_id, side, outcome, price, quantity, filled_quantity, status, created_at, updated_at) values
		  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 1, 1, 'BUY', 'YES', 40, 2, 2, 'FILLED', now(), now()),
		  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 2, 2, 'BUY', 'NO', 60, 2, 2, 'FILLED', now(), now()),
		  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 3, 1, 'BUY', 'YES', 30, 3, 0, 'OPEN', now(), now());
		insert into trades (id, market_id, seq, kind, yes_price, quantity, taker_order_seq, maker_order_seq,
		                    taker_account_id, maker_account_id, taker_side, taker_outcome, taker_price, created_at) values
		  (gen_random_uuid(), '00000000-0000-0000-0000-0000000000aa', 1, 'MINT', 40, 2, 2, 1, 2, 1, 'BUY', 'NO', 60, now());
		insert into positions (account_id, market_id, outcome, id, quantity, locked_quantity, created_at, updated_at) values
		  (1, '00000000-0000-0000-0000-0000000000aa', 'YES', gen_random_uuid(), 2, 0, now(), now()),
		  (2, '00000000-0000-0000-0000-0000000000aa', 'NO', gen_random_uuid(), 2, 0, now(), now());
		update markets set event_seq = 5 where id = '00000000-0000-0000-0000-0000000000aa';
		insert into market_events (market_id, first_seq, last_seq, created_at, events) values
		  ('00000000-0000-0000-0000-0000000000aa', 1, 3, now(), '[]'),
		  ('00000000-0000-0000-0000-0000000000aa', 4, 5, now(), '[]');
		-- An event of three outcomes: c minted a pair in each market (300 of collateral), then
		-- converted 1 NO of e1 and of e2 into 1 YES of e3 and 100 cents, leaving 200 whichever wins.
		insert into accounts (id, uid, name, available, granted, created_at, updated_at) overriding system value values
		  (3, gen_random_uuid(), 'c', 1000 - 300 + 100, 1000, now(), now());
		insert into events (id, name, question, category, outcomes, status, created_at, updated_at) values
		  ('00000000-0000-0000-0000-0000000000ee', 'cup', 'Who?', 'c', '[{"key":"e1"},{"key":"e2"},{"key":"e3"}]', 'OPEN', now(), now());
		insert into markets (id, question, category, label_a, label_b, status, created_at, updated_at, event_id, outcome_key) values
		  ('00000000-0000-0000-0000-0000000000e1', 'e1?', 'c', 'Yes', 'No', 'OPEN', now(), now(), '00000000-0000-0000-0000-0000000000ee', 'e1'),
		  ('00000000-0000-0000-0000-0000000000e2', 'e2?', 'c', 'Yes', 'No', 'OPEN', now(), now(), '00000000-0000-0000-0000-0000000000ee', 'e2'),
		  ('00000000-0000-0000-0000-0000000000e3', 'e3?', 'c', 'Yes', 'No', 'OPEN', now(), now(), '00000000-0000-0000-0000-0000000000ee', 'e3');
		insert into positions (account_id, market_id, outcome, id, quantity, locked_quantity, created_at, updated_at) values
		  (3, '00000000-0000-0000-0000-0000000000e1', 'YES', gen_random_uuid(), 1, 0, now(), now()),
		  (3, '00000000-0000-0000-0000-0000000000e1', 'NO', gen_random_uuid(), 0, 0, now(), now()),
		  (3, '00000000-0000-0000-0000-0000000000e2', 'YES', gen_random_uuid(), 1, 0, now(), now()),
		  (3, '00000000-0000-0000-0000-0000000000e3', 'YES', gen_random_uuid(), 2, 0, now(), now()),
		  (3, '00000000-0000-0000-0000-0000000000e3', 'NO', gen_random_uuid(), 1, 0, now(), now());`
	if _, err := st.Pool.Exec(ctx, seed); err != nil {
		t.Fatal(err)
	}
	if err := Invariants(ctx, st.Pool); err != nil {
		t.Fatalf("the consistent seed violates an invariant:\n%v", err)
	}

	const market = `'00000000-0000-0000-0000-0000000000aa'`
	cases := []struct {
		invariant, corruption string
	}{
		{"cash is conserved", `update accounts set available = available + 1 where id = 2`},
		{"YES shares outstanding = NO shares outstanding", `update positions set quantity = 3 where outcome = 'YES'`},
		{"for every event and outcome w, what the exchange pays if w wins is the event's collateral",
			`update positions set quantity = 3 where market_id = '00000000-0000-0000-0000-0000000000e3' and outcome = 'YES'`},
		{"cash is conserved", `update accounts set available = available - 100 where id = 3`},
		{"cash is conserved", `insert into exchange_remainders values ('00000000-0000-0000-0000-0000000000ee', 1, now())`},
		{"cash is conserved", `update allocations set available = available + 1 where account_id = 1`},
		{"cash is conserved", `update orders set price = 31 where seq = 3`},
		{"under a maxLockedCash, Σ room + what open BUY orders lock ≤ the limit", `update allocations set room = 11 where account_id = 1`},
		{"under a maxLockedCash, Σ room + what open BUY orders lock ≤ the limit", `insert into allocations (account_id, holder, room) values (1, 'shard-1', 1)`},
		{"locked shares = what open SELL orders need", `update positions set locked_quantity = 1 where account_id = 1`},
		{"no negative balance", `alter domain nonnegative drop constraint nonnegative_check;
			update accounts set available = -1 where id = 2`},
		{"no negative balance", `alter table allocations drop constraint allocations_room_check;
			update allocations set room = -1 where account_id = 1`},
		{"orders are consistent with their status", `update orders set status = 'FILLED' where seq = 3`},
		{"only OPEN markets have resting orders", `update markets set status = 'CLOSED' where id = ` + market},
		{"a settled market holds no shares", `update markets set status = 'CANCELED', settled_at = now() where id = ` + market},
		{"filled quantities equal the trades", `update trades set quantity = 1`},
		{"every order, trade and position names an existing account and market", `update orders set account_id = 99 where seq = 3`},
		{"every order, trade and position names an existing account and market", `update trades set maker_account_id = 99`},
		{"every order, trade and position names an existing account and market", `update trades set taker_order_seq = 3`},
		{"every order, trade and position names an existing account and market", `update positions set market_id = gen_random_uuid() where account_id = 1`},
		{"every market's feed is gapless", `update market_events set first_seq = 5 where first_seq = 4`},
		{"every market's feed is gapless", `update markets set event_seq = 6`},
	}
	for _, c := range cases {
		t.Run(c.corruption, func(t *testing.T) {
			err := pgx.BeginFunc(ctx, st.Pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, c.corruption); err != nil {
					t.Fatalf("corrupting: %v", err)
				}
				err := Invariants(ctx, tx)
				if err == nil || !strings.Contains(err.Error(), "violated: "+c.invariant) {
					t.Errorf("want the invariant %q reported, got: %v", c.invariant, err)
				}
				return pgx.ErrTxClosed // anything non-nil: roll back
			})
			if err != pgx.ErrTxClosed {
				t.Fatal(err)
			}
		})
	}
	if err := Invariants(ctx, st.Pool); err != nil {
		t.Fatalf("a corruption outlived its transaction:\n%v", err)
	}
}

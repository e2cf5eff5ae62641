package accounts

import "context"

// RateTake refills the account's bucket of a kind ("read" or "write") at rate tokens a second up
// to burst, and takes from it between need and want tokens (none when it holds fewer than need);
// it returns what it took and what is left (migration 015).
func (s *Accounts) RateTake(ctx context.Context, account int64, kind string, rate, burst, need, want float64) (taken, remaining float64, err error) {
	err = s.Pool.QueryRow(ctx, `select taken, remaining from rate_take($1, $2, $3, $4, $5, $6)`,
		account, kind, rate, burst, need, want).Scan(&taken, &remaining)
	return taken, remaining, err
}

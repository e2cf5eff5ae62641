package accounts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// KeyChannel is the Postgres notification channel on which a revoked key's prefix is announced.
const KeyChannel = "pmx_api_keys"

// ListenKeys listens for revoked API keys on a connection of its own: it calls ready once
// listening, then revoked with the prefix of every key revoked anywhere, until ctx ends or the
// connection fails, which it returns. Whoever caches keys must drop its cache before ready and
// whenever ListenKeys returns, since notifications may have been missed meanwhile.
func (s *Accounts) ListenKeys(ctx context.Context, ready func(), revoked func(prefix string)) error {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection carries a LISTEN: it must never go back to the pool.
	c := conn.Hijack()
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "listen "+KeyChannel); err != nil {
		return fmt.Errorf("while listening for revoked keys: %w", err)
	}
	ready()
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		revoked(n.Payload)
	}
}

// RevokedKeys returns those of the prefixes whose keys are revoked (or gone): for a front to check
// the keys it holds connections of when revocations may have gone unannounced to it, while
// ListenKeys was not listening.
func (s *Accounts) RevokedKeys(ctx context.Context, prefixes []string) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `select p from unnest($1::text[]) p
		where not exists (select 1 from api_keys k where k.prefix = p and k.revoked_at is null)`, prefixes)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

package accounts

import (
	"context"
	"crypto/sha256"
	"time"

	"github.com/google/uuid"
)

// Signed requests' replays (migration 025): every front records each signed request it accepts
// here, so that the same request sent to any front again is refused.

// FirstSignedRequest records a signed request of a key, by the SHA-256 of the key's id and the
// message signed, and says whether it is the first time any front has seen it: false is a
// replay. One insert of a primary key into an unlogged table, the one Postgres round trip a
// signed request costs beyond an unsigned one.
func (s *Accounts) FirstSignedRequest(ctx context.Context, key uuid.UUID, message []byte) (bool, error) {
	h := sha256.New()
	h.Write(key[:])
	h.Write(message)
	tag, err := s.Pool.Exec(ctx, `insert into signed_requests (digest) values ($1) on conflict do nothing`, h.Sum(nil))
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// SweepSignedRequests forgets the signed requests first seen more than hold ago by Postgres's
// clock, when no front could accept them again.
func (s *Accounts) SweepSignedRequests(ctx context.Context, hold time.Duration) error {
	_, err := s.Pool.Exec(ctx, `delete from signed_requests where seen_at < now() - $1::interval`, hold.String())
	return err
}

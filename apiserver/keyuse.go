package apiserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// keyUseEvery is how often, at most, a front writes when one key was last used.
const keyUseEvery = time.Minute

// keyUse records when each key was last used (GET /account/keys' lastUsedAt, the settings page's
// "Last used") without a write per request, and without a request ever waiting for one: a request
// notes its key's use in memory, and a goroutine of the front writes the uses in one statement
// (store.TouchAPIKeys). A key's use is written as soon as the writer gets to it when the key has
// not been written for keyUseEvery (so a new key shows its first use at once), and otherwise
// waits for its minute: a busy key costs one row update a minute per replica, whatever its
// request rate. The price: lastUsedAt lags by up to a minute, and a process that dies loses the
// uses it had not written (Close writes them).
type keyUse struct {
	wake chan struct{} // a due use is waiting

	mu      sync.Mutex
	pending map[uuid.UUID]time.Time // uses not yet written, the latest of each key
	written map[uuid.UUID]time.Time // when each key's use was last written, by the clock of note
}

func newKeyUse() *keyUse {
	return &keyUse{wake: make(chan struct{}, 1), pending: map[uuid.UUID]time.Time{}, written: map[uuid.UUID]time.Time{}}
}

// note records that a key was used at now.
func (u *keyUse) note(id uuid.UUID, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.After(u.pending[id]) {
		u.pending[id] = now
	}
	if now.Sub(u.written[id]) >= keyUseEvery {
		select {
		case u.wake <- struct{}{}:
		default:
		}
	}
}

// take removes and returns the uses due to be written at now (all of them when all is set), and
// forgets keys not written for a minute, which are due again whenever they are next used.
func (u *keyUse) take(now time.Time, all bool) (ids []uuid.UUID, at []time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for id, t := range u.pending {
		if all || now.Sub(u.written[id]) >= keyUseEvery {
			ids, at = append(ids, id), append(at, t)
			delete(u.pending, id)
			u.written[id] = t
		}
	}
	for id, t := range u.written {
		if _, waiting := u.pending[id]; !waiting && now.Sub(t) >= keyUseEvery {
			delete(u.written, id)
		}
	}
	return ids, at
}

// flush writes the uses due at now; uses it could not write wait for the next flush.
func (u *keyUse) flush(ctx context.Context, st KeyUses, now time.Time, all bool) error {
	ids, at := u.take(now, all)
	err := st.TouchAPIKeys(ctx, ids, at)
	if err != nil {
		for i, id := range ids {
			u.note(id, at[i])
		}
	}
	return err
}

// run writes the keys' uses as they fall due until ctx ends, and all that are left then. clock is
// the clock of note's times (the server's).
func (u *keyUse) run(ctx context.Context, st KeyUses, clock func() time.Time, log *slog.Logger) {
	tick := time.NewTicker(keyUseEvery / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last write gets a moment of its own: ctx is over.
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := u.flush(last, st, clock(), true); err != nil {
				log.Warn("could not record when API keys were last used", "err", err)
			}
			return
		case <-u.wake:
		case <-tick.C:
		}
		if err := u.flush(ctx, st, clock(), false); err != nil && ctx.Err() == nil {
			log.Warn("could not record when API keys were last used; will try again", "err", err)
		}
	}
}

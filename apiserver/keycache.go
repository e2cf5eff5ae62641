package apiserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/store"
)

// keyCache remembers API keys by prefix, so that a request costs no database round trip to
// authenticate. A revoked key is refused at once all the same: every revocation is announced by
// Postgres (store.ListenKeys) to every replica, which forgets the key. While the announcement
// channel is down the cache is bypassed, and it starts empty each time the channel comes back.
type keyCache struct {
	mu      sync.Mutex
	valid   bool // the listener is connected
	gen     uint64
	entries map[string]store.KeyRecord
}

func (k *keyCache) init() {
	k.entries = map[string]store.KeyRecord{}
}

// get returns a cached key, and the generation to pass to put after a lookup.
func (k *keyCache) get(prefix string) (store.KeyRecord, bool, uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rec, ok := k.entries[prefix]
	return rec, ok && k.valid, k.gen
}

// put caches a key read from the database, unless something was revoked since the read began (gen
// moved on): the key read may be the one revoked.
func (k *keyCache) put(prefix string, rec store.KeyRecord, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.valid && k.gen == gen {
		k.entries[prefix] = rec
	}
}

func (k *keyCache) revoke(prefix string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gen++
	delete(k.entries, prefix)
}

// setValid starts or stops trusting the cache, emptying it either way.
func (k *keyCache) setValid(valid bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.valid = valid
	k.gen++
	clear(k.entries)
}

// listen keeps the cache in step with revocations until ctx ends, reconnecting with backoff.
func (k *keyCache) listen(ctx context.Context, st *store.Store, log *slog.Logger) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := st.ListenKeys(ctx, func() { k.setValid(true); backoff = 100 * time.Millisecond }, k.revoke)
		k.setValid(false)
		if ctx.Err() != nil {
			return
		}
		log.Warn("lost the key revocation channel; authenticating from the database until it is back", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

package apiserver

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// keyCache remembers API keys by prefix, so that a request costs no database round trip to
// authenticate. A revoked key is refused at once all the same: every revocation is announced by
// Postgres (store.ListenKeys) to every replica, which forgets the key. While the announcement
// channel is down the cache is bypassed, and it starts empty each time the channel comes back.
//
// It also holds the replica's keyed feed connections by their key (watch), since a connection
// lasts and a key may end while it does: the same announcement closes a revoked key's
// connections (code wsKeyEnded), on every replica, and checkFeeds closes an expired key's within
// feedKeyCheck of its expiry. When announcements may have been missed (the channel was down, or
// a revocation was announced between a connection's authentication and its watch), checkFeeds
// asks Postgres which of the keys held are revoked instead, on its next tick.
type keyCache struct {
	mu      sync.Mutex
	valid   bool // the listener is connected
	gen     uint64
	entries map[string]accounts.KeyRecord
	// feeds are the feed connections by their key's prefix; recheck says a revocation of one of
	// their keys may have gone unheard.
	feeds   map[string]map[*wsConn]struct{}
	recheck bool
}

// feedKeyCheck is how often checkFeeds closes the connections of keys that have expired, and
// asks Postgres for revocations that may have gone unheard.
const feedKeyCheck = time.Second

func (k *keyCache) init() {
	k.entries = map[string]accounts.KeyRecord{}
	k.feeds = map[string]map[*wsConn]struct{}{}
}

// get returns a cached key, and the generation to pass to put after a lookup.
func (k *keyCache) get(prefix string) (accounts.KeyRecord, bool, uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	rec, ok := k.entries[prefix]
	return rec, ok && k.valid, k.gen
}

// generation is the generation to pass to put or watch after reading a key some other way (a
// ws-token's).
func (k *keyCache) generation() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.gen
}

// put caches a key read from the database, unless something was revoked since the read began (gen
// moved on): the key read may be the one revoked.
func (k *keyCache) put(prefix string, rec accounts.KeyRecord, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.valid && k.gen == gen {
		k.entries[prefix] = rec
	}
}

// revoke forgets a revoked key and closes its feed connections here.
func (k *keyCache) revoke(prefix string) {
	k.mu.Lock()
	k.gen++
	delete(k.entries, prefix)
	conns := slices.Collect(maps.Keys(k.feeds[prefix]))
	k.mu.Unlock()
	for _, c := range conns {
		c.close(wsKeyEnded, wsKeyRevoked)
	}
}

// setValid starts or stops trusting the cache, emptying it either way. Revocations may have gone
// unheard while the cache was not trusted, so the feed connections' keys are checked in Postgres
// when it is again.
func (k *keyCache) setValid(valid bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.valid = valid
	k.gen++
	clear(k.entries)
	k.recheck = k.recheck || valid
}

// watch holds a feed connection with its key, read at generation gen, until unwatch. A revocation
// since that read (gen moved on), or one that could not be heard (the channel is down), may have
// been its key's: checkFeeds then asks Postgres.
func (k *keyCache) watch(c *wsConn, gen uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	conns := k.feeds[c.key.Prefix]
	if conns == nil {
		conns = map[*wsConn]struct{}{}
		k.feeds[c.key.Prefix] = conns
	}
	conns[c] = struct{}{}
	if gen != k.gen || !k.valid {
		k.recheck = true
	}
}

func (k *keyCache) unwatch(c *wsConn) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.feeds[c.key.Prefix], c)
	if len(k.feeds[c.key.Prefix]) == 0 {
		delete(k.feeds, c.key.Prefix)
	}
}

// watchFeeds runs checkFeeds every feedKeyCheck until ctx ends.
func (k *keyCache) watchFeeds(ctx context.Context, st KeyRevocations, now func() time.Time, log *slog.Logger) {
	failing := false
	every(ctx, feedKeyCheck, func() {
		err := k.checkFeeds(ctx, st, now())
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			log.Warn("could not check the feed connections' keys for revocations; trying again every second", "err", err)
		case err == nil && failing:
			log.Info("checked the feed connections' keys for revocations again")
		}
		failing = err != nil
	})
}

// checkFeeds closes the feed connections whose keys have expired at now and, when revocations
// may have gone unheard (recheck, or the channel is down and the cache bypassed), those whose
// keys Postgres has revoked. A failed check is tried again on the next call.
func (k *keyCache) checkFeeds(ctx context.Context, st KeyRevocations, now time.Time) error {
	k.mu.Lock()
	var expired []*wsConn
	for _, conns := range k.feeds {
		for c := range conns {
			if auth.Expired(c.key.ExpiresAt, now) {
				expired = append(expired, c)
			}
		}
	}
	var prefixes []string
	if k.recheck || !k.valid {
		prefixes = slices.Collect(maps.Keys(k.feeds))
		k.recheck = false
	}
	k.mu.Unlock()
	for _, c := range expired {
		c.close(wsKeyEnded, wsKeyExpired(*c.key.ExpiresAt))
	}
	if len(prefixes) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, feedKeyCheck)
	defer cancel()
	revoked, err := st.RevokedKeys(qctx, prefixes)
	if err != nil {
		k.mu.Lock()
		k.recheck = true
		k.mu.Unlock()
		return err
	}
	for _, prefix := range revoked {
		k.revoke(prefix)
	}
	return nil
}

// listen keeps the cache in step with revocations until ctx ends, reconnecting with backoff.
func (k *keyCache) listen(ctx context.Context, st KeyRevocations, log *slog.Logger) {
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

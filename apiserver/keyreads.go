package apiserver

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
)

// keyReads reads the API keys that requests miss in the key cache, many in one statement: a miss
// while no read is under way starts one at once, and the misses that come while it is under way
// wait for it to end and are read together in the next. A front just started, or whose cache was
// emptied (keyCache.setValid), meets every bot's key at once; read one by one, those reads queued
// for the pool's connections and for Postgres, and the last waited tens of milliseconds (on 2
// cores, 128 bots: up to 44 ms, a large part of a fresh exchange's first-second p99;
// docs/performance.md, "The first second of a fresh exchange"). Read together, they cost one
// round trip each time the read before has ended. A single miss costs what it did: its read
// starts when it comes.
type keyReads struct {
	cache *keyCache
	read  func(ctx context.Context, prefixes []string) (map[string]accounts.KeyRecord, error)

	mu      sync.Mutex
	waiting map[string][]chan<- keyRead // by prefix: the requests waiting for the next read
	reading bool                        // a read is under way (run)
}

// keyRead is what a waiting request gets: its key, and the key cache's generation when the read
// began (for the feed: keyCache.watch); err store.ErrNotFound when no key has the prefix.
type keyRead struct {
	rec accounts.KeyRecord
	gen uint64
	err error
}

// keyReadTimeout bounds one read of keys. A request waits for its read, or for its own end.
const keyReadTimeout = 10 * time.Second

// maxKeyRead is the most prefixes one statement reads; the rest wait for the next.
const maxKeyRead = 1000

func newKeyReads(cache *keyCache, read func(context.Context, []string) (map[string]accounts.KeyRecord, error)) *keyReads {
	return &keyReads{cache: cache, read: read, waiting: map[string][]chan<- keyRead{}}
}

// get returns the key with this prefix, read from Postgres with the other keys missed meanwhile,
// and cached unless a key was revoked since the read began.
func (r *keyReads) get(ctx context.Context, prefix string) (accounts.KeyRecord, uint64, error) {
	ch := make(chan keyRead, 1)
	r.mu.Lock()
	r.waiting[prefix] = append(r.waiting[prefix], ch)
	if !r.reading {
		r.reading = true
		go r.run()
	}
	r.mu.Unlock()
	select {
	case got := <-ch:
		return got.rec, got.gen, got.err
	case <-ctx.Done():
		return accounts.KeyRecord{}, 0, ctx.Err() // the read goes on for the others; ch is buffered
	}
}

// run reads what is waiting until nothing is.
func (r *keyReads) run() {
	for {
		r.mu.Lock()
		if len(r.waiting) == 0 {
			r.reading = false
			r.mu.Unlock()
			return
		}
		prefixes := slices.Collect(maps.Keys(r.waiting))
		if len(prefixes) > maxKeyRead {
			prefixes = prefixes[:maxKeyRead]
		}
		waiters := make([][]chan<- keyRead, len(prefixes))
		for i, p := range prefixes {
			waiters[i] = r.waiting[p]
			delete(r.waiting, p)
		}
		r.mu.Unlock()

		gen := r.cache.generation() // before the read: a revocation during it keeps what it read out of the cache
		ctx, cancel := context.WithTimeout(context.Background(), keyReadTimeout)
		keys, err := r.read(ctx, prefixes)
		cancel()
		for i, p := range prefixes {
			got := keyRead{gen: gen, err: err}
			if err == nil {
				rec, ok := keys[p]
				if ok {
					r.cache.put(p, rec, gen)
					got.rec = rec
				} else {
					got.err = store.ErrNotFound
				}
			}
			for _, ch := range waiters[i] {
				ch <- got
			}
		}
	}
}

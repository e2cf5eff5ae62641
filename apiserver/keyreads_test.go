package apiserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/kit/auth"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/store/accounts"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestKeyReadsTogether checks that the keys missed while a read is under way are read together,
// on a real Postgres: the first miss starts a read at once, which the test holds; 20 requests for
// 12 keys (some the same key, one a prefix no key has, one given up by its caller) wait meanwhile,
// and all are answered by one more read of the 12 prefixes. Every caller gets its own key, or
// store.ErrNotFound, or its context's error; the keys read are cached, at the generation of the
// cache when their read began, except the keys of a read during which a key was revoked.
func TestKeyReadsTogether(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	account := storetest.Account(t, st, "reads", 1000)
	var prefixes []string
	for i := range 12 {
		p := fmt.Sprintf("pmx_read%02d", i)
		if i == 11 {
			p = "pmx_nokey" // no key has it
		} else if err := st.InsertAPIKey(ctx, accounts.APIKey{ID: uuid.New(), AccountID: account, Prefix: p,
			Scope: auth.ScopeTrade, CreatedAt: time.Now()}, []byte(p)); err != nil {
			t.Fatal(err)
		}
		prefixes = append(prefixes, p)
	}

	var cache keyCache
	cache.init()
	cache.setValid(true)
	var mu sync.Mutex
	var reads [][]string
	hold := make(chan struct{})
	r := newKeyReads(&cache, func(ctx context.Context, prefixes []string) (map[string]accounts.KeyRecord, error) {
		mu.Lock()
		reads = append(reads, slices.Sorted(slices.Values(prefixes)))
		first := len(reads) == 1
		mu.Unlock()
		if first {
			<-hold
		}
		return st.KeysByPrefix(ctx, prefixes)
	})

	type answer struct {
		prefix string
		rec    accounts.KeyRecord
		gen    uint64
		err    error
	}
	answers := make(chan answer, 32)
	ask := func(ctx context.Context, prefix string) {
		rec, gen, err := r.get(ctx, prefix)
		answers <- answer{prefix, rec, gen, err}
	}
	gen0 := cache.generation()
	go ask(ctx, "pmx_read00")
	poll.Wait(t, 10*time.Second, "the first read to start", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(reads) == 1
	})
	gaveUp, giveUp := context.WithCancel(ctx)
	go ask(gaveUp, "pmx_read01")
	const others = 19
	for i := range others {
		go ask(ctx, prefixes[1+i%11]) // pmx_read01..pmx_read10 and pmx_nokey, some twice
	}
	poll.Wait(t, 10*time.Second, "20 requests to wait for the next read", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, w := range r.waiting {
			n += len(w)
		}
		return n == 1+others
	})
	giveUp()
	if a := <-answers; !errors.Is(a.err, context.Canceled) || a.prefix != "pmx_read01" {
		t.Fatalf("the caller that gave up: %+v, want its context's error", a)
	}
	close(hold)

	for range 1 + others { // the first request's and the others'
		a := <-answers
		switch {
		case a.prefix == "pmx_nokey":
			if !errors.Is(a.err, store.ErrNotFound) {
				t.Errorf("a prefix no key has: %v, want store.ErrNotFound", a.err)
			}
		case a.err != nil || a.rec.Prefix != a.prefix || a.rec.AccountID != account || a.gen != gen0:
			t.Errorf("for %s: %+v, want its key at generation %d", a.prefix, a, gen0)
		}
	}
	mu.Lock()
	got := slices.Clone(reads)
	mu.Unlock()
	if want := [][]string{{"pmx_read00"}, slices.Sorted(slices.Values(prefixes[1:]))}; len(got) != 2 || !slices.Equal(got[0], want[0]) || !slices.Equal(got[1], want[1]) {
		t.Fatalf("reads %v, want %v", got, want)
	}
	for _, p := range prefixes[:11] {
		if rec, ok, _ := cache.get(p); !ok || rec.Prefix != p {
			t.Errorf("%s not cached after its read", p)
		}
	}
	if _, ok, _ := cache.get("pmx_nokey"); ok {
		t.Error("a prefix no key has was cached")
	}

	// A revocation during a read: what it read is not cached, and its callers get the
	// generation from before, so that a feed connection of theirs checks its key (keyCache.watch).
	cache.setValid(true) // empties the cache
	started, hold2 := make(chan struct{}), make(chan struct{})
	r.read = func(ctx context.Context, prefixes []string) (map[string]accounts.KeyRecord, error) {
		close(started)
		<-hold2
		return st.KeysByPrefix(ctx, prefixes)
	}
	before := cache.generation()
	go ask(ctx, "pmx_read02")
	<-started
	cache.revoke("pmx_read09")
	close(hold2)
	if a := <-answers; a.err != nil || a.rec.Prefix != "pmx_read02" || a.gen != before {
		t.Fatalf("read across a revocation: %+v, want the key at generation %d", a, before)
	}
	if _, ok, _ := cache.get("pmx_read02"); ok {
		t.Error("a key read across a revocation was cached")
	}
}

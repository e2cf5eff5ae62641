package marketpages

import (
	"context"
	"sync"
	"time"

	"github.com/pmx-dev/pmx/internal/kit/boundedmap"
	"github.com/pmx-dev/pmx/internal/store"
)

// Every request for a page of the list is answered from a snapshot of that page read at most
// snapshotAge ago: all requests for it meanwhile, however many and from whomever, cost Postgres
// one read (issue 34: read per request, 170 lists a second from four connections took both
// cores). A second is as stale as the list ever looks, as it follows the feed from each row's
// seq; and to a reader a market listed a second late is listed at once.
const snapshotAge = time.Second

// snapshotPages is how many pages of the list (newest, and each cursor asked for) keep a
// snapshot. A page beyond them is read again, at most at the per-address rate of every page.
const snapshotPages = 256

// snapshots shares reads of the list's pages: a request for a page being read waits for that
// read, and one for a page read less than snapshotAge ago gets it.
// V is what a page's read gives: the markets list's (*listView) or the events list's.
type snapshots[V any] struct {
	read func(ctx context.Context, after *store.Cursor) (V, error)

	mu    sync.Mutex
	pages *boundedmap.Map[store.Cursor, *snapshot[V]]
}

// snapshot is a read of a page: done is closed once v and err are set.
type snapshot[V any] struct {
	done chan struct{}
	at   time.Time // when the read began: what it shows is at least this fresh
	v    V
	err  error
}

func newSnapshots[V any](read func(ctx context.Context, after *store.Cursor) (V, error)) *snapshots[V] {
	return &snapshots[V]{read: read, pages: boundedmap.New[store.Cursor, *snapshot[V]](snapshotPages)}
}

// get returns the page after a cursor (nil: the first) from a snapshot, reading one if there is
// none fresh. The read runs apart from the request that began it, which may go away while others
// wait on it.
func (s *snapshots[V]) get(ctx context.Context, after *store.Cursor) (V, error) {
	var key store.Cursor // the zero cursor is the first page's: no cursor is written for it
	if after != nil {
		key = store.Cursor{CreatedAt: after.CreatedAt.UTC(), ID: after.ID}
	}
	s.mu.Lock()
	snap, ok := s.pages.Get(key)
	if !ok || !snap.usable(time.Now()) {
		snap = &snapshot[V]{done: make(chan struct{}), at: time.Now()}
		s.pages.Put(key, snap)
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
			defer cancel()
			snap.v, snap.err = s.read(rctx, after)
			close(snap.done)
		}()
	}
	s.mu.Unlock()
	select {
	case <-snap.done:
		return snap.v, snap.err
	case <-ctx.Done():
		var none V
		return none, ctx.Err()
	}
}

// readTimeout bounds a read of the list that the requests waiting for it gave up on.
const readTimeout = 30 * time.Second

// usable says whether a request at now may take this snapshot: one being read, or one read
// without error less than snapshotAge ago. Under snapshots.mu.
func (s *snapshot[V]) usable(now time.Time) bool {
	select {
	case <-s.done:
		return s.err == nil && now.Sub(s.at) < snapshotAge
	default:
		return true
	}
}

package marketpages

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/store"
)

// TestSnapshots shares a read among the requests for a page while it runs and for snapshotAge
// after, reads each page apart, and keeps no failed read.
func TestSnapshots(t *testing.T) {
	var reads atomic.Int64
	release := make(chan struct{})
	fail := atomic.Bool{}
	s := newSnapshots(func(ctx context.Context, after *store.Cursor) (*listView, error) {
		reads.Add(1)
		<-release
		if fail.Load() {
			return nil, errors.New("no database")
		}
		return &listView{Next: "read"}, nil
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if v, err := s.get(ctx, nil); err != nil || v.Next != "read" {
				t.Errorf("get: %v, %v", v, err)
			}
		})
	}
	// A request that gives up does not end the read the others wait for.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.get(gone, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a request that went away: %v", err)
	}
	close(release)
	wg.Wait()
	if _, err := s.get(ctx, nil); err != nil || reads.Load() != 1 {
		t.Fatalf("11 requests for the first page within its age read it %d times (%v)", reads.Load(), err)
	}
	at := time.Now()
	s.get(ctx, &store.Cursor{CreatedAt: at, ID: uuid.New()})
	if reads.Load() != 2 {
		t.Fatalf("another page was not read: %d reads", reads.Load())
	}

	s.mu.Lock()
	first, _ := s.pages.Get(store.Cursor{})
	first.at = first.at.Add(-snapshotAge) // as if a second had passed
	s.mu.Unlock()
	fail.Store(true)
	if _, err := s.get(ctx, nil); err == nil || reads.Load() != 3 {
		t.Fatalf("a page older than its age: %v, %d reads", err, reads.Load())
	}
	fail.Store(false)
	if v, err := s.get(ctx, nil); err != nil || v.Next != "read" || reads.Load() != 4 {
		t.Fatalf("after a failed read: %v, %v, %d reads", v, err, reads.Load())
	}
}

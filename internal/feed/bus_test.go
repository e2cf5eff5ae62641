package feed

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
)

// TestBus checks that every follower gets the batches in order, and that a follower whose buffer
// fills is dropped (Lost closes) without holding up the others or the publisher.
func TestBus(t *testing.T) {
	var bus Bus
	fast, slow := bus.Subscribe(10), bus.Subscribe(2)
	m := uuid.New()
	for i := int64(1); i <= 5; i++ {
		bus.Publish([]Batch{{Market: m, First: i, Last: i}})
		if got := <-fast.C(); got.First != i {
			t.Fatalf("fast follower got batch %d, want %d", got.First, i)
		}
	}
	select {
	case <-slow.Lost():
	default:
		t.Fatal("a follower two batches behind with a buffer of two was not dropped")
	}
	for want := int64(1); want <= 2; want++ {
		if got := <-slow.C(); got.First != want {
			t.Fatalf("the dropped follower's buffered batch %d, want %d", got.First, want)
		}
	}
	select {
	case b := <-slow.C():
		t.Fatalf("the dropped follower got batch %d after it was dropped", b.First)
	default:
	}
	select {
	case <-fast.Lost():
		t.Fatal("the fast follower was dropped")
	default:
	}
	fast.Close()
	<-fast.Lost()
	bus.Publish([]Batch{{Market: m, First: 6, Last: 6}}) // nobody follows: nothing waits
	var none *Bus
	none.Publish([]Batch{{Market: m}}) // a shard without a bus
}

// TestBusWire checks that the followers of a batch share one encoding of it: Wire calls encode
// once for all the copies of a batch published to several followers, concurrently too, and
// once per call for a batch that only one follows or that was never published.
func TestBusWire(t *testing.T) {
	var bus Bus
	subs := []*Sub{bus.Subscribe(4), bus.Subscribe(4), bus.Subscribe(4)}
	m := uuid.New()
	var calls atomic.Int64
	encode := func(b Batch) ([]byte, error) {
		calls.Add(1)
		return []byte(fmt.Sprintf("%d-%d", b.First, b.Last)), nil
	}
	bus.Publish([]Batch{{Market: m, First: 1, Last: 2}, {Market: m, First: 3, Last: 3}})
	for _, want := range []string{"1-2", "3-3"} {
		calls.Store(0)
		var wg sync.WaitGroup
		for _, s := range subs {
			b := <-s.C()
			wg.Go(func() {
				if got, err := b.Wire(encode); err != nil || string(got) != want {
					t.Errorf("Wire = %q, %v; want %q", got, err, want)
				}
			})
		}
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("batch %s: encoded %d times for 3 followers, want once", want, n)
		}
	}
	for _, s := range subs[1:] {
		s.Close()
	}
	calls.Store(0)
	bus.Publish([]Batch{{Market: m, First: 4, Last: 4}})
	b := <-subs[0].C()
	_, _ = b.Wire(encode)
	_, _ = b.Wire(encode)
	unpublished := Batch{Market: m, First: 5, Last: 5}
	if got, _ := unpublished.Wire(encode); string(got) != "5-5" {
		t.Errorf("an unpublished batch's Wire = %q, want 5-5", got)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("one follower's batch encoded twice and an unpublished one once: %d calls, want 3", n)
	}
}

// TestBookApply checks the book a hub rebuilds from events, and its best prices.
func TestBookApply(t *testing.T) {
	var b Book
	for i, e := range []Event{
		{Type: TypeLevel, Side: "bid", Price: 40, Quantity: 5},
		{Type: TypeLevel, Side: "bid", Price: 42, Quantity: 1},
		{Type: TypeLevel, Side: "ask", Price: 60, Quantity: 3},
		{Type: TypeTrade, Price: 42, Quantity: 1},
		{Type: TypeLevel, Side: "bid", Price: 42, Quantity: 0},
		{Type: TypeStatus, Status: "CLOSED"},
	} {
		e.Seq = int64(i + 1)
		b.apply(e)
	}
	bid, ask := b.Best()
	if b.Seq != 6 || bid != 40 || ask != 60 || b.LastPrice != 42 || b.Status != "CLOSED" || b.Levels[0][40] != 5 {
		t.Fatalf("book %+v, best %d/%d", b, bid, ask)
	}
}

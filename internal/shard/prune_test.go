package shard

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/exchange"
)

// TestPruningKeepsAmendedTerms runs the shard's pruning sweep (pruneEvents) over the feeds of an
// order moved by an amend, of one still resting and of one filled: the feeds past the retention
// are gone, and order_terms keeps the moved order's terms as accepted and as amended and the resting
// one's as accepted, not the filled one's.
func TestPruningKeepsAmendedTerms(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s := New(Config{Store: f.st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), EventRetention: time.Nanosecond})
	t.Cleanup(s.Stop)
	moved, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 40, 10))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Amend(ctx, exchange.AmendRequest{Account: f.alice, Market: f.market, Seq: moved.Seq, Side: engine.Buy,
		Outcome: engine.Yes, Price: 42, Remaining: 10}); err != nil {
		t.Fatal(err)
	}
	resting, err := s.Place(ctx, f.buy(f.alice, engine.Yes, 30, 5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Place(ctx, f.buy(f.bob, engine.No, 58, 10)); err != nil { // fills the moved order at 42
		t.Fatal(err)
	}
	time.Sleep(time.Millisecond)
	s.pruneEvents(ctx)
	var left int
	if err := f.st.Pool.QueryRow(ctx, `select count(*) from account_events`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d account event batches left past the retention", left)
	}
	rows, err := f.st.Pool.Query(ctx, `select o.seq, t.amended, t.price, t.quantity from order_terms t join orders o on o.id = t.order_id
		order by o.seq, t.position, t.seq`)
	if err != nil {
		t.Fatal(err)
	}
	type term struct {
		seq      int64
		amended  bool
		price    int
		quantity int64
	}
	var got []term
	for rows.Next() {
		var k term
		if err := rows.Scan(&k.seq, &k.amended, &k.price, &k.quantity); err != nil {
			t.Fatal(err)
		}
		got = append(got, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []term{{moved.Seq, false, 40, 10}, {moved.Seq, true, 42, 10}, {resting.Seq, false, 30, 5}}
	if len(got) != len(want) {
		t.Fatalf("order_terms holds %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order_terms holds %+v, want %+v", got, want)
		}
	}
}

package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestShardLoads checks the load reports: a live shard's last report is read back by market; a
// shard that never reported, and a process superseded under its name, report nothing.
func TestShardLoads(t *testing.T) {
	ctx := context.Background()
	st := newTestStore(t)
	a, err := st.Register(ctx, "a", "a:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Register(ctx, "b", "b:1"); err != nil {
		t.Fatal(err)
	}
	m1, m2 := uuid.New(), uuid.New()
	if err := st.ReportLoad(ctx, "a", a, map[uuid.UUID]float64{m1: 2.5}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReportLoad(ctx, "a", a, map[uuid.UUID]float64{m1: 1.5, m2: 0}); err != nil {
		t.Fatal(err)
	}
	if err := st.ReportLoad(ctx, "b", uuid.New(), map[uuid.UUID]float64{m2: 9}); err != nil { // not b's incarnation
		t.Fatal(err)
	}
	loads, err := st.ShardLoads(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 1 || len(loads["a"]) != 2 || loads["a"][m1] != 1.5 || loads["a"][m2] != 0 {
		t.Errorf("loads %v, want a's last report alone", loads)
	}
}

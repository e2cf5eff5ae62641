package bookkeeping

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/store/db/dbtest"
)

// TestShardLoads checks the load reports: a live shard's last report is read back by market; a
// shard that never reported, and a process superseded under its name, report nothing.
func TestShardLoads(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	a, err := st.Register(ctx, "a", "a:1", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Register(ctx, "b", "b:1", ""); err != nil {
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

// TestDrain checks that a draining shard stays live (it still owns and serves its markets) but says
// it drains, that a drain taken back (Undrain) or a process registered under its name afterwards
// takes markets again.
func TestDrain(t *testing.T) {
	ctx := context.Background()
	st := New(dbtest.New(t))
	for _, name := range []string{"a", "b"} {
		if _, err := st.Register(ctx, name, name+":1", ""); err != nil {
			t.Fatal(err)
		}
	}
	draining := func() map[string]bool {
		t.Helper()
		live, err := st.LiveShards(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, sh := range live {
			out[sh.Name] = sh.Draining
		}
		return out
	}
	if got := draining(); len(got) != 2 || got["a"] || got["b"] {
		t.Fatalf("live shards %v, want a and b, neither draining", got)
	}
	if err := st.Drain(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := draining(); len(got) != 2 || !got["a"] || got["b"] {
		t.Errorf("after a drains: %v, want a live and draining, b not", got)
	}
	if err := st.Undrain(ctx, "a"); err != nil { // the operator's scale-down undone
		t.Fatal(err)
	}
	if got := draining(); len(got) != 2 || got["a"] || got["b"] {
		t.Errorf("after a's drain is taken back: %v, want neither draining", got)
	}
	if err := st.Drain(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Register(ctx, "a", "a:2", ""); err != nil { // a's pod back under its name
		t.Fatal(err)
	}
	if got := draining(); got["a"] {
		t.Errorf("a process registered under a draining name drains: %v", got)
	}
}

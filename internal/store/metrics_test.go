package store

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestCollectorUp reads pmx_postgres_up while Postgres answers (1) and once the pool is closed,
// as it is to a process whose database went away (0).
func TestCollectorUp(t *testing.T) {
	st := newTestStore(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(st.Collector())
	if err := st.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := func(up string) {
		t.Helper()
		err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP pmx_postgres_up Whether Postgres answered this process's ping at the scrape (1) or not within 2s (0).
# TYPE pmx_postgres_up gauge
pmx_postgres_up `+up+"\n"), "pmx_postgres_up")
		if err != nil {
			t.Fatal(err)
		}
	}
	want("1")
	if n, err := testutil.GatherAndCount(reg, "pmx_postgres_acquires_total"); err != nil || n != 1 {
		t.Fatalf("pmx_postgres_acquires_total: %d series, %v", n, err)
	}
	st.Close()
	want("0")
}

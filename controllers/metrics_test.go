package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestHealthCollector scrapes the operator's health metrics from a real store: an OPEN market past
// its closesAt on a shard whose heartbeat lapsed is both unowned and overdue; each pool reports its
// live shards and the orders per second they reported; and once Postgres is gone the collector
// reports none of them, rather than zeros that would clear the alerts.
func TestHealthCollector(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&HealthCollector{Store: st, ShardTTL: time.Minute})

	closed := metav1.NewTime(time.Now().Add(-time.Hour))
	row, err := marketspec.Create(ctx, st, pmxv1.MarketSpec{Question: "Will it close?", Category: "test", ClosesAt: &closed}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Register(ctx, "s1", "s1:1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Assign(ctx, row.ID, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `update shards set heartbeat_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP pmx_operator_markets_overdue OPEN markets whose closesAt has passed: the operator closes each at that time through its shard.
# TYPE pmx_operator_markets_overdue gauge
pmx_operator_markets_overdue 1
# HELP pmx_operator_markets_unowned OPEN markets with no live owner (none, or one whose heartbeat is older than the shard TTL): no order in them is matched until the operator schedules them.
# TYPE pmx_operator_markets_unowned gauge
pmx_operator_markets_unowned 1
# HELP pmx_operator_shard_markets OPEN markets each registered shard owns.
# TYPE pmx_operator_shard_markets gauge
pmx_operator_shard_markets{shard="s1"} 1
`), "pmx_operator_markets_overdue", "pmx_operator_markets_unowned", "pmx_operator_shard_markets")
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "pmx_operator_shard_heartbeat_age_seconds" {
			if age := mf.GetMetric()[0].GetGauge().GetValue(); age < 120 || age > 180 {
				t.Fatalf("heartbeat age %vs; want about 120s", age)
			}
		}
	}

	// A live shard of the hot pool reporting its load: the pools' figures sum their live shards.
	if _, err := st.Register(ctx, "h1", "h1:1", "hot"); err != nil {
		t.Fatal(err)
	}
	inc, err := st.Incarnation(ctx, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.ReportLoad(ctx, "h1", inc, map[uuid.UUID]float64{row.ID: 12.5}); err != nil {
		t.Fatal(err)
	}
	err = testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP pmx_operator_pool_live_shards Live shards (heartbeat within the shard TTL) of each pool.
# TYPE pmx_operator_pool_live_shards gauge
pmx_operator_pool_live_shards{pool="default"} 0
pmx_operator_pool_live_shards{pool="hot"} 1
# HELP pmx_operator_pool_orders_per_second Orders per second the live shards of each pool took over the last minute, as each last reported: what an autoscaler on a ShardPool scales by.
# TYPE pmx_operator_pool_orders_per_second gauge
pmx_operator_pool_orders_per_second{pool="default"} 0
pmx_operator_pool_orders_per_second{pool="hot"} 12.5
`), "pmx_operator_pool_live_shards", "pmx_operator_pool_orders_per_second")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("with Postgres gone: %d series, %v; want none", n, err)
	}
}

package controllers

import (
	"context"
	"testing"
	"time"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
	"github.com/pmx-dev/pmx/internal/storetest"
)

// TestScheduleLostShard schedules OPEN markets against a real store: a market whose shard stopped
// sending heartbeats is noted as lost when no shard is live, and moves once one is.
func TestScheduleLostShard(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	r := &MarketReconciler{Store: st, ShardTTL: time.Second}
	mkt := &pmxv1.Market{Spec: pmxv1.MarketSpec{Question: "Will it move?", Category: "test"}}
	now := time.Now()

	// "dead" sent its last heartbeat longer ago than the TTL.
	if _, err := st.Register(ctx, "dead", "dead:1", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `update shards set heartbeat_at = now() - interval '1 hour' where name = 'dead'`); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		owner  string // "" for a new market
		live   bool   // a shard "alive" is live
		lost   string
		noLive bool
		shard  string // the owner afterwards
	}{
		{"new market, no live shard", "", false, "", true, ""},
		{"lost shard, no live shard", "dead", false, "dead", true, "dead"},
		{"taken over by an operator of a release before, no live shard", "operator-1", false, "operator-1", true, "operator-1"},
		{"lost shard, a live one takes it", "dead", true, "", false, "alive"},
	}
	for _, tt := range tests {
		row, err := marketspec.Create(ctx, st, mkt.Spec, nil, now)
		if err != nil {
			t.Fatal(err)
		}
		if tt.owner != "" {
			if _, err := st.Assign(ctx, row.ID, tt.owner); err != nil {
				t.Fatal(err)
			}
		}
		if tt.live { // the last case, so that "alive" is not live in the others
			if _, err := st.Register(ctx, "alive", "alive:1", ""); err != nil {
				t.Fatal(err)
			}
		}
		if row, err = st.Market(ctx, row.ID); err != nil {
			t.Fatal(err)
		}
		var obs observation
		got, err := r.schedule(ctx, mkt, row, &obs)
		shard := ""
		if got.Shard != nil {
			shard = *got.Shard
		}
		if err != nil || obs.lost != tt.lost || obs.noLive != tt.noLive || shard != tt.shard {
			t.Errorf("%s: lost %q, noLive %v, shard %q (%v); want %q, %v, %q", tt.name, obs.lost, obs.noLive, shard, err, tt.lost, tt.noLive, tt.shard)
		}
	}
}

// TestTogether checks where a market of an event goes: to the live shard that holds most of its
// siblings, never to a dead one, else (no live sibling owner) nowhere in particular.
func TestTogether(t *testing.T) {
	live := []bookkeeping.Shard{{Name: "light"}, {Name: "mid"}, {Name: "heavy"}} // least loaded first
	for _, tc := range []struct {
		name   string
		owners []string
		want   string
	}{
		{"no siblings", nil, ""},
		{"siblings on a dead shard", []string{"dead", "dead"}, ""},
		{"one sibling", []string{"heavy"}, "heavy"},
		{"all siblings on one shard", []string{"mid", "mid", "mid"}, "mid"},
		{"siblings moving off a dead shard", []string{"dead", "dead", "heavy"}, "heavy"},
		{"most siblings win", []string{"light", "heavy", "heavy"}, "heavy"},
		{"a tie goes to the least loaded", []string{"heavy", "mid"}, "mid"},
	} {
		if got := together(tc.owners, live, placement.Unit{Key: "e"}); got != tc.want {
			t.Errorf("%s: together(%v) = %q, want %q", tc.name, tc.owners, got, tc.want)
		}
	}
	if got := together([]string{"a"}, nil, placement.Unit{Key: "e"}); got != "" {
		t.Errorf("no live shard: %q", got)
	}
	draining := []bookkeeping.Shard{{Name: "light"}, {Name: "stopping", Draining: true}}
	if got := together([]string{"stopping", "stopping", "light"}, draining, placement.Unit{Key: "e"}); got != "light" {
		t.Errorf("most siblings on a draining shard: %q, want light (a draining shard takes no market)", got)
	}
}

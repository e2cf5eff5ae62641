package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// TestPlanPlacement is the placement rule's table for the Rebalancer: which unit moves first to
// be where its pool and placement ask, where to, and when nothing moves; then the spread, pool by
// pool, never onto a dedicated shard nor a shard kept free for one.
func TestPlanPlacement(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	policy := RebalancePolicy{Margin: 0.2, Interval: 5 * time.Second, Cooldown: time.Minute, MaxFraction: 1}
	unit := func(key, shard, pool string, dedicated bool) rebalanceUnit {
		return rebalanceUnit{key: key, shard: shard, markets: []uuid.UUID{uuid.New()},
			place: placement.Unit{Key: key, Pool: pool, Dedicated: dedicated}}
	}
	// live derives the shards' counts and dedications from the units, as LiveShards reads them.
	live := func(pools map[string]string, units []rebalanceUnit) []bookkeeping.Shard {
		var out []bookkeeping.Shard
		for _, name := range []string{"a", "b", "c", "h0", "h1"} {
			pool, ok := pools[name]
			if !ok {
				continue
			}
			s := bookkeeping.Shard{Name: name, Pool: pool}
			for _, u := range units {
				if u.shard == name {
					s.Markets, s.Units = s.Markets+len(u.markets), s.Units+1
					if u.place.Dedicated && s.DedicatedTo == "" {
						s.DedicatedTo = u.key
					}
				}
			}
			out = append(out, s)
		}
		return out
	}
	defaultAB := map[string]string{"a": "default", "b": "default"}
	withHot := map[string]string{"a": "default", "b": "default", "h0": "hot", "h1": "hot"}
	for _, tc := range []struct {
		name   string
		pools  map[string]string
		units  []rebalanceUnit
		edit   func(*rebalanceInput)
		want   string // "key from->to", or "" for no move
		reason string
	}{
		{name: "nothing misplaced", pools: withHot,
			units: []rebalanceUnit{unit("m1", "a", "", false), unit("e1", "h0", "hot", true)}},
		{name: "a market of another pool goes to its pool", pools: withHot,
			units: []rebalanceUnit{unit("m1", "a", "hot", false), unit("e1", "h0", "hot", true)},
			want:  "m1 a->h1", reason: "its pool is hot"},
		{name: "to its pool even when only a dedicated shard is live there", pools: map[string]string{"a": "default", "h0": "hot"},
			units: []rebalanceUnit{unit("m1", "a", "hot", false), unit("e1", "h0", "hot", true)},
			want:  "m1 a->h0", reason: "its pool is hot"},
		{name: "a dedicated market sharing its shard goes to a free one", pools: withHot,
			units: []rebalanceUnit{unit("e1", "h0", "hot", true), unit("m2", "h0", "hot", false)},
			want:  "e1 h0->h1", reason: "shard of its own"},
		{name: "the dedicated market moves first, even if its key sorts after", pools: withHot,
			units: []rebalanceUnit{unit("z9", "h0", "hot", true), unit("a1", "h0", "hot", false)},
			want:  "z9 h0->h1", reason: "shard of its own"},
		{name: "in its cooldown, the shared market leaves the dedicated shard instead", pools: withHot,
			units: func() []rebalanceUnit {
				e := unit("e1", "h0", "hot", true)
				e.movedAt = now.Add(-time.Second)
				return []rebalanceUnit{e, unit("m2", "h0", "hot", false)}
			}(),
			want: "m2 h0->h1", reason: "dedicated to e1"},
		{name: "no free shard and no shared one: nothing moves", pools: map[string]string{"a": "default", "h0": "hot", "h1": "hot"},
			units: []rebalanceUnit{unit("e1", "h0", "hot", true), unit("m2", "h0", "hot", false), unit("e2", "h1", "hot", true)}},
		{name: "a shard of another pool is never a target", pools: map[string]string{"a": "default", "b": "default", "h0": "hot"},
			units: []rebalanceUnit{unit("e1", "h0", "hot", true), unit("m2", "h0", "hot", false)}},
		{name: "not within a cooldown after start", pools: withHot,
			units: []rebalanceUnit{unit("m1", "a", "hot", false)},
			edit:  func(in *rebalanceInput) { in.started = now.Add(-time.Second) }},
		{name: "one move per interval", pools: withHot,
			units: []rebalanceUnit{unit("m1", "a", "hot", false)},
			edit:  func(in *rebalanceInput) { in.lastMove = now.Add(-time.Second) }},
		{name: "a market on a shard not live is the reconciler's", pools: defaultAB,
			units: []rebalanceUnit{unit("m1", "gone", "", false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := rebalanceInput{now: now, started: now.Add(-time.Hour), units: tc.units}
			if tc.edit != nil {
				tc.edit(&in)
			}
			mv, ok := planPlacement(in, live(tc.pools, tc.units), policy)
			got := ""
			if ok {
				got = fmt.Sprintf("%s %s->%s", mv.unit.key, mv.from, mv.to)
			}
			if got != tc.want {
				t.Fatalf("move %q (%s), want %q", got, mv.reason, tc.want)
			}
			if ok && (mv.kind != "placement" || !strings.Contains(mv.reason, tc.reason)) {
				t.Errorf("kind %q, reason %q; want placement, saying %q", mv.kind, mv.reason, tc.reason)
			}
		})
	}

	// The spread, pool by pool.
	spread := func(pools map[string]string, units []rebalanceUnit) (string, bool) {
		shards := []rebalanceShard{}
		for _, s := range live(pools, units) {
			shards = append(shards, rebalanceShard{name: s.Name})
		}
		in := rebalanceInput{now: now, started: now.Add(-time.Hour), shards: shards, units: units}
		mv, ok, balanced := planSpread(in, live(pools, units), policy)
		if !ok {
			return "", balanced
		}
		return fmt.Sprintf("%s %s->%s", mv.unit.key, mv.from, mv.to), balanced
	}
	many := func(prefix, shard, pool string, n int) []rebalanceUnit {
		var us []rebalanceUnit
		for i := range n {
			us = append(us, unit(fmt.Sprintf("%s%d", prefix, i), shard, pool, false))
		}
		return us
	}
	// Four markets on a, none on b, an idle hot pool: the default pool spreads within itself.
	if got, _ := spread(withHot, many("m", "a", "default", 4)); got != "m0 a->b" {
		t.Errorf("default pool's spread: %q, want m0 a->b", got)
	}
	// Only a and a dedicated hot shard with room: nothing moves onto the dedicated shard, nor out of
	// the pool.
	if got, balanced := spread(map[string]string{"a": "default", "h0": "hot"}, append(many("m", "a", "default", 4), unit("e1", "h0", "hot", true))); got != "" || !balanced {
		t.Errorf("spread onto another pool or a dedicated shard: %q (balanced %v)", got, balanced)
	}
	// The hot pool: three shared markets and a dedicated one on h0, h1 free: h1 is kept free for
	// the dedicated market (planPlacement moves it there) rather than spread onto.
	hot := append(many("s", "h0", "hot", 3), unit("e1", "h0", "hot", true))
	if got, balanced := spread(withHot, hot); got != "" || balanced {
		t.Errorf("the hot pool spread onto the shard kept free for its dedicated market: %q (balanced %v)", got, balanced)
	}
	// Without the dedicated market, the hot pool spreads onto h1.
	if got, _ := spread(withHot, many("s", "h0", "hot", 3)); got != "s0 h0->h1" {
		t.Errorf("hot pool's spread: %q, want s0 h0->h1", got)
	}
}

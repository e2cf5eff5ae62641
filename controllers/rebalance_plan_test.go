package controllers

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestPlanRebalance is the rebalancing rule's table: when markets move, which unit, from where to
// where, and which bounds hold a move back.
func TestPlanRebalance(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	long := now.Add(-time.Hour) // the operator started long ago
	policy := RebalancePolicy{Margin: 0.2, Interval: 5 * time.Second, Cooldown: time.Minute, MaxFraction: 0.5}

	// units builds n markets of their own on a shard, keyed <shard>-<i>.
	units := func(shard string, n int) []rebalanceUnit {
		var us []rebalanceUnit
		for i := range n {
			us = append(us, rebalanceUnit{key: fmt.Sprintf("%s-%d", shard, i), markets: []uuid.UUID{uuid.New()}, shard: shard})
		}
		return us
	}
	event := func(key, shard string, n int) rebalanceUnit {
		u := rebalanceUnit{key: key, event: true, shard: shard}
		for range n {
			u.markets = append(u.markets, uuid.New())
		}
		return u
	}
	join := func(us ...[]rebalanceUnit) []rebalanceUnit {
		var all []rebalanceUnit
		for _, u := range us {
			all = append(all, u...)
		}
		return all
	}
	moved := func(ago time.Duration, us []rebalanceUnit) []rebalanceUnit {
		for i := range us {
			us[i].movedAt = now.Add(-ago)
		}
		return us
	}
	loaded := func(load float64, us []rebalanceUnit) []rebalanceUnit {
		for i := range us {
			us[i].load = load
		}
		return us
	}
	abc := []rebalanceShard{{name: "a"}, {name: "b"}, {name: "c"}}
	reporting := func(shards []rebalanceShard) []rebalanceShard {
		out := slices.Clone(shards)
		for i := range out {
			out[i].reportsLoad = true
		}
		return out
	}
	cJoined := []rebalanceShard{{name: "a"}, {name: "b"}, {name: "c", arrival: shardJoined}}

	tests := []struct {
		name     string
		in       rebalanceInput
		p        RebalancePolicy
		want     string // "<key> <from>-><to>", or "" for no move
		reason   string // a part of the move's reason
		balanced bool
	}{
		{name: "one live shard", in: rebalanceInput{shards: []rebalanceShard{{name: "a"}}, units: units("a", 3)},
			balanced: true},
		{name: "a shard joins", in: rebalanceInput{shards: cJoined, units: join(units("a", 3), units("b", 3))},
			p: RebalancePolicy{Margin: 100}, want: "a-0 a->c", reason: "shard c joined (markets: a 3, b 3, c 0)"},
		{name: "a shard returns", in: rebalanceInput{shards: []rebalanceShard{{name: "a"}, {name: "b", arrival: shardReturned}},
			units: units("a", 6)}, p: RebalancePolicy{Margin: 100}, want: "a-0 a->b", reason: "shard b returned"},
		{name: "of the shards tied for least, the one that joined", in: rebalanceInput{shards: []rebalanceShard{{name: "a"}, {name: "b", arrival: shardJoined}, {name: "c"}},
			units: units("a", 4)}, want: "a-0 a->b", reason: "shard b joined (markets: a 4, c 0, b 0)"},
		{name: "an arrived shard that has its share", in: rebalanceInput{shards: cJoined, units: join(units("a", 2), units("b", 2), units("c", 2))},
			balanced: true},
		{name: "skew within the margin", in: rebalanceInput{shards: abc, units: join(units("a", 5), units("b", 3), units("c", 4))},
			p: RebalancePolicy{Margin: 0.6}},
		{name: "skew over the margin", in: rebalanceInput{shards: abc, units: join(units("a", 5), units("b", 3), units("c", 4))},
			want: "a-0 a->b", reason: "off by more than 20% (markets: a 5, c 4, b 3)"},
		{name: "off by one market is even", in: rebalanceInput{shards: abc, units: join(units("a", 3), units("b", 2), units("c", 2))},
			balanced: true},
		{name: "units on a shard that is not live are not counted", in: rebalanceInput{shards: abc,
			units: join(units("a", 2), units("b", 2), units("c", 2), units("dead", 9))}, balanced: true},
		{name: "an event moves whole", in: rebalanceInput{shards: cJoined,
			units: join([]rebalanceUnit{event("ev", "a", 2)}, units("a", 3), units("b", 5))}, want: "ev a->c"},
		{name: "an event counts as its markets", in: rebalanceInput{shards: cJoined,
			units: join([]rebalanceUnit{event("ev", "a", 3)}, units("b", 3))}, want: "b-0 b->c"},
		{name: "an event is never split", in: rebalanceInput{shards: cJoined, units: []rebalanceUnit{event("ev", "a", 4)}},
			balanced: true},
		{name: "moved within the cooldown: another shard gives", in: rebalanceInput{shards: cJoined,
			units: join(moved(30*time.Second, units("a", 3)), units("b", 3))}, p: RebalancePolicy{MaxFraction: 1}, want: "b-0 b->c"},
		{name: "everything moved within the cooldown", in: rebalanceInput{shards: cJoined,
			units: join(moved(30*time.Second, units("a", 3)), moved(59*time.Second, units("b", 3)))}},
		{name: "moved before the cooldown", in: rebalanceInput{shards: cJoined,
			units: join(moved(61*time.Second, units("a", 3)), units("b", 3))}, want: "a-0 a->c"},
		{name: "an operator that just started waits a cooldown", in: rebalanceInput{started: now.Add(-30 * time.Second),
			shards: cJoined, units: join(units("a", 3), units("b", 3))}},
		{name: "a move within the interval", in: rebalanceInput{lastMove: now.Add(-4 * time.Second),
			shards: cJoined, units: join(units("a", 3), units("b", 3))}},
		{name: "a move after the interval", in: rebalanceInput{lastMove: now.Add(-5 * time.Second),
			shards: cJoined, units: join(units("a", 3), units("b", 3))}, want: "a-0 a->c"},
		{name: "the fraction in motion is full", in: rebalanceInput{shards: cJoined,
			units: join(moved(10*time.Second, units("a", 2)), units("b", 8))}, p: RebalancePolicy{MaxFraction: 0.2}},
		{name: "the fraction in motion has room", in: rebalanceInput{shards: cJoined,
			units: join(moved(10*time.Second, units("a", 1)), units("b", 9))}, p: RebalancePolicy{MaxFraction: 0.2},
			want: "b-0 b->c"},
		{name: "an event larger than the fraction stays", in: rebalanceInput{shards: []rebalanceShard{{name: "a"}, {name: "b", arrival: shardJoined}},
			units: join([]rebalanceUnit{event("ev", "a", 3)}, units("a", 7))}, p: RebalancePolicy{MaxFraction: 0.2},
			want: "a-0 a->b"},
		{name: "the least fraction is one market", in: rebalanceInput{shards: cJoined, units: join(units("a", 3), units("b", 3))},
			p: RebalancePolicy{MaxFraction: 0.01}, want: "a-0 a->c"},
		{name: "by load once shards report it", in: rebalanceInput{shards: reporting(cJoined),
			units: join(loaded(10, units("a", 2)), loaded(1, units("b", 4)))}, want: "a-0 a->c", reason: "markets and orders/s: a 2 and 20, b 4 and 4, c 0 and 0"},
		{name: "by load, idle markets still count", in: rebalanceInput{shards: reporting(cJoined),
			units: join(units("a", 4), loaded(5, units("b", 1)))}, want: "a-0 a->c", reason: "markets and orders/s: b 1 and 5, a 4 and 0, c 0 and 0"},
		{name: "by count while a shard does not report load", in: rebalanceInput{shards: cJoined,
			units: join(loaded(10, units("a", 2)), loaded(1, units("b", 4)))}, want: "b-0 b->c", reason: "markets: b 4, a 2, c 0"},
		{name: "by load: a busy event moves whole", in: rebalanceInput{shards: reporting(abc),
			units: join([]rebalanceUnit{event("ev", "a", 3)}, loaded(1, units("a", 4)), loaded(0.5, units("b", 2)), loaded(0.5, units("c", 2)))},
			want: "ev a->c", reason: "markets and orders/s: a 7 and 10, b 2 and 1, c 2 and 1"},
	}
	// The last case's event reports its load.
	tests[len(tests)-1].in.units[0].load = 6
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy
			if tt.p.Margin != 0 {
				p.Margin = tt.p.Margin
			}
			if tt.p.MaxFraction != 0 {
				p.MaxFraction = tt.p.MaxFraction
			}
			in := tt.in
			in.now = now
			if in.started.IsZero() {
				in.started = long
			}
			mv, ok, balanced := planRebalance(in, p)
			got := ""
			if ok {
				got = fmt.Sprintf("%s %s->%s", mv.unit.key, mv.from, mv.to)
			}
			if got != tt.want || balanced != tt.balanced {
				t.Errorf("move %q, balanced %v; want %q, %v", got, balanced, tt.want, tt.balanced)
			}
			kind := "skew" // unless the shard moved to is owed markets
			for _, s := range tt.in.shards {
				if s.name == mv.to && s.arrival != "" {
					kind = string(s.arrival)
				}
			}
			if ok && mv.kind != kind {
				t.Errorf("kind %q, want %q (%s)", mv.kind, kind, mv.reason)
			}
			if ok && !strings.Contains(mv.reason, tt.reason) {
				t.Errorf("reason %q; want it to say %q", mv.reason, tt.reason)
			}
			if ok && mv.unit.event && len(mv.unit.markets) < 2 {
				t.Errorf("an event moved without its markets: %v", mv.unit.markets)
			}
		})
	}
}

// TestRebalancePolicyValidate: the default is valid, and each bound out of range is refused with a
// message naming its flag.
func TestRebalancePolicyValidate(t *testing.T) {
	if err := DefaultRebalancePolicy.Validate(); err != nil {
		t.Fatalf("the default: %v", err)
	}
	for _, tc := range []struct {
		flag string
		edit func(*RebalancePolicy)
	}{
		{"--rebalance-margin", func(p *RebalancePolicy) { p.Margin = -0.1 }},
		{"--rebalance-interval", func(p *RebalancePolicy) { p.Interval = 0 }},
		{"--rebalance-cooldown", func(p *RebalancePolicy) { p.Cooldown = -time.Second }},
		{"--rebalance-max-fraction", func(p *RebalancePolicy) { p.MaxFraction = 0 }},
		{"--rebalance-max-fraction", func(p *RebalancePolicy) { p.MaxFraction = 1.5 }},
	} {
		p := DefaultRebalancePolicy
		tc.edit(&p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", p, err, tc.flag)
		}
	}
}

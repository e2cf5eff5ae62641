package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// rebalanced is one event the operator recorded on a Market (or an Event).
type rebalanced struct {
	market string
	note   string
	at     time.Time
}

// rebalancedEvents lists the Rebalanced events on Markets, oldest first, and those on Events.
func (w *world) rebalancedEvents(ctx context.Context) (markets []rebalanced, events []rebalanced) {
	return w.eventsOf(ctx, reasonRebalanced)
}

// eventsOf lists the events of a reason on Markets, oldest first, and those on Events.
func (w *world) eventsOf(ctx context.Context, reason recordReason) (markets []rebalanced, events []rebalanced) {
	w.t.Helper()
	var evs eventsv1.EventList
	if err := w.k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
		w.t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason != string(reason) {
			continue
		}
		r := rebalanced{market: e.Regarding.Name, note: e.Note, at: e.EventTime.Time}
		if e.Regarding.Kind == "Event" {
			events = append(events, r)
		} else {
			markets = append(markets, r)
		}
	}
	slices.SortFunc(markets, func(a, b rebalanced) int { return a.at.Compare(b.at) })
	return markets, events
}

// movesCounted reads pmx_operator_rebalance_moves_total{reason} from the Rebalancer's registry.
func (w *world) movesCounted(reason string) float64 {
	w.t.Helper()
	families, err := w.rebalancer.Metrics.(prometheus.Gatherer).Gather()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "pmx_operator_rebalance_moves_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// waitLive waits until exactly the named shards are live.
func (w *world) waitLive(names ...string) {
	w.t.Helper()
	var live []bookkeeping.Shard
	if err := poll.Until(w.t.Context(), 10*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		live, err = w.st.LiveShards(ctx, time.Second)
		got := make([]string, len(live))
		for i, s := range live {
			got[i] = s.Name
		}
		slices.Sort(got)
		return err == nil && slices.Equal(got, names), err
	}); err != nil {
		w.t.Fatalf("live shards %v, want %v: %v", live, names, err)
	}
}

// spread waits until the Markets' statuses (what `kubectl get mkt` shows in its Shard column) put
// want[shard] markets on each shard, and returns each Market's shard.
func (w *world) spread(want map[string]int) map[string]string {
	w.t.Helper()
	var on map[string]string
	var count map[string]int
	if err := poll.Until(w.t.Context(), 30*time.Second, func(ctx context.Context) (bool, error) {
		var ms pmxv1.MarketList
		if err := w.k8s.List(ctx, &ms, client.InNamespace("default")); err != nil {
			return false, err
		}
		on, count = map[string]string{}, map[string]int{}
		for _, m := range ms.Items {
			on[m.Name] = m.Status.Shard
			count[m.Status.Shard]++
		}
		for s, n := range want {
			if count[s] != n {
				return false, nil
			}
		}
		return len(count) == len(want), nil
	}); err != nil {
		w.t.Fatalf("markets per shard %v, want %v (%v)", count, want, err)
	}
	return on
}

// TestRebalance runs the operator with its Rebalancer against a real kube-apiserver and Postgres.
// With only shard-a live, an Event of two outcomes and six markets of their own all go to it.
// When shard-c joins, the markets spread onto it, one move at a time and at least the interval
// apart, the event's two markets whole and first (they bring the two shards nearest even),
// until each has four; every moved Market, and the Event, has a Rebalanced event saying why. When
// shard-c's heartbeat lapses its markets fail over to shard-a; when it returns, markets move back
// to it, but none within the cooldown after its failover.
func TestRebalance(t *testing.T) {
	policy := RebalancePolicy{Margin: 0.2, Interval: 500 * time.Millisecond, Cooldown: 2 * time.Second, MaxFraction: 1}
	w := newWorldRebalancing(t, &policy)
	ctx := t.Context()
	w.waitLive("shard-a", "shard-b")
	w.beats["shard-b"]() // shard-b stops: its heartbeat lapses, and it owns nothing
	w.waitLive("shard-a")

	ev := w.newEvent("derby", "red", "blue")
	w.eventMarkets(ev)
	for i := range 6 {
		w.eventually(w.market(fmt.Sprintf("solo-%d", i), nil), "scheduled", scheduled)
	}
	w.spread(map[string]int{"shard-a": 8})

	// shard-c joins.
	joined := time.Now()
	w.addShard("shard-c")
	on := w.spread(map[string]int{"shard-a": 4, "shard-c": 4})
	if on["derby-red"] != "shard-c" || on["derby-blue"] != "shard-c" {
		t.Errorf("the event's markets are on %s and %s, want both moved to shard-c", on["derby-red"], on["derby-blue"])
	}
	var moves, evMoves []rebalanced
	if err := poll.Until(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		moves, evMoves = w.rebalancedEvents(ctx)
		return len(moves) == 4 && len(evMoves) == 1, nil
	}); err != nil {
		t.Fatalf("Rebalanced events on Markets %+v and Events %+v, want 4 (the event's two markets, then two) and 1", moves, evMoves)
	}
	for _, m := range moves {
		if !strings.Contains(m.note, "from shard shard-a to shard shard-c") || !strings.Contains(m.note, "shard shard-c joined") {
			t.Errorf("%s: %q, want a move from shard-a to shard-c because shard-c joined", m.market, m.note)
		}
	}
	first := []string{moves[0].market, moves[1].market}
	slices.Sort(first)
	if !slices.Equal(first, []string{"derby-blue", "derby-red"}) {
		t.Errorf("moved first %v, want the event's two markets together", first)
	}
	if !strings.Contains(moves[0].note, "with the other 1 markets of its event") || !strings.Contains(evMoves[0].note, "moved its 2 markets") {
		t.Errorf("the event's move says %q and %q", moves[0].note, evMoves[0].note)
	}
	// The bounded rate: the event's move, then one market at a time, at least the interval apart
	// (less what recording the event takes: each event's time is when it was recorded).
	const slack = 150 * time.Millisecond
	for i, at := range []time.Time{moves[2].at, moves[3].at} {
		prev := moves[1+i].at
		if gap := at.Sub(prev); gap < policy.Interval-slack {
			t.Errorf("move %d came %v after the one before, want at least the interval, %v", i+2, gap, policy.Interval)
		}
	}
	if n := w.movesCounted("joined"); n != 3 {
		t.Errorf("pmx_operator_rebalance_moves_total{reason=joined} %v, want 3 (the event, then two markets)", n)
	}
	// The operator started before shard-c joined, more than a cooldown before its first move.
	if moves[0].at.Before(joined) {
		t.Errorf("a move at %v, before shard-c joined at %v", moves[0].at, joined)
	}

	// shard-c stops; its four markets fail over to shard-a (the reconciler's move, ShardLost).
	w.beats["shard-c"]()
	w.spread(map[string]int{"shard-a": 8})
	w.beat("shard-c") // and it returns under its own name
	w.spread(map[string]int{"shard-a": 4, "shard-c": 4})
	all, _ := w.rebalancedEvents(ctx)
	back := all[len(moves):]
	if len(back) != 4 {
		t.Fatalf("Rebalanced events after shard-c returned: %+v, want 4", back)
	}
	// Four markets moved back: an event and two, or four one by one.
	if n := w.movesCounted("returned"); n != 3 && n != 4 {
		t.Errorf("pmx_operator_rebalance_moves_total{reason=returned} %v, want 3 or 4", n)
	}
	failedOver, _ := w.eventsOf(ctx, reasonShardLost)
	lostAt := map[string]time.Time{}
	for _, f := range failedOver {
		lostAt[f.market] = f.at
	}
	for _, m := range back {
		if !strings.Contains(m.note, "from shard shard-a to shard shard-c") || !strings.Contains(m.note, "shard shard-c returned") {
			t.Errorf("%s: %q, want a move back to shard-c because it returned", m.market, m.note)
		}
		// None moves within the cooldown after its failover (recorded just after it): the event's
		// markets, which would bring the shards nearest even, wait, and markets that stayed on
		// shard-a go first.
		if at, ok := lostAt[m.market]; ok && m.at.Sub(at) < policy.Cooldown-slack {
			t.Errorf("%s moved back %v after its failover, within the cooldown %v", m.market, m.at.Sub(at), policy.Cooldown)
		}
	}
}

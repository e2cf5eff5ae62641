package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

// MoveLog remembers when this operator last moved each market, off a lost shard (the Market
// reconciler) or to spread them (the Rebalancer), so that a market that has just moved stays where
// it is for the cooldown. It lives in memory: an operator that starts waits a cooldown before it
// rebalances (planRebalance), which covers the moves it cannot know of. A nil MoveLog records
// nothing.
type MoveLog struct {
	mu sync.Mutex
	at map[uuid.UUID]time.Time
}

// Record notes that markets moved at now.
func (l *MoveLog) Record(now time.Time, markets ...uuid.UUID) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.at == nil {
		l.at = map[uuid.UUID]time.Time{}
	}
	for _, m := range markets {
		l.at[m] = now
	}
}

// last is when a market last moved (zero: not since the operator started).
func (l *MoveLog) last(m uuid.UUID) time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.at[m]
}

// forget drops the moves older than before, which no cooldown looks at any more.
func (l *MoveLog) forget(before time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for m, at := range l.at {
		if at.Before(before) {
			delete(l.at, m)
		}
	}
}

// Rebalancer keeps the OPEN markets spread over the live shards (docs/architecture.md §6,
// "Spread"): on the leader only, every pass it reads the live shards and the markets' owners from
// Postgres, asks planPlacement for the next move that puts a market where its pool and placement
// ask, else planSpread for the next move to spread each pool (planRebalance), and carries it out
// with Move — the planned
// handoff, under the next epoch, with no error for a client — recording a Rebalanced event on each
// Market moved (and on its Event). It never moves a market whose owner is not live: that is the
// Market reconciler's to schedule.
type Rebalancer struct {
	Client   client.Client
	Store    RebalanceStore
	Recorder events.EventRecorder
	// ShardTTL is how long a shard stays live after its last heartbeat, as the reconcilers see it.
	ShardTTL time.Duration
	Policy   RebalancePolicy
	// Move carries a move out: the planned handoff (shardclient.Router.HandOff), which falls back to
	// store.Move for an old owner without it. Nil, it is store.Move: a failover's move, fenced.
	Move func(ctx context.Context, markets []uuid.UUID, from, to string) (moved bool, err error)
	// Moves is shared with the Market reconciler, whose moves off lost shards count for the cooldown.
	Moves *MoveLog
	Clock Clock
	// Metrics, when set, gets pmx_operator_rebalance_moves_total.
	Metrics prometheus.Registerer

	started  time.Time
	lastMove time.Time
	live     map[string]time.Time // the shards live at the last pass, with when each process started
	seen     map[string]bool      // every shard live at some pass
	arrived  map[string]arrival   // shards that joined or returned and are still owed markets
	passes   int
	moved    *prometheus.CounterVec
}

// NeedLeaderElection: only the leading operator moves markets.
func (b *Rebalancer) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends; a pass that fails is logged and the next one tries afresh.
func (b *Rebalancer) Start(ctx context.Context) error {
	if b.Clock == nil {
		b.Clock = realClock{}
	}
	if b.ShardTTL <= 0 {
		b.ShardTTL = 5 * time.Second
	}
	b.started = b.Clock.Now()
	if b.Metrics != nil && b.moved == nil {
		b.moved = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pmx_operator_rebalance_moves_total",
			Help: "Moves the operator made to spread the markets over the live shards, by why: a shard joined, returned, the spread was off by more than the margin (skew), or a market was not where its pool and placement ask (placement). An event's markets are one move."},
			[]string{"reason"})
		if err := b.Metrics.Register(b.moved); err != nil {
			return fmt.Errorf("while registering the rebalancing metric: %w", err)
		}
	}
	// Look often enough to notice a shard that joins within a heartbeat or so, and to keep to the
	// interval closely.
	every := min(max(b.Policy.Interval/2, 10*time.Millisecond), time.Second)
	log := logf.FromContext(ctx).WithName("rebalance")
	log.Info("keeping markets spread over the live shards", "margin", b.Policy.Margin, "interval", b.Policy.Interval,
		"cooldown", b.Policy.Cooldown, "maxFraction", b.Policy.MaxFraction)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		if err := b.pass(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "rebalancing pass failed; trying again at the next")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// pass makes at most one move.
func (b *Rebalancer) pass(ctx context.Context) error {
	now := b.Clock.Now()
	liveShards, err := b.Store.LiveShards(ctx, b.ShardTTL)
	if err != nil {
		return fmt.Errorf("while listing live shards: %w", err)
	}
	loads, err := b.Store.ShardLoads(ctx, b.ShardTTL)
	if err != nil {
		return fmt.Errorf("while reading the shards' load: %w", err)
	}
	// A stopping shard hands its own markets to the others (cmd/pmx shard, HandOffAll), which the
	// spread would answer with moves onto it, while it still beats, just before it stops.
	for _, sh := range liveShards {
		if sh.Draining {
			return nil
		}
	}
	shards := b.arrivals(liveShards)
	for i := range shards {
		_, shards[i].reportsLoad = loads[shards[i].name]
	}
	rows, err := b.Store.Markets(ctx, domain.MarketOpen)
	if err != nil {
		return fmt.Errorf("while listing open markets: %w", err)
	}
	units, byID := b.units(now, rows, loads)
	b.Moves.forget(now.Add(-b.Policy.Cooldown))
	in := rebalanceInput{now: now, started: b.started, lastMove: b.lastMove, shards: shards, units: units}
	mv, ok := planPlacement(in, liveShards, b.Policy)
	balanced := false
	if !ok {
		mv, ok, balanced = planSpread(in, liveShards, b.Policy)
	}
	if balanced {
		clear(b.arrived)
	}
	if !ok {
		return nil
	}
	move := b.Move
	if move == nil {
		move = b.Store.Move
	}
	moved, err := move(ctx, mv.unit.markets, mv.from, mv.to)
	if err != nil || !moved {
		return err // !moved: an owner changed since the listing; the next pass looks again
	}
	b.lastMove = now
	b.Moves.Record(now, mv.unit.markets...)
	if b.moved != nil {
		b.moved.WithLabelValues(mv.kind).Inc()
	}
	logf.FromContext(ctx).WithName("rebalance").Info("moved to spread the markets", "from", mv.from, "to", mv.to,
		"markets", len(mv.unit.markets), "unit", mv.unit.key, "reason", mv.reason)
	b.record(ctx, mv, byID)
	return nil
}

// arrivals notes which live shards joined or returned since the last pass, forgets those no longer
// live, and lists the live shards for the planner. The first pass finds every shard there already.
// A shard returned when it is live again after its heartbeat lapsed, or a new process registered
// under its name (one restarted between two passes, whose lapse no pass saw).
func (b *Rebalancer) arrivals(live []bookkeeping.Shard) []rebalanceShard {
	if b.arrived == nil {
		b.arrived, b.seen = map[string]arrival{}, map[string]bool{}
	}
	now := map[string]time.Time{}
	out := make([]rebalanceShard, 0, len(live))
	for _, s := range live {
		now[s.Name] = s.StartedAt
		if started, ok := b.live[s.Name]; b.passes > 0 && (!ok || !started.Equal(s.StartedAt)) {
			b.arrived[s.Name] = shardJoined
			if b.seen[s.Name] {
				b.arrived[s.Name] = shardReturned
			}
		}
		b.seen[s.Name] = true
		out = append(out, rebalanceShard{name: s.Name, arrival: b.arrived[s.Name]})
	}
	for name := range b.arrived {
		if _, ok := now[name]; !ok {
			delete(b.arrived, name)
		}
	}
	b.live = now
	b.passes++
	return out
}

// units groups the OPEN markets into what moves as one: a market of its own, or all of an
// event's markets. A unit not wholly on one shard — one of its markets unowned, or an event's
// markets apart while the reconciler brings them together — is left out, and so is one whose
// closesAt has passed: its shard is closing it, and a move would only delay that. A unit's load is
// what its owner last reported for its markets (loads, by shard and market).
func (b *Rebalancer) units(now time.Time, rows []records.Market, loads map[string]map[uuid.UUID]float64) ([]rebalanceUnit, map[uuid.UUID]records.Market) {
	byID := make(map[uuid.UUID]records.Market, len(rows))
	events := map[uuid.UUID]int{} // the event's unit's index
	var units []rebalanceUnit
	split := map[int]bool{}
	for _, m := range rows {
		byID[m.ID] = m
		shard := ""
		if m.Shard != nil {
			shard = *m.Shard
		}
		moved := b.Moves.last(m.ID)
		if m.EventID == nil {
			units = append(units, rebalanceUnit{key: m.ID.String(), place: placement.UnitOf(m), markets: []uuid.UUID{m.ID}, shard: shard, movedAt: moved,
				load: loads[shard][m.ID]})
			if shard == "" || m.ClosesAt != nil && !m.ClosesAt.After(now) {
				split[len(units)-1] = true
			}
			continue
		}
		i, ok := events[*m.EventID]
		if !ok {
			i = len(units)
			events[*m.EventID] = i
			units = append(units, rebalanceUnit{key: m.EventID.String(), place: placement.UnitOf(m), event: true, shard: shard})
		}
		u := &units[i]
		u.markets = append(u.markets, m.ID)
		u.load += loads[shard][m.ID]
		if moved.After(u.movedAt) {
			u.movedAt = moved
		}
		if shard == "" || shard != u.shard {
			split[i] = true
		}
		if m.ClosesAt != nil && !m.ClosesAt.After(now) {
			split[i] = true
		}
	}
	whole := units[:0]
	for i, u := range units {
		if !split[i] {
			whole = append(whole, u)
		}
	}
	return whole, byID
}

// record leaves a Rebalanced event on each Market moved, and on the Event whose markets they are,
// saying from where to where and why. A market with no Market resource (none names it) has none.
func (b *Rebalancer) record(ctx context.Context, mv rebalanceMove, byID map[uuid.UUID]records.Market) {
	if b.Recorder == nil {
		return
	}
	with := ""
	if mv.unit.event {
		with = fmt.Sprintf(" with the other %d markets of its event", len(mv.unit.markets)-1)
	}
	var event *pmxv1.Event
	for _, id := range mv.unit.markets {
		row := byID[id]
		if row.Name == nil {
			continue
		}
		key := types.NamespacedName{Name: *row.Name}
		if ns, name, ok := strings.Cut(*row.Name, "/"); ok {
			key = types.NamespacedName{Namespace: ns, Name: name}
		}
		var mkt pmxv1.Market
		if err := b.Client.Get(ctx, key, &mkt); err != nil {
			logf.FromContext(ctx).V(1).Info("no Market to record a move on", "market", key, "error", err)
			continue
		}
		b.k8sEvent(&mkt, "moved from shard %s to shard %s%s: %s", mv.from, mv.to, with, mv.reason)
		if name := mkt.Labels[pmxv1.LabelEvent]; name != "" && event == nil {
			event = &pmxv1.Event{}
			if err := b.Client.Get(ctx, types.NamespacedName{Namespace: mkt.Namespace, Name: name}, event); err != nil {
				continue
			}
			b.k8sEvent(event, "moved its %d markets from shard %s to shard %s: %s", len(mv.unit.markets), mv.from, mv.to, mv.reason)
		}
	}
}

func (b *Rebalancer) k8sEvent(obj runtime.Object, note string, args ...any) {
	b.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, string(reasonRebalanced), "Rebalance", note, args...)
}

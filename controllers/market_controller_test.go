package controllers

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/placement"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store/bookkeeping"
)

func TestPick(t *testing.T) {
	live := []bookkeeping.Shard{{Name: "b", Markets: 1}, {Name: "a", Markets: 3}} // least loaded first
	tests := []struct {
		owner, target string
		move          bool
		live          []bookkeeping.Shard
	}{
		{"a", "a", false, live},       // a live owner keeps its market
		{"", "b", true, live},         // a new market goes to the least loaded
		{"dead", "b", true, live},     // a lost shard's market moves
		{"operator", "b", true, live}, // a market the operator took over goes back to a shard
		{"", "", true, nil},           // nobody to take it
		// A draining shard (stopping) keeps what it owns, which it hands over itself, and takes
		// nothing new.
		{"a", "a", false, []bookkeeping.Shard{{Name: "b"}, {Name: "a", Draining: true}}},
		{"dead", "a", true, []bookkeeping.Shard{{Name: "b", Draining: true}, {Name: "a"}}},
		{"", "", true, []bookkeeping.Shard{{Name: "b", Draining: true}}},
	}
	for _, tt := range tests {
		target, move := pick(tt.owner, tt.live, placement.Unit{Key: "m"})
		if target != tt.target || move != tt.move {
			t.Errorf("pick(%q) = %q, %v; want %q, %v", tt.owner, target, move, tt.target, tt.move)
		}
	}
}

func TestDesiredStatus(t *testing.T) {
	id := uuid.New()
	shardA, last := "shard-a", 42
	mkt := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	open := &records.Market{ID: id, Status: "OPEN", Shard: &shardA, Epoch: 2, LastTradePrice: &last}
	resolved := &records.Market{ID: id, Status: "RESOLVED", Shard: &shardA, Epoch: 3}
	cond := func(st pmxv1.MarketStatus, c pmxv1.MarketConditionType) string {
		got := meta.FindStatusCondition(st.Conditions, string(c))
		if got == nil {
			return "missing"
		}
		return string(got.Status) + "/" + got.Reason
	}
	tests := []struct {
		name                      string
		obs                       observation
		err                       error
		resolution                pmxv1.Resolution
		phase                     pmxv1.MarketPhase
		shard                     string
		ready, scheduled, settled string
	}{
		{"open and served", observation{row: open}, nil, "", "OPEN", "shard-a", "True/Recorded", "True/ShardAssigned", "False/AwaitingResolution"},
		{"open, no live shard", observation{row: &records.Market{ID: id, Status: "OPEN"}, noLive: true}, nil, "", "OPEN", "", "True/Recorded", "False/NoLiveShard", "False/AwaitingResolution"},
		{"closing", observation{row: open, pending: domain.CloseMarket}, nil, "", "OPEN", "shard-a", "False/Reconciling", "True/ShardAssigned", "False/AwaitingResolution"},
		{"resolving", observation{row: open, pending: domain.ResolveYes}, nil, "YES", "OPEN", "shard-a", "False/Reconciling", "True/ShardAssigned", "False/SettlementPending"},
		{"shard lost, none live", observation{row: open, noLive: true, lost: "shard-a"}, nil, "", "OPEN", "shard-a", "True/Recorded", "False/ShardLost", "False/AwaitingResolution"},
		{"closed", observation{row: &records.Market{ID: id, Status: "CLOSED", Shard: &shardA, Epoch: 3}}, nil, "", "CLOSED", "", "True/Recorded", "False/NotServed", "False/AwaitingResolution"},
		{"closing, no live shard", observation{row: open, pending: domain.CloseMarket, noLive: true, lost: "shard-a"}, nil, "", "OPEN", "shard-a", "False/NoLiveShard", "False/ShardLost", "False/AwaitingResolution"},
		{"closed, resolving, no live shard", observation{row: &records.Market{ID: id, Status: "CLOSED", Epoch: 3}, pending: domain.ResolveNo, noLive: true},
			nil, "NO", "CLOSED", "", "False/NoLiveShard", "False/NoLiveShard", "False/SettlementPending"},
		{"resolved", observation{row: resolved}, nil, "YES", "RESOLVED", "", "True/Recorded", "False/NotServed", "True/PaidOut"},
		{"settlement failing", observation{row: open}, errors.New("db down"), "NO", "OPEN", "shard-a", "False/DatabaseError", "True/ShardAssigned", "False/SettlementFailed"},
		{"database unreachable", observation{}, errors.New("db down"), "", "", "", "False/DatabaseError", "missing", "missing"},
		{"invalid new spec", observation{}, fmt.Errorf("while creating market: %w", &marketspec.SpecError{Field: "url", Err: errors.New("url: bad")}),
			"", "", "", "False/InvalidSpec", "missing", "missing"},
		{"invalid changed spec", observation{row: open}, fmt.Errorf(`market "m": %w`, &marketspec.SpecError{Field: "question", Err: errors.New("question: required")}),
			"", "OPEN", "shard-a", "False/InvalidSpec", "True/ShardAssigned", "False/AwaitingResolution"},
		{"market of an event, refused", observation{row: open, pending: domain.CloseMarket, inEvent: &eventMarket{event: "e", refused: true, why: "x"}},
			nil, "", "OPEN", "shard-a", "False/market_in_event", "True/ShardAssigned", "False/AwaitingResolution"},
		{"market of an event, resolving with it", observation{row: open, pending: domain.ResolveNo, inEvent: &eventMarket{event: "e"}},
			nil, "NO", "OPEN", "shard-a", "False/Reconciling", "True/ShardAssigned", "False/SettlementPending"},
		{"phase moved meanwhile", observation{row: open}, fmt.Errorf("while carrying out close: cannot close a market that is CLOSED: %w", market.ErrIllegalTransition),
			"", "OPEN", "shard-a", "False/IllegalTransition", "True/ShardAssigned", "False/AwaitingResolution"},
	}
	for _, tt := range tests {
		mkt.Spec.Resolution = tt.resolution
		st := desiredStatus(mkt, tt.obs, tt.err)
		if st.Phase != tt.phase || st.Shard != tt.shard || st.ObservedGeneration != 3 {
			t.Errorf("%s: phase %q shard %q generation %d", tt.name, st.Phase, st.Shard, st.ObservedGeneration)
		}
		if got := [3]string{cond(st, pmxv1.MarketReady), cond(st, pmxv1.MarketScheduled), cond(st, pmxv1.MarketSettled)}; got != [3]string{tt.ready, tt.scheduled, tt.settled} {
			t.Errorf("%s: conditions %v, want %v", tt.name, got, [3]string{tt.ready, tt.scheduled, tt.settled})
		}
	}
	if st := desiredStatus(mkt, observation{row: open}, nil); st.LastTradePrice == nil || *st.LastTradePrice != 42 || st.MarketID != id.String() {
		t.Errorf("status %+v lacks the market id or last price", st)
	}
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func TestRequeueAfter(t *testing.T) {
	now := time.Date(2027, 1, 1, 12, 0, 0, 0, time.UTC)
	r := &MarketReconciler{Clock: fixedClock(now), Resync: 2 * time.Second}
	open := observation{row: &records.Market{Status: "OPEN"}}
	soon := metav1.NewTime(now.Add(500 * time.Millisecond))
	later := metav1.NewTime(now.Add(time.Hour))
	past := metav1.NewTime(now.Add(-time.Minute))
	tests := []struct {
		closes *metav1.Time
		obs    observation
		want   time.Duration
	}{
		{nil, open, 2 * time.Second},
		{&later, open, 2 * time.Second},
		{&soon, open, 500 * time.Millisecond},
		{&past, open, 10 * time.Millisecond},
		{nil, observation{row: &records.Market{Status: "CLOSED"}}, 0},
		{nil, observation{row: &records.Market{Status: "CLOSED"}, pending: domain.ReopenMarket}, 2 * time.Second},
		{nil, observation{}, 0},
	}
	for _, tt := range tests {
		mkt := &pmxv1.Market{Spec: pmxv1.MarketSpec{ClosesAt: tt.closes}}
		if got := r.requeueAfter(mkt, tt.obs); got != tt.want {
			t.Errorf("requeueAfter(closes %v) = %v, want %v", tt.closes, got, tt.want)
		}
	}
}

// TestWaitForShard checks the wait between looks for a live shard: Resync, doubling with each
// look, up to maxShardWait, per Market; a market that stops waiting starts again from Resync.
func TestWaitForShard(t *testing.T) {
	r := &MarketReconciler{Resync: 2 * time.Second}
	a := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{UID: "a"}}
	b := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{UID: "b"}}
	var got []time.Duration
	for range 7 {
		got = append(got, r.waitForShard(a, domain.CloseMarket))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, maxShardWait, maxShardWait, maxShardWait}
	if !slices.Equal(got, want) {
		t.Errorf("waits %v, want %v", got, want)
	}
	if w := r.waitForShard(b, domain.CloseMarket); w != 2*time.Second {
		t.Errorf("another Market's first wait: %v, want 2s", w)
	}
	r.doneWaiting(a.UID)
	if w := r.waitForShard(a, domain.CloseMarket); w != 2*time.Second {
		t.Errorf("a Market waiting again: %v, want 2s", w)
	}
}

package controllers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/exchange"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
	"github.com/pmx-dev/pmx/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// world is the operator against a real kube-apiserver and Postgres, with two in-process shards
// behind their internal API, a front API routing to them, and the operator's router carrying
// lifecycle changes to them.
type world struct {
	t      *testing.T
	env    *k8stest.Env
	k8s    client.Client
	st     *store.Store
	shards map[string]*shard.Shard
	addrs  map[string]string // each shard's internal API
	beats  map[string]context.CancelFunc
	// poolOf is the pool each shard registers in ("" for the default pool, as with no --pool).
	poolOf map[string]string
	api    string
	admin  string
	// rebalancer is the operator's, in a world made by newWorldRebalancing.
	rebalancer *Rebalancer
	// pools is the operator's ShardPool reconciler, in a world made with worldOptions.poolNamespace.
	pools *ShardPoolReconciler
}

const internalToken = "internal-token"

func newWorld(t *testing.T) *world { return newWorldRebalancing(t, nil) }

// newWorldRebalancing is a world whose operator also runs a Rebalancer with policy, when not nil.
func newWorldRebalancing(t *testing.T, policy *RebalancePolicy) *world {
	return newWorldWith(t, worldOptions{policy: policy, shards: []string{"shard-a", "shard-b"}})
}

// worldOptions are what sets worlds apart.
type worldOptions struct {
	policy *RebalancePolicy // the Rebalancer's, when not nil
	shards []string         // the shards started at once
	// poolNamespace, when not "", has the operator run the ShardPools of that namespace (which the
	// world creates), with handOff emptying the shards that go (nil: through the operator's
	// router).
	poolNamespace string
	handOff       func(ctx context.Context, router *shardclient.Router, shard string) (int, error)
}

// newWorldWith is a world made with opts.
func newWorldWith(t *testing.T, opts worldOptions) *world {
	env := k8stest.Start(t)
	ctx := context.Background()
	st := storetest.New(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := &world{t: t, env: env, k8s: env.Client, st: st, shards: map[string]*shard.Shard{}, addrs: map[string]string{},
		beats: map[string]context.CancelFunc{}, poolOf: map[string]string{}, admin: "admin-token"}

	// The shards, heartbeating every 100ms, reachable over their internal API.
	for _, name := range opts.shards {
		w.addShard(name)
	}
	front := apiserver.New(apiserver.Config{Store: st, Logger: log, AdminToken: w.admin,
		Exchange: &shardclient.Router{Store: st, Token: internalToken}})
	t.Cleanup(front.Close)
	api := httptest.NewServer(front.Handler())
	t.Cleanup(api.Close)
	w.api = api.URL

	// Each test's world has a manager of its own, in one process: the controller's name repeats.
	skip := true
	var cacheOpts cache.Options
	if opts.poolNamespace != "" {
		cacheOpts.ByObject = ShardPoolCache(opts.poolNamespace)
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip}, Cache: cacheOpts})
	if err != nil {
		t.Fatal(err)
	}
	moves := &MoveLog{}
	r := &MarketReconciler{Client: mgr.GetClient(), Scheme: env.Scheme, Store: st, Exchange: &shardclient.Router{Store: st, Token: internalToken, Lifecycle: true},
		ShardTTL: time.Second, Resync: 100 * time.Millisecond, Recorder: mgr.GetEventRecorder("pmx-operator"), Moves: moves}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if opts.policy != nil {
		w.rebalancer = &Rebalancer{Client: mgr.GetClient(), Store: st, Recorder: mgr.GetEventRecorder("pmx-operator"),
			ShardTTL: time.Second, Policy: *opts.policy, Moves: moves, Metrics: prometheus.NewRegistry()}
		if err := mgr.Add(w.rebalancer); err != nil {
			t.Fatal(err)
		}
	}
	if ns := opts.poolNamespace; ns != "" {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		router := &shardclient.Router{Store: st, Token: internalToken, Lifecycle: true}
		handOff := opts.handOff
		if handOff == nil {
			handOff = func(ctx context.Context, router *shardclient.Router, shard string) (int, error) {
				return router.HandOffShard(ctx, shard, time.Second)
			}
		}
		w.pools = &ShardPoolReconciler{Client: mgr.GetClient(), Scheme: env.Scheme, Store: st, Recorder: mgr.GetEventRecorder("pmx-operator"),
			Namespace: ns, ShardTTL: time.Second, Resync: 200 * time.Millisecond, DrainResync: 100 * time.Millisecond,
			HandOffShard: func(ctx context.Context, shard string) (int, error) { return handOff(ctx, router, shard) }}
		if err := w.pools.SetupWithManager(mgr); err != nil {
			t.Fatal(err)
		}
	}
	er := &EventReconciler{Client: mgr.GetClient(), Scheme: env.Scheme, Store: st, Resync: 100 * time.Millisecond,
		Exchange: &shardclient.Router{Store: st, Token: internalToken, Lifecycle: true}, Recorder: mgr.GetEventRecorder("pmx-operator")}
	if err := er.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(mctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return w
}

// addShardIn starts a shard of a pool, as addShard does.
func (w *world) addShardIn(name, pool string) {
	w.poolOf[name] = pool
	w.addShard(name)
}

// addShard starts a shard behind its internal API, heartbeating every 100ms.
func (w *world) addShard(name string) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sh := shard.New(shard.Config{Store: w.st, Name: name, Logger: log})
	w.t.Cleanup(sh.Stop)
	srv := httptest.NewServer(shardserver.Server{Shard: sh, Store: w.st, Token: internalToken, Logger: log}.Handler())
	w.t.Cleanup(srv.Close)
	w.shards[name] = sh
	w.addrs[name] = strings.TrimPrefix(srv.URL, "http://")
	w.beat(name)
}

// beat keeps a shard's heartbeat going until w.beats[name] is called, like a running shard (but
// one that can die without handing its markets back).
func (w *world) beat(name string) {
	addr := w.addrs[name]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		incarnation, err := w.st.Register(ctx, name, addr, w.poolOf[name])
		if err != nil {
			w.t.Errorf("registration: %v", err)
			return
		}
		for {
			if err := w.st.Beat(ctx, name, addr, incarnation); err != nil && ctx.Err() == nil {
				w.t.Errorf("heartbeat: %v", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	w.beats[name] = func() { cancel(); wg.Wait() }
	w.t.Cleanup(w.beats[name])
}

func (w *world) market(name string, edit func(*pmxv1.MarketSpec)) *pmxv1.Market {
	m := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: pmxv1.MarketSpec{Question: "Will " + name + " happen?", Category: "test"}}
	if edit != nil {
		edit(&m.Spec)
	}
	if err := w.k8s.Create(context.Background(), m); err != nil {
		w.t.Fatal(err)
	}
	return m
}

// eventually polls the Market until cond holds.
func (w *world) eventually(m *pmxv1.Market, what string, cond func(*pmxv1.Market) bool) *pmxv1.Market {
	w.t.Helper()
	var got pmxv1.Market
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		got = pmxv1.Market{}
		err = w.k8s.Get(ctx, client.ObjectKeyFromObject(m), &got)
		return err == nil && cond(&got), nil
	}) != nil {
		w.t.Fatalf("Market %s: timed out waiting until %s; last: %+v (%v)", m.Name, what, got.Status, err)
	}
	return &got
}

func scheduled(m *pmxv1.Market) bool {
	return m.Status.Phase == pmxv1.MarketPhaseOpen && meta.IsStatusConditionTrue(m.Status.Conditions, string(pmxv1.MarketScheduled))
}

// call does a public API request with an account's key.
func (w *world) call(key, method, path, body string, want int, out any) {
	w.t.Helper()
	req, _ := http.NewRequest(method, w.api+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		w.t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *world) account(name string) (key string, id int64) {
	var out struct {
		APIKey string `json:"apiKey"`
	}
	w.call(w.admin, "POST", "/admin/v1/accounts", `{"name":"`+name+`"}`, http.StatusCreated, &out)
	prefix := out.APIKey[:20]
	keys, err := w.st.KeysByPrefix(context.Background(), []string{prefix})
	if err != nil || keys[prefix].AccountID == 0 {
		w.t.Fatalf("the key of account %s: %v, %v", name, keys, err)
	}
	return out.APIKey, keys[prefix].AccountID
}

func (w *world) cash(id int64) int64 {
	a, err := w.st.Account(context.Background(), id)
	if err != nil {
		w.t.Fatal(err)
	}
	return a.Available + a.Locked
}

func order(market, side, outcome string, price, qty int) string {
	b, _ := json.Marshal(map[string]any{"marketId": market, "side": side, "outcome": outcome, "price": price, "quantity": qty})
	return string(b)
}

// TestOperator creates, trades, resolves, rejects a changed resolution, voids a deleted market,
// and moves a market off a shard whose heartbeat stops, whose commits are then refused.
func TestOperator(t *testing.T) {
	w := newWorld(t)
	alice, aliceID := w.account("alice")
	bob, bobID := w.account("bob")

	// Create: the market appears in the REST API, scheduled on a live shard.
	m := w.eventually(w.market("rain", nil), "scheduled", scheduled)
	if !strings.HasPrefix(m.Status.Shard, "shard-") || m.Status.Epoch < 1 || m.Status.ObservedGeneration != m.Generation || len(m.Finalizers) != 1 {
		t.Fatalf("status %+v, finalizers %v", m.Status, m.Finalizers)
	}
	var list struct{ Markets []apiserver.Market }
	w.call(alice, "GET", "/api/v1/markets", "", http.StatusOK, &list)
	if len(list.Markets) != 1 || list.Markets[0].ID.String() != m.Status.MarketID || list.Markets[0].Question != "Will rain happen?" {
		t.Fatalf("GET /markets = %+v", list.Markets)
	}

	owner, epoch := m.Status.Shard, m.Status.Epoch

	// Trade: 10 pairs minted at YES 60.
	w.call(alice, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "YES", 60, 10), http.StatusCreated, nil)
	w.call(bob, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "NO", 40, 10), http.StatusCreated, nil)
	w.call(alice, "POST", "/api/v1/order", order(m.Status.MarketID, "BUY", "YES", 10, 5), http.StatusCreated, nil) // rests
	m = w.eventually(m, "last price shown", func(m *pmxv1.Market) bool {
		return m.Status.LastTradePrice != nil && *m.Status.LastTradePrice == 60
	})

	// Resolve YES: alice's 10 YES shares pay 1000, her resting order is cancelled.
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Resolution = pmxv1.ResolutionYes
	if err := w.k8s.Patch(context.Background(), m, patch); err != nil {
		t.Fatal(err)
	}
	m = w.eventually(m, "resolved", func(m *pmxv1.Market) bool {
		return m.Status.Phase == pmxv1.MarketPhaseResolved && meta.IsStatusConditionTrue(m.Status.Conditions, string(pmxv1.MarketSettled))
	})
	// The market's own shard settled it: the operator took nothing over.
	if o, err := w.st.Owner(context.Background(), uuid.MustParse(m.Status.MarketID)); err != nil || o.Shard != owner || o.Epoch != epoch {
		t.Fatalf("after resolving: owner %+v (%v), want %s at epoch %d as before", o, err, owner, epoch)
	}
	if got := w.cash(aliceID); got != 1_000_000-600+1000 {
		t.Fatalf("alice has %d after resolution", got)
	}
	if got := w.cash(bobID); got != 1_000_000-400 {
		t.Fatalf("bob has %d after resolution", got)
	}

	// The resolution cannot change: the apiserver refuses it (CEL).
	patch = client.MergeFrom(m.DeepCopy())
	m.Spec.Resolution = pmxv1.ResolutionNo
	if err := w.k8s.Patch(context.Background(), m, patch); err == nil || !strings.Contains(err.Error(), "cannot be changed") {
		t.Fatalf("changing the resolution: %v", err)
	}

	// Deleting an OPEN market voids it: each share pays 50, resting orders are cancelled.
	v := w.eventually(w.market("void", nil), "scheduled", scheduled)
	w.call(alice, "POST", "/api/v1/order", order(v.Status.MarketID, "BUY", "YES", 30, 4), http.StatusCreated, nil)
	w.call(bob, "POST", "/api/v1/order", order(v.Status.MarketID, "BUY", "NO", 70, 2), http.StatusCreated, nil)
	aliceBefore, bobBefore := w.cash(aliceID), w.cash(bobID)
	if err := w.k8s.Delete(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(v.Status.MarketID)
	var row records.Market
	var getErr error
	if poll.Until(t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		var got pmxv1.Market
		getErr = w.k8s.Get(ctx, client.ObjectKeyFromObject(v), &got)
		row, _ = w.st.Market(ctx, id)
		return getErr != nil && row.Status == domain.MarketCanceled, nil
	}) != nil {
		t.Fatalf("deleted market not voided: %s, %v", row.Status, getErr)
	}
	// Two pairs were minted (alice paid 30 for each YES, bob 70 for each NO); voided, each share
	// pays 50, and alice's unfilled bid releases its lock (already counted in her cash).
	if a, b := w.cash(aliceID), w.cash(bobID); a != aliceBefore+100 || b != bobBefore+100 {
		t.Fatalf("after voiding: alice %d (was %d), bob %d (was %d)", a, aliceBefore, b, bobBefore)
	}

	// A shard whose heartbeat stops loses its markets; its commits are refused.
	f := w.eventually(w.market("failover", nil), "scheduled", scheduled)
	owner = f.Status.Shard
	w.call(alice, "POST", "/api/v1/order", order(f.Status.MarketID, "BUY", "YES", 45, 3), http.StatusCreated, nil)
	w.beats[owner]()
	moved := w.eventually(f, "moved to another shard", func(m *pmxv1.Market) bool {
		return scheduled(m) && m.Status.Shard != owner && m.Status.Epoch > f.Status.Epoch
	})
	_, err := w.shards[owner].Place(context.Background(), exchange.PlaceRequest{Account: aliceID, Market: uuid.MustParse(f.Status.MarketID),
		Side: engine.Buy, Outcome: engine.Yes, Price: 46, Quantity: 1})
	if err == nil || !strings.Contains(err.Error(), "does not own") {
		t.Fatalf("the shard that lost the market placed an order: %v", err)
	}
	var placed apiserver.PlacedOrder
	w.call(bob, "POST", "/api/v1/order", order(f.Status.MarketID, "BUY", "NO", 55, 3), http.StatusCreated, &placed)
	if placed.FilledQuantity != 3 {
		t.Fatalf("on the new shard %s, the resting order was not there to trade with: %+v", moved.Status.Shard, placed)
	}
}

// TestOperatorWaitsForShard checks that the operator never carries a lifecycle change out
// itself: with no shard live, a Market asked to close stays OPEN, owned as before, its Ready
// condition False with NoLiveShard and a WaitingForShard event; once its shard is live again, that
// shard closes it and then resolves it, the market keeping its owner and epoch throughout.
func TestOperatorWaitsForShard(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	m := w.eventually(w.market("patient", nil), "scheduled", scheduled)
	id := uuid.MustParse(m.Status.MarketID)
	for _, stop := range w.beats {
		stop()
	}
	if err := poll.Until(ctx, 10*time.Second, func(ctx context.Context) (bool, error) {
		live, err := w.st.LiveShards(ctx, time.Second)
		return len(live) == 0, err
	}); err != nil {
		t.Fatalf("shards still live after their heartbeats stopped: %v", err)
	}
	// The heartbeats lapse one after the other, and the operator may have moved the market to the
	// shard that lapsed last: its owner is the one it has now that none is live.
	before, err := w.st.Owner(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	owner := before.Shard
	if owner == "" {
		t.Fatal("the market lost its owner when the shards' heartbeats lapsed; it should keep one until a shard is live to take it")
	}

	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Closed = true
	if err := w.k8s.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	w.eventually(m, "waiting for a shard", func(m *pmxv1.Market) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, string(pmxv1.MarketReady))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(pmxv1.ReasonNoLiveShard) &&
			m.Status.ObservedGeneration == m.Generation
	})
	if err := poll.Until(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := w.k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == string(reasonWaitingForShard) && e.Regarding.Name == m.Name {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("no %s event: %v", reasonWaitingForShard, err)
	}
	row, err := w.st.Owner(ctx, id)
	if err != nil || row.Status != domain.MarketOpen || row.Shard != owner || row.Epoch != before.Epoch {
		t.Fatalf("while no shard is live: %+v (%v), want OPEN and owned by %s at epoch %d", row, err, owner, before.Epoch)
	}

	w.beat(owner) // registering again fences the shard's old epoch; the market stays its own
	w.eventually(m, "closed by its shard", func(m *pmxv1.Market) bool {
		return m.Status.Phase == pmxv1.MarketPhaseClosed && meta.IsStatusConditionTrue(m.Status.Conditions, string(pmxv1.MarketReady))
	})
	closed, err := w.st.Owner(ctx, id)
	if err != nil || closed.Shard != owner {
		t.Fatalf("after closing: %+v (%v), want owned by %s", closed, err, owner)
	}
	patch = client.MergeFrom(m.DeepCopy())
	m.Spec.Resolution = pmxv1.ResolutionNo
	if err := w.k8s.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	w.eventually(m, "resolved", func(m *pmxv1.Market) bool { return m.Status.Phase == pmxv1.MarketPhaseResolved })
	if o, err := w.st.Owner(ctx, id); err != nil || o.Shard != owner || o.Epoch != closed.Epoch {
		t.Fatalf("after resolving: %+v (%v), want %s at epoch %d as when closed", o, err, owner, closed.Epoch)
	}
}

// TestConfigManifests applies config/ — the CRD, the operator's RBAC and its Deployment — to a real
// apiserver with a server-side dry run, so that the apiserver validates every object.
func TestConfigManifests(t *testing.T) {
	env := k8stest.Start(t)
	root := k8stest.RepoRoot(t)
	env.Kubectl(t, "apply", "-f", root+"/config/manager/namespace.yaml")
	out := env.Kubectl(t, "apply", "--server-side", "--dry-run=server", "-f", root+"/config/rbac", "-f", root+"/config/manager/manager.yaml")
	for _, want := range []string{"clusterrole.rbac.authorization.k8s.io/pmx-operator", "serviceaccount/pmx-operator",
		"clusterrolebinding.rbac.authorization.k8s.io/pmx-operator", "deployment.apps/pmx-operator",
		"role.rbac.authorization.k8s.io/pmx-operator", "rolebinding.rbac.authorization.k8s.io/pmx-operator"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply did not accept %s:\n%s", want, out)
		}
	}
}

package exchangetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/domain"
	"github.com/pmx-dev/pmx/internal/apitest"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/store"
)

// cluster is the distributed exchange as separate processes on loopback: a real kube-apiserver
// and etcd, Postgres, pmx operator, two pmx shard and two pmx api.
type cluster struct {
	env    *k8stest.Env
	store  *store.Store
	shards map[string]*Process
	apis   []string // base URLs of the api replicas
	// apiMetrics and shardMetrics are where the api replicas (in the order of apis) and the
	// shards serve /metrics.
	apiMetrics   []string
	shardMetrics map[string]string
}

const (
	clusterAdminToken    = "distributed-admin-token"
	clusterInternalToken = "distributed-internal-token"
)

var (
	shardLine    = regexp.MustCompile(`pmx shard \S+ is running on (\S+)`)
	operatorLine = regexp.MustCompile(`msg="starting the (operator)"`)
)

func startCluster(t *testing.T) *cluster {
	env := k8stest.Start(t)
	dbURL := pgtest.NewDatabase(t, pgtest.Shared(t))
	bin := BuildPMX(t)
	st, err := store.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	c := &cluster{env: env, store: st, shards: map[string]*Process{}, shardMetrics: map[string]string{}}

	kubeconfig := "KUBECONFIG=" + env.Kubeconfig
	StartProcessEnv(t, operatorLine, []string{kubeconfig}, bin, "operator", "--database-url", dbURL,
		"--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--name", "operator-test", "--shard-ttl", "2s", "--resync", "250ms", "--log-level", "info")
	for _, name := range []string{"shard-a", "shard-b"} {
		p, _ := StartProcess(t, shardLine, bin, "shard", "--name", name, "--addr", "127.0.0.1:0",
			"--metrics-addr", "127.0.0.1:0", "--database-url", dbURL, "--internal-token", clusterInternalToken,
			"--log-level", "warn", "--max-open-orders", strconv.Itoa(SuiteMaxOpenOrders))
		c.shards[name] = p
		c.shardMetrics[name] = p.Line(metricsLine)
	}
	for range 2 {
		p, base := StartProcess(t, apiLine, bin, append([]string{"api", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--database-url", dbURL, "--admin-token", clusterAdminToken, "--internal-token", clusterInternalToken,
			"--log-level", "warn"}, SuiteLimitFlags()...)...)
		WaitReady(t, base+"/readyz")
		c.apis = append(c.apis, base)
		c.apiMetrics = append(c.apiMetrics, p.Line(metricsLine))
	}
	return c
}

// target is the cluster as the suite sees it, through api replica i.
func (c *cluster) target(t *testing.T, i int) *Target {
	tg := &Target{URL: c.apis[i], MetricsURL: c.apiMetrics[i], AdminToken: clusterAdminToken, Store: c.store,
		Validator: apitest.NewValidator(t), Feed: apitest.NewAsyncValidator(t), HTTP: &http.Client{Timeout: time.Minute}}
	tg.Markets = &KubeMarkets{Client: c.env.Client, Store: c.store, Namespace: "default",
		Scheduled: func(_ context.Context, m store.Market) bool {
			return m.Shard != nil && strings.HasPrefix(*m.Shard, "shard-")
		}}
	return tg
}

// TestDistributed runs the distributed exchange as separate processes: the contract suite through
// one api replica, then Market resources applied with kubectl, trading through both replicas, a
// shard killed under load, and a resolution patched with kubectl.
func TestDistributed(t *testing.T) {
	c := startCluster(t)
	t.Run("Suite", func(t *testing.T) { RunSuite(t, c.target(t, 0)) })
	t.Run("RateLimitAcrossReplicas", func(t *testing.T) { CheckRateAcrossReplicas(t, []*Target{c.target(t, 0), c.target(t, 1)}) })
	t.Run("ShardMetrics", func(t *testing.T) { testShardMetrics(t, c) })
	t.Run("Failover", func(t *testing.T) { testFailover(t, c) })
}

// testShardMetrics checks that each shard serves its group commit's metrics on its metrics
// listener; the suite has placed orders on both by now.
func testShardMetrics(t *testing.T, c *cluster) {
	for name, url := range c.shardMetrics {
		resp, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(raw), "pmx_shard_batches_total") {
			t.Errorf("%s: GET %s/metrics: %d %.300s (%v)", name, url, resp.StatusCode, raw, err)
		}
	}
}

func testFailover(t *testing.T, c *cluster) {
	tg := c.target(t, 1)
	repo := k8stest.RepoRoot(t)
	c.env.Kubectl(t, "apply", "-f", filepath.Join(repo, "config", "samples"))
	samples := map[string]uuid.UUID{}
	scheduled := func(context.Context) (bool, error) {
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Status   struct{ MarketID, Shard, Phase string }
			}
		}
		if err := json.Unmarshal([]byte(c.env.Kubectl(t, "get", "mkt", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Items {
			if strings.HasPrefix(m.Status.Shard, "shard-") && m.Status.Phase == "OPEN" && !strings.HasPrefix(m.Metadata.Name, "suite-") {
				samples[m.Metadata.Name] = uuid.MustParse(m.Status.MarketID)
			}
		}
		return len(samples) >= 3, nil
	}
	if err := poll.Until(t.Context(), 30*time.Second, scheduled); err != nil {
		t.Fatalf("samples not scheduled: %s", c.env.Kubectl(t, "get", "mkt", "-o", "wide"))
	}
	t.Logf("kubectl get mkt:\n%s", c.env.Kubectl(t, "get", "mkt"))
	owners := map[string]bool{}
	var markets []uuid.UUID
	for _, id := range samples {
		o, err := c.store.Owner(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		owners[o.Shard] = true
		markets = append(markets, id)
	}
	if len(owners) != 2 {
		t.Errorf("the three samples sit on %v, not spread over both shards", owners)
	}

	// Bots trade on the samples through both replicas.
	replicas := []*Target{c.target(t, 0), tg}
	bots := make([]*Client, 8)
	for i := range bots {
		bots[i] = tg.NewAccount(t, "failover")
		bots[i].T = replicas[i%2]
	}
	victim := markets[0]
	o, err := c.store.Owner(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	// A client on each front replica follows the victim's book over the WebSocket feed
	// throughout: across the kill and the move its sequence must stay gapless, and both clients
	// must see the same events.
	var watchers []*LiveFollower
	for _, r := range replicas {
		w := tg.NewAccount(t, "watch")
		w.T = r
		watchers = append(watchers, FollowLive(w, victim))
	}
	var (
		mu        sync.Mutex
		acked     = map[uuid.UUID]bool{}
		killedAt  time.Time
		recovered time.Time
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, bot := range bots {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				m := markets[n%len(markets)]
				sent := time.Now()
				status, raw, err := post(bot.T, bot, OrderBody(m, "BUY", []string{"YES", "NO"}[(i+n)%2], 40+(i*7+n*3)%21, 1+n%4))
				if err != nil || status != http.StatusCreated {
					continue // 503 while the market moves: the bot tries again
				}
				var placed apiserver.PlacedOrder
				if json.Unmarshal(raw, &placed) != nil {
					continue
				}
				mu.Lock()
				acked[placed.ID] = true
				// Recovery is an order sent after the kill, to the killed shard's market.
				if m == victim && !killedAt.IsZero() && sent.After(killedAt) && recovered.IsZero() {
					recovered = time.Now()
				}
				mu.Unlock()
			}
		})
	}
	poll.Wait(t, 30*time.Second, "400 acknowledged orders", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 400 })
	// A dead-man switch whose deadline passes while its market's shard is dead, or the market
	// moving, still fires: the shard that takes the market over finds it in Postgres.
	deadman := tg.NewAccount(t, "deadman")
	resting := deadman.Place(t, victim, "BUY", "YES", 2, 1)
	deadman.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 5}, http.StatusOK, nil)
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.shards[o.Shard].Kill()
	poll.Wait(t, 30*time.Second, "trading on the killed shard's market to resume", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !recovered.IsZero()
	})
	close(stop)
	wg.Wait()
	failover := recovered.Sub(killedAt)
	moved, err := c.store.Owner(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s under load; market %s moved to %s (epoch %d); the first order after the kill was acknowledged %v later",
		o.Shard, victim, moved.Shard, moved.Epoch, failover.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "failover: %v from SIGKILL of %s to the next acknowledged order on its market\n", failover.Round(time.Millisecond), o.Shard)
	if moved.Shard == o.Shard || moved.Epoch <= o.Epoch {
		t.Fatalf("market still owned by %s at epoch %d", moved.Shard, moved.Epoch)
	}
	poll.Wait(t, 30*time.Second, "every market of the killed shard to move", func() bool {
		for _, id := range markets {
			if owner, err := c.store.Owner(context.Background(), id); err != nil || owner.Shard == o.Shard {
				return false
			}
		}
		return true
	})
	for id := range acked {
		if _, err := c.store.Order(context.Background(), id); err != nil {
			t.Fatalf("acknowledged order %s is gone: %v", id, err)
		}
	}
	poll.Wait(t, 30*time.Second, "the dead-man switch to cancel its order on the killed shard's market", func() bool {
		o, err := c.store.Order(context.Background(), resting.ID)
		return err == nil && !o.Status.Resting()
	})
	if o, err := c.store.Order(context.Background(), resting.ID); err != nil || o.CancelReason == nil || *o.CancelReason != "HEARTBEAT" {
		t.Errorf("the dead-man switch's order after the failover: %+v, %v", o, err)
	}
	snap := bots[0].Book(t, victim)
	poll.Wait(t, 30*time.Second, "both feed clients to reach the book's seq", func() bool {
		return watchers[0].Seq() >= snap.Seq && watchers[1].Seq() >= snap.Seq
	})
	var followed []*BookFollower
	for _, w := range watchers {
		b := w.Stop(t)
		b.Equal(t, snap)
		followed = append(followed, b)
	}
	same := 0
	for seq, e := range followed[0].Log {
		if other, ok := followed[1].Log[seq]; ok {
			same++
			if other != e {
				t.Errorf("seq %d: one replica's client got %+v, the other's %+v", seq, e, other)
			}
		}
	}
	if same < 100 {
		t.Errorf("the two feed clients share only %d events of %d and %d", same, len(followed[0].Log), len(followed[1].Log))
	}
	t.Logf("two feed clients, one per front replica, followed %d and %d events of the victim across the kill (%d in common) to seq %d",
		followed[0].Events, followed[1].Events, same, snap.Seq)
	CheckInvariants(t, tg)
	CheckBooksOverAPI(t, tg, bots[0], markets)

	// A resolution patched with kubectl pays every YES share 100. Trading has stopped, and the
	// orders resting on the market are cancelled, releasing their locks: cash plus locked cash
	// grows by exactly the payout.
	before := map[*Client]int64{}
	for _, b := range bots {
		avail, locked := b.Balance(t)
		before[b] = avail + locked + 100*b.Positions(t)[victim.String()+"/YES"].Quantity
	}
	var name string
	for n, id := range samples {
		if id == victim {
			name = n
		}
	}
	c.env.Kubectl(t, "patch", "mkt", name, "--type", "merge", "-p", `{"spec":{"resolution":"YES"}}`)
	poll.Wait(t, 30*time.Second, "the market to resolve", func() bool {
		m, err := c.store.Market(context.Background(), victim)
		return err == nil && m.Status == domain.MarketResolved
	})
	for _, b := range bots {
		// Orders on the other markets still rest: count locked cash back in.
		avail, locked := b.Balance(t)
		if got := avail + locked; got != before[b] {
			t.Errorf("%s: %d after resolution, want %d", b.Name, got, before[b])
		}
		if _, ok := b.Positions(t)[victim.String()+"/YES"]; ok {
			t.Errorf("%s still holds YES shares of a resolved market", b.Name)
		}
	}
	if out := c.env.Kubectl(t, "get", "mkt", name); !strings.Contains(out, "RESOLVED") {
		t.Errorf("kubectl get mkt %s:\n%s", name, out)
	}
	CheckInvariants(t, tg)
}

package exchangetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/store"
)

// TestDistributedRebalance runs `pmx operator` with rebalancing on, as a process, against a real
// kube-apiserver and Postgres, with `pmx shard` processes: six Markets of their own and an Event
// of two outcomes spread over shard-a and shard-b. When a third shard process starts, the operator
// moves markets onto it until it serves its share (each shard 2 or 3 markets), the event's two
// markets always on one shard; every move is a Rebalanced event on the Market saying shard-c
// joined; shard-c's process serves the books it was given; and every shard reports its load.
func TestDistributedRebalance(t *testing.T) {
	env := k8stest.Start(t)
	db := pgtest.NewDatabase(t, pgtest.Shared(t))
	bin := BuildPMX(t)
	ctx := t.Context()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	shard := func(name string) {
		StartProcess(t, shardLine, bin, "shard", "--name", name, "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--database-url", db, "--internal-token", clusterInternalToken, "--log-level", "warn")
	}
	shard("shard-a")
	shard("shard-b")
	StartProcessEnv(t, operatorLine, []string{"KUBECONFIG=" + env.Kubeconfig, "PMX_INTERNAL_TOKEN=" + clusterInternalToken},
		bin, "operator", "--database-url", db, "--leader-elect=false", "--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--shard-ttl", "2s", "--resync", "250ms", "--log-level", "info",
		"--rebalance-interval", "300ms", "--rebalance-cooldown", "1s", "--rebalance-max-fraction", "0.5")

	for i := range 6 {
		m := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spread-%d", i), Namespace: "default"},
			Spec: pmxv1.MarketSpec{Question: fmt.Sprintf("Will market %d move?", i), Category: "test"}}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	ev := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "cup", Namespace: "default"},
		Spec: pmxv1.EventSpec{Question: "Who wins the cup?", Category: "test",
			Outcomes: []pmxv1.EventOutcome{{Key: "home", Label: "Home"}, {Key: "away", Label: "Away"}}}}
	if err := env.Client.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}

	// shardsOf waits until the eight Markets show their shards (kubectl get mkt's Shard column) and
	// ok holds of the count per shard.
	shardsOf := func(what string, ok func(map[string]int) bool) map[string]string {
		t.Helper()
		var on map[string]string
		var count map[string]int
		if err := poll.Until(ctx, time.Minute, func(ctx context.Context) (bool, error) {
			var ms pmxv1.MarketList
			if err := env.Client.List(ctx, &ms, client.InNamespace("default")); err != nil {
				return false, err
			}
			on, count = map[string]string{}, map[string]int{}
			for _, m := range ms.Items {
				on[m.Name] = m.Status.Shard
				count[m.Status.Shard]++
			}
			return len(ms.Items) == 8 && count[""] == 0 && ok(count), nil
		}); err != nil {
			t.Fatalf("markets per shard %v, want %s (%v)", count, what, err)
		}
		return on
	}
	shardsOf("all on shard-a and shard-b", func(c map[string]int) bool { return c["shard-a"]+c["shard-b"] == 8 })

	shard("shard-c")
	on := shardsOf("2 or 3 on each of three shards", func(c map[string]int) bool {
		for _, s := range []string{"shard-a", "shard-b", "shard-c"} {
			if c[s] < 2 || c[s] > 3 {
				return false
			}
		}
		return true
	})
	if on["cup-home"] != on["cup-away"] {
		t.Errorf("the event's markets are on %s and %s, want one shard", on["cup-home"], on["cup-away"])
	}

	// Every move is a Rebalanced event on its Market. The operator's recorder sends events on its
	// own, a moment after the move it records: wait for those of the markets now on shard-c (a busy
	// machine has seen them land after the markets' status), then judge what they say.
	movedTo, notes := map[string]bool{}, map[string]eventsv1.Event{} // notes by the Event's name
	if err := poll.Until(ctx, time.Minute, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "Rebalanced" && e.Regarding.Kind == "Market" {
				movedTo[e.Regarding.Name], notes[e.Name] = true, e
			}
		}
		for name, s := range on {
			if s == "shard-c" && !movedTo[name] {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Logf("waiting for the Rebalanced events of the markets on shard-c: %v", err)
	}
	for _, e := range notes {
		if !strings.Contains(e.Note, "to shard shard-c") || !strings.Contains(e.Note, "shard shard-c joined") {
			t.Errorf("%s: %q, want a move to shard-c because it joined", e.Regarding.Name, e.Note)
		}
	}
	router := &shardclient.Router{Store: st, Token: clusterInternalToken}
	served := 0
	for name, s := range on {
		if s != "shard-c" {
			continue
		}
		if !movedTo[name] {
			t.Errorf("%s is on shard-c with no Rebalanced event", name)
		}
		row, err := st.MarketByName(ctx, "default/"+name)
		if err != nil {
			t.Fatal(err)
		}
		// The Market's status follows a move at its next reconcile, a moment after the new owner
		// serves the market.
		if err := poll.Until(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
			_, err := router.OrderBook(ctx, row.ID)
			return err == nil, nil
		}); err != nil {
			t.Errorf("%s: shard-c does not serve its book: %v", name, err)
		}
		served++
	}
	if served < 2 {
		t.Errorf("shard-c serves %d markets, want at least 2", served)
	}
	// Every shard process reports its markets' load (none traded: the spread stays by count).
	loads, err := st.ShardLoads(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"shard-a", "shard-b", "shard-c"} {
		if _, ok := loads[s]; !ok {
			t.Errorf("%s reports no load (%v)", s, loads)
		}
	}
}

package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// budgeted are the components the chart gives a PodDisruptionBudget (maxUnavailable 1 of two pods
// by default): a drain that evicts both of a component's pods at once must be refused one of them.
var budgeted = []string{"api", "shard"}

// testDrain drains the node's pmx pods — both fronts, both shards and the operator — through the
// Eviction API while bots trade through the API Service, as `kubectl drain` does: every pod's
// eviction asked for at once, and one the disruption budgets refuse (429) asked for again until
// they allow it. The node stays schedulable (it is the only one), so each evicted pod comes back
// on it. The budgets must have refused an eviction of each component's second pod; orders are
// acknowledged while the pods go and come back; none acknowledged is lost; the invariants hold.
// Postgres is left alone: the drain is of pmx's own pods.
func (c *cluster) testDrain(t *testing.T, tg *exchangetest.Target, image string) {
	markets := []uuid.UUID{tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID, tg.NewMarket(t, nil).ID}
	load, rec, bots := startLoad(t, tg, "drain", markets)
	defer load.Stop()

	var drained []pod
	for _, p := range c.pods(t) {
		if component(p) != "postgres" {
			drained = append(drained, p)
		}
	}
	began := time.Now()
	var (
		mu      sync.Mutex
		refused = map[string]int{} // 429s by component
		wg      sync.WaitGroup
	)
	for _, p := range drained {
		wg.Go(func() {
			n := c.evict(t, p, 4*time.Minute)
			mu.Lock()
			refused[component(p)] += n
			mu.Unlock()
		})
	}
	wg.Wait()
	ended := time.Now()
	if t.Failed() {
		return
	}
	poll.Wait(t, 2*time.Minute, "an order sent after the drain to be acknowledged", func() bool {
		return load.Sent(ended, time.Now().Add(time.Hour)) > 0
	})
	load.Stop()
	during := load.Sent(began, ended)
	t.Logf("drained %d pmx pods under load in %v; the budgets refused %v; %d orders sent meanwhile were acknowledged, %d in all",
		len(drained), ended.Sub(began).Round(time.Second), refused, during, load.Acked())
	for _, comp := range budgeted {
		if refused[comp] == 0 {
			t.Errorf("no eviction of a %s pod was refused though both were asked for at once: its PodDisruptionBudget is not in force", comp)
		}
	}
	if during == 0 {
		t.Errorf("no order sent during the drain was acknowledged")
	}
	load.CheckKept(t, tg)
	c.checkPods(t, image)
	for _, p := range c.pods(t) {
		for _, old := range drained {
			if p.Metadata.UID == old.Metadata.UID {
				t.Errorf("pod %s was evicted yet is still there", p.Metadata.Name)
			}
		}
	}
	exchangetest.CheckInvariants(t, tg)
	exchangetest.CheckHistory(t, tg, rec.History())
	exchangetest.CheckBooksOverAPI(t, tg, bots[0], markets)
}

// evict asks the Eviction API to evict p, again while a disruption budget refuses (429 Too Many
// Requests, as `kubectl drain` retries it), then waits until p is gone; it returns how many times
// p's eviction was refused, and fails t when p is not gone within timeout.
func (c *cluster) evict(t *testing.T, p pod, timeout time.Duration) int {
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Metadata.Name, Namespace: namespace}}
	// The UID precondition keeps a retry from evicting a replacement of the same name (a
	// StatefulSet's pod) that the drain has not seen.
	uid := types.UID(p.Metadata.UID)
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Metadata.Name, Namespace: namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}}
	refusals := 0
	deadline := time.Now().Add(timeout)
	err := poll.Until(t.Context(), timeout, func(ctx context.Context) (bool, error) {
		err := c.Client.SubResource("eviction").Create(ctx, target, eviction)
		switch {
		case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err): // evicted, or already gone
			return true, nil
		case apierrors.IsTooManyRequests(err):
			refusals++
			return false, nil
		default:
			return false, fmt.Errorf("evicting pod %s: %w", p.Metadata.Name, err)
		}
	})
	if err != nil {
		t.Errorf("pod %s (refused %d times): %v", p.Metadata.Name, refusals, err)
		return refusals
	}
	gone := func(ctx context.Context) (bool, error) {
		var now corev1.Pod
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: p.Metadata.Name}, &now)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && string(now.UID) != p.Metadata.UID, err
	}
	if err := poll.Until(t.Context(), max(time.Until(deadline), time.Second), gone); err != nil {
		t.Errorf("pod %s, evicted, is not gone: %v", p.Metadata.Name, err)
	}
	return refusals
}

package exchangetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/engine"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/records"
)

// KubeEvents drives events through Event resources, as a platform team does with kubectl: the
// operator records the event, makes one Market per outcome on one shard and carries out each
// change of the Event's spec on all of them; each call waits until Postgres shows it done, for
// the event and every one of its markets.
type KubeEvents struct {
	// Markets is the cluster's KubeMarkets: its client, store, namespace and Scheduled.
	Markets *KubeMarkets
	n       int
}

// Create applies an Event and waits until it and every outcome's market are OPEN and served.
func (k *KubeEvents) Create(t testing.TB, keys ...string) apiserver.Event {
	t.Helper()
	k.n++
	ev := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("suite-ev-%d-%d", time.Now().UnixNano()%1e6, k.n), Namespace: k.Markets.Namespace},
		Spec: pmxv1.EventSpec{Question: eventQuestion, Category: "test"}}
	for _, key := range keys {
		ev.Spec.Outcomes = append(ev.Spec.Outcomes, pmxv1.EventOutcome{Key: key, Label: "Outcome " + key})
	}
	if err := k.Markets.Client.Create(context.Background(), ev); err != nil {
		t.Fatalf("creating Event %s: %v", ev.Name, err)
	}
	var id uuid.UUID
	k.Markets.wait(t, "the operator records Event "+ev.Name, func(ctx context.Context) bool {
		var got pmxv1.Event
		if err := k.Markets.Client.Get(ctx, client.ObjectKeyFromObject(ev), &got); err != nil || got.Status.EventID == "" {
			return false
		}
		id = uuid.MustParse(got.Status.EventID)
		return true
	})
	return k.until(t, id, domain.MarketOpen)
}

// patch edits the spec of the Event behind an event id.
func (k *KubeEvents) patch(t testing.TB, id uuid.UUID, edit func(*pmxv1.EventSpec)) {
	t.Helper()
	e, err := k.Markets.Store.Event(context.Background(), id)
	if err != nil {
		t.Fatalf("event %s: %v", id, err)
	}
	key := client.ObjectKey{Namespace: k.Markets.Namespace, Name: strings.TrimPrefix(e.Name, k.Markets.Namespace+"/")}
	var ev pmxv1.Event
	if err := k.Markets.Client.Get(context.Background(), key, &ev); err != nil {
		t.Fatalf("event %s has no Event resource %s: %v", id, key, err)
	}
	before := ev.DeepCopy()
	edit(&ev.Spec)
	if err := k.Markets.Client.Patch(context.Background(), &ev, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching Event %s: %v", key.Name, err)
	}
}

// Pause sets spec.paused and waits until the operator has written it to Postgres.
func (k *KubeEvents) Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Event {
	t.Helper()
	var e records.Event
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Paused = paused })
	k.Markets.wait(t, fmt.Sprintf("event %s is paused %v", id, paused), func(ctx context.Context) bool {
		var err error
		e, err = k.Markets.Store.Event(ctx, id)
		return err == nil && e.Paused == paused
	})
	return apiserver.EventOf(&e)
}

// SetFees sets spec.fees (nil removes it) and waits until the operator has written the event's
// schedule to Postgres, which its markets without one of their own then carry (an event's row
// shows none as the zero schedule).
func (k *KubeEvents) SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Event {
	t.Helper()
	spec := feeSchedule(fees)
	var want engine.Fees
	if spec != nil {
		want = *marketspec.FeesOf(spec)
	}
	var e records.Event
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Fees = spec })
	k.Markets.wait(t, fmt.Sprintf("event %s is under fee schedule %s", id, marketspec.DescribeFees(marketspec.FeesOf(spec))), func(ctx context.Context) bool {
		var err error
		e, err = k.Markets.Store.Event(ctx, id)
		return err == nil && e.Fees == want
	})
	return apiserver.EventOf(&e)
}

func (k *KubeEvents) Close(t testing.TB, id uuid.UUID) apiserver.Event {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Closed = true })
	return k.until(t, id, domain.MarketClosed)
}

func (k *KubeEvents) Reopen(t testing.TB, id uuid.UUID) apiserver.Event {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Closed = false })
	return k.until(t, id, domain.MarketOpen)
}

func (k *KubeEvents) Resolve(t testing.TB, id uuid.UUID, key string) apiserver.Event {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Resolution = key })
	return k.until(t, id, domain.MarketResolved)
}

func (k *KubeEvents) Cancel(t testing.TB, id uuid.UUID) apiserver.Event {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.EventSpec) { s.Resolution = pmxv1.EventResolutionCanceled })
	return k.until(t, id, domain.MarketCanceled)
}

// until polls the event and its markets in Postgres until all of them are in status (and, when
// OPEN, every market is served by a shard).
func (k *KubeEvents) until(t testing.TB, id uuid.UUID, status domain.MarketStatus) apiserver.Event {
	t.Helper()
	var e records.Event
	k.Markets.wait(t, fmt.Sprintf("event %s and its markets are %s", id, status), func(ctx context.Context) bool {
		var err error
		if e, err = k.Markets.Store.Event(ctx, id); err != nil || e.Status != status {
			return false
		}
		for _, o := range e.Outcomes {
			m, err := k.Markets.Store.Market(ctx, o.MarketID)
			if err != nil || m.Status != status || status == domain.MarketOpen && !k.Markets.Scheduled(ctx, m) {
				return false
			}
		}
		return true
	})
	return apiserver.EventOf(&e)
}

package exchangetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/store"
)

// KubeMarkets drives markets through Market resources, as a platform team does with kubectl: the
// operator carries each change out, and each call waits until Postgres shows it done.
type KubeMarkets struct {
	Client    client.Client
	Store     *store.Store
	Namespace string
	// Scheduled reports whether a market's owner is a live shard that serves it; Create and
	// Reopen wait for it.
	Scheduled func(ctx context.Context, m records.Market) bool
	n         int
}

// Create applies a Market and waits until it is OPEN and served by a shard.
func (k *KubeMarkets) Create(t testing.TB, fields map[string]any) apiserver.Market {
	t.Helper()
	f := marketFields(fields)
	k.n++
	mkt := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("suite-%d-%d", time.Now().UnixNano()%1e6, k.n), Namespace: k.Namespace}}
	str := func(key string) string { s, _ := f[key].(string); return s }
	when := func(key string) *metav1.Time {
		s := str(key)
		if s == "" {
			return nil
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		mt := metav1.NewTime(tm)
		return &mt
	}
	mkt.Spec = pmxv1.MarketSpec{Question: str("question"), Description: str("description"), Category: str("category"),
		URL: str("url"), LabelA: str("labelA"), LabelB: str("labelB"), ClosesAt: when("closesAt"), ResolvesAt: when("resolvesAt")}
	if err := k.Client.Create(context.Background(), mkt); err != nil {
		t.Fatalf("creating Market %s: %v", mkt.Name, err)
	}
	var id uuid.UUID
	k.wait(t, "the operator records Market "+mkt.Name, func(ctx context.Context) bool {
		var got pmxv1.Market
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(mkt), &got); err != nil || got.Status.MarketID == "" {
			return false
		}
		id = uuid.MustParse(got.Status.MarketID)
		return true
	})
	return k.until(t, id, "OPEN and served", func(ctx context.Context, m records.Market) bool {
		return m.Status == domain.MarketOpen && k.Scheduled(ctx, m)
	})
}

// patch edits the spec of the Market behind a market id.
func (k *KubeMarkets) patch(t testing.TB, id uuid.UUID, edit func(*pmxv1.MarketSpec)) {
	t.Helper()
	m, err := k.Store.Market(context.Background(), id)
	if err != nil || m.Name == nil {
		t.Fatalf("market %s has no Market resource: %v", id, err)
	}
	ns, name := k.Namespace, *m.Name
	if i := len(k.Namespace); i > 0 && len(name) > i && name[:i+1] == k.Namespace+"/" {
		name = name[i+1:]
	}
	var mkt pmxv1.Market
	if err := k.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &mkt); err != nil {
		t.Fatal(err)
	}
	before := mkt.DeepCopy()
	edit(&mkt.Spec)
	if err := k.Client.Patch(context.Background(), &mkt, client.MergeFrom(before)); err != nil {
		t.Fatalf("patching Market %s: %v", name, err)
	}
}

// Pause sets spec.paused and waits until the operator has written it to Postgres, where every
// shard checks placements against it, and shown it in the Halted condition.
func (k *KubeMarkets) Pause(t testing.TB, id uuid.UUID, paused bool) apiserver.Market {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Paused = paused })
	return k.until(t, id, fmt.Sprintf("paused %v", paused), func(_ context.Context, m records.Market) bool { return m.Paused == paused })
}

// SetFees sets spec.fees (nil removes it) and waits until the operator has written the market's
// own schedule to Postgres, where every shard reads it with the halts for the orders placed next.
func (k *KubeMarkets) SetFees(t testing.TB, id uuid.UUID, fees *apiserver.Fees) apiserver.Market {
	t.Helper()
	spec := feeSchedule(fees)
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Fees = spec })
	return k.until(t, id, "under fee schedule "+marketspec.DescribeFees(marketspec.FeesOf(spec)), func(_ context.Context, m records.Market) bool {
		if spec == nil {
			return !m.OwnFees
		}
		return m.OwnFees && m.Fees == *marketspec.FeesOf(spec)
	})
}

// feeSchedule is spec.fees for the API's shape of a schedule; nil for nil.
func feeSchedule(f *apiserver.Fees) *pmxv1.FeeSchedule {
	if f == nil {
		return nil
	}
	return &pmxv1.FeeSchedule{TakerBps: int32(f.TakerBps), MakerBps: int32(f.MakerBps)}
}

func (k *KubeMarkets) Close(t testing.TB, id uuid.UUID) apiserver.Market {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Closed = true })
	return k.until(t, id, "CLOSED", func(_ context.Context, m records.Market) bool { return m.Status == domain.MarketClosed })
}

func (k *KubeMarkets) Reopen(t testing.TB, id uuid.UUID) apiserver.Market {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Closed = false })
	return k.until(t, id, "OPEN and served", func(ctx context.Context, m records.Market) bool {
		return m.Status == domain.MarketOpen && k.Scheduled(ctx, m)
	})
}

func (k *KubeMarkets) Resolve(t testing.TB, id uuid.UUID, outcome string) apiserver.Market {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Resolution = pmxv1.Resolution(outcome) })
	return k.until(t, id, "RESOLVED", func(_ context.Context, m records.Market) bool { return m.Status == domain.MarketResolved })
}

func (k *KubeMarkets) Cancel(t testing.TB, id uuid.UUID) apiserver.Market {
	t.Helper()
	k.patch(t, id, func(s *pmxv1.MarketSpec) { s.Resolution = pmxv1.ResolutionCanceled })
	return k.until(t, id, "CANCELED", func(_ context.Context, m records.Market) bool { return m.Status == domain.MarketCanceled })
}

// until polls the market in Postgres until ok holds.
func (k *KubeMarkets) until(t testing.TB, id uuid.UUID, what string, ok func(context.Context, records.Market) bool) apiserver.Market {
	t.Helper()
	var m records.Market
	k.wait(t, fmt.Sprintf("market %s is %s", id, what), func(ctx context.Context) bool {
		var err error
		m, err = k.Store.Market(ctx, id)
		return err == nil && ok(ctx, m)
	})
	return apiserver.MarketOf(&m)
}

// wait polls cond for up to 30 seconds.
func (k *KubeMarkets) wait(t testing.TB, what string, cond func(context.Context) bool) {
	t.Helper()
	err := poll.Until(context.Background(), 30*time.Second, func(ctx context.Context) (bool, error) { return cond(ctx), nil })
	if err != nil {
		t.Fatalf("timed out waiting until %s", what)
	}
}

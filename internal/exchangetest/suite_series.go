package exchangetest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/records"
	"github.com/pmx-dev/pmx/internal/series/standalone"
)

// SeriesLister lists a series of markets or of events on a target, as its mode does: a
// MarketSeries resource that the operator follows, or the standalone exchange's lister (pmx
// dev's).
type SeriesLister interface {
	// Create lists the series spec under name and waits until every instance it makes due now is
	// recorded, linked to it and, under the operator, scheduled; it returns the series' id and
	// the instances' ids (markets', or events' for a series of events), soonest to close first.
	Create(t testing.TB, name string, spec pmxv1.MarketSeriesSpec) (uuid.UUID, []uuid.UUID)
}

// series is how the suite lists series on tg: MarketSeries resources where its markets are Market
// resources, else the standalone lister on its database.
func (tg *Target) series() SeriesLister {
	if k, ok := tg.Markets.(*KubeMarkets); ok {
		return KubeSeries{Markets: k}
	}
	return DevSeries{T: tg}
}

// DevSeries lists series as pmx dev does (package standalone), on the target's database.
type DevSeries struct{ T *Target }

// Create records the series and its instances due now.
func (d DevSeries) Create(t testing.TB, name string, spec pmxv1.MarketSeriesSpec) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	ms := pmxv1.MarketSeries{Spec: spec}
	ms.Name = name
	l, err := standalone.New(d.T.Store, []pmxv1.MarketSeries{ms}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, ids, err := l.Sync(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ids[name], instanceIDs(t, d.T, ids[name])
}

// KubeSeries lists series through MarketSeries resources.
type KubeSeries struct{ Markets *KubeMarkets }

// Create applies a MarketSeries and waits until the operator records it and links every
// instance to it, each instance's markets scheduled.
func (k KubeSeries) Create(t testing.TB, name string, spec pmxv1.MarketSeriesSpec) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	ms := &pmxv1.MarketSeries{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Markets.Namespace}, Spec: spec}
	if err := k.Markets.Client.Create(context.Background(), ms); err != nil {
		t.Fatalf("creating MarketSeries %s: %v", name, err)
	}
	var id uuid.UUID
	var want int32
	k.Markets.wait(t, "the operator records MarketSeries "+name+" and lists its instances", func(ctx context.Context) bool {
		var got pmxv1.MarketSeries
		if err := k.Markets.Client.Get(ctx, client.ObjectKeyFromObject(ms), &got); err != nil || got.Status.SeriesID == "" || got.Status.Instances == 0 {
			return false
		}
		id, want = uuid.MustParse(got.Status.SeriesID), got.Status.Instances
		return true
	})
	var ids []uuid.UUID
	k.Markets.wait(t, "the instances of "+name+" are recorded, open and linked", func(ctx context.Context) bool {
		row, err := k.Markets.Store.Series(ctx, id)
		if err != nil {
			return false
		}
		instances, err := k.Markets.Store.SeriesInstances(ctx, row)
		if err != nil || len(instances) != int(want) {
			return false
		}
		ids = ids[:0]
		for _, in := range instances {
			if !k.scheduled(ctx, row.Kind, in.ID) {
				return false
			}
			ids = append(ids, in.ID)
		}
		return true
	})
	return id, ids
}

// scheduled reports whether an instance's markets (a series of markets' one, or an event's
// outcomes') are all scheduled onto a shard.
func (k KubeSeries) scheduled(ctx context.Context, kind records.SeriesKind, id uuid.UUID) bool {
	if kind != records.SeriesOfEvents {
		m, err := k.Markets.Store.Market(ctx, id)
		return err == nil && k.Markets.Scheduled(ctx, m)
	}
	e, err := k.Markets.Store.Event(ctx, id)
	if err != nil {
		return false
	}
	markets, err := k.Markets.Store.EventMarkets(ctx, e)
	if err != nil || len(markets) != len(e.Outcomes) {
		return false
	}
	for _, m := range markets {
		if !k.Markets.Scheduled(ctx, m) {
			return false
		}
	}
	return true
}

// instanceIDs are the instances the database lists as the series': markets, or events.
func instanceIDs(t testing.TB, tg *Target, id uuid.UUID) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	row, err := tg.Store.Series(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	instances, err := tg.Store.SeriesInstances(ctx, row)
	if err != nil {
		t.Fatal(err)
	}
	var out []uuid.UUID
	for _, in := range instances {
		out = append(out, in.ID)
	}
	return out
}

// testSeries lists a daily series of markets, two listed ahead, and reads it back: GET /series
// lists it (named as its markets are: under the operator, after its namespace too), GET
// /series/{id} gives its two instances soonest first, each instance's market names its series,
// and a bad or unknown id is refused. Then a daily series of events: GET /event and GET /events
// name the series of its instance, as its outcomes' markets do.
func testSeries(t *testing.T, tg *Target) {
	c := tg.NewAccount(t, "series")
	name := fmt.Sprintf("suite-ser-%d-%d", time.Now().UnixNano()%1e6, tg.names.Add(1))
	keep := int32(2)
	spec := pmxv1.MarketSeriesSpec{Schedule: "0 0 * * *", TimeZone: "UTC", KeepListed: &keep,
		ResolvesAfter: &metav1.Duration{Duration: time.Hour},
		Market:        &pmxv1.SeriesMarketTemplate{Question: "Suite series market of {date}?", Category: "test"}}
	id, markets := tg.series().Create(t, name, spec)
	if len(markets) != 2 {
		t.Fatalf("instances %v, want the two midnights to come", markets)
	}

	var page struct {
		Series     []apiserver.Series
		NextCursor *string
	}
	c.Expect(t, "GET", "/series?limit=500", nil, http.StatusOK, &page)
	i := slices.IndexFunc(page.Series, func(s apiserver.Series) bool { return s.ID == id })
	if i < 0 {
		t.Fatalf("GET /series does not list %s: %+v", id, page.Series)
	}
	if s := page.Series[i]; !strings.HasSuffix(s.Name, name) || s.Kind != "MARKET" || s.Schedule != "0 0 * * *" || s.TimeZone != "UTC" ||
		s.Question != spec.Market.Question || s.NextInstanceAt == nil {
		t.Errorf("GET /series: %+v", s)
	}

	var d apiserver.SeriesDetail
	c.Expect(t, "GET", "/series/"+id.String(), nil, http.StatusOK, &d)
	if d.ID != id || len(d.Instances) != 2 {
		t.Fatalf("GET /series/{id}: %+v", d)
	}
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	for k, in := range d.Instances {
		at := midnight.Add(time.Duration(k) * 24 * time.Hour)
		if in.MarketID == nil || *in.MarketID != markets[k] || in.Status != "OPEN" || in.ClosesAt == nil || !in.ClosesAt.Equal(at) ||
			!strings.HasSuffix(in.Name, name+"-"+at.Format("20060102-1504")) || in.EventID != nil {
			t.Errorf("instance %d: %+v, want market %s closing at %s", k, in, markets[k], at)
		}
	}
	// On the next instance's time, the series lists the one after (its nextInstanceAt).
	if d.NextInstanceAt == nil || !d.NextInstanceAt.Equal(midnight.Add(48*time.Hour)) {
		t.Errorf("nextInstanceAt %v, want %s", d.NextInstanceAt, midnight.Add(48*time.Hour))
	}

	var m apiserver.Market
	c.Expect(t, "GET", "/market?marketId="+markets[0].String(), nil, http.StatusCreated, &m)
	if m.SeriesID == nil || *m.SeriesID != id || !strings.HasSuffix(m.Question, midnight.Format("2006-01-02")+"?") {
		t.Errorf("GET /market of an instance: seriesId %v, question %q", m.SeriesID, m.Question)
	}
	var list struct{ Markets []apiserver.Market }
	c.Expect(t, "GET", "/markets?status=OPEN", nil, http.StatusOK, &list)
	if j := slices.IndexFunc(list.Markets, func(m apiserver.Market) bool { return m.ID == markets[1] }); j < 0 ||
		list.Markets[j].SeriesID == nil || *list.Markets[j].SeriesID != id {
		t.Errorf("GET /markets does not show the second instance with its series")
	}

	testEventSeries(t, tg, c, name+"-ev")

	c.ExpectError(t, "GET", "/series/42", nil, http.StatusBadRequest, "invalid_uuid")
	c.ExpectError(t, "GET", "/series/"+uuid.NewString(), nil, http.StatusNotFound, "series_not_found")
	c.ExpectError(t, "GET", "/series?limit=0", nil, http.StatusBadRequest, "out_of_range")
}

// testEventSeries lists a daily series of events, one listed ahead, under name: its instance is an
// event whose seriesId, in GET /event and GET /events, names the series, as its outcomes' markets'
// do in GET /market; GET /series/{id} lists the event as its instance.
func testEventSeries(t *testing.T, tg *Target, c *Client, name string) {
	keep := int32(1)
	spec := pmxv1.MarketSeriesSpec{Schedule: "0 0 * * *", TimeZone: "UTC", KeepListed: &keep,
		ResolvesAfter: &metav1.Duration{Duration: time.Hour},
		Event: &pmxv1.SeriesEventTemplate{Question: "Suite series event of {date}?", Category: "test",
			Outcomes: []pmxv1.EventOutcome{{Key: "up", Label: "Up"}, {Key: "down", Label: "Down"}}}}
	id, events := tg.series().Create(t, name, spec)
	if len(events) != 1 {
		t.Fatalf("instances %v, want the next midnight's event", events)
	}
	// Voided once done with, as newEvent's are: an open event keeps its markets on one shard.
	t.Cleanup(func() { tg.events().Cancel(t, events[0]) })
	var d apiserver.SeriesDetail
	c.Expect(t, "GET", "/series/"+id.String(), nil, http.StatusOK, &d)
	if d.Kind != "EVENT" || len(d.Instances) != 1 || d.Instances[0].EventID == nil || *d.Instances[0].EventID != events[0] ||
		d.Instances[0].MarketID != nil {
		t.Fatalf("GET /series/{id} of a series of events: %+v", d)
	}

	var e apiserver.EventDetail
	c.Expect(t, "GET", "/event?eventId="+events[0].String(), nil, http.StatusOK, &e)
	if e.SeriesID == nil || *e.SeriesID != id || !strings.HasSuffix(e.Name, d.Instances[0].Name) || len(e.Outcomes) != 2 {
		t.Fatalf("GET /event of an instance: seriesId %v, name %q, %d outcomes; want series %s", e.SeriesID, e.Name, len(e.Outcomes), id)
	}
	var page eventPage
	c.Expect(t, "GET", "/events?status=OPEN&limit=500", nil, http.StatusOK, &page)
	if j := slices.IndexFunc(page.Events, func(ev apiserver.Event) bool { return ev.ID == events[0] }); j < 0 ||
		page.Events[j].SeriesID == nil || *page.Events[j].SeriesID != id {
		t.Errorf("GET /events does not show the instance with its series")
	}
	for _, o := range e.Outcomes {
		var m apiserver.Market
		c.Expect(t, "GET", "/market?marketId="+o.MarketID.String(), nil, http.StatusCreated, &m)
		if m.SeriesID == nil || *m.SeriesID != id {
			t.Errorf("GET /market of outcome %s: seriesId %v, want %s", o.Key, m.SeriesID, id)
		}
	}
	// An event no series listed has none.
	other := newEvent(t, tg, "x", "y")
	var plain apiserver.EventDetail
	c.Expect(t, "GET", "/event?eventId="+other.ID.String(), nil, http.StatusOK, &plain)
	if plain.SeriesID != nil {
		t.Errorf("GET /event of an event of no series: seriesId %v", plain.SeriesID)
	}
}

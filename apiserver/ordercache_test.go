package apiserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/market/marketspec"
	"github.com/pmx-dev/pmx/internal/pgtest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/shard"
	"github.com/pmx-dev/pmx/internal/shardclient"
	"github.com/pmx-dev/pmx/internal/shardserver"
	"github.com/pmx-dev/pmx/internal/store"
)

func facts(i int) orderFacts {
	return orderFacts{market: uuid.UUID{byte(i)}, seq: int64(i)}
}

func TestOrderCachePutGet(t *testing.T) {
	c := newOrderCache(100)
	ids := make([]uuid.UUID, 50)
	for i := range ids {
		ids[i] = store.NewID()
		c.put(ids[i], facts(i))
	}
	for i, id := range ids {
		if f, ok := c.get(id); !ok || f != facts(i) {
			t.Fatalf("get(%d) = %+v, %v; want %+v", i, f, ok, facts(i))
		}
	}
	if _, ok := c.get(uuid.New()); ok {
		t.Fatal("an id never put was found")
	}
	c.forget(ids[7])
	if _, ok := c.get(ids[7]); ok {
		t.Fatal("a forgotten id was found")
	}
	if n := c.count(); n != 49 {
		t.Fatalf("count = %d, want 49", n)
	}
}

func TestOrderCacheEvictsOldest(t *testing.T) {
	c := newOrderCache(3)
	ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()}
	for i, id := range ids[:3] {
		c.put(id, facts(i))
	}
	c.put(ids[3], facts(3)) // evicts ids[0]
	if _, ok := c.get(ids[0]); ok {
		t.Fatal("the oldest order was kept at capacity")
	}
	for i, id := range ids[1:4] {
		if f, ok := c.get(id); !ok || f != facts(i+1) {
			t.Fatalf("order %d lost: %+v %v", i+1, f, ok)
		}
	}
	// A forgotten order's slot comes round like any other: the next put evicts ids[1].
	c.forget(ids[2])
	c.put(ids[4], facts(4))
	if _, ok := c.get(ids[1]); ok {
		t.Fatal("ids[1] kept")
	}
	if c.count() != 2 {
		t.Fatalf("count = %d, want 2", c.count())
	}
	for _, i := range []int{3, 4} {
		if _, ok := c.get(ids[i]); !ok {
			t.Fatalf("ids[%d] lost", i)
		}
	}
}

// The cache never holds more than its capacity, and holds the newest orders.
func TestOrderCacheBounded(t *testing.T) {
	c := newOrderCache(64)
	ids := make([]uuid.UUID, 10_000)
	for i := range ids {
		ids[i] = store.NewID()
		c.put(ids[i], facts(i))
		if n := c.count(); n > 64 {
			t.Fatalf("%d orders held, capacity 64", n)
		}
	}
	if n := c.count(); n != 64 {
		t.Fatalf("%d orders held after 10,000 puts, want 64", n)
	}
	for i, id := range ids[len(ids)-64:] {
		if f, ok := c.get(id); !ok || f != facts(len(ids)-64+i) {
			t.Fatalf("one of the 64 newest orders is missing: %+v %v", f, ok)
		}
	}
	if c.orders.Cap() != 64 {
		t.Fatalf("capacity %d, want 64", c.orders.Cap())
	}
}

func TestOrderCacheDisabled(t *testing.T) {
	for _, capacity := range []int{0, -1} {
		c := newOrderCache(capacity)
		if c != nil {
			t.Fatalf("newOrderCache(%d) = %v, want nil", capacity, c)
		}
		id := uuid.New()
		c.put(id, facts(1))
		if _, ok := c.get(id); ok || c.count() != 0 {
			t.Fatal("a disabled cache remembered an order")
		}
		c.forget(id)
	}
}

func capacity(c *orderCache) int {
	if c == nil {
		return 0
	}
	return c.orders.Cap()
}

func TestOrderCacheConcurrent(t *testing.T) {
	c := newOrderCache(1000)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				id := store.NewID()
				f := facts(g*10_000 + i)
				c.put(id, f)
				if got, ok := c.get(id); ok && got != f {
					t.Errorf("got %+v, want %+v", got, f)
				}
				if i%3 == 0 {
					c.forget(id)
				}
			}
		})
	}
	wg.Go(func() {
		for range 1000 {
			if c.count() > 1000 {
				t.Error("over capacity")
			}
		}
	})
	wg.Wait()
}

// A full cache of the default size is about 32 MB (as Config says), and puts in steady state
// allocate nothing.
func TestOrderCacheMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 1<<18 orders")
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c := newOrderCache(defaultOrderCacheSize)
	for i := range defaultOrderCacheSize {
		c.put(store.NewID(), facts(i))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	mb := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	t.Logf("a full cache of %d orders holds %.1f MB", defaultOrderCacheSize, mb)
	if mb > 40 {
		t.Errorf("a full cache holds %.1f MB", mb)
	}
	ids := make([]uuid.UUID, 1000)
	for i := range ids {
		ids[i] = store.NewID()
	}
	i := 0
	allocs := testing.AllocsPerRun(10_000, func() {
		c.put(ids[i%len(ids)], facts(i))
		i++
	})
	if allocs > 0.01 {
		t.Errorf("%.3f allocations per put in steady state", allocs)
	}
	runtime.KeepAlive(c)
}

// BenchmarkOrderCache places and cancels, as the API does, from every CPU at once (-cpu): one
// put and one get per operation, on a full cache, so that every put also evicts.
func BenchmarkOrderCache(b *testing.B) {
	c := newOrderCache(defaultOrderCacheSize)
	for i := range defaultOrderCacheSize {
		c.put(store.NewID(), facts(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ids := make([]uuid.UUID, 4096)
		for i := range ids {
			ids[i] = store.NewID()
		}
		i := 0
		for pb.Next() {
			id := ids[i%len(ids)]
			c.put(id, facts(i))
			c.get(id)
			i++
		}
	})
}

// cancelBench is an exchange with two front servers on one shard: hit remembers the orders
// placed through it, miss remembers none, as before the cache. Distributed, the servers reach the
// shard through a Router and the shard's internal API, as pmx api does.
type cancelBench struct {
	t         *testing.T
	hit, miss *Server
	hitStore  *store.Store // hit's own pool, so that its reads can be counted
	store     *store.Store
	shard     *shard.Shard
	name      string // the shard's, when distributed
	seq       int
}

const cancelTestToken = "cancel-test-token"

func newCancelBench(t *testing.T, distributed bool) *cancelBench {
	ctx := t.Context()
	url := pgtest.NewDatabase(t, pgtest.Shared(t))
	open := func() *store.Store {
		st, err := store.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	b := &cancelBench{t: t, store: open(), hitStore: open()}
	if _, _, err := b.store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if distributed {
		b.name = "shard-1"
	}
	b.shard = shard.New(shard.Config{Store: b.store, Name: b.name, Logger: log})
	t.Cleanup(b.shard.Stop)
	var exchange Exchange = b.shard
	if distributed {
		srv := httptest.NewServer(shardserver.Server{Shard: b.shard, Store: b.store, Token: "internal-token", Logger: log}.Handler())
		t.Cleanup(srv.Close)
		if _, err := b.store.Register(ctx, b.name, strings.TrimPrefix(srv.URL, "http://"), ""); err != nil {
			t.Fatal(err)
		}
		exchange = &shardclient.Router{Store: b.store, Token: "internal-token"}
	}
	b.hit = New(Config{Store: b.hitStore, Exchange: exchange, AdminToken: cancelTestToken, Logger: log})
	t.Cleanup(b.hit.Close)
	b.miss = New(Config{Store: b.store, Exchange: exchange, AdminToken: cancelTestToken, OrderCacheSize: -1, Logger: log})
	t.Cleanup(b.miss.Close)
	// Until its key listener is connected, a server reads every key from Postgres.
	poll.Wait(t, 30*time.Second, "the key listener to connect", func() bool {
		b.hit.keys.mu.Lock()
		defer b.hit.keys.mu.Unlock()
		return b.hit.keys.valid
	})
	return b
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (b *cancelBench) do(s *Server, method, path, key string, body any) (int, []byte) {
	b.t.Helper()
	var r *bytes.Reader
	if body == nil {
		r = bytes.NewReader(nil)
	} else {
		raw, err := json.Marshal(body)
		if err != nil {
			b.t.Fatal(err)
		}
		r = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, r)
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	return w.Code, w.Body.Bytes()
}

func (b *cancelBench) expect(s *Server, method, path, key string, body any, want int, out any) {
	b.t.Helper()
	status, raw := b.do(s, method, path, key, body)
	if status != want {
		b.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatal(err)
		}
	}
}

func (b *cancelBench) account() string {
	b.seq++
	var out struct{ APIKey string }
	b.expect(b.hit, "POST", "/admin/v1/accounts", cancelTestToken, map[string]any{"name": fmt.Sprintf("c%d", b.seq)}, http.StatusCreated, &out)
	return out.APIKey
}

// market opens a market: through the admin API standalone; distributed, where the admin API
// refuses (the operator's Market resources make markets there), as the operator records and
// schedules one.
func (b *cancelBench) market() uuid.UUID {
	if b.name == "" {
		var m Market
		b.expect(b.hit, "POST", "/admin/v1/markets", cancelTestToken, map[string]any{"question": "Cached?", "category": "testing"}, http.StatusCreated, &m)
		return m.ID
	}
	m, err := marketspec.Create(b.t.Context(), b.store, v1alpha1.MarketSpec{Question: "Cached?", Category: "testing", LabelA: "Yes", LabelB: "No"}, nil, time.Now())
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.store.Assign(b.t.Context(), m.ID, b.name); err != nil {
		b.t.Fatal(err)
	}
	return m.ID
}

// place places an order through the caching server.
func (b *cancelBench) place(key string, m uuid.UUID, side, outcome string, price, qty int) uuid.UUID {
	var o PlacedOrder
	b.expect(b.hit, "POST", "/api/v1/order", key, map[string]any{"marketId": m, "side": side, "outcome": outcome, "price": price, "quantity": qty}, http.StatusCreated, &o)
	return o.ID
}

// transition moves a market through its lifecycle on its shard, as the admin API does standalone
// and the operator does distributed.
func (b *cancelBench) transition(m uuid.UUID, action domain.MarketAction) {
	if err := b.shard.Transition(b.t.Context(), m, action); err != nil {
		b.t.Fatal(err)
	}
}

// normalized is an answer without what differs between two equal situations: ids and times.
func normalized(t *testing.T, raw []byte) string {
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	for _, k := range []string{"id", "marketId", "createdAt", "updatedAt"} {
		delete(v, k)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestCancelAnswersAsBefore sets up each situation twice, placing through the caching server,
// and cancels once through it and once through a server without a cache, as before: the answers
// must be the same, byte for byte but for ids and times. A cancel the cache serves reads nothing
// from Postgres. Standalone and distributed.
func TestCancelAnswersAsBefore(t *testing.T) {
	t.Run("standalone", func(t *testing.T) { testCancelAnswersAsBefore(t, newCancelBench(t, false)) })
	t.Run("distributed", func(t *testing.T) { testCancelAnswersAsBefore(t, newCancelBench(t, true)) })
}

func testCancelAnswersAsBefore(t *testing.T, b *cancelBench) {
	if capacity(b.hit.orders) != defaultOrderCacheSize || b.miss.orders != nil {
		t.Fatalf("OrderCacheSize 0 gave capacity %d, -1 gave %d", capacity(b.hit.orders), capacity(b.miss.orders))
	}
	small := New(Config{Store: b.miss.cfg.Store, OrderCacheSize: 100})
	small.Close()
	if capacity(small.orders) != 100 {
		t.Fatalf("OrderCacheSize 100 gave capacity %d", capacity(small.orders))
	}
	type situation struct {
		name   string
		status int
		cached bool // the order is remembered when cancelled
		// mayRead: a refusal may read the order from Postgres, to name its status, because the
		// shard no longer remembers what became of it (its market was settled).
		mayRead bool
		// setup returns the key that cancels and the order it cancels.
		setup func() (string, uuid.UUID)
	}
	situations := []situation{
		{"open", http.StatusOK, true, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			return a, b.place(a, m, "BUY", "YES", 30, 10)
		}},
		{"partially filled", http.StatusOK, true, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 40, 10)
			b.place(o, m, "BUY", "NO", 60, 4)
			return a, id
		}},
		{"filled later", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 20, 2)
			b.place(o, m, "BUY", "NO", 80, 2)
			return a, id
		}},
		{"filled at once", http.StatusBadRequest, false, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			b.place(o, m, "BUY", "NO", 80, 2)
			return a, b.place(a, m, "BUY", "YES", 20, 2)
		}},
		{"partially filled then cancelled elsewhere", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 40, 10)
			b.place(o, m, "BUY", "NO", 60, 3)
			b.expect(b.miss, "POST", "/api/v1/cancel-order", a, map[string]any{"orderId": id}, http.StatusOK, nil)
			return a, id
		}},
		{"cancelled elsewhere", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			id := b.place(a, m, "BUY", "NO", 30, 1)
			b.expect(b.miss, "POST", "/api/v1/cancel-order", a, map[string]any{"orderId": id}, http.StatusOK, nil)
			return a, id
		}},
		{"cancelled by cancel-everything elsewhere", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 30, 1)
			b.expect(b.miss, "POST", "/api/v1/cancel-everything", a, nil, http.StatusOK, nil)
			return a, id
		}},
		{"cancelled by cancel-everything", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 30, 1)
			b.expect(b.hit, "POST", "/api/v1/cancel-everything", a, nil, http.StatusOK, nil)
			return a, id
		}},
		{"another account's", http.StatusForbidden, true, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			b.place(a, m, "BUY", "YES", 10, 1) // warms a's key
			return a, b.place(o, m, "BUY", "YES", 30, 1)
		}},
		{"another account's filled", http.StatusForbidden, false, false, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			b.place(a, m, "BUY", "NO", 80, 1)
			return a, b.place(o, m, "BUY", "YES", 20, 1)
		}},
		{"market closed", http.StatusBadRequest, true, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 30, 1)
			b.transition(m, domain.CloseMarket)
			return a, id
		}},
		{"market resolved", http.StatusBadRequest, true, true, func() (string, uuid.UUID) {
			a, o, m := b.account(), b.account(), b.market()
			id := b.place(a, m, "BUY", "YES", 30, 5)
			b.place(o, m, "BUY", "NO", 70, 2)
			b.transition(m, domain.CloseMarket)
			b.transition(m, domain.ResolveYes)
			return a, id
		}},
		{"unknown", http.StatusNotFound, false, false, func() (string, uuid.UUID) {
			a, m := b.account(), b.market()
			b.place(a, m, "BUY", "YES", 30, 1)
			return a, uuid.New()
		}},
	}
	for _, s := range situations {
		t.Run(s.name, func(t *testing.T) {
			var answers [2]string
			for i, via := range []*Server{b.hit, b.miss} {
				var key string
				var id uuid.UUID
				var status int
				var raw []byte
				// The front's own background work (the cancel-on-disconnect records' refresh, every
				// 5 s) takes connections from the same pool, and may do so while a cancel is
				// answered: a cancel that read is tried afresh up to twice, so that only a cancel
				// which reads every time fails.
				for try := 1; ; try++ {
					key, id = s.setup()
					if _, ok := b.hit.orders.get(id); ok != s.cached {
						t.Fatalf("remembered: %v, want %v", ok, s.cached)
					}
					acquired := b.hitStore.Pool.Stat().AcquireCount()
					status, raw = b.do(via, "POST", "/api/v1/cancel-order", key, map[string]any{"orderId": id})
					if status != s.status {
						t.Fatalf("status %d, want %d: %s", status, s.status, raw)
					}
					n := b.hitStore.Pool.Stat().AcquireCount() - acquired
					if via != b.hit || !s.cached {
						break
					}
					if status == http.StatusBadRequest {
						t.Logf("refused with %d database connections", n)
					}
					// Only a refusal may read the order, to name its status, and only when the
					// shard does not remember what became of it (mayRead).
					if n == 0 || status == http.StatusBadRequest && s.mayRead {
						break
					}
					if try == 3 {
						t.Errorf("a remembered order's cancel answering %d used %d database connections, %d times in a row", status, n, try)
						break
					}
					t.Logf("a remembered order's cancel answering %d used %d database connections; trying afresh", status, n)
				}
				if status == http.StatusOK {
					answers[i] = normalized(t, raw)
				} else {
					answers[i] = string(raw)
				}
				if _, ok := b.hit.orders.get(id); ok && via == b.hit && status != http.StatusForbidden {
					t.Error("an order no longer open is still remembered")
				}
				// Once answered, the order is not open, and a cancel says so, remembered or not.
				if status == http.StatusOK || status == http.StatusBadRequest {
					_, again := b.do(via, "POST", "/api/v1/cancel-order", key, map[string]any{"orderId": id})
					if !strings.Contains(string(again), `"order_not_open"`) {
						t.Fatalf("cancelled again: %s", again)
					}
				}
			}
			t.Logf("%s", answers[0])
			if answers[0] != answers[1] {
				t.Fatalf("answers differ:\n  remembered: %s\n  read:       %s", answers[0], answers[1])
			}
		})
	}
}

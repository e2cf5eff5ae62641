package exchangetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/history"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// A distributed exchange disrupted under load: the scenarios that TestDistributed runs on
// processes and the cluster test (internal/clustertest) runs on pods, written once.

// Distributed is a distributed exchange whose Markets are Kubernetes resources and whose shards
// can be killed.
type Distributed struct {
	// Fronts is the exchange seen through each front API replica (at least two). Their Markets
	// create Market resources.
	Fronts []*Target
	// Kubectl runs kubectl on the cluster's apiserver and returns its output; it fails t on an
	// error.
	Kubectl func(t testing.TB, args ...string) string
	// IsShard tells a shard's name, as a Market's status shows it, from anything else.
	IsShard func(name string) bool
	// Shards is how many shards run.
	Shards int
	// Kill kills the shard named name at once, without letting it hand its markets back: SIGKILL,
	// or a pod deleted with --grace-period=0 --force.
	Kill func(t testing.TB, name string)
	// Returns is true when a killed shard comes back under its own name (a StatefulSet's pod):
	// its markets then move to a new epoch, on whichever shard the operator picks.
	Returns bool
}

// Load is bots placing orders on markets until Stop, each through its client's target; it
// records every order the exchange acknowledged. Refusals and transport errors, expected while a
// shard dies or a front restarts, only make the bot go on; a bot refused for too many open
// orders cancels them all.
type Load struct {
	rec      *history.Recorder // every placement, and its answer (not the cancels of everything); nil: none
	mu       sync.Mutex
	acked    map[uuid.UUID]ack
	failures []failure // placements answered 5xx or not at all
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

type failure struct {
	sent time.Time
	what string
}

type ack struct {
	market uuid.UUID
	sent   time.Time
}

// StartLoad starts one goroutine per bot.
func StartLoad(bots []*Client, markets []uuid.UUID) *Load {
	return StartRecordedLoad(bots, markets, nil)
}

// StartRecordedLoad starts one goroutine per bot, as StartLoad does, and records each placement
// and its answer (a transport error or a 5xx being no answer) in rec, unless rec is nil; not the
// cancels of everything, which the history checker does not model.
func StartRecordedLoad(bots []*Client, markets []uuid.UUID, rec *history.Recorder) *Load {
	l := &Load{rec: rec, acked: map[uuid.UUID]ack{}, stop: make(chan struct{})}
	for i, bot := range bots {
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				m := markets[n%len(markets)]
				sent := time.Now()
				status, raw, err := l.place(bot, OrderBody(m, "BUY", []string{"YES", "NO"}[(i+n)%2], 40+(i*7+n*3)%21, 1+n%4))
				if status == http.StatusBadRequest && bytes.Contains(raw, []byte("too_many_open_orders")) {
					call(bot.T, bot, "/cancel-everything", nil) // make room, and trade on
					continue
				}
				if err != nil || status != http.StatusCreated {
					if err != nil || status >= 500 {
						what := fmt.Sprintf("%d %.200s", status, raw)
						if err != nil {
							what = err.Error()
						}
						l.mu.Lock()
						l.failures = append(l.failures, failure{sent: sent, what: what})
						l.mu.Unlock()
						time.Sleep(10 * time.Millisecond) // a shard moving or a front restarting
					}
					continue
				}
				var placed apiserver.PlacedOrder
				if json.Unmarshal(raw, &placed) != nil {
					continue
				}
				l.mu.Lock()
				l.acked[placed.ID] = ack{market: m, sent: sent}
				l.mu.Unlock()
			}
		})
	}
	return l
}

// place places an order as post does, and records it and its answer when the load records.
func (l *Load) place(bot *Client, body map[string]any) (int, []byte, error) {
	if l.rec == nil {
		return post(bot.T, bot, body)
	}
	p := l.rec.Begin(bot.Name, bot.Account, history.Place, history.RequestOf(body))
	resp, raw, err := call(bot.T, bot, "/order", body)
	p.End(resp, raw, err)
	if resp == nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, err
}

// Acked is how many orders were acknowledged so far.
func (l *Load) Acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// AckedAfter tells whether an order sent to market after since was acknowledged, and when it was
// sent.
func (l *Load) AckedAfter(market uuid.UUID, since time.Time) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Time
	for _, a := range l.acked {
		if a.market == market && a.sent.After(since) && (first.IsZero() || a.sent.Before(first)) {
			first = a.sent
		}
	}
	return first, !first.IsZero()
}

// Sent is how many acknowledged orders were sent in [from, to).
func (l *Load) Sent(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acked {
		if !a.sent.Before(from) && a.sent.Before(to) {
			n++
		}
	}
	return n
}

// Failures lists the placements sent in [from, to) that were answered 5xx or not at all: when
// each was sent and what came back.
func (l *Load) Failures(from, to time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.failures {
		if !f.sent.Before(from) && f.sent.Before(to) {
			out = append(out, f.sent.Format("15:04:05.000")+" "+f.what)
		}
	}
	return out
}

// Stop stops the bots and waits for them; once stopped, it does nothing (a test defers it, and
// calls it before its checks).
func (l *Load) Stop() {
	l.stopOnce.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// CheckKept fails t unless every acknowledged order is in Postgres.
func (l *Load) CheckKept(t testing.TB, tg *Target) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.acked {
		if _, err := tg.Store.Order(context.Background(), id); err != nil {
			t.Fatalf("acknowledged order %s is gone: %v", id, err)
		}
	}
}

// Samples applies config/samples with kubectl and waits until its Markets are open on shards;
// it returns them by name.
func (d Distributed) Samples(t *testing.T, samplesDir string) map[string]uuid.UUID {
	t.Helper()
	d.Kubectl(t, "apply", "-f", samplesDir)
	samples := map[string]uuid.UUID{}
	scheduled := func(context.Context) (bool, error) {
		var list struct {
			Items []struct {
				Metadata struct{ Name string }
				Status   struct{ MarketID, Shard, Phase string }
			}
		}
		if err := json.Unmarshal([]byte(d.Kubectl(t, "get", "mkt", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Items {
			if d.IsShard(m.Status.Shard) && m.Status.Phase == "OPEN" && !strings.HasPrefix(m.Metadata.Name, "suite-") {
				samples[m.Metadata.Name] = uuid.MustParse(m.Status.MarketID)
			}
		}
		return len(samples) >= 3, nil
	}
	if err := poll.Until(t.Context(), time.Minute, scheduled); err != nil {
		t.Fatalf("samples not scheduled: %s", d.Kubectl(t, "get", "mkt", "-o", "wide"))
	}
	t.Logf("kubectl get mkt:\n%s", d.Kubectl(t, "get", "mkt"))
	return samples
}

// checkSampleFees checks that each sample Market's spec.fees, as the operator wrote it, is its
// market's schedule in the API (GET /market), both rates 0 for a sample without one.
func checkSampleFees(t *testing.T, tg *Target, samplesDir string, samples map[string]uuid.UUID) {
	t.Helper()
	manifests, err := pmxv1.LoadMarkets(samplesDir)
	if err != nil {
		t.Fatal(err)
	}
	c := tg.NewAccount(t, "samples")
	for _, mf := range manifests {
		id, ok := samples[mf.Name]
		if !ok {
			t.Logf("sample Market %s not among those scheduled (%d): its fees not checked", mf.Name, len(samples))
			continue
		}
		want := `"fees":{"takerBps":0,"makerBps":0}`
		if f := mf.Spec.Fees; f != nil {
			want = fmt.Sprintf(`"fees":{"takerBps":%d,"makerBps":%d}`, f.TakerBps, f.MakerBps)
		}
		raw := c.Expect(t, "GET", "/market?marketId="+id.String(), nil, http.StatusCreated, nil) // 201: the contract
		if !strings.Contains(string(raw), want) {
			t.Errorf("sample Market %s: GET /market answers %s, want %s", mf.Name, raw, want)
		}
	}
}

// RunFailover applies config/samples (samplesDir) and checks that they are spread over the
// shards, each sample's spec.fees its market's schedule in the API; then bots trade on them through every front while the shard of one is killed: its
// markets move to a new epoch, trading on them resumes, no acknowledged order is lost, a dead-man
// switch that falls due meanwhile still fires, a feed client on each front follows the market's
// book gaplessly across it, and the invariants hold. Last, a resolution patched with kubectl pays
// the winning shares, and the bots' placements, recorded with their answers, are checked against
// the log (history.Check).
func RunFailover(t *testing.T, d Distributed, samplesDir string) {
	tg := d.Fronts[len(d.Fronts)-1]
	// The scheduler gives each new market to the live shard with the fewest OPEN markets, so the
	// samples spread only if the shards were about even before them: the tests run before this
	// one (the suite's markets, some closed or resolved since) can leave one shard more markets
	// short than there are samples, and then every sample rightly goes to it.
	live, err := tg.Store.LiveShards(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fewest, most := math.MaxInt, 0
	for _, s := range live {
		fewest, most = min(fewest, s.Markets), max(most, s.Markets)
	}
	samples := d.Samples(t, samplesDir)
	checkSampleFees(t, tg, samplesDir, samples)
	owners := map[string]bool{}
	var markets []uuid.UUID
	for _, id := range samples {
		o, err := tg.Store.Owner(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		owners[o.Shard] = true
		markets = append(markets, id)
	}
	// (A market may close meanwhile, so the shards are taken as even only within one market.)
	if want := min(d.Shards, len(samples)); len(live) == d.Shards && most-fewest <= 1 && len(owners) != want {
		t.Errorf("the %d samples sit on %v, not spread over %d shards, which held %d to %d OPEN markets before them",
			len(samples), owners, want, fewest, most)
	} else if len(owners) != want {
		t.Logf("the %d samples sit on %v: the shards held %d to %d OPEN markets before them", len(samples), owners, fewest, most)
	}

	// Bots trade on the samples through every front.
	bots := make([]*Client, 8)
	for i := range bots {
		bots[i] = tg.NewAccount(t, "failover")
		bots[i].T = d.Fronts[i%len(d.Fronts)]
	}
	victim := markets[0]
	o, err := tg.Store.Owner(context.Background(), victim)
	if err != nil {
		t.Fatal(err)
	}
	// A client on each front follows the victim's book over the WebSocket feed throughout:
	// across the kill and the move its sequence must stay gapless, and all clients must see the
	// same events.
	var watchers []*LiveFollower
	for _, r := range d.Fronts[:2] {
		w := tg.NewAccount(t, "watch")
		w.T = r
		watchers = append(watchers, FollowLive(w, victim))
	}
	rec := &history.Recorder{}
	load := StartRecordedLoad(bots, markets, rec)
	poll.Wait(t, time.Minute, "400 acknowledged orders", func() bool { return load.Acked() >= 400 })
	// A dead-man switch whose deadline passes while its market's shard is dead, or the market
	// moving, still fires: the shard that takes the market over finds it in Postgres.
	deadman := tg.NewAccount(t, "deadman")
	resting := deadman.Place(t, victim, "BUY", "YES", 2, 1)
	deadman.Expect(t, "POST", "/heartbeat", map[string]any{"timeoutSeconds": 5}, http.StatusOK, nil)
	owned := map[uuid.UUID]store.Ownership{}
	for _, id := range markets {
		if owned[id], err = tg.Store.Owner(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	killedAt := time.Now()
	d.Kill(t, o.Shard)
	// A market of the killed shard has moved when it is owned under a new epoch: by another
	// shard, or by a new process under the same name when the shard comes back (whose
	// registration fences the old one).
	movedOn := func(id uuid.UUID) (store.Ownership, bool) {
		now, err := tg.Store.Owner(context.Background(), id)
		return now, err == nil && now.Shard != "" && now.Epoch > owned[id].Epoch && (d.Returns || now.Shard != o.Shard)
	}
	var moved store.Ownership
	var movedAt time.Time
	poll.Wait(t, 2*time.Minute, "the killed shard's market to move", func() bool {
		var ok bool
		moved, ok = movedOn(victim)
		movedAt = time.Now()
		return ok
	})
	var recovered time.Time
	poll.Wait(t, 2*time.Minute, "trading on the killed shard's market to resume", func() bool {
		var ok bool
		recovered, ok = load.AckedAfter(victim, movedAt)
		return ok
	})
	load.Stop()
	failover := recovered.Sub(killedAt)
	t.Logf("killed %s under load; market %s moved to %s (epoch %d → %d); the first order sent after the move and acknowledged was sent %v after the kill",
		o.Shard, victim, moved.Shard, o.Epoch, moved.Epoch, failover.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "failover: %v from the kill of %s to the first acknowledged order on its market under its new owner\n", failover.Round(time.Millisecond), o.Shard)
	poll.Wait(t, 30*time.Second, "every market of the killed shard to move", func() bool {
		for _, id := range markets {
			if _, ok := movedOn(id); owned[id].Shard == o.Shard && !ok {
				return false
			}
		}
		return true
	})
	load.CheckKept(t, tg)
	poll.Wait(t, 30*time.Second, "the dead-man switch to cancel its order on the killed shard's market", func() bool {
		o, err := tg.Store.Order(context.Background(), resting.ID)
		return err == nil && !o.Status.Resting()
	})
	if o, err := tg.Store.Order(context.Background(), resting.ID); err != nil || o.CancelReason == nil || *o.CancelReason != "HEARTBEAT" {
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
	d.Kubectl(t, "patch", "mkt", name, "--type", "merge", "-p", `{"spec":{"resolution":"YES"}}`)
	poll.Wait(t, 30*time.Second, "the market to resolve", func() bool {
		m, err := tg.Store.Market(context.Background(), victim)
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
	if out := d.Kubectl(t, "get", "mkt", name); !strings.Contains(out, "RESOLVED") {
		t.Errorf("kubectl get mkt %s:\n%s", name, out)
	}
	CheckInvariants(t, tg)
	// The bots' placements, across the kill and the move, against the log.
	CheckHistory(t, tg, rec.History())
}

// CheckHistory checks the bots' history against the log (history.Check) and fails the test on
// each violation.
func CheckHistory(t *testing.T, tg *Target, h []history.Op) {
	t.Helper()
	r, err := history.Check(t.Context(), h, tg.Store.Pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("history checked in %v: %d operations, %d orders and %d trades in the log, %d fills reported and found, %d orders linearized by Porcupine (%d timed out)",
		r.Took.Round(time.Millisecond), r.Ops, r.Orders, r.Trades, r.Fills, r.Linearized, r.Unknown)
	for i, v := range r.Violations {
		if i == 20 {
			t.Errorf("... and %d more violations of the history", len(r.Violations)-i)
			break
		}
		t.Errorf("history: %s", v)
	}
}

// post places an order without failing the test on a transport error, which is expected while the
// process is killed.
func post(tg *Target, c *Client, body map[string]any) (int, []byte, error) {
	resp, raw, err := call(tg, c, "/order", body)
	if resp == nil {
		return 0, nil, err
	}
	return resp.StatusCode, raw, err
}

// call sends a request to the public API without failing the test on a transport error, which is
// expected while the process is killed. The answer's body is read and closed.
func call(tg *Target, c *Client, path string, body any) (*http.Response, []byte, error) {
	var raw []byte // a nil body is sent as none
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return nil, nil, err
		}
	}
	req, err := http.NewRequest("POST", tg.URL+"/api/v1"+path, bytes.NewReader(raw))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := tg.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	buf, err := io.ReadAll(resp.Body)
	return resp, buf, err
}

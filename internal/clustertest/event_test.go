package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/apiserver"
	"github.com/pmx-dev/pmx/internal/exchangetest"
	"github.com/pmx-dev/pmx/internal/poll"
	"github.com/pmx-dev/pmx/internal/store"
)

// eventSample is the sample Event the scenario lists, and eventWinner the outcome it resolves to.
const (
	eventSample = "events/event_rate_decision.yaml"
	eventWinner = "hold"
)

// testEvent lists the sample Event with kubectl and follows it through pmx on real pods: all of
// its outcomes' Markets on one shard; two accounts trade every outcome's book and one converts NO
// shares, through the API Service; the event's shard pod is deleted by force, and every one of its
// markets must move to the surviving shard together, where trading and conversion go on; then a
// resolution patched with kubectl settles every outcome's market — the winner YES, the others NO —
// and each account's cash is what its trades, conversions and payouts add up to.
//
// The node is cordoned while the shard is dead: a force-deleted StatefulSet pod otherwise comes
// back under its own name, often before its heartbeat lapses, and keeps its markets at a new epoch
// (the Failover subtest covers that); held off, its markets must go to the one other shard.
func (c *cluster) testEvent(t *testing.T, tg *exchangetest.Target) {
	// Failover's killed shard may still be coming back: the event needs two live shards.
	c.checkPods(t, "pmx:dev")
	ev := c.applyEventSample(t)
	started := time.Now()
	listed := c.eventScheduled(t, tg, ev.Name, func(string) bool { return true })
	t.Logf("Event %s OPEN, its %d markets on %s, %v after kubectl apply", ev.Name, len(listed.markets), listed.shard,
		time.Since(started).Round(time.Millisecond))

	// The trades below are the sample's outcomes'.
	if want := []string{"cut-50", "cut-25", "hold", "hike"}; !slices.Equal(listed.keys, want) {
		t.Fatalf("the sample's outcomes are %v: the scenario trades %v", listed.keys, want)
	}
	s := &eventScenario{tg: tg, spec: ev.Spec, listed: listed}
	yes, no := s.trader(t, "event-yes"), s.trader(t, "event-no")
	s.checkEventOverAPI(t, yes, "OPEN")
	// Prices that sum to 100: the books price the outcomes as exclusive and exhaustive.
	prices := map[string]int{"cut-50": 10, "cut-25": 25, "hold": 50, "hike": 15}
	for _, k := range listed.keys {
		s.trade(t, yes, no, k, prices[k], 5, "before")
	}
	// NO of two outcomes into YES of the other two and 100 cents a pair, retried by its id.
	s.convert(t, no, []string{"cut-50", "cut-25"}, 2, "before")
	s.checkHoldings(t, yes, no)

	// The kill.
	node := strings.TrimSpace(c.Kubectl(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	if strings.Contains(node, " ") || node == "" {
		t.Fatalf("want the one node of the test cluster, got %q", node)
	}
	c.Kubectl(t, "cordon", node)
	uncordoned := false
	uncordon := func() {
		if !uncordoned {
			// Not t.Context(): in a cleanup it is done already.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if out, err := c.KubectlCmd(ctx, "uncordon", node).CombinedOutput(); err != nil {
				t.Errorf("kubectl uncordon %s: %v\n%s", node, err, out)
			}
			uncordoned = true
		}
	}
	t.Cleanup(uncordon)
	killedAt := time.Now()
	c.Kubectl(t, "delete", "pod", "-n", namespace, listed.shard, "--grace-period=0", "--force", "--wait=false")
	moved := c.eventScheduled(t, tg, ev.Name, func(shard string) bool { return shard != listed.shard })
	movedAt := time.Now()
	for i, o := range moved.owners {
		if was := listed.owners[i]; o.Epoch <= was.Epoch {
			t.Errorf("outcome %s's market is on %s at epoch %d, was %d on %s: not moved", listed.keys[i], o.Shard, o.Epoch, was.Epoch, was.Shard)
		}
	}
	uncordon() // the shard's pod comes back, empty, while trading goes on
	for _, k := range listed.keys {
		s.trade(t, yes, no, k, prices[k], 1, "after")
	}
	// One outcome's NO into YES of the three others, no cash: a conversion on the new shard.
	s.convert(t, no, []string{"hike"}, 1, "after")
	resumed := time.Since(killedAt)
	s.checkHoldings(t, yes, no)
	t.Logf("killed %s: all %d markets of the event on %s together %v after the kill; every market traded and a conversion taken again %v after it",
		listed.shard, len(moved.markets), moved.shard, movedAt.Sub(killedAt).Round(time.Millisecond), resumed.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "event: %v from the kill of %s to the event's %d markets together on %s; every market traded and a conversion taken again %v after the kill\n",
		movedAt.Sub(killedAt).Round(time.Millisecond), listed.shard, len(moved.markets), moved.shard, resumed.Round(time.Millisecond))
	exchangetest.CheckBooksOverAPI(t, tg, yes.c, moved.markets)

	// A halt, patched with kubectl: placements refused through the Service, the Halted column True;
	// then resumed.
	c.Kubectl(t, "patch", "events.pmx.dev", ev.Name, "--type=merge", "-p", `{"spec":{"paused":true}}`)
	poll.Wait(t, time.Minute, "the event to halt", func() bool {
		var d apiserver.EventDetail
		yes.c.Expect(t, "GET", "/event?eventId="+listed.id.String(), nil, http.StatusOK, &d)
		return d.Halted == "event"
	})
	yes.c.ExpectError(t, "POST", "/order", exchangetest.OrderBody(moved.markets[0], "BUY", "YES", 1, 1), http.StatusConflict, "event_halted")
	poll.Wait(t, 30*time.Second, "kubectl to show the Event halted", func() bool {
		return strings.Contains(c.Kubectl(t, "get", "pmxev", ev.Name, "-o", `jsonpath={.status.conditions[?(@.type=="Halted")].status}`), "True")
	})
	c.Kubectl(t, "patch", "events.pmx.dev", ev.Name, "--type=merge", "-p", `{"spec":{"paused":false}}`)
	poll.Wait(t, time.Minute, "the event to resume", func() bool {
		var d apiserver.EventDetail
		yes.c.Expect(t, "GET", "/event?eventId="+listed.id.String(), nil, http.StatusOK, &d)
		return d.Halted == ""
	})

	// The resolution, patched with kubectl.
	resolving := time.Now()
	c.Kubectl(t, "patch", "events.pmx.dev", ev.Name, "--type=merge", "-p", `{"spec":{"resolution":"`+eventWinner+`"}}`)
	poll.Wait(t, time.Minute, "the event to resolve", func() bool {
		var d apiserver.EventDetail
		yes.c.Expect(t, "GET", "/event?eventId="+listed.id.String(), nil, http.StatusOK, &d)
		return d.Status == "RESOLVED"
	})
	t.Logf("resolved to %s through kubectl patch in %v", eventWinner, time.Since(resolving).Round(time.Millisecond))
	s.checkEventOverAPI(t, yes, "RESOLVED")
	s.checkSettled(t, yes, no)
	poll.Wait(t, 30*time.Second, "kubectl to show the Event RESOLVED", func() bool {
		return strings.Contains(c.Kubectl(t, "get", "pmxev", ev.Name), "RESOLVED")
	})
	t.Logf("kubectl get pmxev -o wide:\n%s", c.Kubectl(t, "get", "pmxev", "-o", "wide"))
	exchangetest.CheckInvariants(t, tg)
	// The next subtests start from the chart's pods, all Ready.
	c.checkPods(t, "pmx:dev")
}

// applyEventSample applies the sample Event with kubectl as a user would, but for its dates: they
// move to a day from now (the sample's would close it on 10 June 2027, and the test with it).
func (c *cluster) applyEventSample(t *testing.T) pmxv1.Event {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(c.repo, "config", "samples", eventSample))
	if err != nil {
		t.Fatal(err)
	}
	var ev pmxv1.Event
	if err := yaml.UnmarshalStrict(raw, &ev); err != nil {
		t.Fatalf("config/samples/%s: %v", eventSample, err)
	}
	if ev.Spec.ClosesAt == nil || ev.Spec.ResolvesAt == nil {
		t.Fatalf("config/samples/%s: want closesAt and resolvesAt", eventSample)
	}
	closes := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	ev.Spec.ResolvesAt = &metav1.Time{Time: closes.Add(ev.Spec.ResolvesAt.Sub(ev.Spec.ClosesAt.Time))}
	ev.Spec.ClosesAt = &metav1.Time{Time: closes}
	doc, err := json.Marshal(map[string]any{"apiVersion": ev.APIVersion, "kind": ev.Kind,
		"metadata": map[string]any{"name": ev.Name}, "spec": ev.Spec})
	if err != nil {
		t.Fatal(err)
	}
	c.applyJSON(t, string(doc))
	return ev
}

// listedEvent is an Event as the operator lists it and Postgres holds it.
type listedEvent struct {
	id      uuid.UUID
	keys    []string    // the outcomes' keys, in order
	markets []uuid.UUID // their markets, in the outcomes' order
	owners  []store.Ownership
	shard   string // the one shard that owns every market
}

// eventScheduled waits until the Event is OPEN and reports every outcome's market, each OPEN in
// Postgres and all owned by one shard that the Event's status names and ok accepts; after two
// minutes it fails t with the Event and its Markets as kubectl shows them.
func (c *cluster) eventScheduled(t *testing.T, tg *exchangetest.Target, name string, ok func(shard string) bool) listedEvent {
	t.Helper()
	var l listedEvent
	var why string
	check := func(ctx context.Context) (bool, error) {
		var ev pmxv1.Event
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &ev); err != nil {
			why = err.Error()
			return false, nil
		}
		st := ev.Status
		if st.Phase != pmxv1.MarketPhaseOpen || len(st.Outcomes) != len(ev.Spec.Outcomes) {
			why = fmt.Sprintf("phase %q, %d outcomes reported", st.Phase, len(st.Outcomes))
			return false, nil
		}
		l = listedEvent{shard: st.Shard}
		var err error
		if l.id, err = uuid.Parse(st.EventID); err != nil {
			why = "no event id yet"
			return false, nil
		}
		for _, o := range st.Outcomes {
			id, err := uuid.Parse(o.MarketID)
			if err != nil {
				why = "outcome " + o.Key + " has no market id yet"
				return false, nil
			}
			own, err := tg.Store.Owner(ctx, id)
			if err != nil {
				return false, err
			}
			l.keys, l.markets, l.owners = append(l.keys, o.Key), append(l.markets, id), append(l.owners, own)
			if own.Shard != st.Shard || own.Status != "OPEN" {
				why = fmt.Sprintf("outcome %s's market is %s on %q, the Event reports shard %q", o.Key, own.Status, own.Shard, st.Shard)
				return false, nil
			}
		}
		if !isShard(st.Shard) || !ok(st.Shard) {
			why = fmt.Sprintf("all on %q", st.Shard)
			return false, nil
		}
		return true, nil
	}
	if err := poll.Until(t.Context(), 2*time.Minute, check); err != nil {
		t.Fatalf("Event %s not OPEN on one shard (%s): %v\n%s%s", name, why, err,
			c.Kubectl(t, "get", "pmxev", "-o", "wide"), c.Kubectl(t, "get", "mkt", "-l", pmxv1.LabelEvent+"="+name, "-o", "wide"))
	}
	return l
}

// eventScenario is what testEvent did to the event, and what each account should hold for it.
type eventScenario struct {
	tg     *exchangetest.Target
	spec   pmxv1.EventSpec
	listed listedEvent
}

// trader is an account of the scenario and the model of what it holds: its cash moves by what its
// trades and conversions cost or pay, its shares by what they bring.
type trader struct {
	c     *exchangetest.Client
	start int64            // its available cash when made
	cash  int64            // what its trades and conversions added to that
	held  map[string]int64 // shares by "<outcome key>/YES" or "/NO"
}

func (s *eventScenario) trader(t *testing.T, prefix string) *trader {
	t.Helper()
	c := s.tg.NewAccount(t, prefix)
	avail, _ := c.Balance(t)
	return &trader{c: c, start: avail, held: map[string]int64{}}
}

func (s *eventScenario) market(key string) uuid.UUID {
	return s.listed.markets[slices.Index(s.listed.keys, key)]
}

// trade mints quantity pairs in outcome key's market: yes bids price for YES, then no takes it
// with a bid of 100 - price for NO.
func (s *eventScenario) trade(t *testing.T, yes, no *trader, key string, price int, quantity int64, tag string) {
	t.Helper()
	m := s.market(key)
	for _, side := range []struct {
		who     *trader
		outcome string
		price   int
	}{{yes, "YES", price}, {no, "NO", 100 - price}} {
		body := exchangetest.OrderBody(m, "BUY", side.outcome, side.price, int(quantity))
		body["clientOrderId"] = fmt.Sprintf("event-%s-%s-%s", tag, key, side.outcome)
		retried(t, side.who.c, "an order on outcome "+key+"'s market", "/order", body, nil)
		side.who.cash -= int64(side.price) * quantity
		side.who.held[key+"/"+side.outcome] += quantity
	}
}

// convert has who convert quantity NO shares of each of outcomes into YES shares of every other
// outcome and (k - 1) × 100 cents a share, then asks again with the same clientRequestId, which
// must answer the same conversion.
func (s *eventScenario) convert(t *testing.T, who *trader, outcomes []string, quantity int64, tag string) {
	t.Helper()
	body := map[string]any{"eventId": s.listed.id, "outcomes": outcomes, "quantity": quantity,
		"clientRequestId": "event-convert-" + tag}
	var first, again apiserver.Conversion
	retried(t, who.c, "a conversion", "/event/convert", body, &first)
	cash := int64(len(outcomes)-1) * 100 * quantity
	if first.EventID != s.listed.id || first.Quantity != quantity || first.Cash != cash {
		t.Errorf("converting %d NO of %v: %+v, want %d cents", quantity, outcomes, first, cash)
	}
	who.c.Expect(t, "POST", "/event/convert", body, http.StatusOK, &again)
	if again.ID != first.ID {
		t.Errorf("the conversion asked for again answered %s, want %s", again.ID, first.ID)
	}
	who.cash += cash
	for _, k := range s.listed.keys {
		if slices.Contains(outcomes, k) {
			who.held[k+"/NO"] -= quantity
		} else {
			who.held[k+"/YES"] += quantity
		}
	}
}

// retried posts body to path as who until the exchange takes it — 201, or 200 for a retry it
// recognizes by its client id — and decodes the answer into out; 502, 503 and 504 (a market
// moving to its new shard) are retried for at most a minute, anything else fails t.
func retried(t *testing.T, who *exchangetest.Client, what, path string, body map[string]any, out any) {
	t.Helper()
	var raw []byte
	poll.Wait(t, time.Minute, what+" to be taken", func() bool {
		var status int
		status, raw = who.Do(t, "POST", path, body)
		switch status {
		case http.StatusCreated, http.StatusOK:
			return true
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return false
		}
		t.Fatalf("POST %s %v: %d %s", path, body, status, raw)
		return false
	})
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("POST %s: %v: %s", path, err, raw)
		}
	}
}

// checkHoldings compares each trader's cash and shares over the API with the model: every order
// of the scenario filled, none resting.
func (s *eventScenario) checkHoldings(t *testing.T, traders ...*trader) {
	t.Helper()
	for _, tr := range traders {
		if avail, locked := tr.c.Balance(t); avail != tr.start+tr.cash || locked != 0 {
			t.Errorf("%s holds %d cents (%d locked), want %d", tr.c.Name, avail, locked, tr.start+tr.cash)
		}
		held := tr.c.Positions(t)
		for _, k := range s.listed.keys {
			for _, outcome := range []string{"YES", "NO"} {
				if got, want := held[s.market(k).String()+"/"+outcome].Quantity, tr.held[k+"/"+outcome]; got != want {
					t.Errorf("%s holds %d %s of outcome %s, want %d", tr.c.Name, got, outcome, k, want)
				}
			}
		}
	}
}

// checkEventOverAPI reads the event and each of its outcomes' markets through the API: the
// event's question, status and outcomes as listed; each market answering its event and outcome,
// and, once resolved, the winner's YES and every other's NO.
func (s *eventScenario) checkEventOverAPI(t *testing.T, who *trader, status string) {
	t.Helper()
	var d apiserver.EventDetail
	who.c.Expect(t, "GET", "/event?eventId="+s.listed.id.String(), nil, http.StatusOK, &d)
	if d.Status != status || d.Question != s.spec.Question || len(d.Outcomes) != len(s.listed.keys) {
		t.Fatalf("GET /event: %+v, want %s with the sample's question and %d outcomes", d, status, len(s.listed.keys))
	}
	if status == "RESOLVED" && (d.Resolution == nil || *d.Resolution != eventWinner) {
		t.Errorf("GET /event: resolution %v, want %s", d.Resolution, eventWinner)
	}
	for i, o := range d.Outcomes {
		if o.Key != s.listed.keys[i] || o.MarketID != s.listed.markets[i] {
			t.Errorf("GET /event: outcome %d is %s (market %s), the Event lists %s (market %s)", i, o.Key, o.MarketID, s.listed.keys[i], s.listed.markets[i])
		}
		var m apiserver.Market
		who.c.Expect(t, "GET", "/market?marketId="+o.MarketID.String(), nil, http.StatusCreated, &m) // 201: the contract
		want := "NO"
		if o.Key == eventWinner {
			want = "YES"
		}
		switch {
		case m.EventID == nil || *m.EventID != s.listed.id || m.OutcomeKey == nil || *m.OutcomeKey != o.Key:
			t.Errorf("outcome %s's market answers event %v, outcome %v", o.Key, m.EventID, m.OutcomeKey)
		case m.Status != status:
			t.Errorf("outcome %s's market is %s, want %s", o.Key, m.Status, status)
		case status == "RESOLVED" && (!m.Resolved || m.Outcome == nil || *m.Outcome != want):
			t.Errorf("outcome %s's market resolved %v to %v, want %s", o.Key, m.Resolved, m.Outcome, want)
		}
	}
}

// checkSettled checks that each trader was paid what its shares were owed — 100 cents for each YES
// of the winner and each NO of every other outcome — and holds no share of the event any more.
func (s *eventScenario) checkSettled(t *testing.T, traders ...*trader) {
	t.Helper()
	for _, tr := range traders {
		owed := 100 * tr.held[eventWinner+"/YES"]
		for _, k := range s.listed.keys {
			if k != eventWinner {
				owed += 100 * tr.held[k+"/NO"]
			}
		}
		if avail, locked := tr.c.Balance(t); avail != tr.start+tr.cash+owed || locked != 0 {
			t.Errorf("%s holds %d cents (%d locked) after the resolution, want %d + %d traded + %d owed",
				tr.c.Name, avail, locked, tr.start, tr.cash, owed)
		}
		held := tr.c.Positions(t)
		for _, m := range s.listed.markets {
			for _, outcome := range []string{"YES", "NO"} {
				if p := held[m.String()+"/"+outcome]; p.Quantity != 0 {
					t.Errorf("%s still holds %d %s of market %s", tr.c.Name, p.Quantity, outcome, m)
				}
			}
		}
	}
}

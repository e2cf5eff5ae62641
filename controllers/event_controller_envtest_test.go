package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/poll"
)

// newEvent creates an Event of the given outcome keys.
func (w *world) newEvent(name string, keys ...string) *pmxv1.Event {
	w.t.Helper()
	ev := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: pmxv1.EventSpec{Question: "Who wins " + name + "?", Category: "test"}}
	for _, k := range keys {
		ev.Spec.Outcomes = append(ev.Spec.Outcomes, pmxv1.EventOutcome{Key: k, Label: strings.ToUpper(k)})
	}
	if err := w.k8s.Create(context.Background(), ev); err != nil {
		w.t.Fatal(err)
	}
	return ev
}

// eventMarkets waits until every outcome of ev has its Market scheduled, and returns them in
// outcome order.
func (w *world) eventMarkets(ev *pmxv1.Event) []*pmxv1.Market {
	w.t.Helper()
	var ms []*pmxv1.Market
	for _, o := range ev.Spec.Outcomes {
		m := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Namespace: ev.Namespace, Name: pmxv1.MarketName(ev.Name, o.Key)}}
		ms = append(ms, w.eventually(m, "scheduled", scheduled))
	}
	return ms
}

func shardsOf(ms []*pmxv1.Market) map[string]int {
	on := map[string]int{}
	for _, m := range ms {
		on[m.Status.Shard]++
	}
	return on
}

// TestEventMarkets checks an Event's Markets: one per outcome, owned by the Event and labelled
// with it and their outcome, all on one shard (with a standalone market spreading the load, so
// that the least loaded shard is not simply the same one each time), following each other to
// the other shard when theirs stops; a change only one Market asks for is refused and reported.
func TestEventMarkets(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.eventually(w.market("standalone", nil), "scheduled", scheduled)
	ev := w.newEvent("title", "reds", "blues", "greens", "whites")

	ms := w.eventMarkets(ev)
	for i, m := range ms {
		ref := metav1.GetControllerOf(m)
		if ref == nil || ref.Kind != "Event" || ref.Name != ev.Name || ref.UID != ev.UID || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%s: controller %+v, want the Event %s", m.Name, ref, ev.Name)
		}
		key := ev.Spec.Outcomes[i].Key
		if m.Labels[pmxv1.LabelEvent] != ev.Name || m.Labels[pmxv1.LabelOutcome] != key {
			t.Errorf("%s: labels %v", m.Name, m.Labels)
		}
		if want := "Who wins title? — " + strings.ToUpper(key); m.Spec.Question != want || m.Spec.Category != "test" {
			t.Errorf("%s: question %q category %q, want %q", m.Name, m.Spec.Question, m.Spec.Category, want)
		}
	}
	on := shardsOf(ms)
	if len(on) != 1 {
		t.Fatalf("the event's markets are spread over %v; want one shard", on)
	}
	owner := ms[0].Status.Shard

	// The Event reports each outcome's Market and market id, and the shard they share.
	got := w.eventuallyEvent(ev, "every outcome reported", func(e *pmxv1.Event) bool {
		if len(e.Status.Outcomes) != 4 || e.Status.Shard != owner || e.Status.Phase != pmxv1.MarketPhaseOpen {
			return false
		}
		for i, o := range e.Status.Outcomes {
			if o.Market != ms[i].Name || o.MarketID != ms[i].Status.MarketID {
				return false
			}
		}
		return meta.IsStatusConditionTrue(e.Status.Conditions, string(pmxv1.MarketScheduled))
	})
	if got.Status.ObservedGeneration != got.Generation || len(got.Finalizers) != 1 || got.Finalizers[0] != eventFinalizer {
		t.Errorf("status generation %d of %d, finalizers %v", got.Status.ObservedGeneration, got.Generation, got.Finalizers)
	}

	// A trade on one outcome makes it the leader, at its price.
	alice, _ := w.account("alice")
	bob, _ := w.account("bob")
	w.call(alice, "POST", "/api/v1/order", order(ms[2].Status.MarketID, "BUY", "YES", 35, 2), 201, nil)
	w.call(bob, "POST", "/api/v1/order", order(ms[2].Status.MarketID, "BUY", "NO", 65, 2), 201, nil)
	w.eventuallyEvent(ev, "greens leading at 35", func(e *pmxv1.Event) bool {
		return e.Status.Leader == "greens" && e.Status.LeaderPrice != nil && *e.Status.LeaderPrice == 35
	})

	// Failover: the shard stops; the four markets move, all to the other shard.
	w.beats[owner]()
	moved := make([]*pmxv1.Market, len(ms))
	for i, m := range ms {
		moved[i] = w.eventually(m, "moved off the dead shard", func(m *pmxv1.Market) bool {
			return scheduled(m) && m.Status.Shard != owner
		})
	}
	if on := shardsOf(moved); len(on) != 1 {
		t.Fatalf("after failover the event's markets are on %v; want one shard", on)
	}
	w.eventuallyEvent(ev, "reported on the new shard", func(e *pmxv1.Event) bool {
		return e.Status.Shard == moved[0].Status.Shard
	})

	// One Market asked to close on its own: refused, reported, not carried out. The Event puts
	// its own spec back on its Market, which may come before the Market's reconciler reads the
	// change (then it sees nothing to refuse): the request is made again until one is refused,
	// a few times at most.
	m := ms[1]
	for try := 1; ; try++ {
		if err := w.k8s.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(m.DeepCopy())
		m.Spec.Closed = true
		if err := w.k8s.Patch(ctx, m, patch); err != nil {
			t.Fatal(err)
		}
		if w.sawEvent(m.Name, string(reasonMarketInEvent), 10*time.Second) {
			break
		}
		if try == 5 {
			t.Fatalf("no %s event about %s after %d requests to close it", reasonMarketInEvent, m.Name, try)
		}
		w.eventually(m, "closed put back by the Event", func(m *pmxv1.Market) bool { return !m.Spec.Closed })
	}
	if row, err := w.st.Market(ctx, uuid.MustParse(m.Status.MarketID)); err != nil || row.Status != "OPEN" {
		t.Fatalf("a market of an event closed on its own: %s (%v)", row.Status, err)
	}
	// The Event puts its own spec back on its Market.
	w.eventually(m, "closed put back by the Event", func(m *pmxv1.Market) bool { return !m.Spec.Closed })
}

// TestEventResolution resolves an Event: its shard resolves the winning outcome's market YES and
// every other NO in one transaction (no moment shows some resolved and others not), and pays the
// winners; the Markets report RESOLVED.
func TestEventResolution(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ev := w.newEvent("final", "ajax", "psv", "az")
	ms := w.eventMarkets(ev)
	alice, aliceID := w.account("alice")
	bob, bobID := w.account("bob")
	w.call(alice, "POST", "/api/v1/order", order(ms[1].Status.MarketID, "BUY", "YES", 40, 5), 201, nil)
	w.call(bob, "POST", "/api/v1/order", order(ms[1].Status.MarketID, "BUY", "NO", 60, 5), 201, nil)
	w.call(bob, "POST", "/api/v1/order", order(ms[0].Status.MarketID, "BUY", "YES", 20, 3), 201, nil) // rests
	got := w.eventuallyEvent(ev, "recorded", func(e *pmxv1.Event) bool { return e.Status.EventID != "" })
	id := uuid.MustParse(got.Status.EventID)

	// Deleting one Market of the event does not void its market alone: it waits, reported.
	if err := w.k8s.Delete(ctx, ms[2]); err != nil {
		t.Fatal(err)
	}
	w.waitForEvent(ms[2].Name, string(reasonMarketInEvent))
	if row, err := w.st.Market(ctx, uuid.MustParse(ms[2].Status.MarketID)); err != nil || row.Status != "OPEN" {
		t.Fatalf("a deleted Market of an event voided its market alone: %s (%v)", row.Status, err)
	}

	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Resolution = "psv"
	if err := w.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	// Each look reads all of the event's markets in one query: the first that shows one resolved
	// shows them all resolved, each to its side.
	var statuses []string
	if err := poll.Until(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		e, err := w.st.Event(ctx, id)
		if err != nil {
			return false, err
		}
		rows, err := w.st.EventMarkets(ctx, e)
		if err != nil {
			return false, err
		}
		statuses = statuses[:0]
		resolved := 0
		for _, r := range rows {
			statuses = append(statuses, string(r.Status))
			if r.Status == "RESOLVED" {
				resolved++
			}
		}
		if resolved > 0 && resolved < len(rows) {
			return false, fmt.Errorf("some markets resolved and others not: %v", statuses)
		}
		return resolved == len(rows) && e.Status == "RESOLVED", nil
	}); err != nil {
		t.Fatalf("event not resolved in one step: %v (%v)", err, statuses)
	}
	w.eventuallyEvent(ev, "RESOLVED and settled", func(e *pmxv1.Event) bool {
		return e.Status.Phase == pmxv1.MarketPhaseResolved && meta.IsStatusConditionTrue(e.Status.Conditions, string(pmxv1.MarketSettled))
	})
	for i, want := range []pmxv1.Resolution{pmxv1.ResolutionNo, pmxv1.ResolutionYes, pmxv1.ResolutionNo} {
		m := w.eventually(ms[i], "resolved", func(m *pmxv1.Market) bool { return m.Status.Phase == pmxv1.MarketPhaseResolved })
		if m.Spec.Resolution != want {
			t.Errorf("%s: resolution %q, want %q", m.Name, m.Spec.Resolution, want)
		}
	}
	// Its event settled, the deleted Market goes (the Event lists its outcome again, as a new one).
	if err := poll.Until(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		var m pmxv1.Market
		err := w.k8s.Get(ctx, client.ObjectKeyFromObject(ms[2]), &m)
		return apierrors.IsNotFound(err) || (err == nil && m.UID != ms[2].UID), nil
	}); err != nil {
		t.Fatalf("the deleted Market %s stayed after its event was resolved", ms[2].Name)
	}
	// alice's 5 YES of psv pay 500; bob's NO pay nothing; his resting bid was released.
	if a, b := w.cash(aliceID), w.cash(bobID); a != 1_000_000-200+500 || b != 1_000_000-300 {
		t.Fatalf("after resolution: alice %d, bob %d", a, b)
	}
}

// TestEventDeletedVoids deletes an unresolved Event: its finalizer has the shard void the event,
// all its markets together, paying ⌊100/n⌋ per YES and (n−1)·⌊100/n⌋ per NO, then lets it go.
func TestEventDeletedVoids(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ev := w.newEvent("gone", "x", "y", "z")
	ms := w.eventMarkets(ev)
	alice, aliceID := w.account("alice")
	bob, bobID := w.account("bob")
	w.call(alice, "POST", "/api/v1/order", order(ms[2].Status.MarketID, "BUY", "YES", 40, 5), 201, nil)
	w.call(bob, "POST", "/api/v1/order", order(ms[2].Status.MarketID, "BUY", "NO", 60, 5), 201, nil)
	got := w.eventuallyEvent(ev, "recorded", func(e *pmxv1.Event) bool { return e.Status.EventID != "" })
	id := uuid.MustParse(got.Status.EventID)
	if err := w.k8s.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	var status string
	var getErr error
	if poll.Until(ctx, 20*time.Second, func(ctx context.Context) (bool, error) {
		e, err := w.st.Event(ctx, id)
		if err != nil {
			return false, err
		}
		status = string(e.Status)
		getErr = w.k8s.Get(ctx, client.ObjectKeyFromObject(ev), &pmxv1.Event{})
		return status == "CANCELED" && getErr != nil, nil
	}) != nil {
		t.Fatalf("deleted event: %s, Event %v", status, getErr)
	}
	e, _ := w.st.Event(ctx, id)
	rows, err := w.st.EventMarkets(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Status != "CANCELED" {
			t.Errorf("market %s: %s after the event was voided", r.ID, r.Status)
		}
	}
	// n = 3: each YES pays 33, each NO 66 (the cent left of each pair stays with the exchange).
	if a, b := w.cash(aliceID), w.cash(bobID); a != 1_000_000-200+5*33 || b != 1_000_000-300+5*66 {
		t.Fatalf("after the void: alice %d, bob %d", a, b)
	}
}

// TestEventSampleWithKubectl applies config/samples/events with kubectl, as a platform team
// would: the Event's four Markets are scheduled on one shard, `kubectl get evt` and `kubectl get
// pmxev` show the Event's columns, and `kubectl patch` resolves it. (kubectl takes ev and events
// for the core Event: the short names that reach this one are evt and pmxev, or the full
// events.pmx.dev.)
func TestEventSampleWithKubectl(t *testing.T) {
	w := newWorld(t)
	dir := k8stest.RepoRoot(t) + "/config/samples/events"
	out := w.env.Kubectl(t, "apply", "-n", "default", "-f", dir)
	const name = "rate-decision-2027-06"
	if !strings.Contains(out, "event.pmx.dev/"+name+" created") {
		t.Fatalf("kubectl apply: %s", out)
	}
	var ev pmxv1.Event
	if err := w.k8s.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, &ev); err != nil {
		t.Fatal(err)
	}
	if on := shardsOf(w.eventMarkets(&ev)); len(on) != 1 {
		t.Fatalf("the sample's markets are on %v; want one shard", on)
	}
	w.eventuallyEvent(&ev, "OPEN on a shard", func(e *pmxv1.Event) bool { return e.Status.Shard != "" })
	for _, short := range []string{"evt", "pmxev"} {
		out = w.env.Kubectl(t, "get", short, "-n", "default")
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := "NAME QUESTION STATUS LEADER PRICE SHARD HALTED AGE"; strings.Join(header, " ") != want {
			t.Errorf("kubectl get %s columns %v, want %s:\n%s", short, header, want, out)
		}
	}
	if out := w.env.Kubectl(t, "get", "mkt", "-n", "default", "-l", pmxv1.LabelEvent+"="+name, "-o", "name"); strings.Count(out, "market.pmx.dev/") != 4 {
		t.Errorf("kubectl get mkt -l %s=%s:\n%s", pmxv1.LabelEvent, name, out)
	}
	// spec.paused halts the event's markets: the Halted condition and column say so.
	w.env.Kubectl(t, "patch", "events.pmx.dev", name, "-n", "default", "--type=merge", "-p", `{"spec":{"paused":true}}`)
	w.eventuallyEvent(&ev, "Halted", func(e *pmxv1.Event) bool {
		c := meta.FindStatusCondition(e.Status.Conditions, string(pmxv1.MarketHalted))
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == string(pmxv1.ReasonEventPaused)
	})
	if out := w.env.Kubectl(t, "get", "evt", name, "-n", "default", "--no-headers"); strings.Fields(out)[len(strings.Fields(out))-2] != "True" {
		t.Errorf("kubectl get evt of a paused event does not show it halted:\n%s", out)
	}
	w.env.Kubectl(t, "patch", "events.pmx.dev", name, "-n", "default", "--type=merge", "-p", `{"spec":{"paused":false}}`)
	w.eventuallyEvent(&ev, "trading again", func(e *pmxv1.Event) bool {
		c := meta.FindStatusCondition(e.Status.Conditions, string(pmxv1.MarketHalted))
		return c != nil && c.Status == metav1.ConditionFalse
	})
	w.env.Kubectl(t, "patch", "events.pmx.dev", name, "-n", "default", "--type=merge", "-p", `{"spec":{"resolution":"hold"}}`)
	w.eventuallyEvent(&ev, "RESOLVED", func(e *pmxv1.Event) bool { return e.Status.Phase == pmxv1.MarketPhaseResolved })
}

// TestEventCEL checks that the apiserver refuses the edits the Event's rules forbid.
func TestEventCEL(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ev := w.newEvent("cel", "a", "b", "c")
	for _, tc := range []struct {
		name, want string
		edit       func(*pmxv1.EventSpec)
	}{
		{"add an outcome", "outcome keys are fixed", func(s *pmxv1.EventSpec) {
			s.Outcomes = append(s.Outcomes, pmxv1.EventOutcome{Key: "d", Label: "D"})
		}},
		{"rename an outcome", "outcome keys are fixed", func(s *pmxv1.EventSpec) { s.Outcomes[2].Key = "z" }},
		{"resolve to no outcome", "resolution must be the key of one of the outcomes", func(s *pmxv1.EventSpec) { s.Resolution = "zz" }},
		{"a repeated key", "Duplicate value", func(s *pmxv1.EventSpec) { s.Outcomes[1].Key = "a" }},
	} {
		// The controller writes the status meanwhile: read again on a conflict.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var cur pmxv1.Event
			if err := w.k8s.Get(ctx, client.ObjectKeyFromObject(ev), &cur); err != nil {
				return err
			}
			tc.edit(&cur.Spec)
			return w.k8s.Update(ctx, &cur)
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	one := &pmxv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"},
		Spec: pmxv1.EventSpec{Question: "q", Category: "c", Outcomes: []pmxv1.EventOutcome{{Key: "only", Label: "Only"}}}}
	if err := w.k8s.Create(ctx, one); err == nil || !strings.Contains(err.Error(), "spec.outcomes") {
		t.Errorf("an Event of one outcome: %v", err)
	}
}

// eventuallyEvent polls the Event until cond holds.
func (w *world) eventuallyEvent(ev *pmxv1.Event, what string, cond func(*pmxv1.Event) bool) *pmxv1.Event {
	w.t.Helper()
	var got pmxv1.Event
	var err error
	if poll.Until(w.t.Context(), 20*time.Second, func(ctx context.Context) (bool, error) {
		got = pmxv1.Event{}
		err = w.k8s.Get(ctx, client.ObjectKeyFromObject(ev), &got)
		return err == nil && cond(&got), nil
	}) != nil {
		w.t.Fatalf("Event %s: timed out waiting until %s; last: %+v (%v)", ev.Name, what, got.Status, err)
	}
	return &got
}

// waitForEvent waits for a Kubernetes event of reason about the object named name.
func (w *world) waitForEvent(name, reason string) {
	w.t.Helper()
	if !w.sawEvent(name, reason, 20*time.Second) {
		w.t.Fatalf("no %s event about %s", reason, name)
	}
}

// sawEvent reports whether a Kubernetes event of reason about the object name is recorded within
// timeout.
func (w *world) sawEvent(name, reason string, timeout time.Duration) bool {
	w.t.Helper()
	err := poll.Until(w.t.Context(), timeout, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := w.k8s.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				return true, nil
			}
		}
		return false, nil
	})
	return err == nil
}

// TestEventRegroups splits an event's markets over two live shards, as a shard that comes back
// while its markets are following one another to the other shard leaves them: the operator brings
// them together again on one shard, and the Event reports it.
func TestEventRegroups(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	ev := w.newEvent("split", "north", "south", "east")
	ms := w.eventMarkets(ev)
	owner := ms[0].Status.Shard
	other := "shard-a"
	if owner == other {
		other = "shard-b"
	}
	if _, err := w.st.Assign(ctx, uuid.MustParse(ms[1].Status.MarketID), other); err != nil {
		t.Fatal(err)
	}
	var on map[string]int
	if err := poll.Until(ctx, 30*time.Second, func(context.Context) (bool, error) {
		on = map[string]int{}
		for _, m := range ms {
			row, err := w.st.Market(ctx, uuid.MustParse(m.Status.MarketID))
			if err != nil {
				return false, err
			}
			if row.Shard != nil {
				on[*row.Shard]++
			}
		}
		return len(on) == 1 && on[owner] == len(ms), nil
	}); err != nil {
		t.Fatalf("the event's markets split over both live shards stay on %v: %v", on, err)
	}
	w.waitForEvent(ms[1].Name, string(reasonRegrouped))
	w.eventuallyEvent(ev, "reported on one shard", func(e *pmxv1.Event) bool { return e.Status.Shard == owner })
}

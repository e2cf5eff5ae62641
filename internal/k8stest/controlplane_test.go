package k8stest

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

// TestControlPlane checks the control plane Start gives, and pmx's CRD as the real kube-apiserver
// serves it: kubectl, printer columns, defaults, CEL rules and the status subresource.
func TestControlPlane(t *testing.T) {
	env := Start(t)
	c := env.Client

	t.Run("Versions", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
		if err != nil {
			t.Fatal(err)
		}
		v, err := dc.ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if v.GitVersion != KubernetesVersion {
			t.Errorf("kube-apiserver reports version %q, want %q", v.GitVersion, KubernetesVersion)
		}
		var kv struct {
			ClientVersion struct{ GitVersion string } `json:"clientVersion"`
			ServerVersion struct{ GitVersion string } `json:"serverVersion"`
		}
		if err := json.Unmarshal([]byte(env.Kubectl(t, "version", "-o", "json")), &kv); err != nil {
			t.Fatal(err)
		}
		if kv.ClientVersion.GitVersion != KubernetesVersion || kv.ServerVersion.GitVersion != KubernetesVersion {
			t.Errorf("kubectl version: client %q, server %q, want %q", kv.ClientVersion.GitVersion,
				kv.ServerVersion.GitVersion, KubernetesVersion)
		}
	})

	t.Run("Samples", func(t *testing.T) {
		samples := filepath.Join(RepoRoot(t), "config", "samples")
		out := env.Kubectl(t, "apply", "-f", samples)
		for _, name := range sampleNames(t, samples) {
			if !strings.Contains(out, "market.pmx.dev/"+name+" created") {
				t.Errorf("kubectl apply -f config/samples did not create %s:\n%s", name, out)
			}
		}
		// Server-side apply of the same manifests, as an owner of the fields, changes nothing.
		files, err := filepath.Glob(filepath.Join(samples, "market_*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no market_*.yaml in %s (%v)", samples, err)
		}
		args := []string{"apply", "--server-side", "--field-manager=k8stest", "--force-conflicts"}
		for _, f := range files {
			args = append(args, "-f", f)
		}
		out = env.Kubectl(t, args...)
		if n := strings.Count(out, " serverside-applied"); n != len(files) {
			t.Errorf("kubectl apply --server-side applied %d of %d files:\n%s", n, len(files), out)
		}
		for _, name := range sampleNames(t, samples) {
			if m := getMarket(t, env, name); m.Generation != 1 {
				t.Errorf("%s: generation %d after applying the same manifest again, want 1", name, m.Generation)
			}
		}

		out = env.Kubectl(t, "get", "mkt")
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		if want := []string{"NAME", "QUESTION", "STATUS", "SHARD", "HALTED", "LAST", "CLOSES", "AGE"}; strings.Join(header, " ") != strings.Join(want, " ") {
			t.Errorf("kubectl get mkt columns %v, want %v:\n%s", header, want, out)
		}
		for _, want := range []string{"rain-paris-2027-06-01", "Will it rain in Paris on 1 June 2027?", "2027-05-31T20:00:00Z",
			"go-1-30-by-march-2028", "marathon-world-record-2027"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get mkt lacks %q:\n%s", want, out)
			}
		}
		out = env.Kubectl(t, "get", "markets.pmx.dev", "-o", "wide")
		if !strings.Contains(out, "CATEGORY") || !strings.Contains(out, "weather") {
			t.Errorf("kubectl get markets -o wide lacks the category:\n%s", out)
		}
		if out := env.Kubectl(t, "get", "pmx", "-o", "name"); strings.Count(out, "market.pmx.dev/") != 3 {
			t.Errorf("kubectl get pmx (the category) = %q, want the 3 samples", out)
		}
	})

	t.Run("Defaults", func(t *testing.T) {
		m := newMarket("defaults")
		if err := c.Create(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		if m.Spec.LabelA != "Yes" || m.Spec.LabelB != "No" {
			t.Errorf("labels %q/%q after create, want the defaults Yes/No", m.Spec.LabelA, m.Spec.LabelB)
		}
		// Given labels are kept.
		m = newMarket("labels")
		m.Spec.LabelA, m.Spec.LabelB = "Record", "No record"
		if err := c.Create(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		got := getMarket(t, env, "labels")
		if got.Spec.LabelA != "Record" || got.Spec.LabelB != "No record" {
			t.Errorf("labels %q/%q, want Record/No record", got.Spec.LabelA, got.Spec.LabelB)
		}
	})

	t.Run("ResolutionCannotBeChanged", func(t *testing.T) {
		const msg = "resolution cannot be changed or removed once set"
		if err := c.Create(t.Context(), newMarket("resolve-once")); err != nil {
			t.Fatal(err)
		}
		env.Kubectl(t, "patch", "mkt", "resolve-once", "--type=merge", "-p", `{"spec":{"resolution":"YES"}}`)

		out, err := env.KubectlCmd(t.Context(), "patch", "mkt", "resolve-once", "--type=merge",
			"-p", `{"spec":{"resolution":"NO"}}`).CombinedOutput()
		if err == nil || !strings.Contains(string(out), msg) {
			t.Errorf("patching resolution YES to NO: err %v, output %s; want rejected with %q", err, out, msg)
		}
		out, err = env.KubectlCmd(t.Context(), "patch", "mkt", "resolve-once", "--type=json",
			"-p", `[{"op":"remove","path":"/spec/resolution"}]`).CombinedOutput()
		if err == nil || !strings.Contains(string(out), msg) {
			t.Errorf("removing resolution: err %v, output %s; want rejected with %q", err, out, msg)
		}
		for _, r := range []v1alpha1.Resolution{"", v1alpha1.ResolutionNo, v1alpha1.ResolutionCanceled} {
			m := getMarket(t, env, "resolve-once")
			m.Spec.Resolution = r
			if err := c.Update(t.Context(), m); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) {
				t.Errorf("update of resolution YES to %q: %v, want Invalid with %q", r, err, msg)
			}
		}
		if got := getMarket(t, env, "resolve-once").Spec.Resolution; got != v1alpha1.ResolutionYes {
			t.Errorf("resolution %q after the rejected changes, want YES", got)
		}
		// Setting the same value again, or changing anything else, is allowed.
		env.Kubectl(t, "patch", "mkt", "resolve-once", "--type=merge",
			"-p", `{"spec":{"resolution":"YES","description":"Resolved."}}`)
		env.Kubectl(t, "delete", "mkt", "resolve-once", "--wait=false")
		var m v1alpha1.Market
		if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "resolve-once"}, &m); !apierrors.IsNotFound(err) {
			t.Errorf("get after kubectl delete: %v, want NotFound", err)
		}
	})

	t.Run("ClosesAtBeforeResolvesAt", func(t *testing.T) {
		const msg = "closesAt must be before resolvesAt"
		base := time.Date(2027, 6, 1, 12, 0, 0, 0, time.UTC)
		for name, closesAt := range map[string]time.Time{"after": base.Add(time.Hour), "equal": base} {
			m := newMarket("closes-" + name)
			m.Spec.ClosesAt, m.Spec.ResolvesAt = &metav1.Time{Time: closesAt}, &metav1.Time{Time: base}
			if err := c.Create(t.Context(), m); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) {
				t.Errorf("create with closesAt %s resolvesAt %s: %v, want Invalid with %q", closesAt, base, err, msg)
			}
		}
		m := newMarket("closes-before")
		m.Spec.ClosesAt, m.Spec.ResolvesAt = &metav1.Time{Time: base.Add(-time.Hour)}, &metav1.Time{Time: base}
		if err := c.Create(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		out, err := env.KubectlCmd(t.Context(), "patch", "mkt", "closes-before", "--type=merge",
			"-p", `{"spec":{"closesAt":"2027-06-02T00:00:00Z"}}`).CombinedOutput()
		if err == nil || !strings.Contains(string(out), msg) {
			t.Errorf("patching closesAt after resolvesAt: err %v, output %s; want rejected with %q", err, out, msg)
		}
	})

	t.Run("FeeSchedule", func(t *testing.T) {
		// The CRD refuses a schedule out of range (OpenAPI) or breaking the rule (CEL), and stores
		// nothing.
		for _, tc := range []struct {
			name string
			fees v1alpha1.FeeSchedule
			want []string // in the error
		}{
			{"rebate above the taker fee", v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -701}, []string{"spec.fees", v1alpha1.FeeRuleMessage}},
			{"maker fee above the taker's", v1alpha1.FeeSchedule{TakerBps: 100, MakerBps: 200}, []string{"spec.fees", v1alpha1.FeeRuleMessage}},
			{"taker fee above 10000", v1alpha1.FeeSchedule{TakerBps: 10001, MakerBps: 0}, []string{"spec.fees.takerBps", "less than or equal to 10000"}},
			{"negative taker fee", v1alpha1.FeeSchedule{TakerBps: -1, MakerBps: 0}, []string{"spec.fees.takerBps", "greater than or equal to 0"}},
			{"maker rate below -10000", v1alpha1.FeeSchedule{TakerBps: 10000, MakerBps: -10001}, []string{"spec.fees.makerBps", "greater than or equal to -10000"}},
		} {
			m := newMarket("fees-refused")
			m.Spec.Fees = &tc.fees
			err := c.Create(t.Context(), m)
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: create: %v, want Invalid", tc.name, err)
				continue
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%s: create: %v, want it to say %q", tc.name, err, want)
				}
			}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: "fees-refused"}, &v1alpha1.Market{}); !apierrors.IsNotFound(err) {
				t.Errorf("%s: get after the refused create: %v, want NotFound", tc.name, err)
			}
		}
		// Both rates are required: kubectl apply of a schedule without makerBps is refused.
		apply := func(manifest string) (string, error) {
			cmd := env.KubectlCmd(t.Context(), "apply", "-f", "-")
			cmd.Stdin = strings.NewReader(manifest)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		out, err := apply("apiVersion: pmx.dev/v1alpha1\nkind: Market\nmetadata:\n  name: fees-half\n  namespace: default\n" +
			"spec:\n  question: Will it?\n  category: testing\n  fees:\n    takerBps: 700\n")
		if err == nil || !strings.Contains(out, "spec.fees.makerBps") || !strings.Contains(out, "Required value") {
			t.Errorf("kubectl apply of fees without makerBps: err %v, output %s; want spec.fees.makerBps required", err, out)
		}
		// An Event's schedule follows the same rules.
		ev := &v1alpha1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fees-refused"},
			Spec: v1alpha1.EventSpec{Question: "Which?", Category: "testing", Outcomes: []v1alpha1.EventOutcome{{Key: "a", Label: "A"}, {Key: "b", Label: "B"}},
				Fees: &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -701}}}
		if err := c.Create(t.Context(), ev); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), v1alpha1.FeeRuleMessage) {
			t.Errorf("create of an Event whose rebate is above its taker fee: %v, want Invalid with %q", err, v1alpha1.FeeRuleMessage)
		}
		if err := c.Get(t.Context(), client.ObjectKeyFromObject(ev), &v1alpha1.Event{}); !apierrors.IsNotFound(err) {
			t.Errorf("get of the refused Event: %v, want NotFound", err)
		}

		// A valid schedule is kept as given; a patch that breaks the rule is refused and leaves
		// it; removing it leaves none.
		m := newMarket("fees")
		m.Spec.Fees = &v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}
		if err := c.Create(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		refused, err := env.KubectlCmd(t.Context(), "patch", "mkt", "fees", "--type=merge", "-p", `{"spec":{"fees":{"makerBps":-800}}}`).CombinedOutput()
		if err == nil || !strings.Contains(string(refused), v1alpha1.FeeRuleMessage) {
			t.Errorf("patching makerBps below -takerBps: err %v, output %s; want rejected with %q", err, refused, v1alpha1.FeeRuleMessage)
		}
		if got := getMarket(t, env, "fees").Spec.Fees; got == nil || *got != (v1alpha1.FeeSchedule{TakerBps: 700, MakerBps: -175}) {
			t.Errorf("fees after the refused patch: %+v, want takerBps 700, makerBps -175", got)
		}
		env.Kubectl(t, "patch", "mkt", "fees", "--type=merge", "-p", `{"spec":{"fees":{"takerBps":10000,"makerBps":-10000}}}`)
		if got := getMarket(t, env, "fees").Spec.Fees; got == nil || *got != (v1alpha1.FeeSchedule{TakerBps: 10000, MakerBps: -10000}) {
			t.Errorf("fees after patching them to the bounds: %+v", got)
		}
		env.Kubectl(t, "patch", "mkt", "fees", "--type=json", "-p", `[{"op":"remove","path":"/spec/fees"}]`)
		if got := getMarket(t, env, "fees").Spec.Fees; got != nil {
			t.Errorf("fees after removing them: %+v, want none", got)
		}
	})

	t.Run("StatusSubresource", func(t *testing.T) {
		if err := c.Create(t.Context(), newMarket("status")); err != nil {
			t.Fatal(err)
		}
		m := getMarket(t, env, "status")
		spec, generation := m.Spec, m.Generation
		price := int32(42)
		m.Status = v1alpha1.MarketStatus{
			MarketID:           "0b7e5b1c-6a52-4c8e-9d0e-2f1a3b4c5d6e",
			Phase:              v1alpha1.MarketPhaseOpen,
			Shard:              "shard-0",
			Epoch:              1,
			LastTradePrice:     &price,
			ObservedGeneration: generation,
		}
		m.Spec.Question = "Changed through the status subresource?"
		if err := c.Status().Update(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		got := getMarket(t, env, "status")
		if got.Spec != spec || got.Generation != generation {
			t.Errorf("status update changed the spec: %+v (generation %d), want %+v (generation %d)",
				got.Spec, got.Generation, spec, generation)
		}
		if got.Status.Phase != v1alpha1.MarketPhaseOpen || got.Status.Shard != "shard-0" ||
			got.Status.LastTradePrice == nil || *got.Status.LastTradePrice != 42 {
			t.Errorf("status after the update: %+v", got.Status)
		}
		// Through the main resource, status is ignored and a spec change bumps the generation.
		got.Status.Phase = v1alpha1.MarketPhaseClosed
		got.Spec.Closed = true
		if err := c.Update(t.Context(), got); err != nil {
			t.Fatal(err)
		}
		got = getMarket(t, env, "status")
		if got.Status.Phase != v1alpha1.MarketPhaseOpen || !got.Spec.Closed || got.Generation != generation+1 {
			t.Errorf("after an update of the main resource: phase %s, closed %v, generation %d; want OPEN, true, %d",
				got.Status.Phase, got.Spec.Closed, got.Generation, generation+1)
		}
		// The status schema is enforced.
		got.Status.Phase = "BOGUS"
		if err := c.Status().Update(t.Context(), got); !apierrors.IsInvalid(err) {
			t.Errorf("status update with phase BOGUS: %v, want Invalid", err)
		}
		out := env.Kubectl(t, "get", "mkt", "status")
		if !strings.Contains(out, "OPEN") || !strings.Contains(out, "shard-0") || !strings.Contains(out, "42") {
			t.Errorf("kubectl get mkt status does not show the status:\n%s", out)
		}
	})
}

func newMarket(name string) *v1alpha1.Market {
	return &v1alpha1.Market{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       v1alpha1.MarketSpec{Question: "Will " + name + " pass?", Category: "testing"},
	}
}

func getMarket(t *testing.T, env *Env, name string) *v1alpha1.Market {
	t.Helper()
	var m v1alpha1.Market
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: name}, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

// sampleNames returns the names of the Markets in the folder config/samples.
func sampleNames(t *testing.T, dir string) []string {
	t.Helper()
	markets, err := v1alpha1.LoadMarkets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(markets) == 0 {
		t.Fatalf("no markets in %s", dir)
	}
	var names []string
	for _, m := range markets {
		names = append(names, m.Name)
	}
	return names
}

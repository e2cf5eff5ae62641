package v1alpha1

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
)

// These tests run the Event's CRD through the apiserver's own code, as crd_test.go does the
// Market's: schema and CEL rules on create, and the transition rules on update.

// eventManifest is an Event named e with the given spec lines (unindented YAML).
func eventManifest(spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: pmx.dev/v1alpha1\nkind: Event\nmetadata:\n  name: e\nspec:\n")
	for line := range strings.Lines(strings.TrimSpace(spec) + "\n") {
		b.WriteString("  " + line)
	}
	return b.String()
}

const eventQuestion = `
question: Which party wins the most seats?
category: politics
`

// outcomes is an outcomes list of the given keys, each labelled with its key in upper case (cut to
// the 50 characters a label may have).
func outcomes(keys ...string) string {
	var b strings.Builder
	b.WriteString("outcomes:\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "- key: %q\n  label: %q\n", k, strings.ToUpper(k[:min(len(k), 50)]))
	}
	return b.String()
}

func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("o%d", i)
	}
	return keys
}

var validEvent = eventQuestion + outcomes("red", "blue", "green")

func TestEventCRDCreate(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_events.yaml")
	for _, tc := range []struct {
		name, spec, wantErr string // wantErr "" when valid
	}{
		{"three outcomes", validEvent, ""},
		{"every field", validEvent + `
description: The party with the most seats in the new parliament.
url: https://example.com/election
closesAt: "2027-05-01T12:00:00Z"
resolvesAt: "2027-05-03T12:00:00Z"
closed: true
resolution: blue`, ""},
		{"two outcomes", eventQuestion + outcomes("yes-2027", "no-2027"), ""},
		{"question of 445 characters", "category: c\nquestion: " + strings.Repeat("é", 445) + "\n" + outcomes("a", "b"), ""},
		{"fifty outcomes", eventQuestion + outcomes(manyKeys(50)...), ""},
		{"resolution CANCELED", validEvent + "resolution: CANCELED", ""},
		{"key of 63 characters", eventQuestion + outcomes(strings.Repeat("k", 63), "b"), ""},
		{"label of 50 characters", eventQuestion + "outcomes:\n- key: a\n  label: " + strings.Repeat("é", 50) + "\n- key: b\n  label: B", ""},

		{"fees", validEvent + "fees:\n  takerBps: 700\n  makerBps: -175", ""},
		{"rebate above the taker fee", validEvent + "fees:\n  takerBps: 700\n  makerBps: -701", "makerBps must lie between -takerBps and takerBps"},
		{"taker fee above 10000", validEvent + "fees:\n  takerBps: 10001\n  makerBps: 0", "spec.fees.takerBps"},
		{"fees without makerBps", validEvent + "fees:\n  takerBps: 700", "spec.fees.makerBps"},

		{"one outcome", eventQuestion + outcomes("red"), "spec.outcomes"},
		{"question of 446 characters", "category: c\nquestion: " + strings.Repeat("é", 446) + "\n" + outcomes("a", "b"), "spec.question"},
		{"no outcomes", eventQuestion, "spec.outcomes"},
		{"fifty-one outcomes", eventQuestion + outcomes(manyKeys(51)...), "spec.outcomes"},
		{"repeated key", eventQuestion + outcomes("red", "blue", "red"), "Duplicate value"},
		{"upper-case key", eventQuestion + outcomes("Red", "blue"), "spec.outcomes[0].key"},
		{"key with a dot", eventQuestion + outcomes("r.d", "blue"), "spec.outcomes[0].key"},
		{"key ending in a dash", eventQuestion + outcomes("red-", "blue"), "spec.outcomes[0].key"},
		{"key of 64 characters", eventQuestion + outcomes(strings.Repeat("k", 64), "b"), "spec.outcomes[0].key"},
		{"label of 51 characters", eventQuestion + "outcomes:\n- key: a\n  label: " + strings.Repeat("é", 51) + "\n- key: b\n  label: B", "spec.outcomes[0].label"},
		{"empty label", eventQuestion + "outcomes:\n- key: a\n  label: \"\"\n- key: b\n  label: B", "spec.outcomes[0].label"},
		{"no question", "category: c\n" + outcomes("a", "b"), "spec.question"},
		{"no category", "question: q\n" + outcomes("a", "b"), "spec.category"},
		{"ftp url", validEvent + "url: ftp://example.com/", "url must be an absolute http or https URL"},
		{"resolution not an outcome", validEvent + "resolution: purple", "resolution must be the key of one of the outcomes"},
		{"resolution YES", validEvent + `resolution: "YES"`, "resolution must be the key of one of the outcomes"},
		{"closesAt after resolvesAt", validEvent + "closesAt: \"2027-05-03T12:00:00Z\"\nresolvesAt: \"2027-05-01T12:00:00Z\"", "closesAt must be before resolvesAt"},
		{"closesAt in year 10000", validEvent + `closesAt: "9999-12-31T23:59:59-23:59"`, "spec.closesAt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := object(t, eventManifest(tc.spec))
			errs := c.create(t, obj)
			// The apiserver checks that list map keys are unique as it stores an object.
			errs = append(errs, listtype.ValidateListSetsAndMaps(nil, c.structural, obj)...)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("rejected: %v", errs.ToAggregate())
			case tc.wantErr != "" && len(errs) == 0:
				t.Errorf("accepted, want an error about %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("error %v, want one about %q", errs.ToAggregate(), tc.wantErr)
			}
		})
	}

	long := object(t, eventManifest(validEvent))
	long["metadata"].(map[string]any)["name"] = strings.Repeat("e", 64)
	if errs := c.create(t, long); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "at most 63 characters") {
		t.Errorf("an Event named with 64 characters: %v", errs.ToAggregate())
	}
}

func TestEventCRDUpdate(t *testing.T) {
	const (
		locked = "resolution cannot be changed or removed once set"
		fixed  = "outcome keys are fixed once the event is created"
	)
	c := loadCRDFile(t, "pmx.dev_events.yaml")
	for _, tc := range []struct {
		name     string
		old, new string // whole specs
		wantErr  string
	}{
		{"resolve", validEvent, validEvent + "resolution: green", ""},
		{"cancel", validEvent, validEvent + "resolution: CANCELED", ""},
		{"close and reopen", validEvent + "closed: true", validEvent + "closed: false", ""},
		{"relabel an outcome", validEvent, eventQuestion + "outcomes:\n- key: red\n  label: Reds\n- key: blue\n  label: BLUE\n- key: green\n  label: GREEN", ""},
		{"edit the text of a resolved event", validEvent + "resolution: red", validEvent + "resolution: red\ndescription: settled", ""},
		{"change the resolution", validEvent + "resolution: red", validEvent + "resolution: blue", locked},
		{"cancel a resolved event", validEvent + "resolution: red", validEvent + "resolution: CANCELED", locked},
		{"remove the resolution", validEvent + "resolution: CANCELED", validEvent, locked},
		{"add an outcome", validEvent, eventQuestion + outcomes("red", "blue", "green", "white"), fixed},
		{"remove an outcome", validEvent, eventQuestion + outcomes("red", "blue"), fixed},
		{"rename an outcome", validEvent, eventQuestion + outcomes("red", "blue", "lime"), fixed},
		{"reorder the outcomes", validEvent, eventQuestion + outcomes("blue", "red", "green"), fixed},
		{"change fees", validEvent + "fees:\n  takerBps: 700\n  makerBps: -175", validEvent + "fees:\n  takerBps: 500\n  makerBps: 0", ""},
		{"remove fees", validEvent + "fees:\n  takerBps: 700\n  makerBps: -175", validEvent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := object(t, eventManifest(tc.old))
			if errs := c.create(t, old); len(errs) > 0 {
				t.Fatalf("old object: %v", errs.ToAggregate())
			}
			errs := c.update(t, object(t, eventManifest(tc.new)), old)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("rejected: %v", errs.ToAggregate())
			case tc.wantErr != "" && len(errs) == 0:
				t.Errorf("accepted, want %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(errs.ToAggregate().Error(), tc.wantErr):
				t.Errorf("error %v, want %q", errs.ToAggregate(), tc.wantErr)
			}
		})
	}
}

func TestEventCRDNamesAndColumns(t *testing.T) {
	def := loadCRDFile(t, "pmx.dev_events.yaml").def
	if def.Name != "events.pmx.dev" || def.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("CRD %s, scope %s", def.Name, def.Spec.Scope)
	}
	n := def.Spec.Names
	if n.Kind != "Event" || n.Plural != "events" || !slices.Equal(n.ShortNames, []string{"evt", "pmxev"}) || !slices.Contains(n.Categories, "pmx") {
		t.Errorf("names %+v", n)
	}
	// kubectl resolves a short name to a built-in resource before a custom one: a short name of
	// Kubernetes' own (`kubectl api-resources`) would never reach this resource.
	builtin := []string{"cm", "cs", "csr", "cj", "crd", "crds", "deploy", "ds", "ep", "ev", "hpa", "ing", "limits", "netpol",
		"no", "ns", "pc", "pdb", "po", "psp", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc"}
	for _, s := range n.ShortNames {
		if slices.Contains(builtin, s) {
			t.Errorf("short name %s is Kubernetes' own: kubectl get %s lists the built-in resource, not this one", s, s)
		}
	}
	v := def.Spec.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource")
	}
	props := v.Schema.OpenAPIV3Schema.Properties
	for part, want := range map[string][]string{
		"spec":   {"category", "closed", "closesAt", "description", "fees", "outcomes", "paused", "placement", "question", "resolution", "resolvesAt", "shardPool", "url"},
		"status": {"conditions", "eventId", "leader", "leaderPrice", "observedGeneration", "outcomes", "phase", "shard"},
	} {
		if got := slices.Sorted(maps.Keys(props[part].Properties)); !slices.Equal(got, want) {
			t.Errorf("%s fields %v, want %v", part, got, want)
		}
	}
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		if c.Priority == 0 {
			columns = append(columns, c.Name+"="+c.JSONPath)
		}
	}
	want := []string{"Question=.spec.question", "Status=.status.phase", "Leader=.status.leader",
		"Price=.status.leaderPrice", "Shard=.status.shard", `Halted=.status.conditions[?(@.type=="Halted")].status`, "Age=.metadata.creationTimestamp"}
	if !slices.Equal(columns, want) {
		t.Errorf("kubectl get columns\n%v\nwant\n%v", columns, want)
	}
}

// TestEventSamples checks config/samples/events: each is an Event the CRD accepts, with four
// outcomes.
func TestEventSamples(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_events.yaml")
	dir := filepath.Join(repoRoot(t), "config", "samples", "events")
	files := globNames(t, dir, "event_*.yaml")
	if all := globNames(t, dir, "*"); len(files) == 0 || !slices.Equal(all, files) {
		t.Errorf("config/samples/events holds %v; want event_*.yaml files only", all)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		obj := object(t, string(data))
		if errs := c.create(t, obj); len(errs) > 0 {
			t.Errorf("%s: the CRD rejects it: %v", f, errs.ToAggregate())
		}
		if n := len(obj["spec"].(map[string]any)["outcomes"].([]any)); n != 4 {
			t.Errorf("%s: %d outcomes, want 4", f, n)
		}
	}
}

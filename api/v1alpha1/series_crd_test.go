package v1alpha1

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// These tests run the MarketSeries' CRD through the apiserver's own code, as crd_test.go does the
// Market's: the schema, its defaults and its CEL rules on create.

// seriesManifest is a MarketSeries named s with the given spec lines (unindented YAML).
func seriesManifest(spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: pmx.dev/v1alpha1\nkind: MarketSeries\nmetadata:\n  name: s\nspec:\n")
	for line := range strings.Lines(strings.TrimSpace(spec) + "\n") {
		b.WriteString("  " + line)
	}
	return b.String()
}

const seriesMarket = `
market:
  question: Will it rain in Paris on {date}?
  category: weather
`

func TestSeriesCRDCreate(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_marketseries.yaml")
	for _, tc := range []struct {
		name, spec, wantErr string // wantErr "" when valid
	}{
		{"daily", "schedule: \"0 18 * * *\"" + seriesMarket, ""},
		{"descriptor", "schedule: \"@weekly\"" + seriesMarket, ""},
		{"every field", `
schedule: "0 9 * * MON-FRI"
timeZone: America/New_York
closesAfter: 7h
resolvesAfter: 30h
keepListed: 0
keepSettledFor: 0s` + seriesMarket, ""},
		{"event", "schedule: \"0 0 1 * *\"\nevent:\n  question: Which index range on {date}?\n  category: finance\n  outcomes:\n  - key: low\n    label: Low\n  - key: high\n    label: High", ""},
		{"ranges and steps", "schedule: \"*/15 8-17 1,15 */2 ?\"" + seriesMarket, ""},
		{"a pool, dedicated", "schedule: \"@daily\"\nshardPool: hot\nplacement: Dedicated" + seriesMarket, ""},
		{"shared", "schedule: \"@daily\"\nplacement: Shared" + seriesMarket, ""},

		{"four fields", "schedule: \"0 18 * *\"" + seriesMarket, "schedule must be five cron fields"},
		{"six fields", "schedule: \"0 0 18 * * *\"" + seriesMarket, "schedule must be five cron fields"},
		{"@every", "schedule: \"@every 1h\"" + seriesMarket, "schedule must be five cron fields"},
		{"CRON_TZ", "schedule: \"CRON_TZ=UTC 0 18 * * *\"" + seriesMarket, "schedule must be five cron fields"},
		{"no template", "schedule: \"@daily\"", "set exactly one of market and event"},
		{"both templates", "schedule: \"@daily\"" + seriesMarket + "event:\n  question: q\n  category: c\n  outcomes:\n  - key: a\n    label: A\n  - key: b\n    label: B", "set exactly one of market and event"},
		{"negative keepListed", "schedule: \"@daily\"\nkeepListed: -1" + seriesMarket, "spec.keepListed"},
		{"keepListed 101", "schedule: \"@daily\"\nkeepListed: 101" + seriesMarket, "spec.keepListed"},
		{"negative closesAfter", "schedule: \"@daily\"\nclosesAfter: -1h" + seriesMarket, "closesAfter must be 0s or more"},
		{"negative keepSettledFor", "schedule: \"@daily\"\nkeepSettledFor: -1h" + seriesMarket, "keepSettledFor must be 0s or more"},
		{"resolves before it closes", "schedule: \"@daily\"\nclosesAfter: 2h\nresolvesAfter: 1h" + seriesMarket, "resolvesAfter must be longer than closesAfter"},
		{"resolves at 0s", "schedule: \"@daily\"\nresolvesAfter: 0s" + seriesMarket, "resolvesAfter must be longer than closesAfter"},
		{"a pool that is no DNS label", "schedule: \"@daily\"\nshardPool: Hot_Pool" + seriesMarket, "spec.shardPool in body should match '^[a-z]([-a-z0-9]*[a-z0-9])?$'"},
		{"a pool name too long", "schedule: \"@daily\"\nshardPool: " + strings.Repeat("p", 47) + seriesMarket, "spec.shardPool: Too long: may not be more than 46"},
		{"an unknown placement", "schedule: \"@daily\"\nplacement: alone" + seriesMarket, `spec.placement: Unsupported value: "alone": supported values: "Shared", "Dedicated"`},
		{"zone with a space", "schedule: \"@daily\"\ntimeZone: Europe/Par is" + seriesMarket, "spec.timeZone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.create(t, object(t, seriesManifest(tc.spec)))
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

	obj := object(t, seriesManifest("schedule: \"@daily\""+seriesMarket))
	if errs := c.create(t, obj); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	spec := obj["spec"].(map[string]any)
	if spec["timeZone"] != "UTC" || spec["keepListed"] != int64(1) || spec["keepSettledFor"] != "168h" {
		t.Errorf("defaults: timeZone %v, keepListed %v, keepSettledFor %v", spec["timeZone"], spec["keepListed"], spec["keepSettledFor"])
	}
	long := object(t, seriesManifest("schedule: \"@daily\""+seriesMarket))
	long["metadata"].(map[string]any)["name"] = strings.Repeat("s", 50)
	if errs := c.create(t, long); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "at most 49 characters") {
		t.Errorf("a MarketSeries named with 50 characters: %v", errs.ToAggregate())
	}
}

func TestSeriesCRDNames(t *testing.T) {
	def := loadCRDFile(t, "pmx.dev_marketseries.yaml").def
	n := def.Spec.Names
	if def.Name != "marketseries.pmx.dev" || n.Kind != "MarketSeries" || n.Plural != "marketseries" || !slices.Equal(n.ShortNames, []string{"mser", "series"}) {
		t.Errorf("CRD %s, names %+v", def.Name, n)
	}
	props := def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties
	want := []string{"conditions", "instances", "lastInstance", "lastInstanceTime", "nextInstance", "nextInstanceTime", "observedGeneration", "seriesId"}
	if got := slices.Sorted(maps.Keys(props["status"].Properties)); !slices.Equal(got, want) {
		t.Errorf("status fields %v, want %v", got, want)
	}
}

// TestSeriesCRDPlacement: a series' shardPool and placement, which each instance takes, have the
// schema of a Market's and an Event's (their descriptions aside), so that no instance the series
// makes can be refused for them.
func TestSeriesCRDPlacement(t *testing.T) {
	spec := func(file string) map[string]apiextensionsv1.JSONSchemaProps {
		return loadCRDFile(t, file).def.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	}
	series := spec("pmx.dev_marketseries.yaml")
	for _, file := range []string{"pmx.dev_markets.yaml", "pmx.dev_events.yaml"} {
		other := spec(file)
		for _, name := range []string{"shardPool", "placement"} {
			a, b := series[name], other[name]
			a.Description, b.Description = "", ""
			if !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("spec.%s: the series' schema %+v, %s's %+v", name, a, file, b)
			}
		}
	}
}

// TestSeriesSamples checks config/samples/series: each file a MarketSeries the CRD accepts.
func TestSeriesSamples(t *testing.T) {
	c := loadCRDFile(t, "pmx.dev_marketseries.yaml")
	dir := filepath.Join(repoRoot(t), "config", "samples", "series")
	files := globNames(t, dir, "*.yaml")
	if len(files) == 0 {
		t.Fatal("no sample series")
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if errs := c.create(t, object(t, string(data))); len(errs) > 0 {
			t.Errorf("%s: the CRD rejects it: %v", f, errs.ToAggregate())
		}
	}
}

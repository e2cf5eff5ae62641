package v1alpha1

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

// These tests run the generated CRD through the apiserver's own code for CustomResourceDefinitions
// (k8s.io/apiextensions-apiserver): the checks made when the CRD is applied, then defaulting,
// OpenAPI schema validation and CEL rules on Market objects, including the transition rule on
// updates. They need no running apiserver; the envtest suites of the controllers cover the rest.

// crd is one of config/crd/bases ready to default and validate its objects.
type crd struct {
	def        *apiextensionsv1.CustomResourceDefinition
	structural *structuralschema.Structural
	schema     validation.SchemaValidator
	cel        *cel.Validator
}

// loadCRD is the Market's CRD, config/crd/bases/pmx.dev_markets.yaml.
func loadCRD(t *testing.T) *crd {
	t.Helper()
	return loadCRDFile(t, "pmx.dev_markets.yaml")
}

// loadCRDFile is config/crd/bases/name.
func loadCRDFile(t *testing.T, name string) *crd {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "config", "crd", "bases", name))
	if err != nil {
		t.Fatal(err)
	}
	var def apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &def); err != nil {
		t.Fatal(err)
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&def)
	var internal apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&def, &internal, nil); err != nil {
		t.Fatal(err)
	}
	// What the apiserver checks when the CRD is created: structural schema, CEL rules that
	// compile and fit the cost budget, defaults that validate.
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &internal); len(errs) > 0 {
		t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
	}
	if len(internal.Spec.Versions) != 1 || internal.Spec.Versions[0].Name != GroupVersion.Version {
		t.Fatalf("CRD versions %v, want only %s", internal.Spec.Versions, GroupVersion.Version)
	}
	// The internal form keeps a schema shared by every version in spec.validation.
	validationSpec := internal.Spec.Validation
	if v := internal.Spec.Versions[0].Schema; v != nil {
		validationSpec = v
	}
	props := validationSpec.OpenAPIV3Schema
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		t.Fatal(err)
	}
	schema, _, err := validation.NewSchemaValidator(props)
	if err != nil {
		t.Fatal(err)
	}
	return &crd{
		def:        &def,
		structural: structural,
		schema:     schema,
		cel:        cel.NewValidator(structural, true, celconfig.PerCallLimit),
	}
}

// create defaults obj and validates it as the apiserver does on create.
func (c *crd) create(t *testing.T, obj map[string]any) field.ErrorList {
	t.Helper()
	defaulting.Default(obj, c.structural)
	errs := validation.ValidateCustomResource(nil, obj, c.schema)
	celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// update defaults obj and validates it as the apiserver does on an update from old.
func (c *crd) update(t *testing.T, obj, old map[string]any) field.ErrorList {
	t.Helper()
	defaulting.Default(obj, c.structural)
	errs := validation.ValidateCustomResourceUpdate(nil, obj, old, c.schema)
	celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, old, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

// object decodes a YAML manifest as the apiserver holds it: JSON numbers as int64 or float64.
func object(t *testing.T, manifest string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// marketManifest is a Market named m with the given spec lines (unindented YAML).
func marketManifest(spec string) string {
	var b strings.Builder
	b.WriteString("apiVersion: pmx.dev/v1alpha1\nkind: Market\nmetadata:\n  name: m\nspec:\n")
	for line := range strings.Lines(strings.TrimSpace(spec) + "\n") {
		b.WriteString("  " + line)
	}
	return b.String()
}

const validSpec = `
question: Will it snow in Oslo on 1 December 2027?
category: weather
`

// specCases are specs for a new Market. The CRD and LoadMarkets must agree on each: both accept it
// or both reject it, LoadMarkets naming field.
var specCases = []struct {
	name  string
	spec  string
	field string // "" when valid
}{
	{"minimal", validSpec, ""},
	{"every field", validSpec + `
description: Resolves YES if the Norwegian Meteorological Institute reports snowfall at Blindern.
url: https://www.met.no/en
labelA: Snow
labelB: No snow
closesAt: "2027-11-30T12:00:00Z"
resolvesAt: "2027-12-02T12:00:00Z"
closed: true
resolution: CANCELED`, ""},
	{"unquoted timestamps", validSpec + "closesAt: 2027-11-30T12:00:00Z\nresolvesAt: 2027-12-02T12:00:00+01:00", ""},
	{"only closesAt", validSpec + `closesAt: "2027-11-30T12:00:00Z"`, ""},
	{"only resolvesAt", validSpec + `resolvesAt: "2027-11-30T12:00:00Z"`, ""},
	{"http url with path and query", validSpec + "url: http://example.com/a/b?c=d#e", ""},
	{"question of 500 characters", "category: c\nquestion: " + strings.Repeat("é", 500), ""},
	{"resolution YES", validSpec + "resolution: \"YES\"", ""},
	{"resolution NO", validSpec + "resolution: \"NO\"", ""},
	{"a pool, dedicated", validSpec + "shardPool: hot\nplacement: Dedicated", ""},
	{"shared", validSpec + "placement: Shared", ""},

	{"no question", "category: weather", "spec.question"},
	{"empty question", "category: weather\nquestion: \"\"", "spec.question"},
	{"question of 501 characters", "category: c\nquestion: " + strings.Repeat("é", 501), "spec.question"},
	{"no category", "question: Will it?", "spec.category"},
	{"empty category", "question: Will it?\ncategory: \"\"", "spec.category"},
	{"category too long", "question: Will it?\ncategory: " + strings.Repeat("c", 101), "spec.category"},
	{"description too long", validSpec + "description: " + strings.Repeat("d", 10001), "spec.description"},
	{"empty label", validSpec + `labelA: ""`, "spec.labelA"},
	{"label too long", validSpec + "labelB: " + strings.Repeat("n", 51), "spec.labelB"},
	{"relative url", validSpec + "url: /weather/oslo", "spec.url"},
	{"url without scheme", validSpec + "url: www.met.no", "spec.url"},
	{"ftp url", validSpec + "url: ftp://met.no/snow", "spec.url"},
	{"empty url", validSpec + `url: ""`, "spec.url"},
	{"url too long", validSpec + "url: https://example.com/" + strings.Repeat("a", 2030), "spec.url"},
	{"lower-case resolution", validSpec + "resolution: \"yes\"", "spec.resolution"},
	{"unknown resolution", validSpec + "resolution: MAYBE", "spec.resolution"},
	{"empty resolution", validSpec + `resolution: ""`, "spec.resolution"},
	{"unquoted YES, a YAML boolean", validSpec + "resolution: YES", "spec.resolution"},
	{"unquoted Yes label, a YAML boolean", validSpec + "labelA: Yes", "spec.labelA"},
	{"unquoted no category, a YAML boolean", "question: Will it?\ncategory: no", "spec.category"},
	{"closed as a string", validSpec + `closed: "true"`, "spec.closed"},
	{"a pool that is no DNS label", validSpec + "shardPool: Hot_Pool", "spec.shardPool"},
	{"a pool name too long", validSpec + "shardPool: " + strings.Repeat("p", 47), "spec.shardPool"},
	{"an unknown placement", validSpec + "placement: alone", "spec.placement"},
	{"malformed closesAt", validSpec + "closesAt: next tuesday", "spec.closesAt"},
	{"times at the bounds", validSpec + "closesAt: \"1970-01-01T00:00:00Z\"\nresolvesAt: \"9999-12-31T23:59:59.999999999Z\"", ""},
	{"resolvesAt at the end of year 9999 by its offset", validSpec + `resolvesAt: "9999-12-31T23:59:59+00:01"`, ""},
	{"closesAt in year 10000 in UTC", validSpec + `closesAt: "9999-12-31T23:59:59-23:59"`, "spec.closesAt"},
	{"resolvesAt in year 10000 in UTC", validSpec + `resolvesAt: "9999-12-31T23:59:59-23:59"`, "spec.resolvesAt"},
	{"resolvesAt a minute into year 10000", validSpec + `resolvesAt: "9999-12-31T23:59:00-00:01"`, "spec.resolvesAt"},
	{"closesAt before 1970", validSpec + `closesAt: "1969-12-31T23:59:59Z"`, "spec.closesAt"},
	{"closesAt in year -1 in UTC", validSpec + `closesAt: "0000-01-01T00:00:00+23:59"`, "spec.closesAt"},
	{"resolvesAt in year 0", validSpec + `resolvesAt: "0000-06-01T00:00:00Z"`, "spec.resolvesAt"},
	{"closesAt after resolvesAt", validSpec + "closesAt: \"2027-12-02T12:00:00Z\"\nresolvesAt: \"2027-11-30T12:00:00Z\"", "closesAt must be before resolvesAt"},
	{"fees", validSpec + "fees:\n  takerBps: 700\n  makerBps: -175", ""},
	{"fees at the bounds", validSpec + "fees:\n  takerBps: 10000\n  makerBps: -10000", ""},
	{"no fees, explicitly zero", validSpec + "fees:\n  takerBps: 0\n  makerBps: 0", ""},
	{"maker fee equal to the taker's", validSpec + "fees:\n  takerBps: 300\n  makerBps: 300", ""},
	{"rebate above the taker fee", validSpec + "fees:\n  takerBps: 700\n  makerBps: -701", "makerBps must lie between -takerBps and takerBps"},
	{"maker fee above the taker's", validSpec + "fees:\n  takerBps: 100\n  makerBps: 200", "makerBps must lie between -takerBps and takerBps"},
	{"rebate without a taker fee", validSpec + "fees:\n  takerBps: 0\n  makerBps: -1", "makerBps must lie between -takerBps and takerBps"},
	{"taker fee above 10000", validSpec + "fees:\n  takerBps: 10001\n  makerBps: 0", "spec.fees.takerBps"},
	{"negative taker fee", validSpec + "fees:\n  takerBps: -1\n  makerBps: 0", "spec.fees.takerBps"},
	{"maker rate below -10000", validSpec + "fees:\n  takerBps: 10000\n  makerBps: -10001", "spec.fees.makerBps"},
	{"fees without makerBps", validSpec + "fees:\n  takerBps: 700", "spec.fees.makerBps"},
	{"fees without takerBps", validSpec + "fees:\n  makerBps: 0", "spec.fees.takerBps"},
	{"fractional fee", validSpec + "fees:\n  takerBps: 7.5\n  makerBps: 0", "spec.fees.takerBps"},
	{"closesAt equal to resolvesAt", validSpec + "closesAt: \"2027-12-02T12:00:00Z\"\nresolvesAt: \"2027-12-02T13:00:00+01:00\"", "closesAt must be before resolvesAt"},
}

func TestCRDAndLoadMarketsAgree(t *testing.T) {
	c := loadCRD(t)
	for _, tc := range specCases {
		t.Run(tc.name, func(t *testing.T) {
			manifest := marketManifest(tc.spec)

			crdErrs := c.create(t, object(t, manifest))
			if tc.field == "" && len(crdErrs) > 0 {
				t.Errorf("the CRD rejects it: %v", crdErrs.ToAggregate())
			}
			if tc.field != "" && len(crdErrs) == 0 {
				t.Errorf("the CRD accepts it, want an error about %s", tc.field)
			}

			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifest), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadMarkets(dir)
			switch {
			case tc.field == "" && err != nil:
				t.Errorf("LoadMarkets rejects it: %v", err)
			case tc.field != "" && err == nil:
				t.Errorf("LoadMarkets accepts it, want an error about %s", tc.field)
			case tc.field != "" && !strings.Contains(err.Error(), tc.field):
				t.Errorf("LoadMarkets error %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestCRDDefaultsLabels(t *testing.T) {
	c := loadCRD(t)
	for _, tc := range []struct {
		spec           string
		labelA, labelB string
	}{
		{validSpec, DefaultLabelA, DefaultLabelB},
		{validSpec + "labelA: Snow", "Snow", DefaultLabelB},
		{validSpec + "labelA: Snow\nlabelB: Rain", "Snow", "Rain"},
	} {
		obj := object(t, marketManifest(tc.spec))
		if errs := c.create(t, obj); len(errs) > 0 {
			t.Fatal(errs.ToAggregate())
		}
		spec := obj["spec"].(map[string]any)
		if spec["labelA"] != tc.labelA || spec["labelB"] != tc.labelB {
			t.Errorf("%q: CRD defaults labels to %v/%v, want %s/%s", tc.spec, spec["labelA"], spec["labelB"], tc.labelA, tc.labelB)
		}

		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(marketManifest(tc.spec)), 0o644); err != nil {
			t.Fatal(err)
		}
		ms, err := LoadMarkets(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := ms[0].Spec; got.LabelA != tc.labelA || got.LabelB != tc.labelB {
			t.Errorf("%q: LoadMarkets defaults labels to %s/%s, want %s/%s", tc.spec, got.LabelA, got.LabelB, tc.labelA, tc.labelB)
		}
	}
}

func TestCRDResolutionCannotChange(t *testing.T) {
	const locked = "resolution cannot be changed or removed once set"
	c := loadCRD(t)
	for _, tc := range []struct {
		name     string
		old, new string // spec lines added to validSpec
		wantErr  string
	}{
		{"resolve YES", "", "resolution: \"YES\"", ""},
		{"resolve NO after closing", "closed: true", "closed: true\nresolution: \"NO\"", ""},
		{"cancel", "", "resolution: CANCELED", ""},
		{"close", "", "closed: true", ""},
		{"reopen", "closed: true", "closed: false", ""},
		{"edit the text of a resolved market", "resolution: \"YES\"", "resolution: \"YES\"\ndescription: settled", ""},
		{"change YES to NO", "resolution: \"YES\"", "resolution: \"NO\"", locked},
		{"change NO to CANCELED", "resolution: \"NO\"", "resolution: CANCELED", locked},
		{"change CANCELED to YES", "resolution: CANCELED", "resolution: \"YES\"", locked},
		{"remove YES", "resolution: \"YES\"", "", locked},
		{"remove CANCELED", "resolution: CANCELED", "closed: true", locked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := object(t, marketManifest(validSpec+tc.old))
			if errs := c.create(t, old); len(errs) > 0 {
				t.Fatalf("old object: %v", errs.ToAggregate())
			}
			errs := c.update(t, object(t, marketManifest(validSpec+tc.new)), old)
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

func TestCRDNamesAndColumns(t *testing.T) {
	def := loadCRD(t).def
	if def.Name != "markets.pmx.dev" || def.Spec.Group != GroupVersion.Group || def.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("CRD %s, group %s, scope %s", def.Name, def.Spec.Group, def.Spec.Scope)
	}
	n := def.Spec.Names
	if n.Kind != "Market" || n.ListKind != "MarketList" || n.Plural != "markets" || !slices.Equal(n.ShortNames, []string{"mkt"}) {
		t.Errorf("names %+v", n)
	}
	v := def.Spec.Versions[0]
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Error("no status subresource")
	}
	props := v.Schema.OpenAPIV3Schema.Properties
	for part, want := range map[string][]string{
		"spec":   {"category", "closed", "closesAt", "description", "fees", "labelA", "labelB", "paused", "placement", "question", "resolution", "resolvesAt", "shardPool", "url"},
		"status": {"conditions", "epoch", "lastTradePrice", "marketId", "observedGeneration", "phase", "shard"},
	} {
		got := slices.Sorted(maps.Keys(props[part].Properties))
		if !slices.Equal(got, want) {
			t.Errorf("%s fields %v, want %v", part, got, want)
		}
	}
	if got := props["spec"].Required; !slices.Equal(got, []string{"category", "question"}) {
		t.Errorf("spec requires %v", got)
	}
	var columns []string
	for _, c := range v.AdditionalPrinterColumns {
		if c.Priority == 0 {
			columns = append(columns, c.Name+"="+c.JSONPath)
		}
	}
	want := []string{
		"Question=.spec.question", "Status=.status.phase", "Shard=.status.shard",
		`Halted=.status.conditions[?(@.type=="Halted")].status`, "Last=.status.lastTradePrice", "Closes=.spec.closesAt", "Age=.metadata.creationTimestamp",
	}
	if !slices.Equal(columns, want) {
		t.Errorf("kubectl get columns\n%v\nwant\n%v", columns, want)
	}
}

// TestSamples checks config/samples: every sample is a valid Market for the CRD and for
// LoadMarkets. The folder holds nothing else, so that kubectl apply -f config/samples/ works.
func TestSamples(t *testing.T) {
	c := loadCRD(t)
	dir := filepath.Join(repoRoot(t), "config", "samples")
	markets, err := LoadMarkets(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(markets) < 2 {
		t.Errorf("%d sample markets, want at least 2", len(markets))
	}
	// One sample shows a fee schedule (spec.fees), which the distributed tests' failover checks
	// through the API (exchangetest.RunFailover).
	if !slices.ContainsFunc(markets, func(m Market) bool { return m.Spec.Fees != nil }) {
		t.Error("no sample market has spec.fees; one shows how a fee schedule is given")
	}

	files := globNames(t, dir, "market_*.yaml")
	// The Event, MarketSeries and ShardPool samples sit in folders of their own (TestEventSamples,
	// TestSeriesSamples, TestShardPoolSamples), which kubectl apply -f config/samples/ and
	// LoadMarkets pass over: applying the markets must not start shard pods.
	if all := globNames(t, dir, "*"); !slices.Equal(all, slices.Sorted(slices.Values(append(slices.Clone(files), "events", "series", "shardpools")))) {
		t.Errorf("config/samples holds %v; only market_*.yaml files and the events, series and shardpools folders belong there (kubectl apply -f reads them all)", all)
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

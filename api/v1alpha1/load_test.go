package v1alpha1

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLoadMarkets(t *testing.T) {
	dir := filepath.Join("testdata", "load", "good")
	got, err := LoadMarkets(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: tm}
	}
	// File name order, then document order; kustomization.yaml, README.md, the dot file and the
	// subdirectory are skipped, and so is the empty document of 02_sports.yml.
	want := []struct {
		namespace, name string
		spec            MarketSpec
	}{
		{"trading", "snow-oslo", MarketSpec{
			Question: "Will it snow in Oslo on 1 December 2027?", Category: "weather",
			URL: "https://www.met.no/en", LabelA: "Yes", LabelB: "No",
			ClosesAt: at("2027-11-30T12:00:00Z"), ResolvesAt: at("2027-12-02T12:00:00Z"),
		}},
		{"", "final-goals", MarketSpec{
			Question: "Will the 2027 cup final have more than 2 goals?", Category: "sports",
			LabelA: "Over 2.5", LabelB: "Under 2.5",
		}},
		{"", "final-penalties", MarketSpec{
			Question: "Will the 2027 cup final go to penalties?", Category: "sports",
			LabelA: "Yes", LabelB: "No", Closed: true, Resolution: ResolutionCanceled,
		}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d markets, want %d", len(got), len(want))
	}
	for i, w := range want {
		m := got[i]
		if m.Namespace != w.namespace || m.Name != w.name {
			t.Errorf("market %d is %s/%s, want %s/%s", i, m.Namespace, m.Name, w.namespace, w.name)
		}
		if m.APIVersion != GroupVersion.String() || m.Kind != "Market" {
			t.Errorf("%s: type %s %s", m.Name, m.APIVersion, m.Kind)
		}
		if !equalSpec(m.Spec, w.spec) {
			t.Errorf("%s: spec\n%+v\nwant\n%+v", m.Name, m.Spec, w.spec)
		}
		if m.Status.Phase != "" || m.Status.Shard != "" {
			t.Errorf("%s: status %+v kept from the manifest", m.Name, m.Status)
		}
	}
	if got[0].Labels["team"] != "weather" {
		t.Errorf("metadata.labels lost: %v", got[0].Labels)
	}
}

func equalSpec(a, b MarketSpec) bool {
	sameTime := func(x, y *metav1.Time) bool {
		return (x == nil) == (y == nil) && (x == nil || x.Equal(y))
	}
	if !sameTime(a.ClosesAt, b.ClosesAt) || !sameTime(a.ResolvesAt, b.ResolvesAt) {
		return false
	}
	a.ClosesAt, a.ResolvesAt, b.ClosesAt, b.ResolvesAt = nil, nil, nil, nil
	return a == b
}

// TestLoadMarketsErrors loads each directory of testdata/load/bad: each holds one mistake.
func TestLoadMarketsErrors(t *testing.T) {
	cases := []struct {
		dir  string
		want []string // parts of the error, in order
	}{
		{"unknown-field", []string{`unknown-field/market.yaml: document 1 (market "m"): unknown field "spec.colour"`}},
		{"field-case", []string{`field-case/market.yaml: document 1 (market "m"): unknown field "spec.Question"`}},
		{"duplicate-key", []string{`duplicate-key/market.yaml: document 1: yaml: unmarshal errors:`, `key "category" already set`}},
		{"wrong-kind", []string{`wrong-kind/cm.yaml: document 1: apiVersion "v1", kind "ConfigMap": only pmx.dev/v1alpha1 Market objects are allowed`}},
		{"wrong-version", []string{`wrong-version/market.yaml: document 1: apiVersion "pmx.dev/v1beta1", kind "Market"`}},
		{"not-an-object", []string{`not-an-object/list.yaml: document 1: not a Kubernetes object`}},
		{"bad-yaml", []string{`bad-yaml/market.yaml: document 1: yaml: line 5:`}},
		{"wrong-type", []string{`wrong-type/market.yaml: document 1 (market "m"): `, `spec.closed`}},
		{"no-name", []string{`no-name/market.yaml: document 1: metadata.name: required`}},
		{"bad-name", []string{`bad-name/market.yaml: document 1 (market "Rain_Paris"): metadata.name: "Rain_Paris": a lowercase RFC 1123 subdomain`}},
		{"missing-fields", []string{
			`missing-fields/market.yaml: document 1 (market "m"): spec.question: required`,
			`missing-fields/market.yaml: document 1 (market "m"): spec.category: required`,
		}},
		{"no-spec", []string{`no-spec/market.yaml: document 1 (market "m"): spec.question: required`, `spec.category: required`}},
		{"bad-resolution", []string{`bad-resolution/market.yaml: document 1 (market "m"): spec.resolution: "MAYBE": must be one of YES, NO, CANCELED`}},
		{"unquoted-yes", []string{`unquoted-yes/market.yaml: document 1 (market "m"): spec.resolution: is the boolean true, not a string: quote the value`}},
		{"empty-label", []string{`empty-label/market.yaml: document 1 (market "m"): spec.labelB: must not be empty`}},
		{"bad-url", []string{`bad-url/market.yaml: document 1 (market "m"): spec.url: "example.com/rain": must be an absolute http or https URL`}},
		{"bad-time", []string{`bad-time/market.yaml: document 1 (market "m"): spec.closesAt: "next tuesday": must be an RFC 3339 date-time`}},
		{"closes-after-resolves", []string{`closes-after-resolves/market.yaml: document 1 (market "m"): spec: closesAt must be before resolvesAt`}},
		{"second-document", []string{`second-document/markets.yaml: document 2 (market "second"): spec.question: required`}},
		{"duplicate", []string{`duplicate/b.yaml: document 1 (market "same"): metadata.name: market default/same is already defined in testdata/load/bad/duplicate/a.yaml: document 1`}},
		{"no-such-directory", []string{`while reading market manifests: open testdata/load/bad/no-such-directory: no such file or directory`}},
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "load", "bad"))
	if err != nil {
		t.Fatal(err)
	}
	tested := map[string]bool{}
	for _, tc := range cases {
		tested[tc.dir] = true
	}
	for _, e := range entries {
		if !tested[e.Name()] {
			t.Errorf("testdata/load/bad/%s has no case in this test", e.Name())
		}
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			markets, err := LoadMarkets(filepath.Join("testdata", "load", "bad", tc.dir))
			if err == nil {
				t.Fatalf("no error; loaded %d markets", len(markets))
			}
			if markets != nil {
				t.Errorf("returned %d markets with the error", len(markets))
			}
			msg := err.Error()
			rest := msg
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("error\n%s\ndoes not contain, in order,\n%s", msg, strings.Join(tc.want, "\n"))
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestLoadMarketsEmptyDirectory(t *testing.T) {
	markets, err := LoadMarkets(t.TempDir())
	if err != nil || markets == nil || len(markets) != 0 {
		t.Errorf("LoadMarkets(empty dir) = %v, %v; want an empty list", markets, err)
	}
}

func TestLoadMarketsReportsEveryFile(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.yaml": "apiVersion: v1\nkind: Secret\n",
		"b.yml":  marketManifest("question: q"),
		"c.yaml": marketManifest(validSpec),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadMarkets(dir)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "a.yaml") || !strings.Contains(lines[1], "b.yml: document 1 (market \"m\"): spec.category: required") {
		t.Errorf("error lines %q, want one about a.yaml then one about b.yml", lines)
	}
}

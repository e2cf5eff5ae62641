package v1alpha1

import (
	"strings"
	"testing"
)

// TestValidateTyped covers the typed entry points that the standalone admin API uses; the rules
// themselves are tested against the CRD in TestCRDAndLoadMarketsAgree.
func TestValidateTyped(t *testing.T) {
	m := Market{Spec: MarketSpec{Question: "Will it?", Category: "weather"}}
	m.Name = "will-it"
	m.Default()
	if m.Spec.LabelA != DefaultLabelA || m.Spec.LabelB != DefaultLabelB {
		t.Errorf("Default left labels %q/%q", m.Spec.LabelA, m.Spec.LabelB)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	bad := Market{Spec: MarketSpec{Resolution: "yes", URL: "mailto:a@b.c", LabelA: strings.Repeat("x", 51)}}
	bad.Default()
	err := bad.Validate()
	if err == nil {
		t.Fatal("Validate accepted an invalid market")
	}
	want := []string{
		"metadata.name: required",
		"spec.question: required",
		"spec.category: required",
		"spec.labelA: must be at most 50 characters (it has 51)",
		`spec.url: "mailto:a@b.c": must be an absolute http or https URL`,
		`spec.resolution: "yes": must be one of YES, NO, CANCELED`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Validate:\n%s\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

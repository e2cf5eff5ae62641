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

// TestValidateText covers the rule the CRD cannot state: text Postgres can store, valid UTF-8
// without NUL, in every text field.
func TestValidateText(t *testing.T) {
	tests := []struct {
		name string
		edit func(*MarketSpec)
		want string // the one error; "" when valid
	}{
		{"UTF-8 text with control characters", func(s *MarketSpec) { s.Description = "caf\u00e9\x01\t\n" }, ""},
		{"NUL in the question", func(s *MarketSpec) { s.Question = "Will it\x00?" },
			"spec.question: must not contain a NUL character (U+0000; the database cannot store it); remove it"},
		{"invalid UTF-8 in the question", func(s *MarketSpec) { s.Question = "Will it\xff?" },
			"spec.question: must be valid UTF-8 (the database stores only that); send text encoded as UTF-8"},
		{"NUL in the description", func(s *MarketSpec) { s.Description = "\x00" }, "spec.description: must not contain a NUL"},
		{"NUL in the category", func(s *MarketSpec) { s.Category = "w\x00" }, "spec.category: must not contain a NUL"},
		{"NUL in the url", func(s *MarketSpec) { s.URL = "https://example.com/\x00" }, "spec.url: must not contain a NUL"},
		{"NUL in labelA", func(s *MarketSpec) { s.LabelA = "Y\x00" }, "spec.labelA: must not contain a NUL"},
		{"NUL in labelB", func(s *MarketSpec) { s.LabelB = "\x00" }, "spec.labelB: must not contain a NUL"},
		{"invalid UTF-8 in the description", func(s *MarketSpec) { s.Description = "\xc3(" }, "spec.description: must be valid UTF-8"},
		{"a surrogate in the category", func(s *MarketSpec) { s.Category = "\xed\xa0\x80" }, "spec.category: must be valid UTF-8"},
		{"invalid UTF-8 in the url", func(s *MarketSpec) { s.URL = "https://example.com/\xff" }, "spec.url: must be valid UTF-8"},
		{"invalid UTF-8 in labelA", func(s *MarketSpec) { s.LabelA = "\xfe" }, "spec.labelA: must be valid UTF-8"},
		{"invalid UTF-8 in labelB", func(s *MarketSpec) { s.LabelB = "No\x80" }, "spec.labelB: must be valid UTF-8"},
	}
	for _, tt := range tests {
		m := Market{Spec: MarketSpec{Question: "Will it?", Category: "weather"}}
		m.Name = "will-it"
		m.Default()
		tt.edit(&m.Spec)
		err := m.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%s: Validate = %v, want an error starting %q", tt.name, err, tt.want)
		}
	}
}

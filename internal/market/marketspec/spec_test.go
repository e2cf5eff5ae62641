package marketspec

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pmx-dev/pmx/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Hour))
	tests := []struct {
		name  string
		spec  v1alpha1.MarketSpec
		field string
	}{
		{"minimal", v1alpha1.MarketSpec{Question: "Will it rain?", Category: "weather"}, ""},
		{"schedule in order", v1alpha1.MarketSpec{Question: "q", Category: "c", ClosesAt: &t0, ResolvesAt: &t1}, ""},
		{"no question", v1alpha1.MarketSpec{Category: "c"}, "question"},
		{"no category", v1alpha1.MarketSpec{Question: "q"}, "category"},
		{"bad url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "ftp://x"}, "url"},
		{"resolves before it closes", v1alpha1.MarketSpec{Question: "q", Category: "c", ClosesAt: &t1, ResolvesAt: &t0}, "resolvesAt"},
		// What Postgres text cannot hold is refused here, not by the database.
		{"NUL in the question", v1alpha1.MarketSpec{Question: "q\x00", Category: "c"}, "question"},
		{"NUL in the description", v1alpha1.MarketSpec{Question: "q", Description: "\x00", Category: "c"}, "description"},
		{"NUL in the category", v1alpha1.MarketSpec{Question: "q", Category: "c\x00c"}, "category"},
		{"NUL in the url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "https://x/\x00"}, "url"},
		{"NUL in labelA", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelA: "\x00"}, "labelA"},
		{"NUL in labelB", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelB: "N\x00"}, "labelB"},
		{"invalid UTF-8 in the question", v1alpha1.MarketSpec{Question: "q\xff", Category: "c"}, "question"},
		{"invalid UTF-8 in the description", v1alpha1.MarketSpec{Question: "q", Description: "\xc3", Category: "c"}, "description"},
		{"invalid UTF-8 in the category", v1alpha1.MarketSpec{Question: "q", Category: "\xed\xa0\x80"}, "category"},
		{"invalid UTF-8 in the url", v1alpha1.MarketSpec{Question: "q", Category: "c", URL: "https://x/\xff"}, "url"},
		{"invalid UTF-8 in labelA", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelA: "\xfe"}, "labelA"},
		{"invalid UTF-8 in labelB", v1alpha1.MarketSpec{Question: "q", Category: "c", LabelB: "\x80"}, "labelB"},
		{"other control characters are text", v1alpha1.MarketSpec{Question: "q\x01\t\u2028", Category: "c\u00e9"}, ""},
	}
	for _, tt := range tests {
		err := Validate(&tt.spec)
		var se *SpecError
		if (tt.field == "") != (err == nil) || (err != nil && (!errors.As(err, &se) || se.Field != tt.field)) {
			t.Errorf("%s: Validate() = %v (%+v), want an error on %q", tt.name, err, se, tt.field)
		}
		if err == nil && (tt.spec.LabelA != "Yes" || tt.spec.LabelB != "No") {
			t.Errorf("%s: labels not defaulted: %+v", tt.name, tt.spec)
		}
	}
}

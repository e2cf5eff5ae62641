package controllers

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/k8stest"
)

// TestMarketTimesBounded creates Markets with times at and past the exchange's bounds against a
// real kube-apiserver: the CRD's CEL rules refuse a closesAt or resolvesAt outside 1970 to year
// 9999 in UTC (9999-12-31T23:59:59-23:59 is valid RFC 3339, but year 10000 in UTC), naming the
// field, and take the last instant of year 9999. The operator's own check (marketspec.Record) refuses
// the same for a CRD installed without the rules.
func TestMarketTimesBounded(t *testing.T) {
	env := k8stest.Start(t)
	ctx := context.Background()
	tests := []struct {
		name, field, at string
		ok              bool
	}{
		{"end-of-9999", "resolvesAt", "9999-12-31T23:59:59Z", true},
		{"epoch", "closesAt", "1970-01-01T00:00:00Z", true},
		{"year-10000-by-offset", "resolvesAt", "9999-12-31T23:59:59-23:59", false},
		{"closes-year-10000-by-offset", "closesAt", "9999-12-31T23:59:59-00:01", false},
		{"before-1970", "closesAt", "1969-12-31T23:59:59Z", false},
		{"year-minus-one-by-offset", "resolvesAt", "0000-01-01T00:00:00+23:59", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": pmxv1.GroupVersion.String(), "kind": "Market",
				"metadata": map[string]any{"name": "times-" + tc.name, "namespace": "default"},
				"spec":     map[string]any{"question": "Will it?", "category": "test", tc.field: tc.at},
			}}
			err := env.Client.Create(ctx, m)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("%s %s refused: %v", tc.field, tc.at, err)
			case !tc.ok && (!apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec."+tc.field) ||
				!strings.Contains(err.Error(), tc.field+" must be from 1970-01-01T00:00:00Z to 9999-12-31T23:59:59.999999999Z")):
				t.Fatalf("%s %s: %v, want the CRD's rule refusing it", tc.field, tc.at, err)
			}
		})
	}
}

package controllers

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pmxv1 "github.com/pmx-dev/pmx/api/v1alpha1"
	"github.com/pmx-dev/pmx/internal/domain"
	"github.com/pmx-dev/pmx/internal/k8stest"
	"github.com/pmx-dev/pmx/internal/records"
)

// TestUpdateStatusConflict writes a status computed from generation 1 of a Market whose spec
// became generation 2 meanwhile, against a real apiserver: the write conflicts, and the status
// written on retry must still describe generation 1, whose spec the reconcile acted on.
func TestUpdateStatusConflict(t *testing.T) {
	env := k8stest.Start(t)
	ctx := context.Background()
	r := &MarketReconciler{Client: env.Client}

	m := &pmxv1.Market{ObjectMeta: metav1.ObjectMeta{Name: "conflict", Namespace: "default"},
		Spec: pmxv1.MarketSpec{Question: "Will it conflict?", Category: "test"}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	acted := m.DeepCopy() // what the reconcile read: generation 1, no resolution

	// Meanwhile the spec changes: generation 2 asks for resolution YES.
	patch := client.MergeFrom(m.DeepCopy())
	m.Spec.Resolution = pmxv1.ResolutionYes
	if err := env.Client.Patch(ctx, m, patch); err != nil {
		t.Fatal(err)
	}
	if acted.Generation != 1 || m.Generation != 2 {
		t.Fatalf("generations %d and %d, want 1 and 2", acted.Generation, m.Generation)
	}

	obs := observation{row: &records.Market{ID: uuid.New(), Status: domain.MarketOpen}, noLive: true}
	if err := r.updateStatus(ctx, acted, obs, nil); err != nil {
		t.Fatal(err)
	}
	var got pmxv1.Market
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.ObservedGeneration != 1 {
		t.Errorf("observedGeneration %d, want 1: the status was computed from generation 1", got.Status.ObservedGeneration)
	}
	for _, c := range got.Status.Conditions {
		if c.ObservedGeneration != 1 {
			t.Errorf("condition %s has observedGeneration %d, want 1", c.Type, c.ObservedGeneration)
		}
	}
	// Generation 1 had no resolution: its status must not speak of one.
	if c := meta.FindStatusCondition(got.Status.Conditions, string(pmxv1.MarketSettled)); c == nil || c.Reason != string(pmxv1.ReasonAwaitingResolution) {
		t.Errorf("Settled = %+v, want reason AwaitingResolution (generation 1's spec)", c)
	}
	if acted.Generation != 1 || acted.Spec.Resolution != "" {
		t.Errorf("updateStatus changed the spec it acted on: generation %d, resolution %q", acted.Generation, acted.Spec.Resolution)
	}
}

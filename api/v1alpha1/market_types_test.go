package v1alpha1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for obj, kind := range map[runtime.Object]string{&Market{}: "Market", &MarketList{}: "MarketList"} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		if len(gvks) != 1 || gvks[0] != GroupVersion.WithKind(kind) {
			t.Errorf("%T registered as %v, want %v", obj, gvks, GroupVersion.WithKind(kind))
		}
	}
}

func TestPhases(t *testing.T) {
	for _, tc := range []struct {
		resolution Resolution
		phase      MarketPhase
	}{
		{ResolutionYes, MarketPhaseResolved},
		{ResolutionNo, MarketPhaseResolved},
		{ResolutionCanceled, MarketPhaseCanceled},
		{"", ""},
		{"MAYBE", ""},
	} {
		if got := tc.resolution.Phase(); got != tc.phase {
			t.Errorf("Resolution(%q).Phase() = %q, want %q", tc.resolution, got, tc.phase)
		}
	}
	for phase, final := range map[MarketPhase]bool{
		MarketPhaseOpen: false, MarketPhaseClosed: false, MarketPhaseResolved: true, MarketPhaseCanceled: true,
	} {
		if phase.Final() != final {
			t.Errorf("%s.Final() = %v", phase, !final)
		}
	}
}

func TestDeepCopyDoesNotShare(t *testing.T) {
	price := int32(42)
	m := &Market{Status: MarketStatus{LastTradePrice: &price}}
	m.Status.Conditions = append(m.Status.Conditions, newCondition(MarketReady))
	c := m.DeepCopy()
	*c.Status.LastTradePrice = 7
	c.Status.Conditions[0].Reason = "Changed"
	if *m.Status.LastTradePrice != 42 || m.Status.Conditions[0].Reason != string(ReasonRecorded) {
		t.Error("DeepCopy shares memory with the original")
	}
}

func newCondition(t MarketConditionType) metav1.Condition {
	return metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: string(ReasonRecorded)}
}

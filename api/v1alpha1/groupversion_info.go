// Package v1alpha1 holds the pmx.dev/v1alpha1 API: the Market custom resource through which platform
// teams create, close, resolve and cancel markets with kubectl; the Event custom resource, a question
// of 2 to 50 mutually exclusive outcomes whose Markets the operator creates and moves together; the MarketSeries custom resource,
// a Market or Event listed again and again on a schedule (internal/series holds its rules); the
// ShardPool custom resource, a set of matching shards the operator runs as a StatefulSet; and
// LoadMarkets, which reads Market manifests from a directory for the standalone exchange.
//
// The package depends only on the standard library, k8s.io/apimachinery, k8s.io/api/core/v1 (the
// ShardPool's pod fields) and sigs.k8s.io/yaml, so that anything in pmx can import it cheaply.
//
// +kubebuilder:object:generate=true
// +groupName=pmx.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every pmx custom resource.
const GroupName = "pmx.dev"

var (
	// GroupVersion is the group and version of the types in this package.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this group-version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Market{}, &MarketList{}, &Event{}, &EventList{}, &MarketSeries{}, &MarketSeriesList{},
		&ShardPool{}, &ShardPoolList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Package v1alpha1 holds the EvaTenant API (eva.aidonow.com/v1alpha1).
//
// The package depends only on apimachinery and the apiextensions JSON type, so tools can
// import it without pulling in the operator.
//
// +kubebuilder:object:generate=true
// +groupName=eva.aidonow.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the EvaTenant and EvaRollout kinds.
	GroupVersion = schema.GroupVersion{Group: "eva.aidonow.com", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind is the kind name of the EvaTenant type.
const Kind = "EvaTenant"

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &EvaTenant{}, &EvaTenantList{}, &EvaRollout{}, &EvaRolloutList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}

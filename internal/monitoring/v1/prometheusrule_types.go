// Package v1 describes the Prometheus Operator's PrometheusRule object
// (monitoring.coreos.com/v1), only the fields Eva uses, so the renderer has typed
// objects and tests a CRD generated from them.
//
// +kubebuilder:object:generate=true
// +groupName=monitoring.coreos.com
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the Prometheus Operator's API group and version.
var GroupVersion = schema.GroupVersion{Group: "monitoring.coreos.com", Version: "v1"}

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PrometheusRule{}, &PrometheusRuleList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers PrometheusRule with a scheme.
var AddToScheme = schemeBuilder.AddToScheme

// Rule is an alerting rule.
type Rule struct {
	// alert is the name of the alert.
	Alert string `json:"alert"`
	// expr is the PromQL expression.
	Expr string `json:"expr"`
	// for is how long the expression must hold before the alert fires.
	// +optional
	For string `json:"for,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RuleGroup is a named group of rules.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// PrometheusRuleSpec holds the rule groups.
type PrometheusRuleSpec struct {
	Groups []RuleGroup `json:"groups"`
}

// PrometheusRule is a set of Prometheus alerting rules.
//
// +kubebuilder:object:root=true
type PrometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PrometheusRuleSpec `json:"spec"`
}

// PrometheusRuleList is a list of PrometheusRule.
//
// +kubebuilder:object:root=true
type PrometheusRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PrometheusRule `json:"items"`
}

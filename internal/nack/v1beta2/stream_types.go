// Package v1beta2 describes NACK's JetStream Stream object (jetstream.nats.io/v1beta2),
// only the fields Eva uses. NACK's own Go module cannot be downloaded here; the field
// names and enums follow its CRD, and tests check rendered Streams against a CRD
// generated from these types.
//
// +kubebuilder:object:generate=true
// +groupName=jetstream.nats.io
package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is NACK's API group and version.
var GroupVersion = schema.GroupVersion{Group: "jetstream.nats.io", Version: "v1beta2"}

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Stream{}, &StreamList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers Stream with a scheme.
var AddToScheme = schemeBuilder.AddToScheme

// StreamSpec is the part of NACK's stream spec Eva sets.
type StreamSpec struct {
	// name of the stream in JetStream.
	Name string `json:"name"`
	// description of the stream.
	// +optional
	Description string `json:"description,omitempty"`
	// subjects the stream captures.
	// +optional
	Subjects []string `json:"subjects,omitempty"`
	// retention policy.
	// +kubebuilder:validation:Enum=limits;interest;workqueue
	// +optional
	Retention string `json:"retention,omitempty"`
	// maxMsgs is the most messages the stream keeps.
	// +optional
	MaxMsgs int64 `json:"maxMsgs,omitempty"`
	// maxBytes is the most bytes the stream keeps.
	// +optional
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// maxAge is how long messages are kept (a Go duration).
	// +optional
	MaxAge string `json:"maxAge,omitempty"`
	// discard says which messages go when a limit is reached.
	// +kubebuilder:validation:Enum=old;new
	// +optional
	Discard string `json:"discard,omitempty"`
	// storage backend.
	// +kubebuilder:validation:Enum=file;memory
	// +optional
	Storage string `json:"storage,omitempty"`
	// replicas of the stream in a clustered JetStream.
	// +optional
	Replicas int `json:"replicas,omitempty"`
	// duplicateWindow is the window of duplicate detection (a Go duration).
	// +optional
	DuplicateWindow string `json:"duplicateWindow,omitempty"`
}

// StreamStatus is what NACK reports.
type StreamStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Stream is a JetStream stream managed by NACK.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type Stream struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// spec keeps fields unknown to these types, as NACK's own CRD holds many more
	// (mirror, sources, servers, account, …): the admission policy eva-tenant-streams
	// must see them to refuse them.
	// +kubebuilder:pruning:PreserveUnknownFields
	Spec   StreamSpec   `json:"spec"`
	Status StreamStatus `json:"status,omitempty"`
}

// StreamList is a list of Stream.
//
// +kubebuilder:object:root=true
type StreamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stream `json:"items"`
}

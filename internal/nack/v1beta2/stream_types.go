// Package v1beta2 describes NACK's JetStream Stream and Account objects (jetstream.nats.io/v1beta2)
// as NACK's published CRD does: every spec field, with its defaults and validations.
// NACK's own Go module cannot be downloaded here; the tests' Stream CRD is generated
// from these types, so the API server defaults and prunes a Stream as a cluster with
// NACK's CRD does.
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
	s.AddKnownTypes(GroupVersion, &Stream{}, &StreamList{}, &Account{}, &AccountList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers Stream and Account with a scheme.
var AddToScheme = schemeBuilder.AddToScheme

// StreamSpec is NACK's stream spec, every field its published CRD (deploy/crds.yml)
// holds, with the same defaults and validations: the API server defaults a Stream in the
// tests as it does on a cluster with NACK, so the admission policy eva-tenant-streams is
// tested against the object NACK's CRD makes of a rendered Stream. Eva renders only the
// first fields (name to duplicateWindow) and, in an environment with natsAccounts,
// account; the others exist so that the CRD keeps them, as NACK's does, for the policy
// to refuse.
type StreamSpec struct {
	// name of the stream in JetStream.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^[^.*>]*$`
	// +optional
	Name string `json:"name,omitempty"`
	// description of the stream.
	// +optional
	Description string `json:"description,omitempty"`
	// subjects the stream captures.
	// +kubebuilder:validation:items:MinLength=1
	// +optional
	Subjects []string `json:"subjects,omitempty"`
	// retention policy.
	// +kubebuilder:validation:Enum=limits;interest;workqueue
	// +kubebuilder:default=limits
	// +optional
	Retention string `json:"retention,omitempty"`
	// maxMsgs is the most messages the stream keeps; -1 for no limit.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:default=-1
	// +optional
	MaxMsgs int64 `json:"maxMsgs,omitempty"`
	// maxBytes is the most bytes the stream keeps; -1 for no limit.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:default=-1
	// +optional
	MaxBytes int64 `json:"maxBytes,omitempty"`
	// maxAge is how long messages are kept (a Go duration); empty for no limit.
	// +kubebuilder:default=""
	// +optional
	MaxAge string `json:"maxAge,omitempty"`
	// discard says which messages go when a limit is reached.
	// +kubebuilder:validation:Enum=old;new
	// +kubebuilder:default=old
	// +optional
	Discard string `json:"discard,omitempty"`
	// storage backend.
	// +kubebuilder:validation:Enum=file;memory
	// +kubebuilder:default=memory
	// +optional
	Storage string `json:"storage,omitempty"`
	// replicas of the stream in a clustered JetStream.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Replicas int `json:"replicas,omitempty"`
	// duplicateWindow is the window of duplicate detection (a Go duration).
	// +optional
	DuplicateWindow string `json:"duplicateWindow,omitempty"`

	StreamSpecUnrendered `json:",inline"`
}

// StreamSpecUnrendered are the fields of NACK's stream spec that Eva never renders.
// Each is a pointer, so that a rendered Stream leaves them out; NACK's CRD defaults
// most of them (the defaults below are its).
type StreamSpecUnrendered struct {
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:default=-1
	// +optional
	MaxConsumers *int64 `json:"maxConsumers,omitempty"`
	// +kubebuilder:default=false
	// +optional
	DiscardPerSubject *bool `json:"discardPerSubject,omitempty"`
	// +kubebuilder:default=0
	// +optional
	MaxMsgsPerSubject *int64 `json:"maxMsgsPerSubject,omitempty"`
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:default=-1
	// +optional
	MaxMsgSize *int64 `json:"maxMsgSize,omitempty"`
	// +kubebuilder:default=false
	// +optional
	NoAck *bool `json:"noAck,omitempty"`
	// +optional
	Placement *StreamPlacement `json:"placement,omitempty"`
	// +optional
	Mirror *StreamSource `json:"mirror,omitempty"`
	// +optional
	Sources []StreamSource `json:"sources,omitempty"`
	// +kubebuilder:default=false
	// +optional
	Sealed *bool `json:"sealed,omitempty"`
	// +kubebuilder:default=false
	// +optional
	DenyDelete *bool `json:"denyDelete,omitempty"`
	// +kubebuilder:default=false
	// +optional
	DenyPurge *bool `json:"denyPurge,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowRollup *bool `json:"allowRollup,omitempty"`
	// +kubebuilder:validation:Enum=s2;none;""
	// +kubebuilder:default=""
	// +optional
	Compression *string `json:"compression,omitempty"`
	// firstSequence is a JSON number in NACK's CRD.
	// +kubebuilder:validation:Type=number
	// +kubebuilder:default=0
	// +optional
	FirstSequence *int64 `json:"firstSequence,omitempty"`
	// +optional
	SubjectTransform *SubjectTransform `json:"subjectTransform,omitempty"`
	// +optional
	Republish *StreamRepublish `json:"republish,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowDirect *bool `json:"allowDirect,omitempty"`
	// +kubebuilder:default=false
	// +optional
	MirrorDirect *bool `json:"mirrorDirect,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowMsgTTL *bool `json:"allowMsgTtl,omitempty"`
	// +kubebuilder:default=""
	// +optional
	SubjectDeleteMarkerTTL *string `json:"subjectDeleteMarkerTtl,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowMsgCounter *bool `json:"allowMsgCounter,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowAtomicPublish *bool `json:"allowAtomicPublish,omitempty"`
	// +kubebuilder:default=false
	// +optional
	AllowMsgSchedules *bool `json:"allowMsgSchedules,omitempty"`
	// +kubebuilder:default=""
	// +optional
	PersistMode *string `json:"persistMode,omitempty"`
	// +optional
	ConsumerLimits *StreamConsumerLimits `json:"consumerLimits,omitempty"`
	// +optional
	Metadata map[string]string `json:"metadata,omitempty"`
	// +kubebuilder:validation:Pattern=`^[^.*>]*$`
	// +optional
	Account *string `json:"account,omitempty"`
	// +kubebuilder:default=""
	// +optional
	Creds *string `json:"creds,omitempty"`
	// +kubebuilder:default=""
	// +optional
	Nkey *string `json:"nkey,omitempty"`
	// +kubebuilder:default=false
	// +optional
	PreventDelete *bool `json:"preventDelete,omitempty"`
	// +kubebuilder:default=false
	// +optional
	PreventUpdate *bool `json:"preventUpdate,omitempty"`
	// +kubebuilder:default={}
	// +optional
	Servers []string `json:"servers,omitempty"`
	// +optional
	TLS *StreamTLS `json:"tls,omitempty"`
	// +kubebuilder:default=false
	// +optional
	TLSFirst *bool `json:"tlsFirst,omitempty"`
	// +optional
	JSDomain *string `json:"jsDomain,omitempty"`
}

// StreamPlacement places a stream in a JetStream cluster.
type StreamPlacement struct {
	// +optional
	Cluster string `json:"cluster,omitempty"`
	// +optional
	Tags []string `json:"tags,omitempty"`
}

// StreamSource is a stream mirrored or sourced.
type StreamSource struct {
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	OptStartSeq int64 `json:"optStartSeq,omitempty"`
	// +optional
	OptStartTime string `json:"optStartTime,omitempty"`
	// +optional
	FilterSubject string `json:"filterSubject,omitempty"`
	// +optional
	ExternalAPIPrefix string `json:"externalApiPrefix,omitempty"`
	// +optional
	ExternalDeliverPrefix string `json:"externalDeliverPrefix,omitempty"`
	// +optional
	SubjectTransforms []SubjectTransform `json:"subjectTransforms,omitempty"`
}

// SubjectTransform maps subjects.
type SubjectTransform struct {
	// +optional
	Source string `json:"source,omitempty"`
	// +optional
	Dest string `json:"dest,omitempty"`
}

// StreamRepublish republishes a stream's messages.
type StreamRepublish struct {
	// +optional
	Destination string `json:"destination,omitempty"`
	// +optional
	Source string `json:"source,omitempty"`
}

// StreamConsumerLimits bound a stream's consumers.
type StreamConsumerLimits struct {
	// +optional
	InactiveThreshold string `json:"inactiveThreshold,omitempty"`
	// +optional
	MaxAckPending int64 `json:"maxAckPending,omitempty"`
}

// StreamTLS is the client TLS of a stream's own connection.
type StreamTLS struct {
	// +optional
	ClientCert string `json:"clientCert,omitempty"`
	// +optional
	ClientKey string `json:"clientKey,omitempty"`
	// +optional
	RootCAs []string `json:"rootCas,omitempty"`
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
	Spec              StreamSpec   `json:"spec"`
	Status            StreamStatus `json:"status,omitempty"`
}

// StreamList is a list of Stream.
//
// +kubebuilder:object:root=true
type StreamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Stream `json:"items"`
}

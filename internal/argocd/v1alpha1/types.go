// Package v1alpha1 describes Argo CD's Application and AppProject objects
// (argoproj.io/v1alpha1), only the fields Eva writes and reads back. Argo CD's own Go
// module pins its dependencies with replace directives a dependent module cannot
// inherit, so Eva does not import it; the field names follow Argo CD v3.2's API, and
// tests check every rendered object against Argo CD's own CRDs (hack/e2e-binaries.sh
// extracts them from the module) and run the real Argo CD controllers on them.
//
// +kubebuilder:object:generate=true
// +groupName=argoproj.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is Argo CD's API group and version.
var GroupVersion = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}

// Kinds of the objects Eva renders.
const (
	ApplicationKind = "Application"
	AppProjectKind  = "AppProject"
)

// ResourcesFinalizer makes Argo CD delete an Application's resources before the
// Application itself (foreground cascade).
const ResourcesFinalizer = "resources-finalizer.argocd.argoproj.io"

var schemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Application{}, &ApplicationList{}, &AppProject{}, &AppProjectList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme registers Application and AppProject with a scheme.
var AddToScheme = schemeBuilder.AddToScheme

// Application is one Argo CD application: a source synced into a destination.
//
// +kubebuilder:object:root=true
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ApplicationSpec   `json:"spec"`
	Status            ApplicationStatus `json:"status,omitempty"`
}

// ApplicationList lists Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}

// ApplicationSpec is what to sync where, and how.
type ApplicationSpec struct {
	Source      *ApplicationSource     `json:"source,omitempty"`
	Destination ApplicationDestination `json:"destination"`
	Project     string                 `json:"project"`
	SyncPolicy  *SyncPolicy            `json:"syncPolicy,omitempty"`
}

// ApplicationSource is a folder of a git repository or a chart of a Helm repository.
type ApplicationSource struct {
	RepoURL        string `json:"repoURL"`
	Path           string `json:"path,omitempty"`
	TargetRevision string `json:"targetRevision,omitempty"`
	// Chart is the chart's name in a Helm repository (repoURL is then the repository).
	Chart     string                      `json:"chart,omitempty"`
	Helm      *ApplicationSourceHelm      `json:"helm,omitempty"`
	Directory *ApplicationSourceDirectory `json:"directory,omitempty"`
}

// ApplicationSourceHelm are the Helm options of a source.
type ApplicationSourceHelm struct {
	ReleaseName string `json:"releaseName,omitempty"`
	// ValuesObject are the release's values, inline.
	// +kubebuilder:pruning:PreserveUnknownFields
	ValuesObject *runtime.RawExtension `json:"valuesObject,omitempty"`
}

// ApplicationSourceDirectory makes a source a plain folder of manifests (no kustomize,
// no Helm, whatever files it holds).
type ApplicationSourceDirectory struct {
	Recurse bool `json:"recurse,omitempty"`
	// Include is a glob of the files to read.
	Include string `json:"include,omitempty"`
}

// ApplicationDestination is the cluster and namespace an Application syncs into.
type ApplicationDestination struct {
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// SyncPolicy says when and how Argo CD syncs.
type SyncPolicy struct {
	Automated   *SyncPolicyAutomated `json:"automated,omitempty"`
	SyncOptions []string             `json:"syncOptions,omitempty"`
	Retry       *RetryStrategy       `json:"retry,omitempty"`
}

// SyncPolicyAutomated syncs every change of the source by itself.
type SyncPolicyAutomated struct {
	Prune    bool `json:"prune,omitempty"`
	SelfHeal bool `json:"selfHeal,omitempty"`
	// AllowEmpty lets a sync prune every resource when the source renders none.
	AllowEmpty bool `json:"allowEmpty,omitempty"`
}

// RetryStrategy retries a failed sync.
type RetryStrategy struct {
	Limit   int64    `json:"limit,omitempty"`
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff spaces the retries.
type Backoff struct {
	Duration    string `json:"duration,omitempty"`
	Factor      *int64 `json:"factor,omitempty"`
	MaxDuration string `json:"maxDuration,omitempty"`
}

// ApplicationStatus is what Argo CD reports.
type ApplicationStatus struct {
	Sync           SyncStatus             `json:"sync,omitempty"`
	Health         HealthStatus           `json:"health,omitempty"`
	OperationState *OperationState        `json:"operationState,omitempty"`
	Conditions     []ApplicationCondition `json:"conditions,omitempty"`
	// Resources are the Application's objects, each with its sync status and (when the
	// application controller persists resource health, controller.resource.health.persist)
	// its health: since Argo CD 3.0 the Application's own health carries no message, a
	// resource's does.
	Resources []ResourceStatus `json:"resources,omitempty"`
	// ResourceHealthSource is "appTree" when resource health is kept out of the
	// Application (in Argo CD's cache), empty when it is in Resources.
	ResourceHealthSource string `json:"resourceHealthSource,omitempty"`
}

// ResourceStatus is one object an Application manages.
type ResourceStatus struct {
	Group     string `json:"group,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Status is the object's sync status: Synced or OutOfSync.
	Status string        `json:"status,omitempty"`
	Health *HealthStatus `json:"health,omitempty"`
}

// SyncStatus compares the live state with the source at a revision.
type SyncStatus struct {
	// Status is Synced, OutOfSync or Unknown.
	Status string `json:"status"`
	// Revision is the source revision compared (a git commit, a chart version).
	Revision string `json:"revision,omitempty"`
	// ComparedTo is the source and destination the status is about: an Application
	// whose spec changed since says nothing yet of its new spec.
	ComparedTo *ComparedTo `json:"comparedTo,omitempty"`
}

// ComparedTo is what a comparison was made against.
type ComparedTo struct {
	Source      *ApplicationSource     `json:"source,omitempty"`
	Destination ApplicationDestination `json:"destination"`
}

// HealthStatus is an Application's or a resource's health: Healthy, Progressing,
// Degraded, Suspended, Missing or Unknown. Since Argo CD 3.0 only a resource's health
// has a message.
type HealthStatus struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// OperationState is the last (or current) sync operation.
type OperationState struct {
	// Phase is Running, Terminating, Failed, Error or Succeeded.
	Phase      string               `json:"phase"`
	Message    string               `json:"message,omitempty"`
	SyncResult *SyncOperationResult `json:"syncResult,omitempty"`
	// RetryCount is how many times the operation was retried.
	RetryCount int64 `json:"retryCount,omitempty"`
}

// SyncOperationResult is what a sync operation synced.
type SyncOperationResult struct {
	Revision string `json:"revision"`
}

// ApplicationCondition is an error or warning Argo CD found with the Application
// (ComparisonError, InvalidSpecError, SyncError, ...).
type ApplicationCondition struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AppProject confines the Applications in it: which sources they may read, where they
// may deploy, which kinds they may create, as whom.
//
// +kubebuilder:object:root=true
type AppProject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AppProjectSpec `json:"spec"`
}

// AppProjectList lists AppProjects.
//
// +kubebuilder:object:root=true
type AppProjectList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppProject `json:"items"`
}

// AppProjectSpec are the project's restrictions.
type AppProjectSpec struct {
	Description  string                   `json:"description,omitempty"`
	SourceRepos  []string                 `json:"sourceRepos,omitempty"`
	Destinations []ApplicationDestination `json:"destinations,omitempty"`
	// ClusterResourceWhitelist lists the cluster-scoped kinds the project may create;
	// empty allows none.
	ClusterResourceWhitelist []metav1.GroupKind `json:"clusterResourceWhitelist,omitempty"`
	// NamespaceResourceWhitelist lists the namespaced kinds the project may create.
	NamespaceResourceWhitelist []metav1.GroupKind `json:"namespaceResourceWhitelist,omitempty"`
	// DestinationServiceAccounts are the accounts Argo CD impersonates to sync into a
	// destination (with application.sync.impersonation.enabled in argocd-cm).
	DestinationServiceAccounts []DestinationServiceAccount `json:"destinationServiceAccounts,omitempty"`
}

// DestinationServiceAccount is the account syncs into one destination run as.
type DestinationServiceAccount struct {
	Server    string `json:"server"`
	Namespace string `json:"namespace,omitempty"`
	// DefaultServiceAccount is "name" (in the destination namespace) or
	// "namespace:name".
	DefaultServiceAccount string `json:"defaultServiceAccount"`
}

// Package status turns what the operator observed of a tenant's objects into its five
// conditions, the Ready summary, the phase and per-module status. It does no I/O: the
// reconciler reads, this package decides, and every rule is table-tested.
package status

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Observed is everything read about one tenant's objects in one reconcile.
type Observed struct {
	// Now is when it was observed (how long a release has been blocked is judged
	// against it; zero never judges a release blocked).
	Now time.Time
	// BlockedGrace is how long a release may wait on something only a person can fix
	// before the tenant is Failed; zero is DefaultBlockedGrace.
	BlockedGrace time.Duration
	// Generation of the tenant.
	Generation int64
	// Namespace of the tenant; nil when missing.
	Namespace *NamespaceState
	// Applied says whether every rendered object was applied and exists.
	Applied AppliedState
	// Streams are the tenant's two JetStream streams.
	Streams []StreamState
	// FenceMismatch, when set, says the environment the tenant is rendered with is not
	// the one the cluster's fence enforces, naming both digests.
	FenceMismatch string
	// MessagingError is set when JetStream could not be reached to ensure or read the
	// streams (direct messaging mode).
	MessagingError string
	// Releases are the module HelmReleases, in catalog order.
	Releases []ReleaseState
	// SeedsVersion is the seed data set the tenant asks for ("" for none).
	SeedsVersion string
	// SeedJob is the seed Job of SeedsVersion; nil when none exists.
	SeedJob *JobState
	// SeedAnnotation is the provisioner's eva.aidonow.com/seed-loaded value.
	SeedAnnotation string
	// Ingress is the tenant Ingress; nil when missing.
	Ingress *IngressState
	// GitOps is set in GitOps mode: the tenant's two Flux Kustomizations.
	GitOps *GitOpsState
}

// GitOpsState is what the GitOps tool (Flux or Argo CD) applied of the tenant: its
// foundation (Provisioned) and its workloads (ModulesDeployed reads the releases only
// once these applied the published revision, so a release's state is about the
// published spec).
type GitOpsState struct {
	Foundation, Workloads DeliveryState
}

// DeliveryState is one of the objects delivering a tenant folder (a Flux Kustomization,
// an Argo CD Application) against the published revision.
type DeliveryState struct {
	// Kind names the delivery object in messages (default Kustomization).
	Kind  string
	Name  string // namespace/name
	Found bool
	// Ready is the object's readiness: Flux's Ready condition, or one made of Argo CD's
	// sync status and health.
	Ready *metav1.Condition
	// LastAppliedRevision is what the tool applied; Applied says it is at or after the
	// revision the operator published.
	LastAppliedRevision string
	Applied             bool
	// RevisionError says why it could not be told whether the applied revision includes
	// the published one (the source could not be read): the verdict names it instead of
	// waiting in silence.
	RevisionError string
}

// NamespaceState is what matters of the namespace.
type NamespaceState struct {
	Name  string
	Phase string // Active or Terminating
}

// AppliedState is the outcome of applying the bundle.
type AppliedState struct {
	// Revision is the published revision (GitOps) or the bundle digest (pure cluster).
	Revision string
	// Missing names the rendered objects that do not exist.
	Missing []string
	// Error is a failure to deliver, phrased for the tenant's readers: what failed and
	// the API server's or the dependency's answer (a publish failure, whose answer may
	// name the remote, points to the operator's log instead).
	Error string
	// Waiting says why the workloads were held back after the foundation was applied
	// (the tenant's quota not yet enforced); empty when nothing was held back.
	Waiting string
}

// StreamState is one NACK Stream.
type StreamState struct {
	Name  string // namespace/name of the object
	Found bool
	Ready *metav1.Condition
}

// ReleaseState is one module's release: its Flux HelmRelease, or its Argo CD
// Application (ApplicationRelease).
type ReleaseState struct {
	// Kind names the release object in messages (default HelmRelease).
	Kind    string
	Module  string
	Name    string // namespace/name
	Version string // the chart version it must run
	// ChartDigest is the OCI manifest digest its chart source pins, when it pins one:
	// helm-controller's version then carries its first digits.
	ChartDigest string
	Found       bool
	// Generation and ObservedGeneration of the HelmRelease. helm-controller writes
	// status.observedGeneration from the object it reconciled, when a reconcile ends with
	// no retry pending (done, or stalled); its conditions may carry a newer generation
	// than the one they are about.
	Generation, ObservedGeneration int64
	Ready, Stalled                 *metav1.Condition
	// LastAttemptedRevision is the chart version helm-controller last tried.
	LastAttemptedRevision string
	// HistoryVersion is the chart version of the latest release in history.
	HistoryVersion string
	// Outdated says the HelmRelease in the cluster does not (yet) carry the spec the
	// tenant renders now (the operator's apply or Flux has not reached it, or the cache
	// is behind): what helm-controller says of it is about an older spec.
	Outdated bool
	// RetriesExhausted says helm-controller gave up on the generation it last attempted:
	// its last action (LastAction, install or upgrade) failed Failures times, more than
	// that action's remediation retries allow. Read from the failure counters, not from
	// Stalled: helm-controller clears Stalled for a moment each time it looks at a
	// stalled release again, the counters stay.
	RetriesExhausted bool
	LastAction       string
	Failures         int64
}

// JobState is the seed Job.
type JobState struct {
	Name     string
	Complete bool
	Failed   bool
	Message  string
}

// IngressState is the tenant Ingress.
type IngressState struct {
	Name string
	// Addresses counts the load-balancer addresses the ingress controller reported.
	Addresses int
}

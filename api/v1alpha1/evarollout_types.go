package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// RolloutPhase is where a platform release stands.
// +kubebuilder:validation:Enum=Progressing;Baking;Paused;Halted;Superseded;Complete
type RolloutPhase string

// The phases of a rollout.
const (
	// RolloutProgressing: tenants of the current wave are being updated.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutBaking: every tenant of the current wave is Ready on the release; the
	// rollout waits for the wave's bake time, its gates still checked.
	RolloutBaking RolloutPhase = "Baking"
	// RolloutPaused: spec.paused; nothing new is admitted.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutHalted: a gate failed; nothing new is admitted until the gate passes again
	// (the failing tenants recover) or a newer release supersedes this one.
	RolloutHalted RolloutPhase = "Halted"
	// RolloutSuperseded: a newer release exists; this one admits nothing more.
	RolloutSuperseded RolloutPhase = "Superseded"
	// RolloutComplete: every wave was updated and baked.
	RolloutComplete RolloutPhase = "Complete"
)

// RolloutWave is one step of a rollout: the tenants whose spec.wave is Wave.
type RolloutWave struct {
	// wave is the tenants' spec.wave this step updates.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3
	Wave int32 `json:"wave"`

	// maxUpdate is how many tenants of the wave may be updating at once (admitted and
	// not yet Ready on the release): a count or a percentage of the wave's tenants,
	// rounded up, at least 1. Unset: all at once.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxUpdate *intstr.IntOrString `json:"maxUpdate,omitempty"`

	// bakeTime is how long every tenant of the wave must stay Ready on the release,
	// gates passing, before the next wave starts.
	// +optional
	BakeTime metav1.Duration `json:"bakeTime,omitempty"`

	// frozen, when set, is why no tenant of this wave may be updated: the rollout stops
	// before the wave until it is cleared.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Frozen string `json:"frozen,omitempty"`
}

// RolloutGates are what must hold of the tenants a rollout updated before it goes on.
type RolloutGates struct {
	// readyTimeout is how long an updated tenant may take to be Ready on the release.
	// Unset: its tier's provisioning budget (Starter 5m, Customer 10m, Enterprise and
	// Platform 15m).
	// +optional
	ReadyTimeout *metav1.Duration `json:"readyTimeout,omitempty"`
	// maxQueueDepth, when set, holds the rollout while a tenant it updated has a
	// JetStream stream holding more messages than this (capsule_queue_depth, measured
	// by an operator connected to NATS): the rollout is Halted, naming the tenant, and
	// goes on once the backlog is below it again. Not measured, it is not checked.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxQueueDepth *int64 `json:"maxQueueDepth,omitempty"`
	// onTenantFailure is what a tenant failing a gate (Failed on the release, not Ready
	// on it within readyTimeout, a backlog over maxQueueDepth grown since the release
	// reached it) does to the rollout. SetAside, the default: once the release was judged
	// Ready on another tenant, the failure is the tenant's own (its values, its
	// workload); it has until readyTimeout after the release reached it to recover, and
	// is then set aside (status.waves[].updated[].setAsideAt, a TenantSetAside event)
	// while the rollout goes on. A tenant failing before the release was judged Ready on
	// any other halts the rollout. Halt: every failing tenant halts the rollout.
	// +optional
	// +kubebuilder:validation:Enum=SetAside;Halt
	OnTenantFailure TenantFailurePolicy `json:"onTenantFailure,omitempty"`
}

// TenantFailurePolicy is what a tenant failing a rollout's gate does to the rollout.
type TenantFailurePolicy string

// The tenant failure policies.
const (
	// TenantFailureSetAside sets a failing tenant aside once the release is proven on
	// another, and goes on.
	TenantFailureSetAside TenantFailurePolicy = "SetAside"
	// TenantFailureHalt halts the rollout on any failing tenant.
	TenantFailureHalt TenantFailurePolicy = "Halt"
)

// EvaRolloutSpec is a platform release: module chart versions brought to the tenants
// wave by wave.
// +kubebuilder:validation:XValidation:rule="self.versions.all(k, k.matches('^[a-z][a-z0-9-]*$'))",message="versions keys must be module names"
// +kubebuilder:validation:XValidation:rule="self.versions == oldSelf.versions",message="versions cannot change once released: create a new EvaRollout"
// +kubebuilder:validation:XValidation:rule="self.waves.map(w, w.wave) == oldSelf.waves.map(w, w.wave)",message="the waves cannot be added, removed or reordered: create a new EvaRollout"
type EvaRolloutSpec struct {
	// versions are the module chart versions of the release (module name to exact
	// semver). A tenant's own spec.versions pin wins over them.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=16
	Versions map[string]ModuleVersion `json:"versions"`

	// waves are the steps of the rollout, in order; tenants of a wave not listed are
	// never updated by this release.
	// +required
	// +listType=map
	// +listMapKey=wave
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	Waves []RolloutWave `json:"waves"`

	// gates are checked on every updated tenant of the current wave while it updates
	// and bakes: none Failed on the release, each Ready on it within readyTimeout.
	// +optional
	Gates RolloutGates `json:"gates,omitempty"`

	// paused stops admitting tenants; what was admitted goes on.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// security marks a security release: it reaches the tenants that froze themselves
	// (spec.frozen), and renders them thawed while they stay as it admitted them. The
	// platform's own freezes still hold it: a frozen wave, spec.paused.
	// +optional
	Security bool `json:"security,omitempty"`
}

// RolloutTenant is one tenant in a wave's status.
type RolloutTenant struct {
	// code is the tenant's capsule code.
	Code string `json:"code"`
	// name of the EvaTenant (in the rollout's namespace).
	Name string `json:"name"`
	// admittedAt is when the release was given to the tenant.
	// +optional
	AdmittedAt *metav1.Time `json:"admittedAt,omitempty"`
	// reachedAt is when the release was first seen to have reached the tenant: for the
	// operator, its next look after the admission; on the pull-request path, once the
	// admitting commit was published and applied. The ready timeout counts from then.
	// +optional
	ReachedAt *metav1.Time `json:"reachedAt,omitempty"`
	// readyAt is when the tenant was first seen Ready on the release.
	// +optional
	ReadyAt *metav1.Time `json:"readyAt,omitempty"`
	// generation is the tenant's metadata.generation when the release admitted it. A
	// tenant whose spec changed since is its owner's doing: the gates do not judge it.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// uid is the EvaTenant's metadata.uid when the release admitted it (none for a
	// tenant file). A tenant deleted and created again under the same name is another
	// tenant: it is admitted by its own wave, never by the first one's admission.
	// +optional
	UID types.UID `json:"uid,omitempty"`
	// admittedQueueDepth is the most messages one of the tenant's streams held when the
	// release admitted it (when measured): the queue-depth gate counts only a backlog
	// grown since, on the release.
	// +optional
	AdmittedQueueDepth *int64 `json:"admittedQueueDepth,omitempty"`
	// setAsideAt is when the tenant, failing a gate on its own (spec.gates.onTenantFailure
	// SetAside), was set aside: the rollout goes on without it and judges it no more.
	// +optional
	SetAsideAt *metav1.Time `json:"setAsideAt,omitempty"`
	// reason says why the tenant was skipped, is not judged, or was set aside.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// WaveStatus is the progress of one wave.
type WaveStatus struct {
	// wave is the tenants' spec.wave.
	Wave int32 `json:"wave"`
	// total is how many tenants the wave has (frozen ones included).
	Total int32 `json:"total"`
	// updated are the tenants admitted to the release, in admission order.
	// +optional
	// +listType=atomic
	Updated []RolloutTenant `json:"updated,omitempty"`
	// skipped are the tenants the release passes over (frozen), with the reason.
	// +optional
	// +listType=atomic
	Skipped []RolloutTenant `json:"skipped,omitempty"`
	// bakeStartedAt is when every admitted tenant of the wave was first Ready together.
	// +optional
	BakeStartedAt *metav1.Time `json:"bakeStartedAt,omitempty"`
	// completedAt is when the wave finished baking, or was passed over.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// passedOver: the wave held no tenant the release could reach (none, or all of them
	// frozen, unserved or not Ready), so the rollout went on without waiting on it.
	// +optional
	PassedOver bool `json:"passedOver,omitempty"`
}

// EvaRolloutStatus is the observed progress of a release.
type EvaRolloutStatus struct {
	// observedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase summarises the rollout.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// currentWave is the wave being updated or baked (0 once complete).
	// +optional
	CurrentWave int32 `json:"currentWave,omitempty"`
	// updated counts the live tenants the rollout reached, every wave together.
	// +optional
	Updated int32 `json:"updated,omitempty"`
	// total is how many tenants the rollout's waves hold, frozen ones included.
	// +optional
	Total int32 `json:"total,omitempty"`
	// message says what the rollout waits for or why it halted, naming the tenants.
	// +optional
	Message string `json:"message,omitempty"`
	// waves reports each wave, in rollout order.
	// +optional
	// +listType=atomic
	Waves []WaveStatus `json:"waves,omitempty"`
	// conditions: Ready (the rollout is complete), Stalled (halted), Reconciling.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// EvaRollout is a platform release rolled out to the tenants of its namespace wave by
// wave, each wave gated on the health of the tenants it updated. Only the newest
// rollout of a namespace admits tenants. Creating one needs its own RBAC (ClusterRole
// eva-release-manager): it changes what every tenant of the namespace runs.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=evr,categories=eva
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.status.currentWave`
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.updated`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EvaRollout struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the release.
	// +required
	Spec EvaRolloutSpec `json:"spec"`

	// status is its progress, written by the operator.
	// +optional
	Status EvaRolloutStatus `json:"status,omitempty"`
}

// EvaRolloutList is a list of EvaRollout.
//
// +kubebuilder:object:root=true
type EvaRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EvaRollout `json:"items"`
}

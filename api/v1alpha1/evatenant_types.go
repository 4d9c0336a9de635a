package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SemverPattern is the regular expression a semantic version must match (an optional
// leading "v" is accepted). Numeric pre-release identifiers have no leading zero, as
// semver 2.0.0 requires (1.0.0-01 is refused; 1.0.0-0a and build metadata +001 are
// not numeric identifiers and pass). It is written with character classes instead of
// escapes so the same text is valid in Go, OpenAPI and CEL.
const SemverPattern = `^v?(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)([.](0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?([+][0-9A-Za-z-]+([.][0-9A-Za-z-]+)*)?$`

// CapsuleCodePattern is the regular expression a capsule code must match.
const CapsuleCodePattern = `^[A-Z]{6}$`

// Tier selects the modules, quotas and messaging limits of a tenant.
// +kubebuilder:validation:Enum=Starter;Customer;Enterprise;Platform
type Tier string

// The tiers a tenant can have.
const (
	TierStarter    Tier = "Starter"
	TierCustomer   Tier = "Customer"
	TierEnterprise Tier = "Enterprise"
	TierPlatform   Tier = "Platform"
)

// Tiers lists every tier in a stable order.
var Tiers = []Tier{TierStarter, TierCustomer, TierEnterprise, TierPlatform}

// Lifecycle is the desired lifecycle of a tenant. It only moves forward.
// +kubebuilder:validation:Enum=Active;Decommissioned
type Lifecycle string

// The lifecycles a tenant can have.
const (
	LifecycleActive         Lifecycle = "Active"
	LifecycleDecommissioned Lifecycle = "Decommissioned"
)

// ModuleVersion is an exact semantic version of a module's chart.
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^v?(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)([.](0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?([+][0-9A-Za-z-]+([.][0-9A-Za-z-]+)*)?$`
type ModuleVersion string

// ValuesKind is the kind of object a values reference points at.
// +kubebuilder:validation:Enum=Secret;ConfigMap
type ValuesKind string

// The kinds a values reference can point at.
const (
	ValuesKindSecret    ValuesKind = "Secret"
	ValuesKindConfigMap ValuesKind = "ConfigMap"
)

// ValuesReference pointed a module's Helm release at values held in a Secret or
// ConfigMap in the tenant's namespace. It is refused now (see EvaTenantSpec.ValuesFrom)
// and kept so that an object still carrying one is refused with a reason, not pruned.
type ValuesReference struct {
	// module is the module whose release receives the values; it must belong to the tier.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	Module string `json:"module"`

	// kind of the referenced object.
	// +required
	Kind ValuesKind `json:"kind"`

	// name of the referenced object in the tenant's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// valuesKey is the data key holding the values; Flux's default is values.yaml.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	ValuesKey string `json:"valuesKey,omitempty"`

	// targetPath is the dotted values path the referenced value is written to. It is
	// required: merging a whole values document from a Secret or ConfigMap would let
	// its content set what helmValues may not (images, platform-owned keys, limits).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=250
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9_./-]|\[[0-9]+\])+$`
	TargetPath string `json:"targetPath"`

	// optional marks the reference as not required for the release to install.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// SecretMount mounts one of the tenant's Secrets into one module's pods.
type SecretMount struct {
	// module whose pods mount the Secret; it must belong to the tier.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	Module string `json:"module"`

	// secret is one of the tenant's Secrets (spec.secrets, or a file
	// <CODE>.<secret>.sops.yaml beside the tenant file), by its name after the tenant's
	// prefix: the Secret <code>-<secret> of the tenant's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Secret string `json:"secret"`
}

// EncryptedSecret is one of a tenant's Secrets, encrypted with SOPS.
type EncryptedSecret struct {
	// name of the Secret after the tenant's prefix: the Secret is <code>-<name> in the
	// tenant's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// sops is the whole Secret manifest as sops encrypted it (YAML), kept as text: SOPS'
	// message authentication code covers every value in document order, the Secret's
	// name and namespace included.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=65536
	Sops string `json:"sops"`
}

// EvaTenantSpec is the desired state of one tenant ("capsule").
// +kubebuilder:validation:XValidation:rule="!has(self.versions) || self.versions.all(k, k.matches('^[a-z][a-z0-9-]*$'))",message="versions keys must be module names"
type EvaTenantSpec struct {
	// capsuleCode is the tenant's six upper-case letters, for example DEVUSR. It names the
	// namespace, the streams and the subjects of the tenant and cannot change.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Z]{6}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="capsuleCode is immutable"
	CapsuleCode string `json:"capsuleCode"`

	// tier selects the modules, resource quota and messaging limits of the tenant.
	// +required
	Tier Tier `json:"tier"`

	// lifecycle is Active, or Decommissioned to tear the tenant down. A decommissioned
	// tenant never becomes Active again.
	// +optional
	// +kubebuilder:default=Active
	// +kubebuilder:validation:XValidation:rule="oldSelf != 'Decommissioned' || self == 'Decommissioned'",message="lifecycle cannot change from Decommissioned back to Active"
	Lifecycle Lifecycle `json:"lifecycle,omitempty"`

	// operatorVersion is the semantic version of the operator that owns this tenant
	// (blue/green upgrades); empty lets any operator claim it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^v?(0|[1-9][0-9]*)[.](0|[1-9][0-9]*)[.](0|[1-9][0-9]*)(-(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)([.](0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*)?([+][0-9A-Za-z-]+([.][0-9A-Za-z-]+)*)?$`
	OperatorVersion string `json:"operatorVersion,omitempty"`

	// seedsVersion is the git tag of the seed data set loaded into the tenant.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._+-]*$`
	SeedsVersion string `json:"seedsVersion,omitempty"`

	// versions pins a module's chart version (module name to exact semver); modules not
	// listed use the catalog default. Every module must belong to the tier.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Versions map[string]ModuleVersion `json:"versions,omitempty"`

	// helmValues holds per-module Helm value overrides (module name to a values object).
	// Never put secrets here: use secretMounts.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	HelmValues map[string]apiextensionsv1.JSON `json:"helmValues,omitempty"`

	// valuesFrom is refused: helm-controller writes a referenced value into the release
	// through Helm's --set parser, so a value holding ',' or '=' sets other values
	// (images, limits, platform-owned keys), and Helm stores and quotes what it parsed.
	// Hand Secrets to modules with secretMounts, and set other values in helmValues,
	// where Eva checks them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="size(self) == 0",message="valuesFrom is refused: hand Secrets to modules with secretMounts, and set other values in helmValues"
	ValuesFrom []ValuesReference `json:"valuesFrom,omitempty"`

	// secretMounts hands the tenant's Secrets to its modules: the module's chart mounts
	// the Secret read-only at /var/run/secrets/eva/<secret>, one file per key, and rolls
	// its pods when the encrypted Secret changes. The values never pass through Helm:
	// they are not parsed as values, stored in Helm's release storage or quoted in a Helm
	// error.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	SecretMounts []SecretMount `json:"secretMounts,omitempty"`

	// secrets are the tenant's Secrets, each a whole Secret manifest encrypted with SOPS
	// for the tenant's own age key, so that secretMounts can hand them to modules. They are
	// published still encrypted and decrypted by kustomize-controller through the
	// tenant's Kustomization; the plaintext never passes through Eva. In tenant files
	// they are usually kept beside the file instead, as <CODE>.<name>.sops.yaml.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Secrets []EncryptedSecret `json:"secrets,omitempty"`

	// wave is the rollout wave: 1 internal, 2 pilot, 3 fleet.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3
	Wave int32 `json:"wave,omitempty"`

	// frozen, when set, is why no platform release may reach this tenant: rollouts
	// pass it over (reported as skipped) and its HelmReleases are rendered suspended,
	// so helm-controller changes nothing of them until it is cleared.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Frozen string `json:"frozen,omitempty"`

	// deletionProtection refuses decommissioning while true.
	// +optional
	DeletionProtection bool `json:"deletionProtection,omitempty"`

	// placement says which cells (clusters) of the environment the tenant may run on;
	// unset: any. Eva chooses among them by capacity (docs/cells.md).
	// +optional
	Placement *Placement `json:"placement,omitempty"`
}

// Placement constrains the cells a tenant may be placed on: both fields must hold.
type Placement struct {
	// cell names the one cell the tenant may run on.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Cell string `json:"cell,omitempty"`

	// labels are labels the tenant's cell must carry (region, class, ...).
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Labels map[string]string `json:"labels,omitempty"`
}

// Phase is the coarse state of a tenant, derived from its conditions.
// +kubebuilder:validation:Enum=Requested;Provisioning;Active;Decommissioning;Decommissioned;Failed
type Phase string

// The phases of a tenant.
const (
	PhaseRequested       Phase = "Requested"
	PhaseProvisioning    Phase = "Provisioning"
	PhaseActive          Phase = "Active"
	PhaseDecommissioning Phase = "Decommissioning"
	PhaseDecommissioned  Phase = "Decommissioned"
	PhaseFailed          Phase = "Failed"
)

// DecommissionStep is the step of the GitOps decommission saga the operator last
// published and waits for Flux to apply.
type DecommissionStep string

// The GitOps decommission saga's steps, in order.
const (
	// StepTrafficRemoved: the Ingress is out of the tree (the source cell of a move
	// takes its traffic away first, and drains).
	StepTrafficRemoved DecommissionStep = "TrafficRemoved"
	// StepStreamsRemoved: the streams and alert rules are out of the tree.
	StepStreamsRemoved DecommissionStep = "StreamsRemoved"
	// StepReleasesRemoved: the workloads are out of the tree too (helm-controller
	// uninstalls the releases).
	StepReleasesRemoved DecommissionStep = "ReleasesRemoved"
	// StepNamespaceOnly: the tenant's bundle is its Decommissioned namespace alone.
	StepNamespaceOnly DecommissionStep = "NamespaceOnly"
	// StepRemoved: the tenant is out of the tree; Flux prunes its namespace.
	StepRemoved DecommissionStep = "Removed"
)

// The condition types reported on a tenant.
const (
	ConditionNamespaceReady  = "NamespaceReady"
	ConditionProvisioned     = "Provisioned"
	ConditionSeedLoaded      = "SeedLoaded"
	ConditionModulesDeployed = "ModulesDeployed"
	ConditionIngressReady    = "IngressReady"
	ConditionReady           = "Ready"
	// ConditionStalled is True when the tenant cannot progress without a change to it
	// (an invalid spec, a capsule code owned by another tenant, a release whose retries
	// are exhausted, a decommission refused); kstatus reads it as Failed.
	ConditionStalled = "Stalled"
	// ConditionReconciling is True while the operator works toward the spec (provisioning
	// or decommissioning); kstatus reads it as InProgress.
	ConditionReconciling = "Reconciling"
)

// ModuleStatus is the observed state of one module's Helm release.
type ModuleStatus struct {
	// name of the module.
	Name string `json:"name"`
	// version is the chart version the release should run.
	// +optional
	Version string `json:"version,omitempty"`
	// ready is true when the release is Ready for its current generation and version.
	Ready bool `json:"ready"`
	// reason and message carried up from the release.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// EvaTenantStatus is the observed state of a tenant.
type EvaTenantStatus struct {
	// observedGeneration is the generation whose outcome the status reports. It moves
	// when a reconcile settles the generation: its objects judged, the tenant refused
	// (phase Failed), or its decommission finished. A failed apply or publish that is
	// being retried, and a decommission under way, leave it behind.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the conditions, derived with them from the same outcome:
	// Requested and Provisioning (Reconciling True), Active (Ready True), Failed
	// (Stalled True: nothing will change until the spec or the cluster does),
	// Decommissioning (Reconciling True) and Decommissioned (Ready True).
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// conditions: NamespaceReady, Provisioned, SeedLoaded, ModulesDeployed,
	// IngressReady and the Ready summary.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// natsAccount is the public key of the tenant's own NATS account, when the operator
	// gives each tenant one (environment setting natsAccounts): its streams and subjects live there.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	NATSAccount string `json:"natsAccount,omitempty"`

	// revision is the published revision of the tenant's bundle (git commit or OCI digest).
	// +optional
	Revision string `json:"revision,omitempty"`

	// modules reports each module's release.
	// +optional
	// +listType=map
	// +listMapKey=name
	Modules []ModuleStatus `json:"modules,omitempty"`

	// provisioningStartedAt is when provisioning of the current spec began.
	// +optional
	ProvisioningStartedAt *metav1.Time `json:"provisioningStartedAt,omitempty"`

	// firstTrue records, per condition type, when the condition first became True
	// after provisioning started.
	// +optional
	FirstTrue map[string]metav1.Time `json:"firstTrue,omitempty"`

	// inventory lists the objects applied for the tenant (pure-cluster mode), so objects
	// no longer rendered are pruned.
	// +optional
	// +listType=atomic
	Inventory []ObjectRef `json:"inventory,omitempty"`

	// appliedDigest is the digest of what Eva last delivered for the tenant's spec, so
	// that an unchanged tenant is not delivered again. In pure-cluster mode, the bundle
	// applied (its manifests and encrypted Secrets; the periodic drift check applies it
	// again regardless). In GitOps mode, the tenant's files published (revision names
	// the commit or artifact they went out in; during the decommission saga, the files
	// of the step published): the operator compares it with what the branch or tag, and
	// what Flux applied, hold of the tenant, so a restarted operator resumes and files
	// that went missing are published again.
	// +optional
	AppliedDigest string `json:"appliedDigest,omitempty"`

	// release is the EvaRollout whose module versions the tenant renders; empty: the
	// catalog's defaults. Its own spec.versions pins win over either.
	// +optional
	Release string `json:"release,omitempty"`

	// decommissionStep is how far the decommission saga got in GitOps mode, where each
	// step is a publish Flux applies before the next: TrafficRemoved (a move's source
	// only), StreamsRemoved, ReleasesRemoved, NamespaceOnly, Removed. A restarted
	// operator resumes from it.
	// +optional
	// +kubebuilder:validation:Enum=TrafficRemoved;StreamsRemoved;ReleasesRemoved;NamespaceOnly;Removed
	DecommissionStep DecommissionStep `json:"decommissionStep,omitempty"`

	// cell is the cell (cluster) the tenant was placed on, in an environment with cells
	// (docs/cells.md). The fleet operator sets it once, by capacity and spec.placement;
	// only the operator of that cell delivers the tenant. It does not change with
	// spec.placement: a tenant moves only through a move.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Cell string `json:"cell,omitempty"`

	// move is the move between cells under way, set by the fleet operator when the
	// tenant's placement no longer allows its cell (docs/cells.md#moves).
	// +optional
	Move *Move `json:"move,omitempty"`
}

// MoveStep is how far a move between cells got.
// +kubebuilder:validation:Enum=ProvisioningTarget;RemovingSource
type MoveStep string

// The steps of a move, in order.
const (
	// MoveProvisioningTarget: the target cell's operator provisions the tenant there
	// while the source keeps serving it.
	MoveProvisioningTarget MoveStep = "ProvisioningTarget"
	// MoveRemovingSource: the tenant is Active on the target; the source cell's
	// operator takes its traffic away, waits out the drain and removes it there.
	MoveRemovingSource MoveStep = "RemovingSource"
)

// Move is a move of the tenant from one cell to another: an ordered saga each of whose
// steps a restarted operator resumes.
type Move struct {
	// from is the cell the tenant is moving off (status.cell until the move ends).
	// +kubebuilder:validation:MaxLength=63
	From string `json:"from"`
	// to is the cell it is moving to.
	// +kubebuilder:validation:MaxLength=63
	To string `json:"to"`
	// step is how far the move got.
	Step MoveStep `json:"step"`
	// startedAt is when the move began.
	StartedAt metav1.Time `json:"startedAt"`
	// targetPhase and targetMessage are the target cell operator's report while it
	// provisions: the phase the tenant has there, and its Ready message.
	// +optional
	TargetPhase Phase `json:"targetPhase,omitempty"`
	// +optional
	TargetMessage string `json:"targetMessage,omitempty"`
	// trafficMovedAt is when the source cell's operator removed the tenant's Ingress
	// there: the drain runs from it.
	// +optional
	TrafficMovedAt *metav1.Time `json:"trafficMovedAt,omitempty"`
	// sourceRemovedAt is when the source cell's operator finished removing the
	// tenant there; the fleet operator then ends the move.
	// +optional
	SourceRemovedAt *metav1.Time `json:"sourceRemovedAt,omitempty"`
	// cancelled says the move is being undone: the tenant's placement allows its
	// source again before the target was Active. The target's copy is removed.
	// +optional
	Cancelled bool `json:"cancelled,omitempty"`
	// targetRemovedAt is when the target cell's operator finished removing its copy
	// of a cancelled move, or of a tenant decommissioned or deleted during its move.
	// +optional
	TargetRemovedAt *metav1.Time `json:"targetRemovedAt,omitempty"`
	// sourceMessage is what the source cell's operator waits for while it removes the
	// tenant there.
	// +optional
	SourceMessage string `json:"sourceMessage,omitempty"`
	// targetPublished is what the target cell's operator published of the tenant in
	// GitOps mode (its copy's record: the tenant's own status is the source's until
	// the move ends, when the fleet operator makes this the tenant's record).
	// +optional
	TargetPublished *Publication `json:"targetPublished,omitempty"`
}

// Publication is what an operator in GitOps mode last published of a tenant: the
// revision, the digest of the tenant's files in it, and the decommission step they are.
type Publication struct {
	// +optional
	Revision string `json:"revision,omitempty"`
	// +optional
	AppliedDigest string `json:"appliedDigest,omitempty"`
	// +optional
	// +kubebuilder:validation:Enum=TrafficRemoved;StreamsRemoved;ReleasesRemoved;NamespaceOnly;Removed
	DecommissionStep DecommissionStep `json:"decommissionStep,omitempty"`
}

// ObjectRef names one applied object.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// +optional
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// EvaTenant is one tenant ("capsule") of the platform.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=evt;capsule,categories=eva
// +kubebuilder:printcolumn:name="Code",type=string,JSONPath=`.spec.capsuleCode`
// +kubebuilder:printcolumn:name="Tier",type=string,JSONPath=`.spec.tier`
// +kubebuilder:printcolumn:name="Wave",type=integer,JSONPath=`.spec.wave`
// +kubebuilder:printcolumn:name="Cell",type=string,JSONPath=`.status.cell`,priority=1
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EvaTenant struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired tenant.
	// +required
	Spec EvaTenantSpec `json:"spec"`

	// status is the observed tenant, written by the operator.
	// +optional
	Status EvaTenantStatus `json:"status,omitempty"`
}

// EvaTenantList is a list of EvaTenant.
//
// +kubebuilder:object:root=true
type EvaTenantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EvaTenant `json:"items"`
}

// LifecycleOrDefault returns the tenant's lifecycle, Active when unset.
func (s *EvaTenantSpec) LifecycleOrDefault() Lifecycle {
	if s.Lifecycle == "" {
		return LifecycleActive
	}
	return s.Lifecycle
}

// WaveOrDefault returns the tenant's wave, 1 when unset.
func (s *EvaTenantSpec) WaveOrDefault() int32 {
	if s.Wave == 0 {
		return 1
	}
	return s.Wave
}

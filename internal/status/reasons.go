package status

// The reasons of a tenant's conditions (its five conditions, Ready, Reconciling and
// Stalled), all in one place: what users match on in alerts and `kubectl wait`, and what
// the tests assert. Events that repeat a condition's reason use the same constant.
const (
	// A condition's own progress.
	ReasonReady       = "Ready"
	ReasonProgressing = "Progressing"
	ReasonNotFound    = "NotFound"
	ReasonTerminating = "Terminating"

	// Provisioned.
	ReasonApplyFailed = "ApplyFailed"
	// ReasonFenceMismatch: the cluster's fence (ConfigMap eva-tenant-ingress) is not the
	// environment's the operator renders with: the tenant's Ingress would be refused.
	ReasonFenceMismatch   = "EnvironmentMismatch"
	ReasonStreamsNotReady = "StreamsNotReady"
	ReasonMessagingDown   = "MessagingUnavailable"

	// SeedLoaded.
	ReasonSeedJobComplete = "SeedJobComplete"
	ReasonSeedAnnotated   = "SeedLoadedAnnotation"
	ReasonSeedJobFailed   = "SeedJobFailed"
	ReasonNoSeedData      = "NoSeedData"

	// ModulesDeployed: helm-controller gave up (ReleaseFailed), marks the release Stalled
	// (ReleaseStalled), or waits on something only a person can fix (ReleaseBlocked).
	ReasonReleaseStalled = "ReleaseStalled"
	ReasonReleaseFailed  = "ReleaseFailed"
	ReasonReleaseBlocked = "ReleaseBlocked"

	// IngressReady.
	ReasonNoAddress = "NoLoadBalancerAddress"

	// Ready, when a condition failed.
	ReasonDependencyFailed = "DependencyFailed"

	// The spec: refused by the catalog's validation (terminal until the spec changes).
	ReasonInvalidSpec = "InvalidSpec"

	// The tenant boundary.
	// ReasonCapsuleCodeInUse: another EvaTenant holds the capsule code.
	ReasonCapsuleCodeInUse = "CapsuleCodeInUse"
	// ReasonNamespaceInUse: the tenant's namespace exists and belongs to someone else.
	ReasonNamespaceInUse = "NamespaceInUse"
	// ReasonNamespaceNotAllowed: the EvaTenant lives in a namespace the platform does not
	// accept tenants from.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonTenantLimit: the fleet holds as many tenants as the entitlements allow
	// (maxTenants); a new capsule code waits for one to be released.
	ReasonTenantLimit = "TenantLimitReached"
	// ReasonUnserved: the operator version the tenant belongs to has no running
	// operator; its last status is not current.
	ReasonUnserved = "Unserved"

	// The decommission saga.
	ReasonDeletionProtected    = "DeletionProtected"
	ReasonDecommissioning      = "Decommissioning"
	ReasonDecommissioned       = "Decommissioned"
	ReasonStepFailed           = "DecommissionStepFailed"
	ReasonNamespaceTerminating = "NamespaceTerminating"
)

// The reasons of a tenant's events that no condition carries: its life's milestones, in
// the order they happen. What users match on in `kubectl get events` and alerts.
const (
	EventProvisioningStarted  = "ProvisioningStarted"
	EventNamespaceCreated     = "NamespaceCreated"
	EventModuleDeployStarted  = "ModuleDeployStarted"
	EventSeedLoaded           = "SeedLoaded"
	EventModuleDeployComplete = "ModuleDeployComplete"
	EventIngressProvisioned   = "IngressProvisioned"
	EventProvisioningComplete = "ProvisioningComplete"
	// EventProvisioningFailed: the tenant entered phase Failed.
	EventProvisioningFailed = "ProvisioningFailed"
	// EventDriftCorrected: objects changed outside Eva were applied again.
	EventDriftCorrected = "DriftCorrected"
	// EventStreamsMoved: messages of the tenant's streams in the shared NATS account
	// were moved into its own account (--nats-move-shared-streams).
	EventStreamsMoved = "StreamsMoved"
	// EventRepublished: the tenant's published files were missing or changed in the
	// branch or tag (another writer, a force-push), and were published again.
	EventRepublished         = "Republished"
	EventDeprovisionRefused  = "DeprovisionRefused"
	EventDeprovisionStarted  = "DeprovisionStarted"
	EventDeprovisionComplete = "DeprovisionComplete"
	// EventDeletionHeld: an EvaRollout's deletion waits (its finalizer).
	EventDeletionHeld = "DeletionHeld"
	// EventPlaced: the fleet operator placed the tenant on a cell (status.cell).
	EventPlaced = "Placed"
	// EventNotPlaced: no cell can take the tenant.
	EventNotPlaced = "NotPlaced"
	// EventMoveStarted, EventMoveTargetActive and EventMoveComplete: the steps of a
	// move between cells.
	EventMoveStarted      = "MoveStarted"
	EventMoveTargetActive = "MoveTargetActive"
	EventMoveComplete     = "MoveComplete"
	EventMoveCancelled    = "MoveCancelled"
	// EventChartPullSecret: the chart registry's pull secret could not be copied into
	// the tenant's namespace (missing, of the wrong type, or refused).
	EventChartPullSecret = "ChartPullSecretNotCopied"
)

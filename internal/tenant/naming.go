package tenant

import "strings"

// Labels and annotations Eva puts on or reads from objects.
const (
	// LabelCapsule marks every object rendered for a tenant with its capsule code.
	LabelCapsule = "eva.aidonow.com/capsule"
	// LabelWave carries the tenant's rollout wave.
	LabelWave = "eva.aidonow.com/wave"
	// LabelTier carries the tenant's tier.
	LabelTier = "eva.aidonow.com/tier"
	// LabelModule marks an object belonging to one module.
	LabelModule = "eva.aidonow.com/module"
	// CellLabelPrefix, followed by a cell's name, is the label the fleet operator puts
	// on an EvaTenant for each cell that must look at it: the one in status.cell, and
	// during a move the target too. A cell's operator selects its tenants by it;
	// status.cell and status.move decide what it does with them.
	CellLabelPrefix = "cell.eva.aidonow.com/"
	// AnnotationOperatorVersion records which operator version owns a tenant.
	AnnotationOperatorVersion = "eva.aidonow.com/operator-version"
	// AnnotationSeedLoaded is set by the provisioner to the seeds version it loaded.
	AnnotationSeedLoaded = "eva.aidonow.com/seed-loaded"
	// AnnotationRotateNATSCredentials on an EvaTenant asks for new NATS credentials of
	// its workloads whenever its value changes (the old user is revoked): platform
	// metadata, like every eva.aidonow.com/ key.
	AnnotationRotateNATSCredentials = "eva.aidonow.com/rotate-nats-credentials"
	// AnnotationSpecDigest on a rendered HelmRelease is a digest of its spec: status
	// reads what helm-controller says of a release only once the release in the cluster
	// carries the spec the tenant renders now.
	AnnotationSpecDigest = "eva.aidonow.com/spec-digest"
	// AnnotationChartVersion on a rendered HelmRelease whose chart comes from the
	// tenant's own OCIRepository (chartRef) is the chart version that source is pinned
	// to, which the release's spec does not name: what a reader of the release (evactl
	// rollout's health, a person) takes as the version it asks for.
	AnnotationChartVersion = "eva.aidonow.com/chart-version"
	// AnnotationFence on a rendered Ingress is the digest of the fence parameters of the
	// environment it was rendered for (overlay.Settings.FenceParams): the admission
	// policy eva-tenant-ingresses refuses it, naming both digests, when the cluster
	// enforces another environment's.
	AnnotationFence = "eva.aidonow.com/fence"
	// ChartPullSecret is the copy, in each tenant namespace, of the chart registry's
	// pull credentials the environment names (chartSource.pullSecret): the operator
	// writes it, and each of the tenant's chart sources references it.
	ChartPullSecret = "eva-chart-pull"
	// NATSCredsKey is the key of the credentials file in NATSCredsSecret.
	NATSCredsKey = "nats.creds"
	// NATSMount is the short name the module charts mount NATSCredsSecret under
	// (/var/run/secrets/eva/nats/nats.creds): no Secret of a tenant may take it.
	NATSMount = "nats"
	// NATSAccountObject names the NACK Account object in each tenant namespace, which
	// the tenant's Streams name in spec.account.
	NATSAccountObject = "eva-nats"
	// Finalizer protects a tenant until its decommission saga has run.
	Finalizer = "eva.aidonow.com/tenant-protection"
	// AnnotationOwnerUID names who owns a tenant's code: the UID of an EvaTenant
	// applied to the cluster, or FileOwner for a tenant file. It is on the rendered
	// Namespace (publishers compare it before replacing a tenant's folder), on every
	// object the operator applies, and on the code's claim.
	AnnotationOwnerUID = "eva.aidonow.com/owner-uid"
	// FileOwner is the owner of a tenant published from a file under tenants/.
	FileOwner = "tenant-file"
)

// Owner is who owns the tenant's code: its UID, or FileOwner for a tenant read from a
// file (which has none).
func Owner(uid string) string {
	if uid == "" {
		return FileOwner
	}
	return uid
}

// Namespace returns the namespace of a tenant: eva-tenant-<code in lower case>.
func Namespace(code string) string { return "eva-tenant-" + strings.ToLower(code) }

// NATSCredsSecret is the Secret, in each tenant namespace of an environment with
// natsAccounts, holding its workloads' credentials of the tenant's own NATS account (key
// NATSCredsKey): <code>-nats, named as the tenant's own Secrets are (NATSMount is a name
// none of them may take). The operator writes it, every module chart mounts it as
// NATSMount, and the tenant's NACK Account (NATSAccountObject) connects with it.
func NATSCredsSecret(code string) string { return SecretName(code, NATSMount) }

// SecretName is the name of a tenant's encrypted Secret of the given short name:
// <code>-<name>, in the tenant's namespace.
func SecretName(code, name string) string { return strings.ToLower(code) + "-" + name }

// EventsStream returns the JetStream stream name of a tenant's events.
func EventsStream(code string) string { return "eva-" + code + "-events" }

// CommandsStream returns the JetStream stream name of a tenant's commands.
func CommandsStream(code string) string { return "eva-" + code + "-commands" }

// EventsSubject returns the subject filter of a tenant's events stream.
func EventsSubject(code string) string { return "capsule." + code + ".events.>" }

// CommandsSubject returns the subject filter of a tenant's commands stream.
func CommandsSubject(code string) string { return "capsule." + code + ".commands.>" }

// EventsQueue returns the subject prefix modules publish a tenant's events on.
func EventsQueue(code string) string { return "capsule." + code + ".events" }

// CommandsQueue returns the subject prefix modules receive a tenant's commands on.
func CommandsQueue(code string) string { return "capsule." + code + ".commands" }

// StreamObjectName returns the Kubernetes object name of a stream (names must be lower case).
func StreamObjectName(stream string) string { return strings.ToLower(stream) }

// IngressName returns the name of a tenant's Ingress.
func IngressName(code string) string { return "eva-" + strings.ToLower(code) }

// Host returns the tenant's host name under domain.
func Host(code, domain string) string { return strings.ToLower(code) + "." + domain }

// CellLabel is the label that shows an EvaTenant to the operator of cell.
func CellLabel(cell string) string { return CellLabelPrefix + cell }

// PlatformPrefix is the prefix of the labels and annotations only the platform writes:
// eva.aidonow.com/ and any subdomain of it (cell.eva.aidonow.com/, …).
const PlatformPrefix = "eva.aidonow.com/"

// PlatformKey reports whether a label or annotation key is under PlatformPrefix or a
// subdomain of it, in any case: what tenant files may not set, what the admission
// policy eva-tenant-metadata-guard keeps to the platform on a live EvaTenant.
func PlatformKey(key string) bool {
	prefix, _, ok := strings.Cut(strings.ToLower(key), "/")
	domain := strings.TrimSuffix(PlatformPrefix, "/")
	return ok && (prefix == domain || strings.HasSuffix(prefix, "."+domain))
}

// Package overlay loads a deployment environment (overlays/<env>/tenant/): the settings
// the renderer needs (domain, chart source, Flux source, ingress and messaging
// namespaces, seeder image) and the standard kustomize patches applied to every
// rendered tenant bundle of that environment.
package overlay

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/entitlement"
	"github.com/aidonow/eva/internal/natsaccount"
)

// SettingsFile and KustomizationFile are the files of an environment's tenant overlay.
const (
	SettingsFile      = "environment.yaml"
	KustomizationFile = "kustomization.yaml"
)

// SourceRef points at a Flux source object.
type SourceRef struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// ChartSource is the Flux source of the module charts.
type ChartSource struct {
	SourceRef `json:",inline"`
	// URL, when set, is the chart source's address: oci://host/path, where
	// `evactl charts push` publishes. Eva then renders the sources itself into every
	// tenant namespace, an OCIRepository named <Name>-<module> per module chart, pinned
	// to the digest published.yaml records for the release's version, so that no
	// HelmRelease refers to anything outside its own namespace (as Flux's
	// --no-cross-namespace-refs lockdown requires) and the cluster installs exactly the
	// chart evactl verified, never a re-tagged one. Namespace must then be left out.
	// Without URL, the releases refer to a source the platform team created in
	// Namespace (default: the Flux namespace).
	URL string `json:"url,omitempty"`
	// Insecure lets source-controller pull the charts over plain HTTP.
	Insecure bool `json:"insecure,omitempty"`
	// PullSecret, with URL, names a kubernetes.io/dockerconfigjson Secret in the
	// operator's namespace holding the registry's pull credentials. The operator copies
	// it into each tenant namespace as tenant.ChartPullSecret, which each chart source
	// references: the credentials never enter the published tree.
	PullSecret string `json:"pullSecret,omitempty"`
	// RequireDigest, with URL, refuses to render a release whose chart version has no
	// digest in the charts' published.yaml (an air-gapped cluster installs only what
	// evactl verified). Without it such a release follows the version's tag.
	RequireDigest bool `json:"requireDigest,omitempty"`
}

// PerTenant reports whether each tenant namespace gets its own chart source.
func (c ChartSource) PerTenant() bool { return c.URL != "" }

// Settings are the per-environment parameters of rendering.
type Settings struct {
	// Domain under which each tenant gets the host <code lower>.<domain>.
	Domain string `json:"domain"`
	// IngressClassName of the tenant Ingress.
	IngressClassName string `json:"ingressClassName,omitempty"`
	// IngressAnnotations are set on every tenant Ingress (for the ingress controller).
	// They are the only annotations a tenant Ingress may carry: the platform's admission
	// policy eva-tenant-ingresses (base/rbac/tenant_objects.yaml) reads their keys, with
	// the domain and the class, from the ConfigMap eva-tenant-ingress generated from this
	// file, and refuses any other (an nginx server-alias would take another tenant's host).
	IngressAnnotations map[string]string `json:"ingressAnnotations,omitempty"`
	// ReservedCodes are capsule codes no Active tenant may have in this environment,
	// beyond the built-in list (tenant.ReservedCodes): a tenant's host is
	// <code>.<domain>, so each of the platform's own services under the domain reserves
	// its label here (GRAFNA for grafana.<domain>, …).
	ReservedCodes []string `json:"reservedCodes,omitempty"`
	// IngressNamespace is where the ingress controller runs (allowed in by NetworkPolicy).
	IngressNamespace string `json:"ingressNamespace,omitempty"`
	// MessagingNamespace is where NATS runs (allowed out by NetworkPolicy); empty denies it.
	MessagingNamespace string `json:"messagingNamespace,omitempty"`
	// NATSAccounts gives every tenant a NATS account of its own (docs/messaging.md): the
	// operator mints it, with its tier's limits, and writes its workloads' credentials
	// into the tenant's namespace (tenant.NATSCredsSecret); every module release mounts
	// them, and the tenant's Streams name the NACK Account that connects with them. The
	// platform's NATS must run in operator mode with a full resolver.
	NATSAccounts bool `json:"natsAccounts,omitempty"`
	// NATSConsumer declares the platform's consumer of tenant events, the one crossing
	// between accounts an environment may make (docs/messaging.md): with natsAccounts,
	// an account the operator keeps, to which every tenant's account sends these
	// subjects of its own.
	NATSConsumer *NATSConsumer `json:"natsConsumer,omitempty"`
	// ChartSource is the Flux source of the module charts: a shared HelmRepository, or
	// (with url) an OCIRepository per module chart in each tenant namespace.
	ChartSource ChartSource `json:"chartSource"`
	// GitOpsSource is the Flux source (GitRepository or OCIRepository) holding the
	// rendered tree, referenced by each tenant's Flux Kustomization.
	GitOpsSource SourceRef `json:"gitopsSource"`
	// FluxNamespace is where the tenant Kustomizations live.
	FluxNamespace string `json:"fluxNamespace,omitempty"`
	// DeployerClusterRole is bound in each tenant namespace to the account Flux
	// impersonates for the tenant's Helm releases.
	DeployerClusterRole string `json:"deployerClusterRole,omitempty"`
	// ApplierClusterRole is bound, cluster-wide, to each tenant's applier account alone
	// (never to a group): the rights a tenant bundle needs, which the applier fence
	// (base/rbac/tenant_applier.yaml) confines to the namespace of the account's name.
	ApplierClusterRole string `json:"applierClusterRole,omitempty"`
	// SecretsClusterRole is bound in the namespace of each tenant with encrypted Secrets
	// to the tenant's applier account, so that kustomize-controller can apply them.
	SecretsClusterRole string `json:"secretsClusterRole,omitempty"`
	// SeedImage runs the seed Job.
	SeedImage string `json:"seedImage"`
	// ReleaseInterval, KustomizationInterval and KustomizationTimeout tune Flux.
	ReleaseInterval metav1.Duration `json:"releaseInterval,omitempty"`
	// ReleaseTimeout bounds each Helm action of a module release (install, upgrade,
	// rollback, test): how long helm-controller waits for the release's workloads to
	// become ready before it counts the attempt as failed (default 5m).
	ReleaseTimeout        metav1.Duration `json:"releaseTimeout,omitempty"`
	KustomizationInterval metav1.Duration `json:"kustomizationInterval,omitempty"`
	KustomizationTimeout  metav1.Duration `json:"kustomizationTimeout,omitempty"`
	// KustomizationRetryInterval is how soon Flux tries a tenant's Kustomization again
	// after a failure (default 30s).
	KustomizationRetryInterval metav1.Duration `json:"kustomizationRetryInterval,omitempty"`
	// Secrets is how the tenants' SOPS-encrypted Secrets are decrypted in this
	// environment; without it, a tenant with secrets is refused.
	Secrets *Secrets `json:"secrets,omitempty"`
	// Applier is the GitOps tool that applies the rendered tree: flux (the default) or
	// argocd. It decides the delivery objects rendered beside each tenant's manifests
	// and how the operator reads back what was applied.
	Applier Applier `json:"applier,omitempty"`
	// ArgoCD configures the Argo CD output; required with applier argocd, refused
	// otherwise.
	ArgoCD *ArgoCD `json:"argocd,omitempty"`
	// FluxShards spreads the tenants' Flux objects over Flux controller shards
	// (applier flux only); without it they carry no shard key.
	FluxShards *FluxShards `json:"fluxShards,omitempty"`
	// HelmReleasesPerMinute is how many Helm releases one helm-controller (each Flux
	// shard's, and the main one) installs or upgrades per minute, sustained, as measured
	// for this cluster (docs/sharding.md). Rollouts admit no more tenants than their
	// shards install within the ready timeout. Zero: no limit.
	HelmReleasesPerMinute float64 `json:"helmReleasesPerMinute,omitempty"`
	// Cells are the clusters the environment's tenants are placed on by capacity and
	// labels (docs/cells.md); none: the environment is one cluster.
	Cells []Cell `json:"cells,omitempty"`
	// Entitlements are what a tenant may claim here (tier, wave, freezing), and what
	// named capsule codes may claim beyond that: checked by evactl and the operator,
	// and on the kubectl path by the admission policy eva-tenant-entitlements, whose
	// parameters (the ConfigMap eva-tenant-entitlements) are generated from them.
	// None: every claim is the tenant's.
	Entitlements *entitlement.Rules `json:"entitlements,omitempty"`
}

// Reserves reports whether the environment reserves the capsule code (reservedCodes).
func (s *Settings) Reserves(code string) bool { return slices.Contains(s.ReservedCodes, code) }

// Environment is a loaded environment: its name, settings and patches.
type Environment struct {
	Name     string
	Settings Settings
	Patches  []Patch
	// Digest identifies everything the environment was loaded from (its name, the
	// settings file, the kustomization and every patch file, as bytes): two loads with
	// the same digest render the same. Empty for an environment built in code.
	Digest string
	// Files are the files the environment was loaded from, by their slash-separated
	// names in its tenant folder: what the operator's chart mounts for the operator to
	// load the same environment (evactl operator values). Nil for one built in code.
	Files map[string][]byte
}

var envNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// Load reads overlays/<name>/tenant/ under root, refusing an environment folder that
// leads out of root.
func Load(root, name string) (*Environment, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	dir, err := openOverlayIn(root, filepath.Join(name, "tenant"))
	if errors.Is(err, fs.ErrNotExist) {
		names := Names(root)
		if len(names) == 0 {
			return nil, fmt.Errorf("environment %s: no environments under %s (an environment is a folder <name>/tenant/ holding %s; pass --overlays)", name, root, SettingsFile)
		}
		return nil, fmt.Errorf("environment %s: no such environment under %s (environments: %s)", name, root, strings.Join(names, ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", name, err)
	}
	defer dir.close()
	return load(dir, name)
}

// Names lists the environments under root: the folders holding tenant/environment.yaml,
// sorted; none when root cannot be read.
func Names(root string) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || !envNameRE.MatchString(e.Name()) {
			continue
		}
		if info, err := os.Lstat(filepath.Join(root, e.Name(), "tenant", SettingsFile)); err == nil && info.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names
}

// LoadDir reads an environment's tenant overlay from dir (the operator mounts it from a
// ConfigMap).
func LoadDir(dir, name string) (*Environment, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	o, err := openOverlayDir(dir)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", name, err)
	}
	defer o.close()
	return load(o, name)
}

// checkName refuses an environment name that is not a plain folder name.
func checkName(name string) error {
	if !envNameRE.MatchString(name) {
		return fmt.Errorf("environment name %q: must be lower-case letters, digits and '-'", name)
	}
	return nil
}

// load reads the settings and patches of an opened overlay folder.
func load(dir *overlayDir, name string) (*Environment, error) {
	data, err := dir.read(SettingsFile)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %s: %w", name, dir.join(SettingsFile), err)
	}
	if err := singleDocument(dir.join(SettingsFile), data); err != nil {
		return nil, err
	}
	settings, err := ParseSettings(data)
	if err != nil {
		return nil, settingsError(dir.join(SettingsFile), data, err)
	}
	sum := sha256.New()
	writeDigestPart(sum, []byte(name))
	writeDigestPart(sum, data)
	patches, err := loadPatches(dir, func(b []byte) { writeDigestPart(sum, b) })
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", name, err)
	}
	return &Environment{Name: name, Settings: *settings, Patches: patches, Digest: hex.EncodeToString(sum.Sum(nil)), Files: dir.files}, nil
}

// writeDigestPart adds one length-prefixed part to a digest, so that no two different
// sequences of parts hash alike.
func writeDigestPart(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// ParseSettings decodes settings strictly, fills defaults and checks them.
func ParseSettings(data []byte) (*Settings, error) {
	var s Settings
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, fmt.Errorf("decoding: %w", err)
	}
	s.applyDefaults()
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

func (s *Settings) applyDefaults() {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&s.IngressClassName, "nginx")
	def(&s.IngressNamespace, "ingress-nginx")
	def(&s.FluxNamespace, "flux-system")
	def(&s.DeployerClusterRole, "eva-tenant-deployer")
	def(&s.SecretsClusterRole, "eva-tenant-secrets")
	def(&s.ApplierClusterRole, "eva-tenant-applier")
	if !s.ChartSource.PerTenant() {
		def(&s.ChartSource.Kind, "HelmRepository")
		def(&s.ChartSource.Namespace, s.FluxNamespace)
	} else {
		def(&s.ChartSource.Kind, "OCIRepository")
	}
	def(&s.GitOpsSource.Kind, "GitRepository")
	def(&s.GitOpsSource.Namespace, s.FluxNamespace)
	durDef := func(d *metav1.Duration, v time.Duration) {
		if d.Duration == 0 {
			d.Duration = v
		}
	}
	durDef(&s.ReleaseInterval, 10*time.Minute)
	durDef(&s.ReleaseTimeout, 5*time.Minute)
	durDef(&s.KustomizationInterval, 10*time.Minute)
	durDef(&s.KustomizationTimeout, 5*time.Minute)
	durDef(&s.KustomizationRetryInterval, 30*time.Second)
	if s.Applier == "" {
		s.Applier = ApplierFlux
	}
	if s.ArgoCD != nil {
		s.ArgoCD.defaults()
	}
}

func (s *Settings) check() error {
	if msgs := validation.IsDNS1123Subdomain(s.Domain); s.Domain == "" || len(msgs) > 0 {
		return fmt.Errorf("domain: %q must be a DNS name", s.Domain)
	}
	if msgs := validation.IsDNS1123Label(s.IngressNamespace); len(msgs) > 0 {
		return fmt.Errorf("ingressNamespace: %q: %s", s.IngressNamespace, msgs[0])
	}
	if msgs := validation.IsDNS1123Subdomain(s.IngressClassName); len(msgs) > 0 {
		return fmt.Errorf("ingressClassName: %q: %s", s.IngressClassName, msgs[0])
	}
	if err := s.Entitlements.Validate(); err != nil {
		return err
	}
	for i, code := range s.ReservedCodes {
		if !capsuleCodeRE.MatchString(code) {
			return fmt.Errorf("reservedCodes[%d]: %q is not a capsule code (six capital letters)", i, code)
		}
	}
	for k := range s.IngressAnnotations {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("ingressAnnotations: %q: %s", k, msgs[0])
		}
	}
	if s.MessagingNamespace != "" && len(validation.IsDNS1123Label(s.MessagingNamespace)) > 0 {
		return fmt.Errorf("messagingNamespace: %q is not a namespace name", s.MessagingNamespace)
	}
	if err := s.checkNATSConsumer(); err != nil {
		return err
	}
	if s.HelmReleasesPerMinute < 0 {
		return fmt.Errorf("helmReleasesPerMinute: %g: must not be negative", s.HelmReleasesPerMinute)
	}
	if d := s.ReleaseTimeout.Duration; d < 10*time.Second || d > time.Hour {
		return fmt.Errorf("releaseTimeout: %s: must be between 10s and 1h", d)
	}
	if s.SeedImage == "" {
		return fmt.Errorf("seedImage: required")
	}
	if err := s.checkCells(); err != nil {
		return err
	}
	switch s.Applier {
	case ApplierFlux:
		if s.ArgoCD != nil {
			return fmt.Errorf("argocd: only with applier: argocd")
		}
		return s.checkFlux()
	case ApplierArgoCD:
		return s.checkArgoCD()
	}
	return fmt.Errorf("applier: %q: must be flux or argocd", s.Applier)
}

// NATSConsumer is the platform's consumer of tenant events.
type NATSConsumer struct {
	// Subjects are under each tenant's capsule.<CODE>., within its events: events.>
	// for all of them, events.orders.* for some.
	Subjects []string `json:"subjects"`
}

func (s *Settings) checkNATSConsumer() error {
	c := s.NATSConsumer
	switch {
	case c == nil:
		return nil
	case !s.NATSAccounts:
		return fmt.Errorf("natsConsumer: receives from the tenants' own NATS accounts: needs natsAccounts: true")
	case len(c.Subjects) == 0:
		return fmt.Errorf("natsConsumer.subjects: required (events.> for every event of every tenant)")
	}
	for i, subject := range c.Subjects {
		if err := natsaccount.CheckConsumerSubject(subject); err != nil {
			return fmt.Errorf("natsConsumer.subjects[%d]: %w", i, err)
		}
		for j, earlier := range c.Subjects[:i] {
			if natsaccount.SubjectsOverlap(subject, earlier) {
				// NATS refuses an account whose exports or imports overlap: every
				// tenant's account would be refused.
				return fmt.Errorf("natsConsumer.subjects[%d]: %q overlaps subjects[%d] %q: name each subject once", i, subject, j, earlier)
			}
		}
	}
	return nil
}

// checkFlux checks the settings of the Flux output.
func (s *Settings) checkFlux() error {
	for field, v := range map[string]string{"fluxNamespace": s.FluxNamespace,
		"chartSource.name": s.ChartSource.Name, "gitopsSource.name": s.GitOpsSource.Name} {
		if msgs := validation.IsDNS1123Label(v); len(msgs) > 0 {
			return fmt.Errorf("%s: %q: %s", field, v, msgs[0])
		}
	}
	if err := s.ChartSource.check(); err != nil {
		return err
	}
	if k := s.GitOpsSource.Kind; k != "GitRepository" && k != "OCIRepository" && k != "Bucket" {
		return fmt.Errorf("gitopsSource.kind: %q: must be GitRepository, OCIRepository or Bucket", k)
	}
	if s.Secrets != nil {
		if err := s.Secrets.check(); err != nil {
			return fmt.Errorf("secrets.%w", err)
		}
	}
	if s.FluxShards != nil {
		return s.FluxShards.check()
	}
	return nil
}

// check checks the chart source: a HelmRepository the platform team made in its
// namespace, or (with URL) an OCI registry each tenant namespace gets its own
// OCIRepository of, one per module chart.
func (c ChartSource) check() error {
	if !c.PerTenant() {
		if c.Kind != "HelmRepository" {
			return fmt.Errorf("chartSource.kind: %q: only HelmRepository is supported without chartSource.url", c.Kind)
		}
		for field, set := range map[string]bool{"insecure": c.Insecure, "pullSecret": c.PullSecret != "", "requireDigest": c.RequireDigest} {
			if set {
				return fmt.Errorf("chartSource.%s: only with chartSource.url (the shared source's settings are the platform team's)", field)
			}
		}
		return nil
	}
	// HelmRepository is how fleets written before charts were pinned by digest spell it.
	if c.Kind != "OCIRepository" && c.Kind != "HelmRepository" {
		return fmt.Errorf("chartSource.kind: %q: with chartSource.url, Eva renders an OCIRepository per module chart", c.Kind)
	}
	if !strings.HasPrefix(c.URL, "oci://") || len(c.URL) <= len("oci://") {
		return fmt.Errorf("chartSource.url: %q: must be an oci:// URL (a chart source rendered into every tenant namespace is an OCI repository, which needs no index fetched per tenant)", c.URL)
	}
	if c.Namespace != "" {
		return fmt.Errorf("chartSource.namespace: %q: leave it out with chartSource.url, which renders the source into each tenant namespace", c.Namespace)
	}
	if msgs := validation.IsDNS1123Subdomain(c.PullSecret); c.PullSecret != "" && len(msgs) > 0 {
		return fmt.Errorf("chartSource.pullSecret: %q: %s", c.PullSecret, msgs[0])
	}
	return nil
}

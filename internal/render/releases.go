package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

// Remediation settings of every module release: a failed install or upgrade is retried
// three times, and a failed upgrade is rolled back so the tenant keeps working.
const releaseRetries = 3

// helmRelease renders the Flux HelmRelease of one module.
func (s *scope) helmRelease(module string) (runtime.Object, error) {
	env := s.r.Env.Settings
	mod := s.r.Catalog.Modules[module]
	rollback := helmv2.RollbackRemediationStrategy
	hr := &helmv2.HelmRelease{
		TypeMeta:   metav1.TypeMeta{APIVersion: helmv2.GroupVersion.String(), Kind: helmv2.HelmReleaseKind},
		ObjectMeta: metav1.ObjectMeta{Name: module, Namespace: s.ns, Labels: s.fluxLabels(tenant.LabelModule, module)},
		Spec: helmv2.HelmReleaseSpec{
			Interval:           env.ReleaseInterval,
			ReleaseName:        module,
			ServiceAccountName: DeployerName,
			// A frozen tenant: helm-controller changes nothing of its releases.
			Suspend:    s.t.Spec.Frozen != "",
			Timeout:    &metav1.Duration{Duration: env.ReleaseTimeout.Duration},
			MaxHistory: ptr.To(5),
			Install: &helmv2.Install{
				Remediation: &helmv2.InstallRemediation{Retries: releaseRetries},
			},
			Upgrade: &helmv2.Upgrade{
				CleanupOnFail: true,
				Remediation: &helmv2.UpgradeRemediation{
					Retries: releaseRetries, RemediateLastFailure: ptr.To(true), Strategy: &rollback,
				},
			},
		},
	}
	if s.r.perTenantCharts() {
		hr.Spec.ChartRef = &helmv2.CrossNamespaceSourceReference{Kind: sourcev1.OCIRepositoryKind, Name: s.chartRepositoryName(module)}
	} else {
		hr.Spec.Chart = &helmv2.HelmChartTemplate{ObjectMeta: s.chartMeta(), Spec: helmv2.HelmChartTemplateSpec{
			Chart:     mod.Chart,
			Version:   s.r.Catalog.ModuleVersion(s.t, module),
			SourceRef: s.chartSourceRef(),
		}}
	}
	values, err := s.values(module)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", module, err)
	}
	hr.Spec.Values = &apiextensionsv1.JSON{Raw: raw}
	spec, err := json.Marshal(hr.Spec)
	if err != nil {
		return nil, fmt.Errorf("spec of %s: %w", module, err)
	}
	version := s.r.Catalog.ModuleVersion(s.t, module)
	if hr.Spec.ChartRef != nil {
		// The chart's version and digest are the source's, not the spec's: they are part
		// of what the release renders, so of its digest.
		digest, _ := s.chartDigest(mod.Chart, version)
		spec = fmt.Appendf(spec, "\n%s@%s@%s", mod.Chart, version, digest)
	}
	sum := sha256.Sum256(spec)
	token, err := s.tenantToken()
	if err != nil {
		return nil, err
	}
	hr.Annotations = map[string]string{
		tenant.AnnotationSpecDigest: "sha256:" + hex.EncodeToString(sum[:8]),
		// A change to the tenant retries every release helm-controller gave up on, as
		// `flux reconcile helmrelease --reset` does: a release that failed because of
		// another (crm's pods filling the quota while itsm installed) has no spec change
		// of its own when the owner fixes the cause, and would otherwise stay stalled
		// with no retries left. For a healthy release the request is a no-op.
		fluxmeta.ReconcileRequestAnnotation: token,
		helmv2.ResetRequestAnnotation:       token,
	}
	if hr.Spec.ChartRef != nil {
		hr.Annotations[tenant.AnnotationChartVersion] = version
	}
	return hr, nil
}

// ReleaseChartVersion is the chart version a rendered HelmRelease asks for: its chart
// template's, or (chartRef to the tenant's OCIRepository) tenant.AnnotationChartVersion.
func ReleaseChartVersion(hr *helmv2.HelmRelease) string {
	if hr.Spec.Chart != nil {
		return hr.Spec.Chart.Spec.Version
	}
	return hr.Annotations[tenant.AnnotationChartVersion]
}

// tenantToken identifies the tenant's spec: it changes with any change a user makes.
func (s *scope) tenantToken() (string, error) {
	if s.token != "" {
		return s.token, nil
	}
	spec, err := json.Marshal(s.t.Spec)
	if err != nil {
		return "", fmt.Errorf("spec of tenant %s: %w", s.code, err)
	}
	sum := sha256.Sum256(spec)
	s.token = "eva-spec-" + hex.EncodeToString(sum[:8])
	return s.token, nil
}

// chartMeta labels the HelmChart helm-controller makes for a release with the tenant's
// Flux shard, so that the shard's source-controller builds it (nil without one).
func (s *scope) chartMeta() *helmv2.HelmChartTemplateObjectMeta {
	if key := s.fluxShard(); key != "" {
		return &helmv2.HelmChartTemplateObjectMeta{Labels: map[string]string{overlay.FluxShardKey: key}}
	}
	return nil
}

// chartSourceRef points a release at the platform's shared chart source.
func (s *scope) chartSourceRef() helmv2.CrossNamespaceObjectReference {
	src := s.r.Env.Settings.ChartSource
	return helmv2.CrossNamespaceObjectReference{Kind: src.Kind, Name: src.Name, Namespace: src.Namespace}
}

// perTenantCharts says whether the tenant's releases take their charts from sources of
// its own namespace, one OCIRepository per module (chartSource.url under Flux; Argo CD
// reads the charts itself).
func (r *Renderer) perTenantCharts() bool {
	return r.Env.Settings.ChartSource.PerTenant() && !r.ArgoCD()
}

// chartRepositoryName is the tenant's chart source of one module.
func (s *scope) chartRepositoryName(module string) string {
	return s.r.Env.Settings.ChartSource.Name + "-" + module
}

// chartRepository renders the tenant's source of one module's chart when the
// environment gives chartSource.url (nil otherwise): an OCIRepository in the tenant
// namespace, which keeps every reference of the tenant's releases inside that
// namespace, pinned to the digest published.yaml records for the version the tenant
// runs, so that source-controller fetches exactly the chart evactl verified.
func (s *scope) chartRepository(module string) (runtime.Object, error) {
	if !s.r.perTenantCharts() {
		return nil, nil
	}
	src := s.r.Env.Settings.ChartSource
	chart, version := s.r.Catalog.Modules[module].Chart, s.r.Catalog.ModuleVersion(s.t, module)
	// The tag says which version a reviewer reads; the digest, which source-controller
	// takes over the tag, is what it fetches. (Helm pushes a version's "+" as "_".)
	ref := &sourcev1.OCIRepositoryRef{Tag: strings.ReplaceAll(version, "+", "_")}
	if digest, ok := s.chartDigest(chart, version); ok {
		ref.Digest = digest
	} else if src.RequireDigest {
		return nil, fmt.Errorf("tenant %s: module %s: chart %s %s has no digest in the charts' published.yaml, and the environment's chartSource.requireDigest installs only published digests (run evactl charts push; the operator reads the file from --published-charts, which the chart sets from evactl operator values)",
			s.code, module, chart, version)
	}
	repo := &sourcev1.OCIRepository{
		TypeMeta: metav1.TypeMeta{APIVersion: sourcev1.GroupVersion.String(), Kind: sourcev1.OCIRepositoryKind},
		ObjectMeta: metav1.ObjectMeta{Name: s.chartRepositoryName(module), Namespace: s.ns,
			Labels: s.fluxLabels(tenant.LabelModule, module)},
		Spec: sourcev1.OCIRepositorySpec{
			URL: strings.TrimSuffix(src.URL, "/") + "/" + chart, Reference: ref,
			LayerSelector: &sourcev1.OCILayerSelector{MediaType: helmChartLayer, Operation: sourcev1.OCILayerCopy},
			Insecure:      src.Insecure, Interval: s.r.Env.Settings.ReleaseInterval,
		},
	}
	if src.PullSecret != "" {
		repo.Spec.SecretRef = &fluxmeta.LocalObjectReference{Name: tenant.ChartPullSecret}
	}
	return repo, nil
}

// helmChartLayer is the media type of a Helm chart's archive in its OCI artifact: the
// layer source-controller copies for helm-controller.
const helmChartLayer = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"

// ChartDigest is the digest the tenant's source of a module's chart pins: "" when its
// releases use the shared source, or its version has no published digest.
func (r *Renderer) ChartDigest(t *evav1.EvaTenant, module string) string {
	if !r.perTenantCharts() || r.Charts == nil {
		return ""
	}
	digest, _ := r.Charts.Digest(r.Catalog.Modules[module].Chart, r.Catalog.ModuleVersion(t, module))
	return digest
}

// chartDigest is the published digest of a chart version, if the renderer knows it.
func (s *scope) chartDigest(chart, version string) (string, bool) {
	if s.r.Charts == nil {
		return "", false
	}
	return s.r.Charts.Digest(chart, version)
}

// values merges, in order: the module's catalog values, the tier's values for the
// module, the capsule identity, and the tenant's overrides. Later layers win; lists are
// replaced, as Helm does. Last come the Secrets the module's pods mount, which no
// override may name (the key is platform-owned).
func (s *scope) values(module string) (map[string]any, error) {
	out := map[string]any{}
	mergeValues(out, s.r.Catalog.Modules[module].Values)
	mergeValues(out, s.tier.Values[module])
	mergeValues(out, map[string]any{tenant.ReservedValuesKey: s.identity()})
	if raw, ok := s.t.Spec.HelmValues[module]; ok && len(raw.Raw) > 0 {
		var overrides map[string]any
		if err := json.Unmarshal(raw.Raw, &overrides); err != nil {
			return nil, fmt.Errorf("helmValues[%s]: %w", module, err)
		}
		mergeValues(out, overrides)
	}
	mounts, err := s.secretMounts(module)
	if err != nil {
		return nil, err
	}
	if len(mounts) > 0 {
		out[tenant.SecretMountsValuesKey] = mounts
	}
	return out, nil
}

// secretMounts are the tenant's Secrets the module's pods mount, as its chart reads
// them: the short name (the folder under /var/run/secrets/eva), the Secret's name, and
// a revision that changes with the encrypted Secret, so that the chart rolls the pods
// when a value rotates; and, in an environment with natsAccounts, the tenant's NATS
// credentials. Only names and a digest of ciphertext: no value.
func (s *scope) secretMounts(module string) ([]any, error) {
	var mounts []any
	for i, m := range s.t.Spec.SecretMounts {
		if m.Module != module {
			continue
		}
		at := slices.IndexFunc(s.t.Spec.Secrets, func(e evav1.EncryptedSecret) bool { return e.Name == m.Secret })
		if at < 0 {
			return nil, fmt.Errorf("tenant %s: spec.secretMounts[%d]: no Secret %s in spec.secrets", s.code, i, m.Secret)
		}
		sum := sha256.Sum256([]byte(s.t.Spec.Secrets[at].Sops))
		mounts = append(mounts, map[string]any{
			"name":       m.Secret,
			"secretName": tenant.SecretName(s.code, m.Secret),
			"revision":   hex.EncodeToString(sum[:8]),
		})
	}
	if s.r.Env.Settings.NATSAccounts {
		// The workloads' credentials of the tenant's own NATS account, at
		// /var/run/secrets/eva/nats/nats.creds. Rotation revokes the old user in the
		// account and the kubelet refreshes the mounted file, which NATS clients read
		// again when they reconnect: the pods need not roll, so the revision is fixed.
		// The Secret is named as the tenant's own are, as the charts' schema requires.
		mounts = append(mounts, map[string]any{
			"name":       tenant.NATSMount,
			"secretName": tenant.NATSCredsSecret(s.code),
			"revision":   natsMountRevision,
		})
	}
	return mounts, nil
}

// natsMountRevision is the fixed revision of the NATS credentials' mount (see
// secretMounts), sixteen hex digits as the charts' schema asks of every revision.
const natsMountRevision = "0000000000000000"

// identity is the capsule identity every module receives under the `capsule` key.
func (s *scope) identity() map[string]any {
	return map[string]any{
		"code":      s.code,
		"tier":      string(s.t.Spec.Tier),
		"wave":      int64(s.t.Spec.WaveOrDefault()),
		"namespace": s.ns,
		"host":      tenant.Host(s.code, s.r.Env.Settings.Domain),
		"queues": map[string]any{
			"events":   tenant.EventsStream(s.code),
			"commands": tenant.CommandsStream(s.code),
		},
		"subjects": map[string]any{
			"events":   tenant.EventsQueue(s.code),
			"commands": tenant.CommandsQueue(s.code),
		},
	}
}

// mergeValues deep-merges src into dst, copying src so no layer shares maps with the
// catalog (which every tenant reads).
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = deepCopyValue(v)
	}
}

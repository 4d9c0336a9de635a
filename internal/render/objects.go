package render

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

func (s *scope) meta(name string, extraLabels ...string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: s.ns, Labels: s.labels(extraLabels...)}
}

func (s *scope) namespace() (runtime.Object, error) {
	const psa = "pod-security.kubernetes.io/"
	ns := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: s.ns, Labels: s.labels(
			LabelLifecycle, string(s.t.Spec.LifecycleOrDefault()),
			psa+"enforce", "restricted", psa+"enforce-version", "latest",
			psa+"audit", "restricted", psa+"warn", "restricted"),
			// Who owns the code: publishers refuse to replace another owner's folder.
			Annotations: map[string]string{tenant.AnnotationOwnerUID: tenant.Owner(string(s.t.UID))}},
	}
	return ns, nil
}

func (s *scope) serviceAccount() (runtime.Object, error) {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: s.meta(DeployerName),
	}, nil
}

// roleBinding lets the account Flux impersonates for the tenant's Helm releases manage
// the tenant namespace, and nothing outside it.
func (s *scope) roleBinding() (runtime.Object, error) {
	rb := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: s.meta(DeployerName),
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: s.r.Env.Settings.DeployerClusterRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: DeployerName, Namespace: s.ns}},
	}
	if s.r.ArgoCD() {
		// Argo CD installs the module charts itself, as the tenant's applier account:
		// it gets the deployer's rights, inside this namespace only.
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: ApplierName(s.code),
			Namespace: s.r.Env.Settings.ArgoCD.Namespace})
	}
	return rb, nil
}

func (s *scope) resourceQuota() (runtime.Object, error) {
	q := s.tier.Quota
	if q == nil || s.r.Env.Settings.Entitlements.Unquoted(s.t) {
		return nil, nil // the entitlements exempt the code (every tier has a quota)
	}
	return &corev1.ResourceQuota{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
		ObjectMeta: s.meta(QuotaName),
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU:              q.CPU,
			corev1.ResourceRequestsMemory:           q.Memory,
			corev1.ResourceLimitsCPU:                q.LimitsCPU,
			corev1.ResourceLimitsMemory:             q.LimitsMemory,
			corev1.ResourceRequestsEphemeralStorage: q.EphemeralStorage,
			corev1.ResourcePods:                     *resource.NewQuantity(q.Pods, resource.DecimalSI),
		}},
	}, nil
}

// limitRange gives every container of the namespace the catalog's default requests
// and limits, and bounds each by the tier's value limits at admission: what validation
// refuses in helmValues, the API server refuses of any pod (a chart's own defaults, an
// environment patch).
func (s *scope) limitRange() (runtime.Object, error) {
	d := s.r.Catalog.LimitRange
	defaults := corev1.ResourceList{corev1.ResourceCPU: d.DefaultCPU, corev1.ResourceMemory: d.DefaultMemory}
	if !d.DefaultEphemeralStorage.IsZero() {
		defaults[corev1.ResourceEphemeralStorage] = d.DefaultEphemeralStorage
	}
	item := corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Default: defaults, DefaultRequest: defaults,
		Min:                  corev1.ResourceList{corev1.ResourceCPU: d.MinCPU, corev1.ResourceMemory: d.MinMemory},
		MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: d.MaxLimitRequestRatio.CPU, corev1.ResourceMemory: d.MaxLimitRequestRatio.Memory}}
	lim := s.tier.ValueLimits
	for name, max := range map[corev1.ResourceName]resource.Quantity{corev1.ResourceCPU: lim.MaxCPU,
		corev1.ResourceMemory: lim.MaxMemory, corev1.ResourceEphemeralStorage: lim.MaxEphemeralStorage} {
		if max.IsZero() {
			continue
		}
		if item.Max == nil {
			item.Max = corev1.ResourceList{}
		}
		item.Max[name] = max
	}
	return &corev1.LimitRange{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "LimitRange"},
		ObjectMeta: s.meta(LimitRangeName),
		Spec:       corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{item}},
	}, nil
}

// networkPolicy denies all traffic except within the namespace, from the ingress
// controller, to cluster DNS and (when configured) to NATS.
func (s *scope) networkPolicy() (runtime.Object, error) {
	env := s.r.Env.Settings
	inNamespace := func(ns string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	}
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	dns, nats := intstr.FromInt32(53), intstr.FromInt32(4222)
	egress := []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
		{
			To: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: inNamespace("kube-system"),
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}},
		},
	}
	if env.MessagingNamespace != "" {
		egress = append(egress, networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: inNamespace(env.MessagingNamespace)}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &nats}},
		})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: s.meta(NetworkPolicyName),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: inNamespace(env.IngressNamespace)}}},
			},
			Egress: egress,
		},
	}, nil
}

// ingress routes /<module> on the tenant's host to each module's Service, so every tier
// has an Ingress and IngressReady means the same everywhere.
func (s *scope) ingress() (runtime.Object, error) {
	prefix := networkingv1.PathTypePrefix
	var paths []networkingv1.HTTPIngressPath
	for _, module := range s.tier.Modules {
		paths = append(paths, networkingv1.HTTPIngressPath{
			Path: "/" + module, PathType: &prefix,
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: module, Port: networkingv1.ServiceBackendPort{Number: 80}}},
		})
	}
	meta := s.meta(tenant.IngressName(s.code))
	meta.Annotations = maps.Clone(s.r.Env.Settings.IngressAnnotations)
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	// The environment it was rendered for, as the Ingress fence knows it.
	meta.Annotations[tenant.AnnotationFence] = s.r.Env.Settings.FenceParams()[overlay.FenceDigestKey]
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: meta,
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(s.r.Env.Settings.IngressClassName),
			Rules: []networkingv1.IngressRule{{
				Host:             tenant.Host(s.code, s.r.Env.Settings.Domain),
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
			}},
		},
	}, nil
}

// SeedJobName returns the name of the seed Job for a seeds version: a DNS label, unique
// per version, so a new version runs a new Job and a finished Job is never re-run.
func SeedJobName(seedsVersion string) string {
	const prefix = "eva-seed-"
	slug := strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(seedsVersion), "-"), "-")
	if len(prefix)+len(slug) <= 63 && slug == strings.ToLower(seedsVersion) {
		return prefix + slug
	}
	// Lossy or long: keep it unique with a hash of the real version.
	sum := sha256.Sum256([]byte(seedsVersion))
	hash := hex.EncodeToString(sum[:])[:8]
	if max := 63 - len(prefix) - len(hash) - 1; len(slug) > max {
		slug = strings.TrimRight(slug[:max], "-")
	}
	return prefix + slug + "-" + hash
}

var (
	nonLabel      = regexp.MustCompile(`[^a-z0-9-]+`)
	nonLabelValue = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
)

// seedJob loads the seed data set into the tenant. Without a seedsVersion there is
// nothing to load.
func (s *scope) seedJob() (runtime.Object, error) {
	version := s.t.Spec.SeedsVersion
	if version == "" {
		return nil, nil
	}
	res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: s.meta(SeedJobName(version), "eva.aidonow.com/seeds-version", labelValue(version)),
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](3),
			ActiveDeadlineSeconds: ptr.To[int64](1800),
			Template: corev1.PodTemplateSpec{
				// Only the capsule label: a Job's template is immutable, so nothing that can
				// change over a tenant's life (tier, wave) may be in it.
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{tenant.LabelCapsule: s.code}},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:  "seed",
						Image: s.r.Env.Settings.SeedImage,
						Args:  []string{"--capsule", s.code, "--seeds-version", version},
						Env: []corev1.EnvVar{
							{Name: "CAPSULE_CODE", Value: s.code},
							{Name: "SEEDS_VERSION", Value: version},
							{Name: "EVENTS_SUBJECT", Value: tenant.EventsQueue(s.code)},
						},
						Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							RunAsNonRoot:             ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	return job, nil
}

// labelValue makes a label value of a seeds version (at most 63 characters).
func labelValue(v string) string {
	v = strings.Trim(nonLabelValue.ReplaceAllString(v, "-"), "-._")
	if len(v) > 63 {
		v = strings.TrimRight(v[:63], "-._")
	}
	return v
}

package drift

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

func parse(t *testing.T, doc string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

const quotaApplied = `
apiVersion: v1
kind: ResourceQuota
metadata:
  name: quota
  namespace: eva-tenant-aaaaaa
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
`

func TestFind(t *testing.T) {
	cases := []struct {
		name, live, want string
	}{
		{"the same", quotaApplied, ""},
		{"other controllers' metadata and the status", `
metadata:
  name: quota
  namespace: eva-tenant-aaaaaa
  uid: x
  resourceVersion: "7"
  finalizers: [other]
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter, other: x}
  annotations: {eva.aidonow.com/owner-uid: u1, note: y}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
status: {hard: {cpu: "1"}}
`, ""},
		{"a limit edited", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "64", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
`, "spec.hard.cpu"},
		{"a limit added", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m, services: "900"}
  scopes: [NotTerminating]
`, "spec.hard"},
		{"a label removed", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
`, "metadata.labels.eva.aidonow.com/tier"},
		{"the owner stamp changed", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u2}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
`, "metadata.annotations.eva.aidonow.com/owner-uid"},
		{"a list grown", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating, BestEffort]
`, "spec.scopes"},
		{"a field added beside the spec", `
metadata:
  labels: {eva.aidonow.com/capsule: AAAAAA, eva.aidonow.com/tier: Starter}
  annotations: {eva.aidonow.com/owner-uid: u1}
spec:
  hard: {cpu: "2", memory: 4Gi, pods: "20", requests.cpu: 1500m}
  scopes: [NotTerminating]
data: {x: y}
`, "data"},
	}
	desired := parse(t, quotaApplied)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Find(desired, parse(t, c.live)); got != c.want {
				t.Errorf("Find = %q, want %q", got, c.want)
			}
		})
	}
}

// TestFindNetworkPolicyOpened: edits that open a tenant's isolation add to what Eva
// set (a selector narrowed, a peer widened); an exact comparison sees them.
func TestFindNetworkPolicyOpened(t *testing.T) {
	desired := parse(t, `
spec:
  podSelector: {}
  policyTypes: [Ingress, Egress]
  ingress:
  - from: [{podSelector: {}}]
`)
	for live, want := range map[string]string{
		`{spec: {podSelector: {matchLabels: {x: y}}, policyTypes: [Ingress, Egress], ingress: [{from: [{podSelector: {}}]}]}}`:                      "spec.podSelector",
		`{spec: {podSelector: {}, policyTypes: [Ingress, Egress], ingress: [{from: [{podSelector: {}, namespaceSelector: {}}]}]}}`:                  "spec.ingress[0].from[0]",
		`{spec: {podSelector: {}, policyTypes: [Ingress], ingress: [{from: [{podSelector: {}}]}]}}`:                                                 "spec.policyTypes",
		`{spec: {podSelector: {}, policyTypes: [Ingress, Egress], ingress: [{from: [{podSelector: {}}]}, {from: [{ipBlock: {cidr: 0.0.0.0/0}}]}]}}`: "spec.ingress",
	} {
		if got := Find(desired, parse(t, live)); got != want {
			t.Errorf("%s: Find = %q, want %q", live, got, want)
		}
	}
}

// TestCanonicalAgainstTheCache compares a rendered object with the same object as the
// informer cache holds it (typed, converted back): other notations of the same
// quantities are not drift, an edit is.
func TestCanonicalAgainstTheCache(t *testing.T) {
	s := scheme(t)
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "LimitRange"}
	rendered, ok := Canonical(s, gvk, parse(t, `
apiVersion: v1
kind: LimitRange
metadata: {name: limits, namespace: ns, labels: {a: b}}
spec:
  limits:
  - type: Container
    default: {cpu: 500m, memory: 512Mi}
    defaultRequest: {cpu: 0.1, memory: 128Mi}
`))
	if !ok {
		t.Fatal("a LimitRange is not canonical")
	}
	lr := &corev1.LimitRange{
		ObjectMeta: metav1.ObjectMeta{Name: "limits", Namespace: "ns", Labels: map[string]string{"a": "b"}, ResourceVersion: "9",
			CreationTimestamp: metav1.Now()},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		}}},
	}
	cached := func() map[string]any {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(lr)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if got := Find(rendered, cached()); got != "" {
		t.Errorf("Find = %q, want equal", got)
	}
	lr.Spec.Limits[0].Default[corev1.ResourceCPU] = resource.MustParse("3")
	if got := Find(rendered, cached()); got != "spec.limits[0].default.cpu" {
		t.Errorf("Find = %q, want spec.limits[0].default.cpu", got)
	}
	lr.Spec.Limits[0].Default[corev1.ResourceCPU] = resource.MustParse("500m")
	lr.Spec.Limits[0].Max = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if got := Find(rendered, cached()); got != "spec.limits[0]" {
		t.Errorf("Find = %q, want spec.limits[0]", got)
	}
}

// TestCanonicalRefusesFieldsTheTypeDropsButAsReadDropsThem: a rendered field the Go type
// does not know would not show in the cache's copy, so the rendered object is not made
// canonical (it is compared with the API server's copy as it is); an object the server
// returned is read as the cache reads it.
func TestCanonicalRefusesFieldsTheTypeDropsButAsReadDropsThem(t *testing.T) {
	s := scheme(t)
	gvk := networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy")
	obj := parse(t, `{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: p}, spec: {podSelector: {}, futureField: 1}}`)
	if _, ok := Canonical(s, gvk, obj); ok {
		t.Error("Canonical accepted a field NetworkPolicy does not have")
	}
	read, ok := AsRead(s, gvk, obj)
	if !ok {
		t.Fatal("AsRead refused it")
	}
	if spec, _ := read["spec"].(map[string]any); spec["futureField"] != nil {
		t.Errorf("AsRead kept the unknown field: %v", spec)
	}
	if _, ok := Canonical(s, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Unknown"}, obj); ok {
		t.Error("Canonical accepted a kind the scheme does not have")
	}
}

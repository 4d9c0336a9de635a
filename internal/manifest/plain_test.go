package manifest

import (
	"encoding/json"
	"reflect"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	argov1 "github.com/aidonow/eva/internal/argocd/v1alpha1"
	monitoringv1 "github.com/aidonow/eva/internal/monitoring/v1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
)

// metadataSeed exercises ObjectMeta's own JSON types: times (one a year past 9999 once
// in UTC), managed fields holding raw JSON, a null creationTimestamp.
const metadataSeed = `{"apiVersion":"v1","kind":"X","metadata":{"name":"n","namespace":"ns",
"labels":{"a":"b"},"annotations":{},"creationTimestamp":null,"deletionTimestamp":"9999-12-31T23:30:00-01:00",
"deletionGracePeriodSeconds":30,"finalizers":[],"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"o","uid":"u","controller":true}],
"managedFields":[{"manager":"m","operation":"Apply","time":"2026-01-02T03:04:05.999+02:00","fieldsType":"FieldsV1",
"fieldsV1":{"f:spec":{"f:x":{}},"n":1.5,"i":7,"big":1e300,"s":"caf\u00e9"}}]},"status":{"phase":"Active"}}`

// rendered lists the types the renderer builds, each with documents to seed
// FuzzToMapMatchesConverter with (besides metadataSeed).
var rendered = []struct {
	new   func() runtime.Object
	seeds []string
}{
	{func() runtime.Object { return &helmv2.HelmRelease{} }, []string{`{"spec":{"interval":"10m0s","timeout":"90s","chart":{"spec":{"chart":"crm","version":"1.2.3","sourceRef":{"kind":"HelmRepository","name":"eva"}}},
"maxHistory":5,"suspend":true,"install":{"remediation":{"retries":3}},"upgrade":{"cleanupOnFail":true,"remediation":{"retries":3,"remediateLastFailure":true,"strategy":"rollback"}},
"values":{"replicaCount":2,"ratio":0.25,"whole":3.0,"big":1e15,"huge":12345678901234567890,"neg":-0,"list":[1,"a",{"x":null,"creationTimestamp":null}],"podTemplate":{"metadata":{"creationTimestamp":null}}},
"valuesFrom":[{"kind":"Secret","name":"s","optional":true}],"driftDetection":{"mode":"enabled","ignore":[{"paths":["/spec/replicas"]}]}}}`,
		`{"spec":{"values":"a string"}}`, `{"spec":{"values":7}}`, `{"spec":{"values":2.5e-7}}`, `{"spec":{"values":[[],{}]}}`, `{"spec":{"values":null}}`}},
	{func() runtime.Object { return &batchv1.Job{} }, []string{`{"spec":{"backoffLimit":2,"ttlSecondsAfterFinished":3600,"template":{"metadata":{"creationTimestamp":null,"labels":{"a":"b"}},
"spec":{"restartPolicy":"Never","containers":[{"name":"seed","image":"x@sha256:00","args":["--a"],"ports":[{"containerPort":80}],
"resources":{"requests":{"cpu":"500m","memory":"0.5Gi"},"limits":{"memory":"1e3","cpu":1.5}},
"livenessProbe":{"httpGet":{"port":"http","path":"/"}},"readinessProbe":{"tcpSocket":{"port":8080}},
"securityContext":{"runAsNonRoot":true,"capabilities":{"drop":["ALL"]}}}],
"volumes":[{"name":"v","emptyDir":{"sizeLimit":"1Gi"}}]}}},"status":{"startTime":"2026-01-01T00:00:00Z"}}`}},
	{func() runtime.Object { return &networkingv1.Ingress{} }, []string{`{"spec":{"ingressClassName":"nginx","rules":[{"host":"a.example.com","http":{"paths":[{"path":"/crm","pathType":"Prefix",
"backend":{"service":{"name":"crm","port":{"number":80}}}}]}}],"tls":[{"hosts":["a.example.com"],"secretName":"t"}]}}`}},
	{func() runtime.Object { return &networkingv1.NetworkPolicy{} }, []string{`{"spec":{"podSelector":{},"policyTypes":["Ingress","Egress"],"ingress":[{"from":[{"podSelector":{}}],"ports":[{"port":53,"protocol":"UDP"},{"port":"dns","endPort":60}]}],
"egress":[{"to":[{"namespaceSelector":{"matchLabels":{"k":"v"}},"ipBlock":{"cidr":"10.0.0.0/8"}}]}]}}`}},
	{func() runtime.Object { return &corev1.ResourceQuota{} }, []string{`{"spec":{"hard":{"requests.cpu":"2","requests.memory":"4Gi","pods":"20","limits.cpu":"2000m","x":"1.5e3"}}}`}},
	{func() runtime.Object { return &corev1.LimitRange{} }, []string{`{"spec":{"limits":[{"type":"Container","default":{"cpu":"500m","memory":"512Mi"},"max":{"ephemeral-storage":"2Gi"}}]}}`}},
	{func() runtime.Object { return &corev1.Namespace{} }, []string{`{"metadata":{"name":"eva-tenant-a","labels":{"pod-security.kubernetes.io/enforce":"restricted"}},"spec":{}}`, `{"spec":{"finalizers":["kubernetes"]}}`}},
	{func() runtime.Object { return &corev1.ServiceAccount{} }, []string{`{"automountServiceAccountToken":false,"imagePullSecrets":[{"name":"p"}],"secrets":[]}`}},
	{func() runtime.Object { return &rbacv1.RoleBinding{} }, []string{`{"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"r"},"subjects":[{"kind":"ServiceAccount","name":"s","namespace":"n"}]}`}},
	{func() runtime.Object { return &rbacv1.ClusterRoleBinding{} }, []string{`{"roleRef":{"kind":"ClusterRole","name":"r"},"subjects":[]}`}},
	{func() runtime.Object { return &sourcev1.HelmRepository{} }, []string{`{"spec":{"type":"oci","url":"oci://r.example.com/charts","interval":"1h","timeout":"60s","secretRef":{"name":"s"}}}`}},
	{func() runtime.Object { return &kustomizev1.Kustomization{} }, []string{`{"spec":{"interval":"10m","retryInterval":"1m","timeout":"5m","path":"./tenants/a","prune":true,"wait":false,
"sourceRef":{"kind":"GitRepository","name":"fleet"},"dependsOn":[{"name":"f"}],"healthChecks":[{"kind":"HelmRelease","name":"crm","namespace":"n"}],
"decryption":{"provider":"sops","secretRef":{"name":"k"}},"patches":[{"patch":"x","target":{"kind":"Y"}}],"postBuild":{"substitute":{"a":"b"}}}}`}},
	{func() runtime.Object { return &nackv1beta2.Stream{} }, []string{`{"spec":{"name":"eva-A-events","subjects":["capsule.A.events.>"],"retention":"limits","maxMsgs":100000,"maxBytes":-1,"maxAge":"24h","replicas":3}}`}},
	{func() runtime.Object { return &monitoringv1.PrometheusRule{} }, []string{`{"spec":{"groups":[{"name":"g","rules":[{"alert":"Full","expr":"x > 80","for":"5m","labels":{"severity":"warning"},"annotations":{"summary":"s"}}]}]}}`}},
	{func() runtime.Object { return &argov1.Application{} }, []string{`{"spec":{"project":"p","source":{"repoURL":"r","chart":"crm","targetRevision":"1.0.0","helm":{"releaseName":"crm","valuesObject":{"a":[1,2.5,{"b":null}]}}},
"destination":{"server":"https://kubernetes.default.svc","namespace":"n"},"syncPolicy":{"automated":{"prune":true,"selfHeal":true},"retry":{"limit":3}}}}`,
		`{"spec":{"source":{"helm":{"valuesObject":"text"}}}}`}},
	{func() runtime.Object { return &argov1.AppProject{} }, []string{`{"spec":{"sourceRepos":["r"],"destinations":[{"server":"s","namespace":"n"}],"destinationServiceAccounts":[{"server":"s","namespace":"n","defaultServiceAccount":"a"}]}}`}},
}

// FuzzToMapMatchesConverter holds ToMap to what it stands in for: for an object of any
// type the renderer builds (rendered), decoded from JSON, ToMap returns exactly what
// runtime.DefaultUnstructuredConverter.ToUnstructured followed by Clean returns, down
// to the Go type of every number (int64 or float64), or both fail. The renderer writes
// every object from ToMap's maps, so this is what keeps its output what the API
// machinery makes of the same objects.
func FuzzToMapMatchesConverter(f *testing.F) {
	for i, r := range rendered {
		for _, doc := range append([]string{metadataSeed}, r.seeds...) {
			f.Add(uint8(i), doc)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, doc string) {
		obj := rendered[int(which)%len(rendered)].new()
		if json.Unmarshal([]byte(doc), obj) != nil {
			return
		}
		want, errWant := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		got, errGot := ToMap(obj)
		if (errWant == nil) != (errGot == nil) {
			t.Fatalf("%T from %s: the converter says %v, ToMap %v", obj, doc, errWant, errGot)
		}
		if errWant != nil {
			return
		}
		Clean(want)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%T from %s: ToMap differs from the converter\n got %#v\nwant %#v", obj, doc, got, want)
		}
	})
}

// TestConverterSeedsDecode checks that every seed of FuzzToMapMatchesConverter decodes
// into its type, so none is skipped as undecodable.
func TestConverterSeedsDecode(t *testing.T) {
	for _, r := range rendered {
		for _, doc := range append([]string{metadataSeed}, r.seeds...) {
			if err := json.Unmarshal([]byte(doc), r.new()); err != nil {
				t.Errorf("%T: %v\n%s", r.new(), err, doc)
			}
		}
	}
}

package manifest

import (
	"bytes"
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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

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
		matchesConverter(t, obj)
	})
}

// FuzzFilledToMapMatchesConverter is FuzzToMapMatchesConverter's invariant on objects
// filled field by field from the fuzz input (filler), which reaches every field of a
// type at once where a JSON document reaches the fields it names.
func FuzzFilledToMapMatchesConverter(f *testing.F) {
	for i := range rendered {
		f.Add(uint8(i), []byte{})
		f.Add(uint8(i), bytes.Repeat([]byte{1, 3, 'a', '1', '-'}, 40))
		f.Add(uint8(i), bytes.Repeat([]byte{0xff, 2, 0x80, 'x', 7, '{', '}'}, 60))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		obj := rendered[int(which)%len(rendered)].new()
		(&filler{data: data}).fill(reflect.ValueOf(obj).Elem())
		matchesConverter(t, obj)
	})
}

// matchesConverter fails the test unless ToMap(obj) is what the converter and Clean
// make of obj, or both fail. ToMap never converts the status (Clean would drop it), so
// the object's status is cleared first: what the converter cannot convert there (a
// RawExtension of no known content type in an Application's status) is no error of
// ToMap's.
func matchesConverter(t *testing.T, obj runtime.Object) {
	t.Helper()
	if status := reflect.ValueOf(obj).Elem().FieldByName("Status"); status.IsValid() {
		status.SetZero()
	}
	want, errWant := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	got, errGot := ToMap(obj)
	if (errWant == nil) != (errGot == nil) {
		t.Fatalf("%T %+v: the converter says %v, ToMap %v", obj, obj, errWant, errGot)
	}
	if errWant != nil {
		return
	}
	Clean(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%T %+v: ToMap differs from the converter\n got %#v\nwant %#v", obj, obj, got, want)
	}
}

// filler fills a typed value from fuzz input, field by field: each pointer, slice and
// map takes a byte to say whether it is set and how long it is, each scalar the next
// bytes. The types with their own JSON form are made by their constructors and parsers,
// so every value is one a program could build (no IntOrString of a third type, no
// Quantity that never parsed). Once the input runs out, everything is zero.
type filler struct {
	data  []byte
	depth int
}

func (f *filler) byte() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[0]
	f.data = f.data[1:]
	return b
}

func (f *filler) uint64() uint64 {
	var x uint64
	for range 8 {
		x = x<<8 | uint64(f.byte())
	}
	return x
}

func (f *filler) string() string {
	n := min(int(f.byte()%24), len(f.data))
	s := string(f.data[:n])
	f.data = f.data[n:]
	return s
}

func (f *filler) fill(v reflect.Value) {
	switch v.Type() {
	case quantityType:
		switch b := f.byte(); b % 4 {
		case 0:
			if q, err := resource.ParseQuantity(f.string()); err == nil {
				v.Set(reflect.ValueOf(q))
			}
		default: // any whole number at any scale, in any of the three formats
			q := resource.NewScaledQuantity(int64(f.uint64()), resource.Scale(int8(f.byte())%24))
			q.Format = []resource.Format{resource.DecimalSI, resource.BinarySI, resource.DecimalExponent}[b%4-1]
			v.Set(reflect.ValueOf(*q))
		}
		return
	case intstrType:
		if f.byte()%2 == 0 {
			v.Set(reflect.ValueOf(intstr.FromInt32(int32(f.uint64()))))
		} else {
			v.Set(reflect.ValueOf(intstr.FromString(f.string())))
		}
		return
	case timeType:
		if f.byte()%2 == 1 {
			v.Set(reflect.ValueOf(metav1.Unix(int64(f.uint64()%(1<<38)), int64(f.uint64()%1e9))))
		}
		return
	case rawJSONType:
		if raw := []byte(f.string()); json.Valid(raw) {
			v.Set(reflect.ValueOf(apiextensionsv1.JSON{Raw: raw}))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if f.byte()%2 == 1 && f.depth < 12 {
			p := reflect.New(v.Type().Elem())
			f.depth++
			f.fill(p.Elem())
			f.depth--
			v.Set(p)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				f.fill(v.Field(i))
			}
		}
	case reflect.Slice:
		b := f.byte()
		if b%2 == 0 || f.depth >= 12 {
			return // nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(f.string()))
			return
		}
		s := reflect.MakeSlice(v.Type(), int(b/2%4), int(b/2%4))
		f.depth++
		for i := range s.Len() {
			f.fill(s.Index(i))
		}
		f.depth--
		v.Set(s)
	case reflect.Map:
		b := f.byte()
		if b%2 == 0 || f.depth >= 12 {
			return // nil
		}
		m := reflect.MakeMap(v.Type())
		f.depth++
		for range b / 2 % 4 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			f.fill(k)
			f.fill(e)
			m.SetMapIndex(k, e)
		}
		f.depth--
		v.Set(m)
	case reflect.String:
		v.SetString(f.string())
	case reflect.Bool:
		v.SetBool(f.byte()%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(f.uint64()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(f.uint64() >> 1) // within int64, as the converter requires of an unsigned value
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(int64(f.uint64())) / 1024) // finite: JSON has no NaN
	}
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

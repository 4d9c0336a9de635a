package quota_test

import (
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/aidonow/eva/internal/quota"
)

// fluxEval evaluates a health check expression as kustomize-controller does
// (github.com/fluxcd/pkg/runtime/cel: parsed, not type-checked, with the same
// environment options, against the object as the API server serves it).
func fluxEval(t *testing.T, expr string, obj map[string]any) bool {
	t.Helper()
	env, err := cel.NewEnv(cel.HomogeneousAggregateLiterals(), cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true), cel.CrossTypeNumericComparisons(true), cel.OptionalTypes(),
		ext.Strings(), ext.Sets(), ext.Encoders())
	if err != nil {
		t.Fatal(err)
	}
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		t.Fatal(issues.Err())
	}
	prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := prg.Eval(obj)
	if err != nil {
		t.Fatalf("evaluating %q: %v", expr, err)
	}
	b, ok := out.Value().(bool)
	if !ok {
		t.Fatalf("%q is not a boolean: %v", expr, out)
	}
	return b
}

func list(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestEnforcedAndHealthCheckAgree(t *testing.T) {
	spec := list("requests.cpu", "2", "requests.memory", "4Gi", "pods", "20")
	cases := []struct {
		name   string
		status corev1.ResourceList
		want   bool
	}{
		{"new quota: no status yet", nil, false},
		{"enforced", list("requests.cpu", "2", "requests.memory", "4Gi", "pods", "20"), true},
		{"a limit not yet recorded", list("requests.cpu", "2", "pods", "20"), false},
		{"an older limit (the tier changed)", list("requests.cpu", "1", "requests.memory", "4Gi", "pods", "20"), false},
		{"a limit the spec dropped is still enforced: stricter, not looser", list("requests.cpu", "2", "requests.memory", "4Gi", "pods", "20", "services", "1"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rq := &corev1.ResourceQuota{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ResourceQuota"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "eva-tenant-acmeco", Name: "tenant-quota"},
				Spec:       corev1.ResourceQuotaSpec{Hard: spec},
				Status:     corev1.ResourceQuotaStatus{Hard: c.status, Used: c.status},
			}
			got, why := quota.Enforced(rq)
			if got != c.want {
				t.Errorf("Enforced = %v (%s), want %v", got, why, c.want)
			}
			if !got && why == "" {
				t.Error("not enforced, and no reason given")
			}
			obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(rq)
			if err != nil {
				t.Fatal(err)
			}
			if cel := fluxEval(t, quota.HealthCheckExpr, obj); cel != c.want {
				t.Errorf("health check expression = %v, want %v (object %v)", cel, c.want, obj)
			}
		})
	}
}

func TestEnforcedNamesWhatIsPending(t *testing.T) {
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "eva-tenant-acmeco", Name: "tenant-quota"},
		Spec: corev1.ResourceQuotaSpec{Hard: list("requests.cpu", "2", "pods", "20")}}
	_, why := quota.Enforced(rq)
	const want = "ResourceQuota eva-tenant-acmeco/tenant-quota: pods, requests.cpu not yet enforced"
	if len(why) < len(want) || why[:len(want)] != want {
		t.Errorf("reason %q, want it to start with %q", why, want)
	}
}

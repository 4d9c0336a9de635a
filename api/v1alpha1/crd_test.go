package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	var err error
	env, err = testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-test-"}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// tenantObject builds an unstructured tenant so tests can send values the Go types
// could not hold (wrong types, zero waves).
func tenantObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(testenv.GVK(evav1.Kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// createValidTenant creates a valid tenant in a new namespace and reads it back.
func createValidTenant(t *testing.T) *evav1.EvaTenant {
	t.Helper()
	ctx := context.Background()
	u := tenantObject(newNamespace(t), "devusr", validSpec())
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	var got evav1.EvaTenant
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func validSpec() map[string]any {
	return map[string]any{"capsuleCode": "DEVUSR", "tier": "Starter"}
}

func TestCRDAcceptsExampleTenants(t *testing.T) {
	ctx := context.Background()
	files, _ := filepath.Glob(filepath.Join(testenv.RepoRoot(), "tenants", "*.yaml"))
	if len(files) < 3 {
		t.Fatalf("expected at least 3 example tenants, found %d", len(files))
	}
	ns := newNamespace(t)
	for _, f := range files {
		if strings.HasSuffix(f, ".sops.yaml") {
			continue // an encrypted Secret beside its tenant file
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var tenant evav1.EvaTenant
			if err := yaml.UnmarshalStrict(data, &tenant); err != nil {
				t.Fatal(err)
			}
			tenant.Namespace = ns
			if err := env.Client.Create(ctx, &tenant); err != nil {
				t.Fatalf("creating %s: %v", f, err)
			}
		})
	}
}

func TestCRDDefaults(t *testing.T) {
	got := createValidTenant(t)
	if got.Spec.Wave != 1 || got.Spec.Lifecycle != evav1.LifecycleActive {
		t.Errorf("defaults: wave=%d lifecycle=%q, want 1 and Active", got.Spec.Wave, got.Spec.Lifecycle)
	}
}

func TestCRDRejectsInvalidTenants(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	cases := map[string]struct {
		mutate func(spec map[string]any)
		want   string // substring of the API server's message
	}{
		"lower-case code":      {func(s map[string]any) { s["capsuleCode"] = "devusr" }, "spec.capsuleCode"},
		"five-letter code":     {func(s map[string]any) { s["capsuleCode"] = "DEVUS" }, "spec.capsuleCode"},
		"code with digit":      {func(s map[string]any) { s["capsuleCode"] = "DEVUS1" }, "spec.capsuleCode"},
		"missing code":         {func(s map[string]any) { delete(s, "capsuleCode") }, "spec.capsuleCode"},
		"unknown tier":         {func(s map[string]any) { s["tier"] = "Gold" }, `spec.tier: Unsupported value: "Gold"`},
		"missing tier":         {func(s map[string]any) { delete(s, "tier") }, "spec.tier"},
		"unknown lifecycle":    {func(s map[string]any) { s["lifecycle"] = "Paused" }, "spec.lifecycle"},
		"wave zero":            {func(s map[string]any) { s["wave"] = int64(0) }, "spec.wave"},
		"wave four":            {func(s map[string]any) { s["wave"] = int64(4) }, "spec.wave"},
		"wave as string":       {func(s map[string]any) { s["wave"] = "2" }, "spec.wave"},
		"operator version tag": {func(s map[string]any) { s["operatorVersion"] = "latest" }, "spec.operatorVersion"},
		"version pin range":    {func(s map[string]any) { s["versions"] = map[string]any{"crm": ">=1.0.0"} }, "spec.versions.crm"},
		"version key not a module": {
			func(s map[string]any) { s["versions"] = map[string]any{"CRM": "1.0.0"} }, "versions keys must be module names"},
		"valuesFrom bad kind": {
			func(s map[string]any) {
				s["valuesFrom"] = []any{map[string]any{"module": "crm", "kind": "Vault", "name": "x"}}
			}, "spec.valuesFrom[0].kind"},
		// valuesFrom is refused whatever it reads (issue 32.3): helm-controller parses the
		// value as Helm --set input.
		"valuesFrom Secret": {
			func(s map[string]any) {
				s["valuesFrom"] = []any{map[string]any{"module": "crm", "kind": "Secret", "name": "devusr-crm-db", "valuesKey": "password", "targetPath": "database.password"}}
			}, "spec.valuesFrom: Invalid value: \"array\": valuesFrom is refused: hand Secrets to modules with secretMounts, and set other values in helmValues"},
		"valuesFrom ConfigMap": {
			func(s map[string]any) {
				s["valuesFrom"] = []any{map[string]any{"module": "crm", "kind": "ConfigMap", "name": "devusr-branding", "targetPath": "branding.theme"}}
			}, "valuesFrom is refused: hand Secrets to modules with secretMounts"},
		"secretMounts secret not a name": {
			func(s map[string]any) { s["secretMounts"] = []any{map[string]any{"module": "crm", "secret": "Crm_DB"}} },
			"spec.secretMounts[0].secret: Invalid value: \"Crm_DB\": spec.secretMounts[0].secret in body should match"},
		"secretMounts secret too long": {
			func(s map[string]any) {
				s["secretMounts"] = []any{map[string]any{"module": "crm", "secret": strings.Repeat("a", 33)}}
			}, "spec.secretMounts[0].secret: Too long"},
		"secretMounts module not a name": {
			func(s map[string]any) { s["secretMounts"] = []any{map[string]any{"module": "CRM", "secret": "crm-db"}} },
			"spec.secretMounts[0].module"},
		"secretMounts without secret": {
			func(s map[string]any) { s["secretMounts"] = []any{map[string]any{"module": "crm"}} },
			"spec.secretMounts[0].secret: Required value"},
	}
	i := 0
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			i++
			spec := validSpec()
			tc.mutate(spec)
			err := env.Client.Create(ctx, tenantObject(ns, fmt.Sprintf("bad-%d", i), spec))
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: got %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

func TestCRDTransitionRules(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	u := tenantObject(ns, "devusr", validSpec())
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	update := func(mutate func(*evav1.EvaTenant)) error {
		var cur evav1.EvaTenant
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), &cur); err != nil {
			t.Fatal(err)
		}
		mutate(&cur)
		return env.Client.Update(ctx, &cur)
	}

	err := update(func(t *evav1.EvaTenant) { t.Spec.CapsuleCode = "OTHERS" })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "capsuleCode is immutable") {
		t.Fatalf("changing capsuleCode: got %v, want immutable", err)
	}
	if err := update(func(t *evav1.EvaTenant) { t.Spec.Wave = 3 }); err != nil {
		t.Fatalf("changing wave: %v", err)
	}
	if err := update(func(t *evav1.EvaTenant) { t.Spec.Lifecycle = evav1.LifecycleDecommissioned }); err != nil {
		t.Fatalf("decommissioning: %v", err)
	}
	err = update(func(t *evav1.EvaTenant) { t.Spec.Lifecycle = evav1.LifecycleActive })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "cannot change from Decommissioned") {
		t.Fatalf("reactivating: got %v, want refusal", err)
	}
	// Dropping the field would default it back to Active: refused the same way.
	err = update(func(t *evav1.EvaTenant) { t.Spec.Lifecycle = "" })
	if !apierrors.IsInvalid(err) {
		t.Fatalf("clearing lifecycle: got %v, want refusal", err)
	}
}

func TestCRDStatusIsASubresource(t *testing.T) {
	ctx := context.Background()
	cur := createValidTenant(t)
	cur.Status.Phase = evav1.PhaseActive
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cur), cur); err != nil {
		t.Fatal(err)
	}
	if cur.Status.Phase != "" {
		t.Fatalf("a spec update wrote status.phase=%q; status must be a subresource", cur.Status.Phase)
	}
	cur.Status.Phase = evav1.PhaseProvisioning
	if err := env.Client.Status().Update(ctx, cur); err != nil {
		t.Fatalf("status update: %v", err)
	}
}

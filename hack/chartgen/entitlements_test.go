package main

import (
	"maps"
	"strings"
	"testing"

	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/scaffold"
)

// entitledEnvironment is the environment.yaml evactl init writes (entitlements with a
// grant), with grants of every kind added: what a platform's own fleet gives the chart.
func entitledEnvironment(t *testing.T) string {
	t.Helper()
	o := scaffold.Options{Env: "dev", Domain: "dev.example.com", ChartsURL: "oci://ghcr.io/aidonow/charts",
		Recipient: "age1fevycyheqs0p4uv3ctl8fkxqntk927m8j4h83r56zeh25qx69q2shuwyf5"}
	return strings.Replace(scaffold.Files(o)["overlays/dev/tenant/environment.yaml"], "  grants: {}\n",
		"  grants:\n    GLOBEX: {tiers: [Enterprise, Platform], waves: [1, 3], freeze: true}\n    ACMECO: {tiers: [Enterprise], namespace: team-acme}\n    DEVUSR: {waves: [1]}\n", 1)
}

// TestChartEntitlementsFollowTheEnvironment: the chart's ConfigMap
// eva-tenant-entitlements, which the admission policy eva-tenant-entitlements reads on
// the kubectl path, says what evactl and the operator read in the environment it is
// given (environmentFiles, as evactl operator values writes them), grants included.
func TestChartEntitlementsFollowTheEnvironment(t *testing.T) {
	text := entitledEnvironment(t)
	settings, err := overlay.ParseSettings([]byte(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if settings.Entitlements == nil || len(settings.Entitlements.Grants) != 3 || settings.Entitlements.Grants["ACMECO"].Namespace != "team-acme" {
		t.Fatalf("the environment's entitlements: %+v", settings.Entitlements)
	}
	objects := helmObjects(t, loadChart(t), map[string]any{"env": "dev",
		"environmentFiles": map[string]any{"environment.yaml": text, "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"}})
	cm := objects["v1/ConfigMap/eva-system/eva-tenant-entitlements"]
	data := map[string]string{}
	for k, v := range nestedMap(cm, "data") {
		data[k], _ = v.(string)
	}
	if want := settings.Entitlements.Params(); !maps.Equal(data, want) {
		t.Errorf("the chart's eva-tenant-entitlements %v, the environment's entitlements %v", data, want)
	}
}

// TestChartCapsTenantsPerNamespace: the environment's maxTenantsPerNamespace is a
// ResourceQuota on count/evatenants in each of the chart's tenantNamespaces; without
// tenantNamespaces the chart refuses the cap it cannot ship.
func TestChartCapsTenantsPerNamespace(t *testing.T) {
	text := strings.Replace(entitledEnvironment(t), "  grants:\n", "  maxTenantsPerNamespace: 5\n  grants:\n", 1)
	settings, err := overlay.ParseSettings([]byte(text))
	if err != nil || settings.Entitlements.MaxTenantsPerNamespace != 5 {
		t.Fatalf("%v %+v\n%s", err, settings.Entitlements, text)
	}
	files := map[string]any{"environment.yaml": text, "kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"}
	objects := helmObjects(t, loadChart(t), map[string]any{"env": "dev", "environmentFiles": files, "tenantNamespaces": "team-a, team-b"})
	for _, ns := range []string{"team-a", "team-b"} {
		q := objects["v1/ResourceQuota/"+ns+"/eva-tenants"]
		if got := nestedMap(q, "spec", "hard")["count/evatenants.eva.aidonow.com"]; got != "5" {
			t.Errorf("%s: quota %v, want count/evatenants 5", ns, q)
		}
	}
	if _, err := render(loadChart(t), map[string]any{"env": "dev", "environmentFiles": files}); err == nil ||
		!strings.Contains(err.Error(), "set tenantNamespaces") {
		t.Errorf("a cap without tenantNamespaces: %v", err)
	}
}

package overlay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/resid"
)

func TestLoadRepositoryOverlays(t *testing.T) {
	for _, env := range []string{"dev", "prod", "airgap"} {
		e, err := Load(filepath.Join("..", "..", "overlays"), env)
		if err != nil {
			t.Fatalf("%s: %v", env, err)
		}
		if e.Settings.Domain == "" || (env != "dev" && len(e.Patches) == 0) {
			t.Errorf("%s: settings %+v, %d patches", env, e.Settings, len(e.Patches))
		}
	}
	if _, err := Load(filepath.Join("..", "..", "overlays"), "staging"); err == nil {
		t.Error("a missing environment loaded")
	}
	if _, err := Load(filepath.Join("..", "..", "overlays"), "../etc"); err == nil {
		t.Error("an environment name with a path loaded")
	}
}

// TestPerTenantChartSource: with chartSource.url the source has no namespace of its own
// (each tenant namespace gets one); without it, the Flux namespace is the default.
func TestPerTenantChartSource(t *testing.T) {
	s, err := ParseSettings([]byte("domain: a.com\nseedImage: x\nchartSource: {name: c, url: 'oci://r.example.com/eva/charts'}\ngitopsSource: {name: g}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.ChartSource.PerTenant() || s.ChartSource.Namespace != "" || s.ChartSource.Kind != "OCIRepository" {
		t.Fatalf("per-tenant chart source: %+v", s.ChartSource)
	}
	s, err = ParseSettings([]byte("domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.ChartSource.PerTenant() || s.ChartSource.Namespace != "flux-system" {
		t.Fatalf("shared chart source: %+v", s.ChartSource)
	}
}

func TestSettingsErrors(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"unknown field":     {"domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\nfoo: 1\n", "unknown field"},
		"bad domain":        {"domain: A_B\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n", "domain"},
		"missing seed":      {"domain: a.com\nchartSource: {name: c}\ngitopsSource: {name: g}\n", "seedImage"},
		"bad source":        {"domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {kind: Git, name: g}\n", "gitopsSource.kind"},
		"chart source":      {"domain: a.com\nseedImage: x\nchartSource: {kind: OCIRepository, name: c}\ngitopsSource: {name: g}\n", "chartSource.kind"},
		"missing source":    {"domain: a.com\nseedImage: x\nchartSource: {name: c}\n", "gitopsSource.name"},
		"http per tenant":   {"domain: a.com\nseedImage: x\nchartSource: {name: c, url: 'https://charts.example.com'}\ngitopsSource: {name: g}\n", "chartSource.url"},
		"url and namespace": {"domain: a.com\nseedImage: x\nchartSource: {name: c, namespace: flux-system, url: 'oci://r.example.com/c'}\ngitopsSource: {name: g}\n", "chartSource.namespace"},
		"insecure shared":   {"domain: a.com\nseedImage: x\nchartSource: {name: c, insecure: true}\ngitopsSource: {name: g}\n", "chartSource.insecure"},
	}
	for name, tc := range cases {
		if _, err := ParseSettings([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func ingress() map[string]any {
	return map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
		"metadata": map[string]any{"name": "eva-devusr", "namespace": "eva-tenant-devusr", "labels": map[string]any{"tier": "Starter"}},
		"spec":     map[string]any{"ingressClassName": "nginx"}}
}

func TestPatches(t *testing.T) {
	json6902, err := ParsePatch("j", "- op: replace\n  path: /spec/ingressClassName\n  value: traefik\n",
		&types.Selector{ResId: resID("Ingress", ""), LabelSelector: "tier=Starter"})
	if err != nil {
		t.Fatal(err)
	}
	smp, err := ParsePatch("s", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: eva-devusr\n  annotations: {a: b}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Apply([]Patch{*json6902, *smp}, []map[string]any{ingress()})
	if err != nil {
		t.Fatal(err)
	}
	spec := out[0]["spec"].(map[string]any)
	meta := out[0]["metadata"].(map[string]any)
	if spec["ingressClassName"] != "traefik" || meta["annotations"].(map[string]any)["a"] != "b" {
		t.Fatalf("patched object: %v", out[0])
	}
	// A selector that does not match leaves the object alone.
	other, _ := ParsePatch("o", "- {op: remove, path: /spec}\n", &types.Selector{ResId: resID("Service", "")})
	out, _ = Apply([]Patch{*other}, []map[string]any{ingress()})
	if _, ok := out[0]["spec"]; !ok {
		t.Fatal("a patch for Services changed an Ingress")
	}
}

func TestPatchErrors(t *testing.T) {
	if _, err := ParsePatch("x", "- op: replace\n  path: /a\n  value: 1\n", nil); err == nil || !strings.Contains(err.Error(), "needs a target") {
		t.Errorf("JSON patch without target: %v", err)
	}
	if _, err := ParsePatch("x", "- op: frobnicate\n  path: /a\n", &types.Selector{}); err == nil {
		t.Error("unknown JSON patch operation accepted")
	}
	if _, err := ParsePatch("x", "spec: {a: 1}\n", nil); err == nil {
		t.Error("strategic merge patch without kind or target accepted")
	}
	bad, _ := ParsePatch("x", "- op: replace\n  path: /spec/missing/deep\n  value: 1\n", &types.Selector{ResId: resID("Ingress", "")})
	if _, err := Apply([]Patch{*bad}, []map[string]any{ingress()}); err == nil || !strings.Contains(err.Error(), "Ingress eva-tenant-devusr/eva-devusr") {
		t.Errorf("failing patch: %v", err)
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, KustomizationFile), []byte("resources: [x.yaml]\n"), 0o644)
	o, err := openOverlayDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	if _, err := loadPatches(o, func([]byte) {}); err == nil || !strings.Contains(err.Error(), "may only hold `patches`") {
		t.Errorf("overlay with resources: %v", err)
	}
}

func resID(kind, name string) resid.ResId {
	return resid.ResId{Gvk: resid.Gvk{Kind: kind}, Name: name}
}

// TestSettingsErrorsSayWhere: a refused environment.yaml is reported as tenant files are,
// file:line:col: field: message, a misspelt key with the name it was meant to be, a
// refused value at its own line, a required one at its object. Seen failing before:
// "decoding: error unmarshaling JSON: … unknown field \"domian\"", no line.
func TestSettingsErrorsSayWhere(t *testing.T) {
	const valid = "domain: a.com\nseedImage: x\nchartSource: {name: c}\ngitopsSource: {name: g}\n"
	cases := map[string]struct{ yaml, want string }{
		"misspelt key":   {strings.Replace(valid, "domain:", "domian:", 1), `environment.yaml:1:1: domian: unknown field (did you mean "domain"?)`},
		"wrong type":     {valid + "natsAccounts: yes please\n", `environment.yaml:5:15: natsAccounts: expected true or false`},
		"duplicate key":  {valid + "seedImage: y\n", `environment.yaml:5:1: seedImage: duplicate key (first set on line 2)`},
		"refused value":  {valid + "releaseTimeout: 5s\n", `environment.yaml:5:17: releaseTimeout: 5s: must be between 10s and 1h`},
		"nested value":   {valid + "natsAccounts: true\nnatsConsumer:\n  subjects: [events.>, orders.>]\n", `environment.yaml:7:24: natsConsumer.subjects[1]: `},
		"required value": {strings.Replace(valid, "seedImage: x\n", "", 1), `environment.yaml:1:1: seedImage: required`},
	}
	for name, tc := range cases {
		root := t.TempDir()
		dir := filepath.Join(root, "dev", "tenant")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, SettingsFile), []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(root, "dev")
		var se *SettingsError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), filepath.Join(dir, tc.want)) {
			t.Errorf("%s: err = %v, want %s", name, err, tc.want)
		}
	}
}

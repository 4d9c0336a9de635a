package render

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// kustomizationResources decodes a kustomization and returns its resources.
func kustomizationResources(t *testing.T, data []byte) []string {
	t.Helper()
	var k struct {
		APIVersion string   `yaml:"apiVersion"`
		Kind       string   `yaml:"kind"`
		Resources  []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, data)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("not a Kustomization:\n%s", data)
	}
	return k.Resources
}

// TestKustomizationsQuoteNames: a name that is not a plain capsule code (a folder of a
// remote tree with a newline in it) stays one resource entry; it cannot plant another.
func TestKustomizationsQuoteNames(t *testing.T) {
	hostile := "abcdef\n- ../planted"
	root := RootKustomizationFile(FluxDir, []string{"ZZZZZZ", hostile})
	got := kustomizationResources(t, root.Data)
	want := []string{"flux/" + hostile + ".yaml", "flux/zzzzzz.yaml"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("root kustomization resources %q, want %q:\n%s", got, want, root.Data)
	}
	got = kustomizationResources(t, kustomizationOf(false, "secrets/"+hostile+".yaml", "secrets/db: x.yaml"))
	want = []string{ManifestsFile, "secrets/" + hostile + ".yaml", "secrets/db: x.yaml"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("kustomization resources %q, want %q", got, want)
	}
}

// TestKustomizationsOfCodesAreUnchanged: the encoder writes exactly what the tree has
// always held for ordinary codes.
func TestKustomizationsOfCodesAreUnchanged(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{string(RootKustomizationFile(FluxDir, []string{"BBBBBB", "AAAAAA"}).Data),
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- flux/aaaaaa.yaml\n- flux/bbbbbb.yaml\n"},
		{string(RootKustomizationFile(FluxDir, nil).Data),
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"},
		{string(kustomizationOf(true)), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"},
		{string(kustomizationOf(false, "secrets/crm-database.yaml")),
			"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- manifests.yaml\n- secrets/crm-database.yaml\n"},
	} {
		if tc.got != tc.want {
			t.Errorf("got\n%s\nwant\n%s", tc.got, tc.want)
		}
	}
}

// TestTeardownTakesTrafficFirst: every teardown step leaves out the Ingress, from
// TeardownTraffic (a move's source's first step) on, and that step leaves out nothing
// else; under Flux and under Argo CD.
func TestTeardownTakesTrafficFirst(t *testing.T) {
	for name, r := range map[string]*Renderer{"flux": renderer(t), "argocd": argoRenderer(t)} {
		tn := tenantFor("GLOBEX", withTier(evav1.TierEnterprise))
		for _, tc := range []struct {
			td               Teardown
			ingress, streams bool
		}{
			{TeardownNone, true, true},
			{TeardownTraffic, false, true},
			{TeardownMessaging, false, false},
			{TeardownWorkloads, false, false},
		} {
			files, err := r.TenantFilesAt(tn, tc.td)
			if err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			for _, f := range files {
				all.Write(f.Data)
			}
			if got := strings.Contains(all.String(), "kind: Ingress\n"); got != tc.ingress {
				t.Errorf("%s, teardown %d: Ingress rendered %v, want %v", name, tc.td, got, tc.ingress)
			}
			if got := strings.Contains(all.String(), "kind: Stream\n"); got != tc.streams {
				t.Errorf("%s, teardown %d: streams rendered %v, want %v", name, tc.td, got, tc.streams)
			}
		}
	}
}

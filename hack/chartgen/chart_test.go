package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/aidonow/eva/internal/testenv"
)

// chartDir is the operator's chart.
var chartDir = filepath.Join("..", "..", "deploy", "charts", "eva-operator")

// hashSuffix is the content hash kustomize appends to a generated ConfigMap's name.
var hashSuffix = regexp.MustCompile(`^(eva-environment)-[a-z0-9]{10}$`)

// TestChartRendersWhatBaseDoes renders the chart for each shipped environment and
// builds the same environment's overlay with kustomize: the two must hold the same
// objects, field for field (the Namespace aside, which a release does not own; the
// ConfigMap's hash suffix and the chart's checksum annotation aside). The CRDs must be
// base's, byte for byte.
func TestChartRendersWhatBaseDoes(t *testing.T) {
	chrt := loadChart(t)
	for _, env := range []string{"dev", "prod", "airgap"} {
		t.Run(env, func(t *testing.T) {
			want := kustomizeObjects(t, env)
			values := map[string]any{"env": env}
			if env == "airgap" {
				// The air-gap overlay pulls from the mirror, by digest.
				deploy := want["apps/v1/Deployment/eva-system/eva-operator"]
				image := deploy["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"].(string)
				repo, digest, _ := strings.Cut(image, "@")
				values["image"] = map[string]any{"repository": repo, "digest": digest}
				if !regexp.MustCompile(`^sha256:[a-f0-9]{64}$`).MatchString(digest) {
					// Not pinned yet (PLACEHOLDER): compare with a real-looking digest.
					values["image"] = map[string]any{"repository": repo, "digest": "sha256:" + strings.Repeat("0", 64)}
					setImage(deploy, repo+"@sha256:"+strings.Repeat("0", 64))
				}
			}
			got := helmObjects(t, chrt, values)
			var keys []string
			for k := range want {
				keys = append(keys, k)
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				w, inBase := want[k]
				g, inChart := got[k]
				switch {
				case !inChart:
					t.Errorf("%s is in overlays/%s but not in the chart", k, env)
				case !inBase:
					t.Errorf("%s is in the chart but not in overlays/%s", k, env)
				default:
					wj, _ := json.MarshalIndent(w, "", " ")
					gj, _ := json.MarshalIndent(g, "", " ")
					if !bytes.Equal(wj, gj) {
						t.Errorf("%s differs between overlays/%s and the chart:\nkustomize: %s\nchart:     %s", k, env, wj, gj)
					}
				}
			}
		})
	}
	crds, _ := filepath.Glob(filepath.Join("..", "..", "base", "crd", "bases", "*.yaml"))
	for _, crd := range crds {
		want, _ := os.ReadFile(crd)
		got, err := os.ReadFile(filepath.Join(chartDir, "crds", filepath.Base(crd)))
		if err != nil || !bytes.Equal(want, got) {
			t.Errorf("the chart's crds/%s is not base's (run make manifests): %v", filepath.Base(crd), err)
		}
	}
}

// TestChartLintsAndValidatesValues lints the chart with Helm and checks that its values
// schema refuses what the operator would refuse at start-up.
func TestChartLintsAndValidatesValues(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{chartDir}, nil)
	for _, m := range res.Messages {
		t.Logf("helm lint: %s", m)
	}
	if len(res.Errors) > 0 {
		t.Fatalf("helm lint: %v", res.Errors)
	}
	chrt := loadChart(t)
	for name, values := range map[string]map[string]any{
		"git publishing without a URL": {"publish": "git"},
		"an unknown publish mode":      {"publish": "s3"},
		"a digest that is not one":     {"image": map[string]any{"repository": "r", "digest": "sha256:PLACEHOLDER"}},
		"an unknown value":             {"replica": 3},
		"an environment not shipped":   {"env": "staging"},
		"a shard name not a name":      {"shards": []any{"Shard A"}},
		"a shard listed twice":         {"shards": []any{"a", "a"}},
	} {
		if _, err := render(chrt, values); err == nil {
			t.Errorf("%s: rendered", name)
		} else {
			t.Logf("%s: %v", name, firstLine(err.Error()))
		}
	}
	out, err := render(chrt, map[string]any{"publish": "oci", "oci": map[string]any{"ref": "oci://registry.example/eva:prod"},
		"concurrency": 8, "log": map[string]any{"level": "debug"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{"--publish=oci", "--oci-ref=oci://registry.example/eva:prod", "--concurrency=8", "--zap-log-level=debug"} {
		if !strings.Contains(out, "- "+arg+"\n") {
			t.Errorf("values did not become the flag %s", arg)
		}
	}
}

// TestChartRendersOneDeploymentPerShard: with shards listed, the chart renders the
// main Deployment for the tenants of no shard and one per shard, each with its --shard
// selector, selecting only its own pods (disjoint selectors), all of them selected by the
// metrics Service and the NetworkPolicy.
func TestChartRendersOneDeploymentPerShard(t *testing.T) {
	chrt := loadChart(t)
	got := helmObjects(t, chrt, map[string]any{"shards": []any{"a", "b7"}})
	wantShard := map[string]string{
		"eva-operator":          "--shard=!eva.aidonow.com/shard",
		"eva-operator-shard-a":  "--shard=eva.aidonow.com/shard=a",
		"eva-operator-shard-b7": "--shard=eva.aidonow.com/shard=b7",
	}
	common := map[string]string{"app.kubernetes.io/part-of": "eva-operator"}
	for name, flag := range wantShard {
		d, ok := got["apps/v1/Deployment/eva-system/"+name]
		if !ok {
			t.Errorf("no Deployment %s", name)
			continue
		}
		selector, _, _ := unstructured.NestedStringMap(d, "spec", "selector", "matchLabels")
		if !maps.Equal(selector, map[string]string{"app.kubernetes.io/name": name}) {
			t.Errorf("%s selects %v, want its own pods only", name, selector)
		}
		podLabels, _, _ := unstructured.NestedStringMap(d, "spec", "template", "metadata", "labels")
		for k, v := range common {
			if podLabels[k] != v {
				t.Errorf("%s's pods are labelled %v: the Service and NetworkPolicy do not select them", name, podLabels)
			}
		}
		containers, _, _ := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		if n := slices.Index(args, flag); n < 0 || len(slices.DeleteFunc(slices.Clone(args), func(a string) bool { return !strings.HasPrefix(a, "--shard") })) != 1 {
			t.Errorf("%s's args %v, want exactly one --shard: %s", name, args, flag)
		}
	}
	for _, key := range []string{"networking.k8s.io/v1/NetworkPolicy/eva-system/eva-operator", "v1/Service/eva-system/eva-operator-metrics"} {
		sel, _, _ := unstructured.NestedStringMap(got[key], "spec", "podSelector", "matchLabels")
		if strings.Contains(key, "Service") {
			sel, _, _ = unstructured.NestedStringMap(got[key], "spec", "selector")
		}
		if !maps.Equal(sel, common) {
			t.Errorf("%s selects %v, want %v", key, sel, common)
		}
	}
	// Unsharded: one Deployment, no --shard.
	plain := helmObjects(t, chrt, map[string]any{})
	for k := range plain {
		if strings.Contains(k, "/Deployment/") && !strings.HasSuffix(k, "/eva-operator") {
			t.Errorf("unsharded chart renders %s", k)
		}
	}
}

// TestChartInstallsOnAnAPIServer installs the chart with Helm on a real API server and
// reads back the objects it created.
func TestChartInstallsOnAnAPIServer(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.KubeConfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ns := "eva-system"
	// Flux is installed first (the chart binds a Role in its namespace).
	flux := &unstructured.Unstructured{}
	flux.SetAPIVersion("v1")
	flux.SetKind("Namespace")
	flux.SetName("flux-system")
	if err := env.Client.Create(context.Background(), flux); err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "eva-operator", ns, true
	rel, err := install.Run(loadChart(t), map[string]any{"env": "prod"})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("release %s %s, revision %d", rel.Name, rel.Info.Status, rel.Version)
	ctx := context.Background()
	for _, obj := range []struct{ apiVersion, kind, namespace, name string }{
		{"apps/v1", "Deployment", ns, "eva-operator"},
		{"v1", "ConfigMap", ns, "eva-environment"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "eva-tenant-decommissioner"},
		{"rbac.authorization.k8s.io/v1", "ClusterRole", "", "eva-operator"},
		{"rbac.authorization.k8s.io/v1", "Role", "flux-system", "eva-operator"},
		{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "eva-operator-tenant-fence"},
		{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "eva-decommission-guard"},
		{"networking.k8s.io/v1", "NetworkPolicy", ns, "eva-operator"},
	} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(obj.apiVersion)
		u.SetKind(obj.kind)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: obj.namespace, Name: obj.name}, u); err != nil {
			t.Errorf("%s %s/%s after helm install: %v", obj.kind, obj.namespace, obj.name, err)
		}
	}
	cm := &unstructured.Unstructured{}
	cm.SetAPIVersion("v1")
	cm.SetKind("ConfigMap")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "eva-environment"}, cm); err == nil {
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		prod, _ := os.ReadFile(filepath.Join("..", "..", "overlays", "prod", "tenant", "environment.yaml"))
		if data["environment.yaml"] != string(prod) {
			t.Errorf("the installed environment is not prod's:\n%s", data["environment.yaml"])
		}
	}
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return chrt
}

// render renders the chart as `helm template --namespace eva-system` does.
func render(chrt *chart.Chart, values map[string]any) (string, error) {
	install := action.NewInstall(&action.Configuration{})
	install.DryRun, install.ClientOnly, install.Replace = true, true, true
	install.ReleaseName, install.Namespace = "eva-operator", "eva-system"
	rel, err := install.Run(chrt, values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// helmObjects renders the chart into objects keyed like kustomizeObjects.
func helmObjects(t *testing.T, chrt *chart.Chart, values map[string]any) map[string]map[string]any {
	t.Helper()
	manifest, err := render(chrt, values)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(manifest, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("chart output: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		u := unstructured.Unstructured{Object: m}
		annotations := nestedMap(m, "spec", "template", "metadata", "annotations")
		delete(annotations, "checksum/environment")
		out[key(&u)] = normalize(t, m)
	}
	return out
}

// kustomizeObjects builds overlays/<env> as `kubectl kustomize` does.
func kustomizeObjects(t *testing.T, env string) map[string]map[string]any {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "overlays", env))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range res.Resources() {
		if r.GetKind() == "Namespace" || r.GetKind() == "CustomResourceDefinition" {
			continue // a release does not own its namespace; the CRDs are compared as files
		}
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := unstructured.Unstructured{Object: m}
		if hashSuffix.MatchString(u.GetName()) {
			u.SetName(hashSuffix.ReplaceAllString(u.GetName(), "$1"))
		}
		for _, v := range nestedSlice(m, "spec", "template", "spec", "volumes") {
			if cm := nestedMap(v.(map[string]any), "configMap"); cm != nil {
				if name, _ := cm["name"].(string); hashSuffix.MatchString(name) {
					cm["name"] = hashSuffix.ReplaceAllString(name, "$1")
				}
			}
		}
		out[key(&u)] = normalize(t, u.Object)
	}
	return out
}

func key(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s/%s/%s/%s", u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
}

// normalize gives both sides the same types (JSON numbers, no empty annotations).
func normalize(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if ann := nestedMap(out, "spec", "template", "metadata", "annotations"); ann != nil && len(ann) == 0 {
		delete(nestedMap(out, "spec", "template", "metadata"), "annotations")
	}
	return out
}

func nestedMap(m map[string]any, path ...string) map[string]any {
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

func nestedSlice(m map[string]any, path ...string) []any {
	parent := nestedMap(m, path[:len(path)-1]...)
	if parent == nil {
		return nil
	}
	s, _ := parent[path[len(path)-1]].([]any)
	return s
}

func setImage(deploy map[string]any, image string) {
	containers := nestedSlice(deploy, "spec", "template", "spec", "containers")
	containers[0].(map[string]any)["image"] = image
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

package cli

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
)

// kustomizeSample is how many tenants the kustomize way builds, spread over the fleet's
// mix of tiers: kubectl takes 150-400 ms a tenant here, the whole fleet
// would take most of an hour per environment.
const kustomizeSample = 40

// kustomizeWay times, in the benchmark's own run, how a team would build the fleet for
// an environment without Eva: a kustomize base per tier (one tenant evactl rendered for
// dev) and one overlay per tenant on it, which moves the tenant to its namespace,
// renames what differs per tenant and carries the environment's own patches
// (<overlaysDir>/<env>/tenant/kustomization.yaml, whole), each built with `kubectl
// kustomize`, and again with the kustomize library in this process (krusty, the code
// kubectl runs, without starting a process per tenant). It returns the time per tenant
// each way over kustomizeSample tenants of the benchmark fleet.
func kustomizeWay(b *testing.B, kubectl, overlaysDir, env string) (withKubectl, inProcess time.Duration) {
	b.Helper()
	dir := tmpfsDir(b, "eva-bench-kustomize-")
	for _, tier := range evav1.Tiers {
		writeKustomizeBase(b, filepath.Join(dir, "base", strings.ToLower(string(tier))), tier)
	}
	envData, err := os.ReadFile(filepath.Join(overlaysDir, env, "tenant", "kustomization.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var envKustomization map[string]any
	if err := yaml.Unmarshal(envData, &envKustomization); err != nil {
		b.Fatalf("overlays/%s/tenant/kustomization.yaml: %v", env, err)
	}
	envPatches, _ := envKustomization["patches"].([]any)

	var overlays []string
	for s := range kustomizeSample {
		i := 100*s + s*100/kustomizeSample // i%100 spread over 0-99: the fleet's mix of tiers
		code := benchCode(i)
		ov := filepath.Join(dir, "overlays", lower(code))
		k := map[string]any{}
		for key, v := range envKustomization {
			k[key] = v
		}
		k["resources"] = []any{"../../base/" + strings.ToLower(benchTier(i))}
		k["namespace"] = "eva-tenant-" + lower(code)
		k["labels"] = []any{map[string]any{"pairs": map[string]any{"eva.aidonow.com/capsule": code}}}
		k["patches"] = append(tenantPatches(code), envPatches...)
		data, err := yaml.Marshal(k)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.MkdirAll(ov, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ov, "kustomization.yaml"), data, 0o644); err != nil {
			b.Fatal(err)
		}
		overlays = append(overlays, ov)
	}
	start := time.Now()
	for _, ov := range overlays {
		if out, err := exec.Command(kubectl, "kustomize", ov).CombinedOutput(); err != nil {
			b.Fatalf("kubectl kustomize %s: %v\n%s", ov, err, out)
		}
	}
	withKubectl = time.Since(start) / time.Duration(len(overlays))
	start = time.Now()
	for _, ov := range overlays {
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), ov)
		if err != nil {
			b.Fatalf("kustomize %s: %v", ov, err)
		}
		if _, err := res.AsYaml(); err != nil {
			b.Fatalf("kustomize %s: %v", ov, err)
		}
	}
	return withKubectl, time.Since(start) / time.Duration(len(overlays))
}

// writeKustomizeBase renders one tenant of a tier, BASEXX, with evactl for dev and
// writes its foundation and workloads as a kustomize base in dir.
func writeKustomizeBase(b *testing.B, dir string, tier evav1.Tier) {
	b.Helper()
	tenants := tmpfsDir(b, "eva-bench-base-")
	text := fmt.Sprintf("apiVersion: eva.aidonow.com/v1alpha1\nkind: EvaTenant\nmetadata:\n  name: basexx\nspec:\n  capsuleCode: BASEXX\n  tier: %s\n  wave: 1\n  seedsVersion: seeds-1.0.0\n", tier)
	if err := os.WriteFile(filepath.Join(tenants, "BASEXX.yaml"), []byte(text), 0o644); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(tmpfsDir(b, "eva-bench-base-out-"), "gitops")
	args := []string{"render", "--tenants", tenants, "--env", "dev", "--git=false", "--quiet", "--verify-charts=false",
		"--overlays", filepath.Join(repoRoot, "overlays"), "--charts", filepath.Join(repoRoot, "charts"), "--out", out}
	if code := Execute(args, io.Discard, io.Discard); code != ExitOK {
		b.Fatalf("evactl render of the %s base: exit %d", tier, code)
	}
	tenantDir := filepath.Join(out, filepath.FromSlash(render.TenantsDir), render.DirName("BASEXX"))
	var manifests []byte
	for _, f := range []string{filepath.Join(tenantDir, render.ManifestsFile), filepath.Join(tenantDir, render.WorkloadsDir, render.ManifestsFile)} {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		manifests = append(append(manifests, data...), "\n---\n"...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifests.yaml"), manifests, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte("resources:\n- manifests.yaml\n"), 0o644); err != nil {
		b.Fatal(err)
	}
}

// tenantPatches are the JSON 6902 patches that make the BASEXX base a tenant's: its
// streams, its host and the identity values its releases receive.
func tenantPatches(code string) []any {
	low := lower(code)
	ops := func(target map[string]any, ops ...string) any {
		return map[string]any{"target": target, "patch": "[" + strings.Join(ops, ",") + "]"}
	}
	op := func(path, value string) string {
		return fmt.Sprintf(`{"op":"replace","path":%q,"value":%q}`, path, value)
	}
	var patches []any
	for _, stream := range []string{"events", "commands"} {
		name := "eva-" + low + "-" + stream
		patches = append(patches, ops(map[string]any{"kind": "Stream", "name": "eva-basexx-" + stream},
			op("/metadata/name", name), op("/spec/name", name), op("/spec/subjects/0", "capsule."+code+"."+stream+".>")))
	}
	patches = append(patches,
		ops(map[string]any{"kind": "Ingress"}, op("/spec/rules/0/host", low+".eva.example.com")),
		ops(map[string]any{"kind": "HelmRelease"},
			op("/spec/values/capsule/code", code), op("/spec/values/capsule/namespace", "eva-tenant-"+low),
			op("/spec/values/capsule/queues/events", "eva-"+low+"-events"),
			op("/spec/values/capsule/queues/commands", "eva-"+low+"-commands")))
	return patches
}

package render

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

var update = flag.Bool("update", false, "rewrite golden files")

func tenantFilesText(t *testing.T, r *Renderer, tn *evav1.EvaTenant) []byte {
	t.Helper()
	files, err := r.TenantFiles(tn)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range files {
		fmt.Fprintf(&buf, "# ==> %s\n", f.Path)
		buf.Write(f.Data)
	}
	return buf.Bytes()
}

func TestGoldenPerTier(t *testing.T) {
	r := renderer(t)
	r.Charts = publishedCharts(r.Catalog) // what a release publishes (whisper 0.9.1 has no digest)
	cases := map[string]*evav1.EvaTenant{
		"starter": tenantFor("DEVUSR", withValues("crm", map[string]any{"logLevel": "debug"})),
		"customer": tenantFor("ACMECO", withTier(evav1.TierCustomer), withWave(2), withPin("whisper", "0.9.1"),
			withSecretMount(t, "crm", "crm-database")),
		"enterprise": tenantFor("GLOBEX", withTier(evav1.TierEnterprise), withWave(3), withSeeds("Seeds_2026.10+b1")),
		"platform":   tenantFor("PLATFM", withTier(evav1.TierPlatform), withSeeds("")),
		"decommissioned": tenantFor("OLDTNT", withTier(evav1.TierCustomer),
			withLifecycle(evav1.LifecycleDecommissioned)),
	}
	for name, tn := range cases {
		t.Run(name, func(t *testing.T) {
			got := tenantFilesText(t, r, tn)
			golden := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/render -run TestGoldenPerTier -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("render of %s differs from %s; rerun with -update and review the diff", name, golden)
			}
		})
	}
}

// kindsOf lists "Kind/name" of every object of a bundle.
func kindsOf(b *Bundle) []string {
	var out []string
	for _, o := range b.Objects() {
		meta := o["metadata"].(map[string]any)
		out = append(out, fmt.Sprintf("%s/%s", o["kind"], meta["name"]))
	}
	return out
}

func TestBundleContentsPerTier(t *testing.T) {
	r := renderer(t)
	cases := map[evav1.Tier]struct {
		quota   bool
		modules []string
	}{
		evav1.TierStarter:    {true, []string{"crm", "itsm"}},
		evav1.TierCustomer:   {true, []string{"crm", "itsm", "whisper", "gateway"}},
		evav1.TierEnterprise: {true, []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"}},
		evav1.TierPlatform:   {true, []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"}},
	}
	for tier, want := range cases {
		t.Run(string(tier), func(t *testing.T) {
			b, err := r.Bundle(tenantFor("ABCDEF", withTier(tier)))
			if err != nil {
				t.Fatal(err)
			}
			kinds := kindsOf(b)
			if slices.Contains(kinds, "ResourceQuota/eva-quota") != want.quota {
				t.Errorf("quota present = %v, want %v: %v", !want.quota, want.quota, kinds)
			}
			for _, m := range want.modules {
				if !slices.Contains(kinds, "HelmRelease/"+m) {
					t.Errorf("no HelmRelease for %s: %v", m, kinds)
				}
			}
			releases := 0
			for _, k := range kinds {
				if strings.HasPrefix(k, "HelmRelease/") {
					releases++
				}
			}
			if releases != len(want.modules) {
				t.Errorf("%d releases, want %d", releases, len(want.modules))
			}
			for _, k := range []string{"Namespace/eva-tenant-abcdef", "LimitRange/eva-defaults", "NetworkPolicy/eva-tenant-isolation",
				"ServiceAccount/eva-deployer", "RoleBinding/eva-deployer", "Stream/eva-abcdef-events", "Stream/eva-abcdef-commands",
				"PrometheusRule/eva-abcdef-streams", "Job/" + SeedJobName("seeds-1.0.0"), "Ingress/eva-abcdef"} {
				if !slices.Contains(kinds, k) {
					t.Errorf("missing %s in %v", k, kinds)
				}
			}
			for _, o := range b.Objects() {
				labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
				if labels[tenant.LabelCapsule] != "ABCDEF" {
					t.Errorf("%v lacks the capsule label", o["kind"])
				}
				if _, ok := o["status"]; ok {
					t.Errorf("%v carries status", o["kind"])
				}
			}
		})
	}
}

func TestStarterQuotaAndLimits(t *testing.T) {
	r := renderer(t)
	b, err := r.Bundle(tenantFor("DEVUSR"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := b.Manifest()
	for _, want := range []string{
		"    limits.cpu: \"4\"\n    limits.memory: \"8Gi\"\n    pods: \"20\"\n    requests.cpu: \"2\"\n    requests.ephemeral-storage: \"20Gi\"\n    requests.memory: \"4Gi\"\n",
		"  - default:\n      cpu: \"500m\"\n      ephemeral-storage: \"1Gi\"\n      memory: \"512Mi\"\n",
		"    max:\n      cpu: \"1\"\n      ephemeral-storage: \"2Gi\"\n      memory: \"2Gi\"\n",
		"host: devusr.dev.eva.example.com",
		"  - \"capsule.DEVUSR.events.>\"",
		"  - \"capsule.DEVUSR.commands.>\"",
		"name: eva-DEVUSR-events",
		"for: \"5m\"",
		"capsule_queue_depth{capsule=\\\"DEVUSR\\\",stream=\\\"eva-DEVUSR-events\\\"} > 80000",
		"nginx.ingress.kubernetes.io/ssl-redirect: \"false\"", // the dev environment's ingressAnnotations
	} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("bundle lacks %q", want)
		}
	}
	if bytes.Contains(data, []byte("creationTimestamp")) {
		t.Error("bundle carries creationTimestamp")
	}
}

func syntheticTenants(n int) []*evav1.EvaTenant {
	tiers := evav1.Tiers
	out := make([]*evav1.EvaTenant, n)
	for i := range n {
		code := codeFor(i)
		out[i] = tenantFor(code, withTier(tiers[i%len(tiers)]), withWave(int32(i%3+1)),
			withValues("crm", map[string]any{"replicaCount": i%3 + 1, "features": map[string]any{"beta": i%2 == 0}}))
	}
	return out
}

// codeFor maps i to a distinct six-letter code.
func codeFor(i int) string {
	b := []byte("AAAAAA")
	for p := 5; p >= 0 && i > 0; p-- {
		b[p] = byte('A' + i%26)
		i /= 26
	}
	return string(b)
}

func renderTree(t *testing.T, r *Renderer, tenants []*evav1.EvaTenant) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var mu sync.Mutex // Tree emits from several goroutines
	_, err := r.Tree(tenants, func(f File) error {
		mu.Lock()
		defer mu.Unlock()
		if _, dup := files[f.Path]; dup {
			return fmt.Errorf("%s emitted twice", f.Path)
		}
		files[f.Path] = f.Data
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestTreeIsDeterministic(t *testing.T) {
	r := renderer(t)
	tenants := syntheticTenants(60)
	first := renderTree(t, r, tenants)
	second := renderTree(t, r, tenants)
	shuffled := slices.Clone(tenants)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	third := renderTree(t, r, shuffled)
	if len(first) != 60*5+1 {
		t.Fatalf("%d files, want %d", len(first), 60*5+1)
	}
	for _, other := range []map[string][]byte{second, third} {
		if len(other) != len(first) {
			t.Fatalf("file count differs: %d vs %d", len(other), len(first))
		}
		for p, data := range first {
			if !bytes.Equal(data, other[p]) {
				t.Fatalf("%s differs between renders", p)
			}
		}
	}
	root := string(first[RootKustomization])
	if !strings.Contains(root, "- flux/aaaaaa.yaml\n- flux/aaaaab.yaml\n") {
		t.Errorf("root kustomization is not sorted:\n%s", root[:200])
	}
}

// TestSecretsStayInTheirSecret: a Secret handed to a module reaches its HelmRelease as
// names and a digest of the ciphertext only (values key secretMounts, which the chart
// mounts), never as values read through valuesFrom; the digest changes with the
// encrypted Secret, so that the chart rolls the pods when a value rotates.
func TestSecretsStayInTheirSecret(t *testing.T) {
	r := renderer(t)
	// Plaintext a careless renderer could have carried; it must never reach the output.
	secretValues := []string{"hunter2-Xq9!", "postgres://crm:hunter2-Xq9!@db/crm"}
	acmeco := tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database"))
	files := renderTree(t, r, []*evav1.EvaTenant{acmeco})
	var all bytes.Buffer
	for _, data := range files {
		all.Write(data)
	}
	for _, v := range secretValues {
		if bytes.Contains(all.Bytes(), []byte(v)) {
			t.Fatalf("secret value %q found in the output", v)
		}
	}
	if bytes.Contains(all.Bytes(), []byte("valuesFrom")) {
		t.Errorf("the output reads values from the cluster (valuesFrom)")
	}

	mounts := func(tn *evav1.EvaTenant, module string) []any {
		t.Helper()
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range b.Objects() {
			if o["kind"] != "HelmRelease" || o["metadata"].(map[string]any)["name"] != module {
				continue
			}
			spec := o["spec"].(map[string]any)
			if _, ok := spec["valuesFrom"]; ok {
				t.Errorf("HelmRelease %s has valuesFrom: %v", module, spec["valuesFrom"])
			}
			values, _ := spec["values"].(map[string]any)
			got, _ := values[tenant.SecretMountsValuesKey].([]any)
			return got
		}
		t.Fatalf("no HelmRelease %s", module)
		return nil
	}
	got := mounts(acmeco, "crm")
	if len(got) != 1 {
		t.Fatalf("crm mounts %v, want crm-database", got)
	}
	m, _ := got[0].(map[string]any)
	revision, _ := m["revision"].(string)
	if len(m) != 3 || m["name"] != "crm-database" || m["secretName"] != "acmeco-crm-database" || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(revision) {
		t.Errorf("crm mounts %v, want name crm-database, secretName acmeco-crm-database and a revision of 16 hex", m)
	}
	for _, module := range []string{"itsm", "whisper", "gateway"} {
		if got := mounts(acmeco, module); got != nil {
			t.Errorf("%s mounts %v, though only crm was handed the Secret", module, got)
		}
	}

	// The same Secret with a rotated value: new ciphertext, new revision.
	rotated := acmeco.DeepCopy()
	sops := rotated.Spec.Secrets[0].Sops
	const value = "password: ENC[AES256_GCM,data:"
	at := strings.Index(sops, value) + len(value)
	if at < len(value) {
		t.Fatalf("the example Secret has no %q", value)
	}
	next := "A"
	if sops[at] == 'A' {
		next = "B"
	}
	sops = sops[:at] + next + sops[at+1:]
	rotated.Spec.Secrets[0].Sops = sops
	again, _ := mounts(rotated, "crm")[0].(map[string]any)
	if again["revision"] == revision || again["secretName"] != "acmeco-crm-database" {
		t.Errorf("re-encrypted Secret: mount %v, was revision %s", again, revision)
	}
	if same, _ := mounts(acmeco.DeepCopy(), "crm")[0].(map[string]any); same["revision"] != revision {
		t.Errorf("the same Secret rendered twice: revision %v, then %s", same["revision"], revision)
	}
}

func TestInvalidTenantIsRefused(t *testing.T) {
	r := renderer(t)
	_, err := r.Bundle(tenantFor("DEVUSR", withPin("forge", "1.0.0")))
	if err == nil || !strings.Contains(err.Error(), "spec.versions[forge]") {
		t.Fatalf("err = %v, want the module-not-in-tier problem", err)
	}
}

func TestSeedJobName(t *testing.T) {
	cases := map[string]string{
		"seeds-1":               "eva-seed-seeds-1",
		"seeds-1.0.0":           "eva-seed-seeds-1-0-0-",
		"v2026.11":              "eva-seed-v2026-11-",
		"Seeds_2026":            "eva-seed-seeds-2026-",
		strings.Repeat("a", 80): "eva-seed-" + strings.Repeat("a", 45),
	}
	for in, prefix := range cases {
		got := SeedJobName(in)
		if !strings.HasPrefix(got, prefix) || len(got) > 63 {
			t.Errorf("SeedJobName(%q) = %q, want prefix %q and at most 63 characters", in, got, prefix)
		}
	}
	if SeedJobName("Seeds_2026") == SeedJobName("seeds-2026") {
		t.Error("distinct versions share a Job name")
	}
}

func FuzzRender(f *testing.F) {
	f.Add("DEVUSR", uint8(0), uint8(1), "seeds-1", "crm", `{"a":{"b":[1,"x"]}}`)
	f.Add("GLOBEX", uint8(2), uint8(3), "", "shell", `{"sessionTimeoutMinutes":30}`)
	f.Add("ACMECO", uint8(1), uint8(2), "v1+b.2", "gateway", `{"x":"y: z # w","":null}`)
	r := renderer(f)
	f.Fuzz(func(t *testing.T, code string, tier, wave uint8, seeds, module, values string) {
		tn := tenantFor(code, withTier(evav1.Tiers[int(tier)%len(evav1.Tiers)]), withWave(int32(wave)), withSeeds(seeds))
		tn.Name = "fuzz"
		var v map[string]any
		if yaml.Unmarshal([]byte(values), &v) == nil && v != nil {
			withValues(module, v)(tn)
		}
		if len(r.Catalog.Validate(tn)) > 0 {
			return // only valid tenants render
		}
		files, err := r.TenantFiles(tn)
		if errors.Is(err, ErrOverBudget) {
			return // valid, but renders more than a tenant may publish: refused, by design
		}
		if err != nil {
			t.Fatalf("valid tenant failed to render: %v", err)
		}
		for _, file := range files {
			dec := yaml.NewDecoder(bytes.NewReader(file.Data))
			for {
				var doc any
				if err := dec.Decode(&doc); err != nil {
					if err.Error() == "EOF" {
						break
					}
					t.Fatalf("%s does not parse: %v\n%s", file.Path, err, file.Data)
				}
			}
		}
	})
}

// TestPerTenantChartSource: with chartSource.url every tenant gets, in its foundation,
// an OCIRepository per module chart pinned to the digest published.yaml records, and
// its releases take their charts from them (chartRef), referring to nothing outside
// their namespace (what Flux's --no-cross-namespace-refs allows). Without it, the
// releases refer to the shared source and no chart source is rendered.
func TestPerTenantChartSource(t *testing.T) {
	r := sharedChartsRenderer(t)
	shared, err := r.Bundle(tenantFor("ABCDEF"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(kindsOf(shared), func(k string) bool { return strings.HasSuffix(strings.Split(k, "/")[0], "Repository") }) {
		t.Fatalf("a shared chart source rendered a source: %v", kindsOf(shared))
	}
	env := *r.Env
	env.Settings.ChartSource.URL = "oci://registry.example.com/eva/charts"
	env.Settings.ChartSource.Namespace = ""
	env.Settings.ChartSource.PullSecret = "registry-pull"
	published := publishedCharts(r.Catalog)
	perTenant := &Renderer{Catalog: r.Catalog, Env: &env, Charts: published}
	tn := tenantFor("ABCDEF")
	b, err := perTenant.Bundle(tn)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]map[string]any{}
	for _, o := range b.Objects() {
		meta := o["metadata"].(map[string]any)
		if meta["namespace"] != nil && meta["namespace"] != b.Namespace {
			t.Errorf("%v %v outside the tenant namespace", o["kind"], meta["name"])
		}
		if o["kind"] == "OCIRepository" {
			sources[meta["name"].(string)] = o["spec"].(map[string]any)
		}
	}
	modules := r.Catalog.ModulesOf(tn.Spec.Tier)
	if len(sources) != len(modules) {
		t.Fatalf("%d chart sources for %d modules: %v", len(sources), len(modules), kindsOf(b))
	}
	for _, o := range b.Objects() {
		if o["kind"] != "HelmRelease" {
			continue
		}
		module := o["metadata"].(map[string]any)["name"].(string)
		spec := o["spec"].(map[string]any)
		ref, _ := spec["chartRef"].(map[string]any)
		if spec["chart"] != nil || ref["kind"] != "OCIRepository" || ref["namespace"] != nil {
			t.Errorf("release %s: chart %v, chartRef %v; want only a chartRef to an OCIRepository of its namespace", module, spec["chart"], ref)
			continue
		}
		if got := o["metadata"].(map[string]any)["annotations"].(map[string]any)[tenant.AnnotationChartVersion]; got != r.Catalog.ModuleVersion(tn, module) {
			t.Errorf("release %s: %s %v, want its version", module, tenant.AnnotationChartVersion, got)
		}
		src := sources[ref["name"].(string)]
		chart := r.Catalog.Modules[module].Chart
		digest, _ := published.Digest(chart, r.Catalog.ModuleVersion(tn, module))
		if src == nil || src["url"] != env.Settings.ChartSource.URL+"/"+chart ||
			!reflect.DeepEqual(src["ref"], map[string]any{"digest": digest, "tag": r.Catalog.ModuleVersion(tn, module)}) {
			t.Errorf("release %s: source %v, want %s/%s at %s", module, src, env.Settings.ChartSource.URL, chart, digest)
		}
		if secret, _ := src["secretRef"].(map[string]any); secret["name"] != tenant.ChartPullSecret {
			t.Errorf("release %s: source's secretRef %v, want %s", module, src["secretRef"], tenant.ChartPullSecret)
		}
	}

	// A version published.yaml does not list follows its tag, unless the environment
	// requires digests: then the render fails, naming the chart and version.
	pinned := tenantFor("ABCDEF", func(t *evav1.EvaTenant) { t.Spec.Versions = map[string]evav1.ModuleVersion{"crm": "9.9.9+hotfix"} })
	perTenant.Charts = nil
	b, err = perTenant.Bundle(pinned)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range b.Objects() {
		if o["kind"] == "OCIRepository" && o["metadata"].(map[string]any)["name"] == "eva-charts-crm" {
			if got := o["spec"].(map[string]any)["ref"]; !reflect.DeepEqual(got, map[string]any{"tag": "9.9.9_hotfix"}) {
				t.Errorf("an unpublished version's ref: %v, want its tag", got)
			}
		}
	}
	env.Settings.ChartSource.RequireDigest = true
	perTenant.Charts = published
	if _, err := perTenant.Bundle(pinned); err == nil || !strings.Contains(err.Error(), "chart eva-crm 9.9.9+hotfix has no digest") {
		t.Fatalf("requireDigest with an unpublished version: %v", err)
	}
}

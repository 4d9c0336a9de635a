package render

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/tenantfile"
	"github.com/aidonow/eva/internal/testenv"
)

var (
	envOnce sync.Once
	env     *testenv.Env
	envErr  error
)

// apiServer starts envtest (once for the package) with Flux's CRDs and the Stream and
// PrometheusRule CRDs generated from Eva's own types.
func apiServer(t *testing.T) *testenv.Env {
	t.Helper()
	envOnce.Do(func() {
		crds := filepath.Join(testenv.RepoRoot(), "internal", "testenv", "crds")
		env, envErr = testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"), filepath.Join(crds, "argocd"))
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return env
}

func TestMain(m *testing.M) {
	code := m.Run()
	if env != nil {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}
	os.Exit(code)
}

func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decoding rendered YAML: %v", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func ensureNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestRenderedObjectsAcceptedByAPIServer server-side applies (dry run) every object of
// every tier and of the example tenants to a real API server holding the real Flux
// CRDs: a field Flux's schema does not know, a wrong type or a missing required field
// fails here.
func TestRenderedObjectsAcceptedByAPIServer(t *testing.T) {
	e := apiServer(t)
	ctx := context.Background()
	r := renderer(t)
	tenants := []*evav1.EvaTenant{
		tenantFor("DEVUSR"), tenantFor("ACMECO", withTier(evav1.TierCustomer), withSecretMount(t, "crm", "crm-database")),
		tenantFor("GLOBEX", withTier(evav1.TierEnterprise)), tenantFor("PLATFM", withTier(evav1.TierPlatform)),
	}
	examples, err := tenantfile.Load([]string{filepath.Join("..", "..", "tenants")}, r.Catalog)
	if err != nil || !examples.Valid() {
		t.Fatalf("example tenants: %v %v", err, examples.Problems)
	}
	for _, ex := range examples.Tenants {
		tenants = append(tenants, ex.Object)
	}
	ensureNamespace(t, e.Client, r.Env.Settings.FluxNamespace)
	for _, tn := range tenants {
		files, err := r.TenantFiles(tn)
		if err != nil {
			t.Fatal(err)
		}
		var objects []*unstructured.Unstructured
		for _, f := range files {
			if path.Base(f.Path) == ManifestsFile || strings.HasPrefix(f.Path, FluxDir+"/") {
				objects = append(objects, decodeObjects(t, f.Data)...)
			}
		}
		// The namespace is created for real so the namespaced objects can be dry-run in it.
		ensureNamespace(t, e.Client, tenant.Namespace(tn.Spec.CapsuleCode))
		for _, u := range objects {
			err := e.Client.Patch(ctx, u, client.Apply, client.DryRunAll, client.FieldOwner("eva"), client.ForceOwnership)
			if err != nil {
				t.Errorf("%s: %s %s/%s rejected: %v", tn.Spec.CapsuleCode, u.GetKind(), u.GetNamespace(), u.GetName(), err)
			}
		}
	}
}

// TestTreeBuildsWithKustomize writes a tree and builds the root and each tenant folder
// with kustomize, as Flux's kustomize-controller (and `kubectl kustomize`) would.
func TestTreeBuildsWithKustomize(t *testing.T) {
	r := renderer(t)
	dir := t.TempDir()
	tenants := syntheticTenants(8)
	_, err := r.Tree(tenants, func(f File) error {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		return os.WriteFile(p, f.Data, 0o644)
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	fs := filesys.MakeFsOnDisk()
	root, err := k.Run(fs, dir)
	if err != nil {
		t.Fatalf("kustomize build of the root: %v", err)
	}
	if n := len(root.Resources()); n != 4*len(tenants) {
		t.Errorf("root builds %d objects, want %d: two Flux Kustomizations, an applier account and its binding per tenant", n, 4*len(tenants))
	}
	for _, tn := range tenants {
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		// The foundation and the workloads together are the bundle, each object once.
		folder := filepath.Join(dir, TenantsDir, DirName(tn.Spec.CapsuleCode))
		built := 0
		for _, sub := range []string{folder, filepath.Join(folder, WorkloadsDir)} {
			res, err := k.Run(fs, sub)
			if err != nil {
				t.Fatalf("kustomize build of %s: %v", sub, err)
			}
			built += len(res.Resources())
		}
		if built != b.Len() {
			t.Errorf("%s builds %d objects from its two folders, want %d", tn.Spec.CapsuleCode, built, b.Len())
		}
	}
}

// TestShippedOverlaysPatchAsKustomizeDoes renders tenants of every tier with each
// shipped environment and compares the bundles with what kustomize itself builds from
// the unpatched bundle and the environment's overlay: the same objects, field for field.
// (The prod overlay's targeted patch once renamed every HelmRelease "any": kustomize
// keeps the target's identity.)
func TestShippedOverlaysPatchAsKustomizeDoes(t *testing.T) {
	base := renderer(t)
	for _, env := range []string{"dev", "prod", "airgap"} {
		t.Run(env, func(t *testing.T) {
			overlayDir := filepath.Join("..", "..", "overlays", env, "tenant")
			e, err := overlay.Load(filepath.Join("..", "..", "overlays"), env)
			if err != nil {
				t.Fatal(err)
			}
			unpatchedEnv := *e
			unpatchedEnv.Patches = nil
			patched := &Renderer{Catalog: base.Catalog, Env: e, Charts: publishedCharts(base.Catalog)}
			unpatched := &Renderer{Catalog: base.Catalog, Env: &unpatchedEnv, Charts: patched.Charts}
			dir := t.TempDir()
			entries, err := os.ReadDir(overlayDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, entry := range entries {
				data, err := os.ReadFile(filepath.Join(overlayDir, entry.Name()))
				if err != nil {
					t.Fatal(err)
				}
				if entry.Name() == overlay.KustomizationFile {
					data = append(data, []byte("\nresources:\n- bundle.yaml\n")...)
				}
				if err := os.WriteFile(filepath.Join(dir, entry.Name()), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, tn := range syntheticTenants(8) {
				plain, err := unpatched.Bundle(tn)
				if err != nil {
					t.Fatal(err)
				}
				manifest, err := plain.Manifest()
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "bundle.yaml"), manifest, 0o644); err != nil {
					t.Fatal(err)
				}
				built, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
				if err != nil {
					t.Fatalf("kustomize build with the %s overlay: %v", env, err)
				}
				want := map[string]string{}
				for _, res := range built.Resources() {
					m, err := res.Map()
					if err != nil {
						t.Fatal(err)
					}
					want[identityKey(m)] = canonicalJSON(t, m)
				}
				got, err := patched.Bundle(tn)
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Objects()) != len(want) {
					t.Errorf("%s: %d objects rendered, kustomize builds %d", tn.Spec.CapsuleCode, len(got.Objects()), len(want))
				}
				for _, obj := range got.Objects() {
					key := identityKey(obj)
					if w, ok := want[key]; !ok {
						t.Errorf("%s: rendered %s, which kustomize does not build", tn.Spec.CapsuleCode, key)
					} else if g := canonicalJSON(t, obj); g != w {
						t.Errorf("%s: %s differs from kustomize's:\n got %s\nwant %s", tn.Spec.CapsuleCode, key, g, w)
					}
				}
				// What the render writes: a patch of maps and scalars is merged into the
				// typed object while it is written, not into its plain form.
				written, err := patched.Bundle(tn)
				if err != nil {
					t.Fatal(err)
				}
				text, err := written.Manifest()
				if err != nil {
					t.Fatal(err)
				}
				docs := strings.Split(string(text), "---\n")[1:]
				if len(docs) != len(want) {
					t.Errorf("%s: %d documents written, kustomize builds %d", tn.Spec.CapsuleCode, len(docs), len(want))
				}
				for _, doc := range docs {
					var obj map[string]any
					if err := sigsyaml.Unmarshal([]byte(doc), &obj); err != nil {
						t.Fatal(err)
					}
					if g, w := canonicalJSON(t, obj), want[identityKey(obj)]; g != w {
						t.Errorf("%s: %s as written differs from kustomize's:\n got %s\nwant %s", tn.Spec.CapsuleCode, identityKey(obj), g, w)
					}
				}
			}
		})
	}
}

func identityKey(obj map[string]any) string {
	id := overlay.IdentityOf(obj)
	return id.APIVersion + " " + id.Kind + " " + id.Namespace + "/" + id.Name
}

// canonicalJSON is an object as JSON with the number types of its decoder forgotten.
func canonicalJSON(t *testing.T, obj map[string]any) string {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// TestLimitRangeBoundsContainers applies a Starter tenant's foundation to the real API
// server: a pod whose container asks more CPU, memory or node disk than the tier's value
// limits (1 CPU, 2Gi, 2Gi) is refused at admission, whatever made it (a chart's own
// defaults, an environment patch), one within them is admitted, and one that sets no
// node disk gets the default limit.
func TestLimitRangeBoundsContainers(t *testing.T) {
	e := apiServer(t)
	ctx := context.Background()
	r := renderer(t)
	b, err := r.Bundle(tenantFor("LIMITS"))
	if err != nil {
		t.Fatal(err)
	}
	var ns string
	for _, u := range b.UnstructuredLayer(Foundation) {
		if k := u.GetKind(); k != "Namespace" && k != "LimitRange" {
			continue
		}
		if u.GetKind() == "Namespace" {
			ns = u.GetName()
		}
		if err := e.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	pod := func(cpu, memory string, disk ...string) *corev1.Pod {
		limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		for _, d := range disk {
			limits[corev1.ResourceEphemeralStorage] = resource.MustParse(d)
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "limits-"},
			Spec: corev1.PodSpec{
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/x:1",
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					Resources: corev1.ResourceRequirements{Limits: limits}}}}}
	}
	for what, p := range map[string]*corev1.Pod{"2 CPUs": pod("2", "1Gi"), "4Gi": pod("500m", "4Gi"), "100Gi of node disk": pod("1", "1Gi", "100Gi")} {
		if err := e.Client.Create(ctx, p, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maximum") {
			t.Errorf("a container of %s: %v, want refused by the LimitRange", what, err)
		}
	}
	if err := e.Client.Create(ctx, pod("1", "2Gi"), client.DryRunAll); err != nil {
		t.Errorf("a container within the tier's limits: %v", err)
	}
	// Small requests cannot hide large limits: no request under the minimum, no limit
	// more than maxLimitRequestRatio times its request.
	withRequests := func(p *corev1.Pod, cpu, memory string) *corev1.Pod {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return p
	}
	for what, c := range map[string]struct {
		p    *corev1.Pod
		want string
	}{
		"1m of CPU requested":    {withRequests(pod("500m", "512Mi"), "1m", "128Mi"), "minimum cpu usage per Container is 10m"},
		"1Mi of memory":          {withRequests(pod("500m", "512Mi"), "100m", "1Mi"), "minimum memory usage per Container is 16Mi"},
		"a limit of 10 requests": {withRequests(pod("1", "512Mi"), "100m", "128Mi"), "cpu max limit to request ratio per Container is 8"},
	} {
		if err := e.Client.Create(ctx, c.p, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a container with %s: %v, want refused by the LimitRange (%s)", what, err, c.want)
		}
	}
	if err := e.Client.Create(ctx, withRequests(pod("500m", "512Mi"), "100m", "128Mi"), client.DryRunAll); err != nil {
		t.Errorf("a container as the module charts ask (100m/128Mi, limits 500m/512Mi): %v", err)
	}
	// A container that sets no node disk gets the default, within the tier's bound.
	admitted := pod("1", "2Gi")
	if err := e.Client.Create(ctx, admitted, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if got := admitted.Spec.Containers[0].Resources.Limits[corev1.ResourceEphemeralStorage]; got.String() != "1Gi" {
		t.Errorf("a container without a node disk limit got %q, want the default 1Gi", got.String())
	}
}

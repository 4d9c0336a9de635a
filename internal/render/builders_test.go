package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/chartrepo"
	"github.com/aidonow/eva/internal/overlay"
	"github.com/aidonow/eva/internal/tenant"
)

type tenantOption func(*evav1.EvaTenant)

// tenantFor builds a valid tenant for tests.
func tenantFor(code string, opts ...tenantOption) *evav1.EvaTenant {
	t := &evav1.EvaTenant{
		TypeMeta:   metav1.TypeMeta{APIVersion: evav1.GroupVersion.String(), Kind: evav1.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: DirName(code), Namespace: "eva-system"},
		Spec: evav1.EvaTenantSpec{
			CapsuleCode: code, Tier: evav1.TierStarter, Wave: 1, SeedsVersion: "seeds-1.0.0",
		},
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func withTier(tier evav1.Tier) tenantOption { return func(t *evav1.EvaTenant) { t.Spec.Tier = tier } }
func withWave(w int32) tenantOption         { return func(t *evav1.EvaTenant) { t.Spec.Wave = w } }
func withSeeds(v string) tenantOption       { return func(t *evav1.EvaTenant) { t.Spec.SeedsVersion = v } }
func withLifecycle(l evav1.Lifecycle) tenantOption {
	return func(t *evav1.EvaTenant) { t.Spec.Lifecycle = l }
}
func withPin(module, version string) tenantOption {
	return func(t *evav1.EvaTenant) {
		if t.Spec.Versions == nil {
			t.Spec.Versions = map[string]evav1.ModuleVersion{}
		}
		t.Spec.Versions[module] = evav1.ModuleVersion(version)
	}
}
func withValues(module string, values map[string]any) tenantOption {
	return func(t *evav1.EvaTenant) {
		raw, _ := json.Marshal(values)
		if t.Spec.HelmValues == nil {
			t.Spec.HelmValues = map[string]apiextensionsv1.JSON{}
		}
		t.Spec.HelmValues[module] = apiextensionsv1.JSON{Raw: raw}
	}
}

// withSecretMount hands one of the tenant's Secrets to a module's pods, adding the
// example's encrypted Secret tenants/<CODE>.<secret>.sops.yaml (encrypted for the dev
// environment's recipients of the tenant) to spec.secrets unless the tenant has it.
func withSecretMount(tb testing.TB, module, secret string) tenantOption {
	return func(t *evav1.EvaTenant) {
		tb.Helper()
		if !slices.ContainsFunc(t.Spec.Secrets, func(s evav1.EncryptedSecret) bool { return s.Name == secret }) {
			t.Spec.Secrets = append(t.Spec.Secrets, evav1.EncryptedSecret{Name: secret, Sops: exampleSecret(tb, t.Spec.CapsuleCode, secret)})
		}
		t.Spec.SecretMounts = append(t.Spec.SecretMounts, evav1.SecretMount{Module: module, Secret: secret})
	}
}

// exampleSecret is the example tenant's encrypted Secret tenants/<CODE>.<name>.sops.yaml.
func exampleSecret(tb testing.TB, code, name string) string {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "tenants", code+"."+name+".sops.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(data)
}

// renderer returns a renderer for the repository's dev environment.
// publishedCharts is a published.yaml that lists every module chart of the catalog at
// its catalog version, with a digest made of its name and version.
func publishedCharts(c *tenant.Catalog) *chartrepo.Lock {
	l := &chartrepo.Lock{Charts: map[string][]chartrepo.Published{}}
	for _, m := range c.Modules {
		sum := sha256.Sum256([]byte(m.Chart + "@" + m.Version))
		digest := "sha256:" + hex.EncodeToString(sum[:])
		l.Charts[m.Chart] = append(l.Charts[m.Chart], chartrepo.Published{Version: m.Version, Digest: digest, Archive: digest})
	}
	return l
}

func renderer(t testing.TB) *Renderer {
	t.Helper()
	env, err := overlay.Load(filepath.Join("..", "..", "overlays"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	return &Renderer{Catalog: tenant.DefaultCatalog(), Env: env}
}

// sharedChartsRenderer renders for the dev environment with its charts from a shared
// HelmRepository the platform team made in the Flux namespace, instead of the release's
// OCI repository by digest.
func sharedChartsRenderer(t testing.TB) *Renderer {
	t.Helper()
	r := renderer(t)
	env := *r.Env
	env.Settings.ChartSource = overlay.ChartSource{SourceRef: overlay.SourceRef{Kind: "HelmRepository", Name: "eva-charts", Namespace: "flux-system"}}
	r.Env = &env
	return r
}

package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// largeValues are helmValues of about size bytes: one module's value holding a long
// string, within the CRD's bounds, as a requester fills a spec.
func largeValues(t testing.TB, size int) map[string]apiextensionsv1.JSON {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"notes": strings.Repeat("x", size)})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]apiextensionsv1.JSON{"crm": {Raw: raw}}
}

// TestUnservedTenantsAreCachedSlim reads through the cache the operator runs with
// (CacheOptions with --tenant-namespaces): a tenant of a served namespace is cached
// whole; a tenant elsewhere keeps only its code, tier, phase, Eva's finalizer and the
// operator-version claim, its large values and a requester's annotations dropped; a
// rollout elsewhere is not cached at all.
func TestUnservedTenantsAreCachedSlim(t *testing.T) {
	ctx := context.Background()
	served, unserved := newTestNamespace(t), newTestNamespace(t)
	big := func(tn *evav1.EvaTenant) {
		tn.Spec.HelmValues = largeValues(t, 200<<10)
		tn.Annotations = map[string]string{"example.com/notes": strings.Repeat("y", 100<<10), tenant.AnnotationOperatorVersion: "1.0.0"}
		tn.Finalizers = []string{tenant.Finalizer}
	}
	mine, theirs := newTenant(served, "SLIMSV", evav1.TierStarter, big), newTenant(unserved, "SLIMUN", evav1.TierCustomer, big)
	for _, tn := range []*evav1.EvaTenant{mine, theirs} {
		createTenant(t, tn)
		t.Cleanup(func() { purgeTenants(t, tn.Namespace) })
	}
	rollout := &evav1.EvaRollout{ObjectMeta: metav1.ObjectMeta{Namespace: unserved, Name: "elsewhere"},
		Spec: evav1.EvaRolloutSpec{Versions: map[string]evav1.ModuleVersion{"crm": "1.5.0"}, Waves: []evav1.RolloutWave{{Wave: 1}}}}
	if err := k8s.Create(ctx, rollout); err != nil {
		t.Fatal(err)
	}

	opts := CacheOptions(claimsNamespace, shard.Selector{}, false, []string{served})
	opts.Scheme = NewScheme()
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = c.Start(cctx) }()
	syncCtx, cancelSync := context.WithTimeout(ctx, time.Minute)
	defer cancelSync()
	var tenants evav1.EvaTenantList
	eventually(t, waitFor, "the cache holds both tenants", func() error {
		c.WaitForCacheSync(syncCtx)
		return c.List(ctx, &tenants)
	})

	var got evav1.EvaTenant
	if err := c.Get(ctx, client.ObjectKeyFromObject(mine), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.HelmValues["crm"].Raw) < 200<<10 || len(got.Annotations) != 2 {
		t.Errorf("the served tenant is not cached whole: values %d bytes, annotations %d", len(got.Spec.HelmValues["crm"].Raw), len(got.Annotations))
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.HelmValues != nil || got.Spec.SeedsVersion != "" || len(got.Annotations) != 1 || got.Annotations[tenant.AnnotationOperatorVersion] != "1.0.0" ||
		len(got.Finalizers) != 1 || got.Finalizers[0] != tenant.Finalizer {
		t.Errorf("the unserved tenant is cached with more than the operator reads: values %d bytes, seeds %q, annotations %d, finalizers %v",
			len(got.Spec.HelmValues["crm"].Raw), got.Spec.SeedsVersion, len(got.Annotations), got.Finalizers)
	}
	if got.Spec.CapsuleCode != "SLIMUN" || got.Spec.Tier != evav1.TierCustomer || string(got.UID) != theirsUID(t, theirs) {
		t.Errorf("the unserved tenant lost what the operator reads of it: code %q, tier %q, uid %q", got.Spec.CapsuleCode, got.Spec.Tier, got.UID)
	}
	var rollouts evav1.EvaRolloutList
	if err := c.List(ctx, &rollouts); err != nil {
		t.Fatal(err)
	}
	for _, ro := range rollouts.Items {
		if ro.Namespace == unserved {
			t.Errorf("the rollout %s/%s of an unserved namespace is cached", ro.Namespace, ro.Name)
		}
	}
}

// theirsUID reads a tenant's UID from the API server.
func theirsUID(t *testing.T, tn *evav1.EvaTenant) string {
	t.Helper()
	var cur evav1.EvaTenant
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(tn), &cur); err != nil {
		t.Fatal(err)
	}
	return string(cur.UID)
}

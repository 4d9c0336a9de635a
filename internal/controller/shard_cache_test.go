package controller

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/shard"
	"github.com/aidonow/eva/internal/tenant"
)

// TestShardCachesHoldOnlyTheirShard: what a shard's operator keeps in memory is its own
// shard's tenants and their objects, for every kind it caches, including the kinds it
// caches as metadata alone and starts watching only at their first read. Each cache is
// read after both shards' tenants are Active (so the other shard's objects exist), and
// must hold its own tenant's objects and nothing else.
func TestShardCachesHoldOnlyTheirShard(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	startStandIn(t)
	caches := map[string]ctrl.Manager{}
	var sel shard.Selector
	for _, name := range []string{"cache-a", "cache-b"} {
		var err error
		if sel, err = shard.Parse(shard.Label + "=" + name); err != nil {
			t.Fatal(err)
		}
		startShardOperator(t, "", sel, func(_ *EvaTenantReconciler, mgr ctrl.Manager) { caches[name] = mgr })
	}
	inShard := func(s string) tenantOpt {
		return func(tn *evav1.EvaTenant) { tn.Labels = map[string]string{shard.Label: s} }
	}
	codes := map[string]string{"cache-a": "CACHEA", "cache-b": "CACHEB"}
	var tenants []*evav1.EvaTenant
	for s, code := range codes {
		tenants = append(tenants, newTenant(ns, code, evav1.TierStarter, inShard(s)))
	}
	for _, tn := range tenants {
		createTenant(t, tn)
	}
	for _, tn := range tenants {
		waitPhase(t, tn, evav1.PhaseActive)
	}

	// Every kind a shard's operator caches (CacheOptions), but the claims: a shard must
	// see every code's claim to refuse a code another shard's tenant holds.
	lists, err := cachedLists(CacheOptions(claimsNamespace, sel, false, nil), &coordinationv1.Lease{})
	if err != nil {
		t.Fatal(err)
	}
	// A tenant's bundle (its inventory) says which kinds its shard's cache must hold.
	held := map[string]bool{"EvaTenant": true}
	for _, tn := range tenants {
		for _, ref := range getTenant(t, tn).Status.Inventory {
			held[ref.Kind] = true
		}
	}
	for name, mgr := range caches {
		for kind, newList := range lists {
			list := newList()
			if err := mgr.GetCache().List(ctx, list); err != nil {
				t.Fatalf("%s's cache of %s: %v", name, kind, err)
			}
			objects, err := metaOf(list)
			if err != nil {
				t.Fatal(err)
			}
			if len(objects) == 0 && held[kind] {
				t.Errorf("%s's cache holds no %s: its own tenant's are missing", name, kind)
			}
			for _, o := range objects {
				// The caches of most kinds keep no labels (cache_transforms.go): a tenant's
				// objects are told by their namespace, the tenant by its shard label.
				where := o.GetNamespace()
				switch kind {
				case "Namespace":
					where = o.GetName()
				case "EvaTenant":
					where = tenant.Namespace(codes[o.GetLabels()[shard.Label]])
				}
				if where != tenant.Namespace(codes[name]) {
					t.Errorf("%s's cache holds %s %s/%s", name, kind, o.GetNamespace(), o.GetName())
				}
			}
		}
	}
}

// cachedLists makes, for each kind opts caches (but those of except), an empty list of
// it as the cache holds it (metadata alone for the kinds cached so), by kind.
func cachedLists(opts cache.Options, except ...client.Object) (map[string]func() client.ObjectList, error) {
	scheme := NewScheme()
	skip := map[schema.GroupVersionKind]bool{}
	for _, o := range except {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, err
		}
		skip[gvk] = true
	}
	out := map[string]func() client.ObjectList{}
	for o := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(o, scheme)
		if err != nil {
			return nil, err
		}
		if skip[gvk] {
			continue
		}
		listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
		if _, metadataOnly := o.(*metav1.PartialObjectMetadata); metadataOnly {
			out[gvk.Kind] = func() client.ObjectList {
				l := &metav1.PartialObjectMetadataList{}
				l.SetGroupVersionKind(listGVK)
				return l
			}
			continue
		}
		if _, err := scheme.New(listGVK); err != nil {
			return nil, err
		}
		out[gvk.Kind] = func() client.ObjectList {
			l, _ := scheme.New(listGVK) // checked above
			return l.(client.ObjectList)
		}
	}
	return out, nil
}

// metaOf returns the items of a list as objects with metadata.
func metaOf(list client.ObjectList) ([]metav1.Object, error) {
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("%T: %w", list, err)
	}
	out := make([]metav1.Object, 0, len(items))
	for _, item := range items {
		o, err := apimeta.Accessor(item)
		if err != nil {
			return nil, fmt.Errorf("%T: %w", item, err)
		}
		out = append(out, o)
	}
	return out, nil
}

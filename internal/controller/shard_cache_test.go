package controller

import (
	"context"
	"fmt"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
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
	for _, name := range []string{"cache-a", "cache-b"} {
		sel, err := shard.Parse(shard.Label + "=" + name)
		if err != nil {
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

	lists := map[string]func() client.ObjectList{
		"EvaTenant":     func() client.ObjectList { return &evav1.EvaTenantList{} },
		"Namespace":     func() client.ObjectList { return &corev1.NamespaceList{} },
		"ResourceQuota": func() client.ObjectList { return &corev1.ResourceQuotaList{} },
		"Job":           func() client.ObjectList { return &batchv1.JobList{} },
		"Ingress":       func() client.ObjectList { return &networkingv1.IngressList{} },
		"Stream":        func() client.ObjectList { return &nackv1beta2.StreamList{} },
		"HelmRelease":   func() client.ObjectList { return &helmv2.HelmReleaseList{} },
	}
	for gvk := range versionOnlyKinds {
		lists[gvk.Kind] = func() client.ObjectList {
			l := &metav1.PartialObjectMetadataList{}
			l.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			return l
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
			if len(objects) == 0 {
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

package render

import (
	"fmt"
	"maps"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestTenantChangeRetriesGivenUpReleases: every release carries a reconcile and reset
// request naming the tenant's spec, the same for every render of an unchanged tenant
// (no write, no reconcile) and new for any change to it, even one that changes another
// module only: a release that failed because of another (a quota filled by crm's pods
// while itsm installed) is retried when its owner fixes crm.
func TestTenantChangeRetriesGivenUpReleases(t *testing.T) {
	r := renderer(t)
	requests := func(tn *evav1.EvaTenant) map[string][2]string {
		b, err := r.Bundle(tn)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]string{}
		for _, o := range b.Objects() {
			if o["kind"] != "HelmRelease" {
				continue
			}
			meta := o["metadata"].(map[string]any)
			a := meta["annotations"].(map[string]any)
			out[meta["name"].(string)] = [2]string{fmt.Sprint(a["reconcile.fluxcd.io/requestedAt"]), fmt.Sprint(a["reconcile.fluxcd.io/resetAt"])}
		}
		return out
	}
	before := requests(tenantFor("ACMECO"))
	if again := requests(tenantFor("ACMECO")); !maps.Equal(before, again) {
		t.Fatalf("an unchanged tenant asks again: %v then %v", before, again)
	}
	changed := tenantFor("ACMECO")
	changed.Spec.HelmValues = map[string]apiextensionsv1.JSON{"crm": {Raw: []byte(`{"replicaCount":1}`)}}
	after := requests(changed)
	if len(before) < 2 {
		t.Fatalf("want several releases, got %v", before)
	}
	for name, req := range after {
		if req[0] == "<nil>" || req[0] != req[1] {
			t.Errorf("%s: requestedAt %q, resetAt %q: want one token in both", name, req[0], req[1])
		}
		if req == before[name] {
			t.Errorf("%s: the request did not change with the tenant (%q): a release given up on would stay so", name, req[0])
		}
	}
}

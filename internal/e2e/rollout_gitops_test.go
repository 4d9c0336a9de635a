package e2e

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
)

// TestRolloutInGitOpsMode: the same kind of release through the operator's GitOps mode.
// The release's crm version reaches the git tree the operator publishes, and Flux
// applies it: the wave-2 tenant's release moves only once the wave-1 tenant's is Ready
// on the new version, as one watch of the HelmReleases saw them.
func TestRolloutInGitOpsMode(t *testing.T) {
	parallel(t)
	pushCrmVersions(t)
	ns, _ := startGitOpsOperator(t, "e2e-rollout-gitops", "eva-rollout")
	waveOf := map[string]int{"GITRLA": 1, "GITRLB": 2}
	var tenants []*unstructured.Unstructured
	for code, w := range waveOf {
		tn := evaTenant(ns, code, evav1.TierStarter)
		if err := unstructured.SetNestedField(tn.Object, int64(w), "spec", "wave"); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Client.Create(context.Background(), tn); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn)
	}
	kubectlWaitReady(t, 8*time.Minute, tenants...)
	history := watchReleases(t, waveOf)
	createRollout(t, ns, "crm-fixed", crmFixed, "",
		map[string]any{"wave": int64(1), "maxUpdate": int64(1), "bakeTime": "5s"},
		map[string]any{"wave": int64(2)})
	done := waitRollout(t, ns, "crm-fixed", 8*time.Minute, evav1.RolloutComplete)
	if done.Updated != 2 || done.Total != 2 {
		t.Errorf("updated %d of %d tenants, want 2 of 2", done.Updated, done.Total)
	}
	for code, v := range crmVersions(t, waveOf) {
		if v != crmFixed {
			t.Errorf("%s runs crm %s after the rollout, want %s", code, v, crmFixed)
		}
	}
	for _, tn := range tenants {
		hr := crmReleases(t, waveOf)[codeOf(tn)]
		if w := writersOf(hr); !containsManager(hr, "kustomize-controller") {
			t.Errorf("%s: crm HelmRelease not applied by Flux (writers: %s)", codeOf(tn), w)
		}
	}
	history.check(t, waveOf)
}

// containsManager reports whether a field manager of that name wrote the object.
func containsManager(u *unstructured.Unstructured, manager string) bool {
	for _, m := range u.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/publish"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/testcluster"
	"github.com/aidonow/eva/internal/testenv"
)

// ociShard is one of the scenario's operators and the tenants it serves.
type ociShard struct {
	ns      string
	op      *testenv.Process
	tenants []*unstructured.Unstructured
}

// TestOCIModeOperatorsRestartAndHeal runs two operator processes publishing their own
// tenants (one and two Starter tenants) to one OCI tag that the real Flux applies. Each
// operator is SIGKILLed and restarted while its tenants provision (one when its first
// tenant's namespace is ready, the other when its first tenant is Provisioned), then
// both at once with every tenant Active: whether Flux's artifact holds a tenant is read
// from the artifact, so no tenant leaves Ready, even after Flux applies an artifact the
// other operator pushed. A hand-made artifact pushed over the tag without one tenant's
// files (a force-push) makes its operator publish that tenant again, once. Deleting the
// tenants runs the decommission saga, both operators killed in the middle of it; every
// tenant goes, and no event of a tenant's life is recorded twice.
func TestOCIModeOperatorsRestartAndHeal(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const source = "eva-oci-heal"
	ref := registry.Host() + "/eva/heal:e2e"
	if err := bootstrapSource(ctx, "OCIRepository", source, "oci://"+registry.Host()+"/eva/heal", "e2e", "10m"); err != nil {
		t.Fatal(err)
	}
	args := []string{"--overlays=" + environment(t, gitOpsSource("OCIRepository", source)),
		"--publish=oci", "--oci-ref=oci://" + ref, "--oci-insecure"}
	watcher, err := client.NewWithWatch(cluster.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	shards := make([]*ociShard, 2)
	var all []*unstructured.Unstructured
	for i := range shards {
		s := &ociShard{ns: tenantNamespace(t, fmt.Sprintf("e2e-oci-heal-%d", i))}
		s.op = startOperator(t, s.ns, args...)
		for k := range i + 1 { // one tenant for the first operator, two for the second
			tn := evaTenant(s.ns, fmt.Sprintf("OHL%cA%c", 'A'+i, 'A'+k), evav1.TierStarter)
			if err := cluster.Client.Create(ctx, tn); err != nil {
				t.Fatal(err)
			}
			s.tenants = append(s.tenants, tn)
			all = append(all, tn)
		}
		shards[i] = s
	}
	restart := func(s *ociShard) { s.op.Kill(); s.op = startOperator(t, s.ns, args...) }
	killWhen(t, watcher, shards[0].op, shards[0].tenants[0], "NamespaceReady True", func(u *unstructured.Unstructured) bool {
		return conditionOf(u, evav1.ConditionNamespaceReady).Status == "True"
	})
	restart(shards[0])
	killWhen(t, watcher, shards[1].op, shards[1].tenants[0], "Provisioned True", func(u *unstructured.Unstructured) bool {
		return conditionOf(u, evav1.ConditionProvisioned).Status == "True"
	})
	restart(shards[1])
	for _, s := range shards {
		kubectlWaitReady(t, 6*time.Minute, s.tenants...)
	}
	restart(shards[0])
	restart(shards[1])

	dropped := shards[1].tenants[1]
	dir := render.DirName(codeOf(dropped))
	forcePushWithout(t, ref, dir)
	poll(t, "the tag to hold "+codeOf(dropped)+"'s files again", 2*time.Minute, func() error {
		// The operator looks at an Active tenant again at its drift check (minutes);
		// any change of its annotations wakes it now.
		if err := annotate(ctx, dropped, "e2e.eva.aidonow.com/poke", time.Now().Format(time.RFC3339Nano)); err != nil {
			return err
		}
		tree, err := (&publish.OCI{Ref: ref, Insecure: true}).Pull(ctx)
		if err != nil {
			return err
		}
		if _, ok := tree[render.TenantsDir+"/"+dir+"/"+render.ManifestsFile]; !ok {
			return fmt.Errorf("%s's files are not in the tag", codeOf(dropped))
		}
		return nil
	})
	head, err := (&publish.OCI{Ref: ref, Insecure: true}).Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Flux applies the operator's publish (it asked Flux to fetch it): every tenant's
	// Kustomizations move to an artifact one operator pushed and the other did not.
	poll(t, "Flux to apply "+head+" for every tenant", 3*time.Minute, func() error {
		for _, tn := range all {
			for _, name := range []string{render.FoundationName(codeOf(tn)), render.WorkloadsName(codeOf(tn))} {
				ks := &unstructured.Unstructured{}
				ks.SetGroupVersionKind(kustomizationGVK)
				if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: name}, ks); err != nil {
					return err
				}
				if rev, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision"); !strings.HasSuffix(rev, head) {
					return fmt.Errorf("Kustomization %s applied %q", name, rev)
				}
			}
		}
		return nil
	})
	stayReady(t, 5*time.Second, all...)
	for _, tn := range all {
		assertActive(t, tn)
		want := 0
		if tn == dropped {
			want = 1
		}
		if n, seen := countEvents(t, tn.GetNamespace(), tn.GetName(), status.EventRepublished); n != want {
			t.Errorf("%s: %d Republished events, want %d:\n%s", codeOf(tn), n, want, strings.Join(seen, "\n"))
		}
	}

	for _, tn := range all {
		if err := cluster.Client.Delete(ctx, tn); err != nil {
			t.Fatal(err)
		}
	}
	// Both operators are killed at once, when the first tenant's saga is under way (the
	// others were deleted with it).
	killWhen(t, watcher, shards[0].op, shards[0].tenants[0], "decommission saga under way", func(u *unstructured.Unstructured) bool {
		return conditionOf(u, evav1.ConditionReady).Reason == status.ReasonDecommissioning
	})
	restart(shards[1])
	shards[0].op = startOperator(t, shards[0].ns, args...)
	if got, err := current(ctx, shards[1].tenants[0]); err == nil {
		t.Logf("%s at the kill: %v", codeOf(got), conditionsOf(got))
	}
	waitGone(t, 5*time.Minute, all...)
	for _, tn := range all {
		for _, reason := range append(onceEvents, status.EventModuleDeployStarted) {
			if n, seen := countEvents(t, tn.GetNamespace(), tn.GetName(), reason); n > 1 {
				t.Errorf("%s: event %s recorded %d times:\n%s", codeOf(tn), reason, n, strings.Join(seen, "\n"))
			}
		}
	}
}

// forcePushWithout pushes over the tag an artifact of what it holds without one
// tenant's files, as someone pushing by hand would (the root kustomization unchanged).
func forcePushWithout(t *testing.T, ref, dir string) {
	t.Helper()
	tree, err := (&publish.OCI{Ref: ref, Insecure: true}).Pull(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for p := range tree {
		if publish.TenantOf(p) == dir {
			delete(tree, p)
		}
	}
	img, err := (&publish.OCI{Source: "by hand"}).Artifact(tree)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
}

// annotate sets one annotation of an object.
func annotate(ctx context.Context, u *unstructured.Unstructured, key, value string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
	return cluster.Client.Patch(ctx, u.DeepCopy(), client.RawPatch("application/merge-patch+json", patch))
}

// stayReady checks every tenant stays Ready for a while: a regression (an operator that
// misjudges what Flux applied) turns one Progressing within a reconcile.
func stayReady(t *testing.T, d time.Duration, tenants ...*unstructured.Unstructured) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(time.Second) {
		for _, tn := range tenants {
			got, err := current(context.Background(), tn)
			if err != nil {
				t.Fatal(err)
			}
			if ready := conditionOf(got, evav1.ConditionReady); ready.Status != "True" {
				t.Fatalf("%s left Ready: %s: %s", codeOf(got), ready.Reason, ready.Message)
			}
		}
	}
}

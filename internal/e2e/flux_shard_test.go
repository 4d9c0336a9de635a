package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
)

var ociRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"}

// TestFluxShardServesItsTenants runs a Flux shard beside the main controllers (which
// leave sharded objects alone) and an operator in GitOps mode whose environment sends
// its tenants to that shard (fluxShards): the shard's kustomize-, helm- and
// source-controller bring a tenant to Active, its Kustomizations, HelmReleases and
// OCIRepositories (one per module chart) labelled with the shard (which objects carry the key,
// for every tier, is internal/render's test). Then the tenant is moved to the main
// controllers (fluxShards.assign, the operator restarted on the new
// environment): its objects lose the label, the main controllers take them over, and
// the tenant is Active with its Helm releases not installed or upgraded again. (The
// move changes each HelmRelease's and OCIRepository's labels: the main helm-controller
// reconciles it once and finds it in sync, the tenant Progressing meanwhile.)
func TestFluxShardServesItsTenants(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const shardName, source = "e2e1", "eva-flux-shard"
	stopShard, err := cluster.StartFluxShard(shardName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stopShard) // after the tenants are gone: the shard prunes them
	url := newGitRepository(t, source+".git")
	if err := bootstrapSource(ctx, "GitRepository", source, url, "main", "10m"); err != nil {
		t.Fatal(err)
	}
	ns := tenantNamespace(t, "e2e-flux-shard")
	args := func(shards map[string]any) []string {
		settings := gitOpsSource("GitRepository", source)
		settings["fluxShards"] = shards
		return []string{"--overlays=" + environment(t, settings),
			"--publish=git", "--git-url=" + url, "--git-branch=main", "--git-cache=" + t.TempDir()}
	}
	op := startOperator(t, ns, args(map[string]any{"shards": []string{shardName}})...)
	moved := evaTenant(ns, "FSHAAB", evav1.TierStarter)
	if err := cluster.Client.Create(ctx, moved); err != nil {
		t.Fatal(err)
	}
	kubectlWaitReady(t, 6*time.Minute, moved)
	assertActive(t, moved)
	assertFluxShard(t, codeOf(moved), shardName)
	versions := releaseVersions(t, codeOf(moved))
	sources := chartArtifacts(t, codeOf(moved))

	op.Kill()
	startOperator(t, ns, args(map[string]any{"shards": []string{shardName}, "assign": map[string]any{codeOf(moved): ""}})...)
	poll(t, codeOf(moved)+"'s Flux objects moved to the main controllers", 3*time.Minute, func() error {
		return fluxShardOf(codeOf(moved), "")
	})
	// The main source-controller does not hold the shard's artifacts: it fetches each
	// chart again (its own artifact URL), and until it has, the release's source is not
	// ready. The tenant may still read Ready from before the move meanwhile (once, in a
	// full suite, kubectl wait returned at once and itsm was SourceNotReady just after).
	poll(t, codeOf(moved)+"'s charts fetched again by the main source-controller", 3*time.Minute, func() error {
		now := chartArtifacts(t, codeOf(moved))
		for name, url := range sources {
			if now[name] == "" || now[name] == url {
				return fmt.Errorf("OCIRepository %s: artifact %q, the shard's was %q", name, now[name], url)
			}
		}
		return allReady(ctx, helmReleaseGVK, len(versions), client.InNamespace(tenant.Namespace(codeOf(moved))))
	})
	kubectlWaitReady(t, 3*time.Minute, moved)
	assertActive(t, moved)
	if after := releaseVersions(t, codeOf(moved)); fmt.Sprint(after) != fmt.Sprint(versions) {
		t.Errorf("%s: Helm release versions %v after the move, %v before: the main helm-controller installed or upgraded them again", codeOf(moved), after, versions)
	}
	deleteAndWaitGone(t, 5*time.Minute, moved)
}

// assertFluxShard checks every Flux object of a tenant carries the shard key.
func assertFluxShard(t *testing.T, code, shard string) {
	t.Helper()
	if err := fluxShardOf(code, shard); err != nil {
		t.Error(err)
	}
}

// fluxShardOf says which of a tenant's Flux objects (its two Kustomizations, its
// HelmReleases and OCIRepositories) do not carry the shard key shard ("": no
// key), or nil.
func fluxShardOf(code, shard string) error {
	ctx := context.Background()
	var objects []unstructured.Unstructured
	for _, name := range []string{render.FoundationName(code), render.WorkloadsName(code)} {
		ks := unstructured.Unstructured{}
		ks.SetGroupVersionKind(kustomizationGVK)
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: name}, &ks); err != nil {
			return err
		}
		objects = append(objects, ks)
	}
	for _, gvk := range []schema.GroupVersionKind{helmReleaseGVK, ociRepositoryGVK} {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := cluster.Client.List(ctx, list, client.InNamespace(tenant.Namespace(code))); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("%s: no %s", code, gvk.Kind)
		}
		objects = append(objects, list.Items...)
	}
	for _, o := range objects {
		if got := o.GetLabels()[testcluster.FluxShardKey]; got != shard {
			return fmt.Errorf("%s %s/%s: shard key %q, want %q", o.GetKind(), o.GetNamespace(), o.GetName(), got, shard)
		}
	}
	return nil
}

// chartArtifacts is the artifact URL of each of a tenant's chart sources (its
// OCIRepositories), "" for one without an artifact: whose storage serves it.
func chartArtifacts(t *testing.T, code string) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(ociRepositoryGVK.GroupVersion().WithKind("OCIRepositoryList"))
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(tenant.Namespace(code))); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()], _, _ = unstructured.NestedString(o.Object, "status", "artifact", "url")
	}
	return out
}

// releaseVersions is the Helm release version of each of a tenant's HelmReleases, as
// helm-controller records it (status.history[0].version).
func releaseVersions(t *testing.T, code string) map[string]int64 {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(tenant.Namespace(code))); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, hr := range list.Items {
		history, _, _ := unstructured.NestedSlice(hr.Object, "status", "history")
		if len(history) > 0 {
			v, _, _ := unstructured.NestedInt64(history[0].(map[string]any), "version")
			out[hr.GetName()] = v
		}
	}
	return out
}

package cli

import (
	"bytes"
	"context"
	"path"
	"path/filepath"
	"strings"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

// cellCluster is one cell's API server for the move tests, with the Flux and add-on
// CRDs. No Flux runs there: the test plays what a cell's Flux and controllers would do
// with the files evactl published (fluxStandIn), named as the stand-in it is.
type cellCluster struct {
	c          client.Client
	kubeconfig string
}

func startCellCluster(t *testing.T) cellCluster {
	t.Helper()
	crds := filepath.Join(repoRoot, "internal", "testenv", "crds")
	env, err := testenv.Start(filepath.Join(crds, "flux"), filepath.Join(crds, "addons"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.KubeConfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cellClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}); err != nil {
		t.Fatal(err)
	}
	return cellCluster{c: c, kubeconfig: kubeconfig}
}

// fluxStandIn applies, as a cell's Flux would, the tenant's files of the cell's tree at
// a revision (read returns a file of that tree; revision is the revision as Flux names
// it), and plays the controllers that make it healthy: the streams, releases and seed
// Job report Ready or Complete, the Ingress gets an address, and both Kustomizations
// applied the revision. What Flux would prune is the test's to delete.
func (cc cellCluster) fluxStandIn(t *testing.T, read func(file string) string, code, revision string) {
	t.Helper()
	ctx := context.Background()
	dir := path.Join(render.TenantsDir, render.DirName(code))
	var objects []*unstructured.Unstructured
	for _, file := range []string{path.Join(dir, render.ManifestsFile), path.Join(dir, render.WorkloadsDir, render.ManifestsFile),
		path.Join(render.FluxDir, render.DirName(code)+".yaml")} {
		data := read(file)
		for doc := range strings.SplitSeq(data, "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(u.Object) > 0 {
				objects = append(objects, u)
			}
		}
	}
	for _, u := range objects {
		if err := cc.c.Patch(ctx, u, client.Apply, client.FieldOwner("flux-stand-in"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	ns := tenant.Namespace(code)
	for _, u := range objects {
		key := types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}
		ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "StandIn", Message: "the test's stand-in", LastTransitionTime: metav1.Now()}
		var obj client.Object
		switch u.GetKind() {
		case "Stream":
			st := &nackv1beta2.Stream{}
			get(t, cc.c, key, st)
			apimeta.SetStatusCondition(&st.Status.Conditions, ready)
			obj = st
		case "HelmRelease":
			hr := &helmv2.HelmRelease{}
			get(t, cc.c, key, hr)
			ready.ObservedGeneration = hr.Generation
			hr.Status.ObservedGeneration, hr.Status.LastAttemptedGeneration = hr.Generation, hr.Generation
			hr.Status.LastAttemptedRevision = render.ReleaseChartVersion(hr)
			apimeta.SetStatusCondition(&hr.Status.Conditions, ready)
			obj = hr
		case "Job":
			job := &batchv1.Job{}
			get(t, cc.c, key, job)
			now := metav1.Now()
			job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
			job.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
			}
			obj = job
		case "Ingress":
			ing := &networkingv1.Ingress{}
			get(t, cc.c, key, ing)
			ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.10"}}
			obj = ing
		case kustomizev1.KustomizationKind:
			ks := &kustomizev1.Kustomization{}
			get(t, cc.c, key, ks)
			ready.ObservedGeneration = ks.Generation
			ks.Status.ObservedGeneration = ks.Generation
			ks.Status.LastAppliedRevision = revision
			apimeta.SetStatusCondition(&ks.Status.Conditions, ready)
			obj = ks
		default:
			continue
		}
		if err := cc.c.Status().Update(ctx, obj); err != nil {
			t.Fatalf("status of %s %s/%s: %v", u.GetKind(), ns, u.GetName(), err)
		}
	}
}

// applied plays the cell's Flux applying revision (as Flux names it) through the tenant's Kustomizations
// (what it prunes is the test's to delete).
func (cc cellCluster) applied(t *testing.T, code, revision string) {
	t.Helper()
	for _, name := range []string{render.FoundationName(code), render.WorkloadsName(code)} {
		ks := &kustomizev1.Kustomization{}
		get(t, cc.c, types.NamespacedName{Namespace: "flux-system", Name: name}, ks)
		ks.Status.LastAppliedRevision = revision
		if err := cc.c.Status().Update(context.Background(), ks); err != nil {
			t.Fatal(err)
		}
	}
}

// prune deletes objects of the tenant's namespace, as the cell's Flux prunes what a
// revision no longer holds.
func (cc cellCluster) prune(t *testing.T, objects ...client.Object) {
	t.Helper()
	for _, obj := range objects {
		if err := cc.c.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
}

func get(t *testing.T, c client.Client, key types.NamespacedName, obj client.Object) {
	t.Helper()
	if err := c.Get(context.Background(), key, obj); err != nil {
		t.Fatalf("reading %T %s: %v", obj, key, err)
	}
}

// hasKind says whether a YAML stream holds an object of kind.
func hasKind(data, kind string) bool {
	return bytes.Contains([]byte(data), []byte("\nkind: "+kind+"\n")) || strings.HasPrefix(data, "kind: "+kind+"\n")
}

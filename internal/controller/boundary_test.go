package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testenv"
)

var applyBaseOnce sync.Once

// applyOperatorBase applies the operator's deployment for dev (kustomize build of
// overlays/dev: base/ and the environment) to the API server: its ClusterRole, Role and
// bindings, the deployer ClusterRole, the admission policies and their parameters,
// exactly as a user installs them.
func applyOperatorBase(t *testing.T) {
	t.Helper()
	var err error
	applyBaseOnce.Do(func() { err = installOperatorBase(env, k8s) })
	if err != nil {
		t.Fatal(err)
	}
}

// installOperatorBase applies overlays/dev to the API server of e (k is its client, as
// an administrator) and waits until its admission policies are enforced.
func installOperatorBase(e *testenv.Env, k client.Client) error { return installOverlay(e, k, "dev") }

// installOverlay applies overlays/<env> to the API server of e, as installOperatorBase.
func installOverlay(e *testenv.Env, k client.Client, env string) error {
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), testenv.RepoRoot()+"/overlays/"+env)
	if err != nil {
		return err
	}
	var objects []*unstructured.Unstructured
	for _, res := range resources.Resources() {
		m, err := res.Map()
		if err != nil {
			return err
		}
		objects = append(objects, &unstructured.Unstructured{Object: m})
	}
	// Flux's namespace exists wherever the operator is installed (base/ binds a Role
	// there).
	fluxNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "flux-system"}}
	if err := k.Create(context.Background(), fluxNS); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, u := range objects {
		if err := k.Patch(context.Background(), u, client.Apply, client.FieldOwner("eva-test-install"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	// The admission policy takes effect a moment after it is created: wait until a
	// request it alone refuses is refused.
	return waitFenceActive(e, k)
}

// waitFenceActive waits until the API server enforces the admission policies that hold
// the operator (its fence, and the shapes of tenant objects every writer is held to),
// probing each with a server-side dry run that only that policy refuses: a policy takes
// effect a moment after it is created, and a test that ran first would see it admit.
func waitFenceActive(e *testenv.Env, k8s client.Client) error {
	ctx := context.Background()
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: testenv.OperatorServiceAccount}
	c, err := client.New(cfg, client.Options{Scheme: NewScheme()})
	if err != nil {
		return err
	}
	const probeNS = "eva-tenant-fnprob"
	if err := k8s.Create(ctx, restrictedNamespace(probeNS)); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	stream := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "jetstream.nats.io/v1beta2", "kind": "Stream",
		"metadata": map[string]any{"namespace": probeNS, "name": "probe"},
		"spec":     map[string]any{"name": "eva-GLOBEX-probe", "subjects": []any{"capsule.FNPROB.x"}}}}
	probes := map[string]client.Object{
		"eva-operator-tenant-fence": &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "fence-probe"}},
		"eva-tenant-workloads":      &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "eva-tenant-fnpsa"}},
		"eva-tenant-ingresses": &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: probeNS, Name: "probe"},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: "probe.example.com"}}}},
		"eva-tenant-streams": stream,
	}
	deadline := time.Now().Add(30 * time.Second)
	for policy, probe := range probes {
		for {
			err := c.Create(ctx, probe.DeepCopyObject().(client.Object), client.DryRunAll)
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "'"+policy+"'") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the admission policy %s is not enforced after 30s: %v", policy, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// startOperatorProcess runs the eva-operator binary for a version, as its deployed
// service account (impersonated), accepting tenants from the claims namespace only.
func startOperatorProcess(t *testing.T, version string, extraArgs ...string) *testenv.Process {
	t.Helper()
	applyOperatorBase(t)
	kubeconfig := env.KubeConfigAs(t, testenv.OperatorServiceAccount)
	args := append([]string{"--overlays=overlays", "--env=dev", "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--concurrency=2"}, extraArgs...)
	return testenv.StartOperator(t, kubeconfig, []string{"OPERATOR_VERSION=" + version, "POD_NAMESPACE=" + claimsNamespace}, args...)
}

// renderedKinds are the kinds of a tenant's objects in pure-cluster mode.
var renderedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "ResourceQuota"},
	{Version: "v1", Kind: "LimitRange"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "helm.toolkit.fluxcd.io", Version: "v2", Kind: "HelmRelease"},
	{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "OCIRepository"},
	{Group: "jetstream.nats.io", Version: "v1beta2", Kind: "Stream"},
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"},
}

// capsuleObjects lists every object carrying a capsule's label, keyed "Kind ns/name".
func capsuleObjects(code string) (map[string]unstructured.Unstructured, error) {
	out := map[string]unstructured.Unstructured{}
	for _, gvk := range renderedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := k8s.List(context.Background(), list, client.MatchingLabels{tenant.LabelCapsule: code}); err != nil {
			return nil, err
		}
		for _, u := range list.Items {
			out[gvk.Kind+" "+u.GetNamespace()+"/"+u.GetName()] = u
		}
	}
	return out, nil
}

// objectVersions maps each object carrying a capsule's label to its resourceVersion.
func objectVersions(code string) (map[string]string, error) {
	objects, err := capsuleObjects(code)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for ref, u := range objects {
		if u.GetDeletionTimestamp() != nil {
			return nil, fmt.Errorf("%s is being deleted", ref)
		}
		out[ref] = u.GetResourceVersion()
	}
	return out, nil
}

func sameVersions(want map[string]string) func() error {
	return func() error {
		got, err := objectVersions("GLOBEX")
		if err != nil {
			return err
		}
		for ref, rv := range want {
			if got[ref] != rv {
				return fmt.Errorf("%s changed: resourceVersion %s → %q (%s)", ref, rv, got[ref], writers("GLOBEX", ref))
			}
		}
		if len(got) != len(want) {
			return fmt.Errorf("owner has %d objects, had %d", len(got), len(want))
		}
		return nil
	}
}

// writers names who last wrote an object of a capsule (ref as objectVersions keys it):
// each field manager, its operation and time, for a failure message.
func writers(code, ref string) string {
	objects, err := capsuleObjects(code)
	if err != nil {
		return err.Error()
	}
	var out []string
	if u, ok := objects[ref]; ok {
		for _, mf := range u.GetManagedFields() {
			out = append(out, fmt.Sprintf("%s %s %s at %s", mf.Manager, mf.Operation, mf.Subresource, mf.Time))
		}
		out = append(out, fmt.Sprintf("annotations %v", u.GetAnnotations()))
	}
	var tenants evav1.EvaTenantList
	if err := k8s.List(context.Background(), &tenants); err == nil {
		for _, tn := range tenants.Items {
			if tn.Spec.CapsuleCode == code {
				out = append(out, fmt.Sprintf("tenant %s/%s uid %s generation %d applied %s", tn.Namespace, tn.Name, tn.UID, tn.Generation, tn.Status.AppliedDigest))
			}
		}
	}
	return strings.Join(out, "; ")
}

// withValidImpostorValues are values the validator accepts, so only the code's claim
// stands between the impostor and the owner's releases.
func withValidImpostorValues(tn *evav1.EvaTenant) {
	tn.Spec.HelmValues = map[string]apiextensionsv1.JSON{"crm": {Raw: []byte(`{"replicaCount":3,"logLevel":"debug"}`)}}
}

func withImpostorValues(tn *evav1.EvaTenant) {
	tn.Spec.HelmValues = map[string]apiextensionsv1.JSON{
		"crm": {Raw: []byte(`{"image":{"repository":"evil.example.com/x","tag":"latest"},"replicaCount":7}`)},
	}
}

// waitStalledBy waits until an impostor is refused, naming the owner.
func waitStalledBy(t *testing.T, impostor *evav1.EvaTenant, owner string) {
	t.Helper()
	eventually(t, waitFor, impostor.Name+" refused", func() error {
		var got evav1.EvaTenant
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(impostor), &got); err != nil {
			return err
		}
		c := condition(&got, evav1.ConditionStalled)
		if c.Status != "True" || c.Reason != status.ReasonCapsuleCodeInUse || !strings.Contains(c.Message, owner) {
			return fmt.Errorf("Stalled: %s %s %q", c.Status, c.Reason, c.Message)
		}
		if len(got.Finalizers) != 0 {
			return fmt.Errorf("impostor holds finalizers %v", got.Finalizers)
		}
		return nil
	})
}

// TestImpostorCannotTakeOverCode plays the takeover of issue 10 against the operator
// binary running as its service account: an EvaTenant claiming the code of an existing,
// deletion-protected tenant changes none of the owner's objects, is Stalled naming the
// owner, and deleting it deletes nothing; the same when a second operator version
// handles the impostor, after a SIGKILL of the first, and from a namespace the
// platform does not accept tenants from.
func TestImpostorCannotTakeOverCode(t *testing.T) {
	ctx := context.Background()
	v1 := startOperatorProcess(t, "1.0.0")
	t.Cleanup(func() { purgeTenants(t, claimsNamespace) })

	owner := newTenant(claimsNamespace, "GLOBEX", evav1.TierStarter, func(tn *evav1.EvaTenant) { tn.Spec.DeletionProtection = true })
	createTenant(t, owner)
	owner = getTenant(t, owner)
	var before map[string]string
	eventually(t, waitFor, "owner's bundle applied", func() error {
		var err error
		if before, err = objectVersions("GLOBEX"); err != nil {
			return err
		}
		var hrs helmv2.HelmReleaseList
		if err := k8s.List(ctx, &hrs, client.InNamespace(tenant.Namespace("GLOBEX"))); err != nil {
			return err
		}
		// The snapshot is taken once the whole bundle is applied (the apply recorded its
		// digest and inventory), or later applies of the owner's own would count as the
		// impostor's doing.
		var current evav1.EvaTenant
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(owner), &current); err != nil {
			return err
		}
		if current.Status.AppliedDigest == "" || len(before) != len(current.Status.Inventory) || len(hrs.Items) != 2 {
			return fmt.Errorf("%d releases, %d objects, %d in the inventory", len(hrs.Items), len(before), len(current.Status.Inventory))
		}
		for _, hr := range hrs.Items {
			if hr.Annotations[claim.AnnotationOwnerUID] != string(owner.UID) {
				return fmt.Errorf("release %s not stamped with the owner's uid", hr.Name)
			}
		}
		return nil
	})
	// The owner's objects must also have settled (no write for 3s), or a late apply of
	// the owner's own, seen under a loaded machine, would count as the impostor's doing.
	eventually(t, waitFor, "owner's objects settled", func() error {
		time.Sleep(3 * time.Second)
		if err := sameVersions(before)(); err != nil {
			before, _ = objectVersions("GLOBEX")
			return err
		}
		return nil
	})
	impostor := newTenant(claimsNamespace, "GLOBEX", evav1.TierStarter, withValidImpostorValues)
	impostor.Name = "notglobex"
	createTenant(t, impostor)
	waitStalledBy(t, impostor, claimsNamespace+"/globex")
	consistently(t, "owner untouched by the impostor", sameVersions(before))

	if err := k8s.Delete(ctx, impostor); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "impostor gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(impostor), &evav1.EvaTenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	consistently(t, "owner untouched after the impostor's deletion", sameVersions(before))

	// A second operator version, and the first one killed: the claim lives in the
	// cluster, not in the first operator's memory.
	startOperatorProcess(t, "2.0.0")
	v1.Kill()
	second := newTenant(claimsNamespace, "GLOBEX", evav1.TierStarter, withImpostorValues,
		func(tn *evav1.EvaTenant) { tn.Name, tn.Spec.OperatorVersion = "globex-two", "2.0.0" })
	createTenant(t, second)
	waitStalledBy(t, second, claimsNamespace+"/globex")
	if got := getTenant(t, second); got.Annotations[tenant.AnnotationOperatorVersion] != "" {
		t.Errorf("the impostor was claimed for operator version %q", got.Annotations[tenant.AnnotationOperatorVersion])
	}
	if err := k8s.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	consistently(t, "owner untouched by the second version's impostor", sameVersions(before))

	// Not an accepted namespace: ignored with an event, nothing written.
	foreign := newTenant(newTestNamespace(t), "GLOBEX", evav1.TierStarter, withImpostorValues)
	createTenant(t, foreign)
	eventually(t, waitFor, "NamespaceNotAllowed event", func() error {
		if reasons := eventReasons(t, foreign); !slices.Contains(reasons, status.ReasonNamespaceNotAllowed) {
			return fmt.Errorf("events %v", reasons)
		}
		return nil
	})
	if got := getTenant(t, foreign); len(got.Finalizers) != 0 || len(got.Status.Conditions) != 0 {
		t.Errorf("a tenant outside the accepted namespaces was processed: finalizers %v, conditions %v", got.Finalizers, got.Status.Conditions)
	}
	consistently(t, "owner untouched by a tenant in another namespace", sameVersions(before))

	// The owner's operator, restarted after its SIGKILL, still owns the code and still
	// refuses to delete a protected tenant.
	startOperatorProcess(t, "1.0.0")
	if err := k8s.Delete(ctx, getTenant(t, owner)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, "owner's deletion refused", func() error {
		got := getTenant(t, owner)
		if c := condition(got, evav1.ConditionReady); c.Reason != status.ReasonDeletionProtected {
			return fmt.Errorf("Ready: %s %q", c.Reason, c.Message)
		}
		return nil
	})
	var ns corev1.Namespace
	if err := k8s.Get(ctx, types.NamespacedName{Name: tenant.Namespace("GLOBEX")}, &ns); err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("owner's namespace: %v, deleting %v", err, ns.DeletionTimestamp)
	}
}

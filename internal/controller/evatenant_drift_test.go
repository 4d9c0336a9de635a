package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
)

// writeLog records the operator's API writes to one tenant namespace and its objects.
type writeLog struct {
	ns     string
	mu     sync.Mutex
	writes []string
}

// add describes a write to be logged; the entry is logged when the returned function
// runs (after the API server answered), described as the object was sent.
func (l *writeLog) add(verb string, o client.Object) func() {
	inTenant := o.GetNamespace() == l.ns || (o.GetNamespace() == "" && o.GetName() == l.ns)
	if !inTenant {
		return func() {}
	}
	kind := o.GetObjectKind().GroupVersionKind().Kind
	if kind == "" {
		kind = fmt.Sprintf("%T", o)
	}
	entry := verb + " " + kind + " " + o.GetName()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.writes = append(l.writes, entry)
	}
}

func (l *writeLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(slices.Values(l.writes))
}

// recordingClient is the operator's client with its writes logged.
type recordingClient struct {
	client.Client
	log *writeLog
}

// Each write is logged once the API server answered it, so a test that sees it in the
// log also sees its effect on the server.
func (c recordingClient) Create(ctx context.Context, o client.Object, opts ...client.CreateOption) error {
	defer c.log.add("create", o)()
	return c.Client.Create(ctx, o, opts...)
}
func (c recordingClient) Update(ctx context.Context, o client.Object, opts ...client.UpdateOption) error {
	defer c.log.add("update", o)()
	return c.Client.Update(ctx, o, opts...)
}
func (c recordingClient) Patch(ctx context.Context, o client.Object, p client.Patch, opts ...client.PatchOption) error {
	if !isDryRun(opts) {
		defer c.log.add("patch", o)()
	}
	return c.Client.Patch(ctx, o, p, opts...)
}

// isDryRun says whether a patch is a dry run: an API request, but no write.
func isDryRun(opts []client.PatchOption) bool {
	return slices.ContainsFunc(opts, func(o client.PatchOption) bool { return o == client.DryRunAll })
}
func (c recordingClient) Delete(ctx context.Context, o client.Object, opts ...client.DeleteOption) error {
	defer c.log.add("delete", o)()
	return c.Client.Delete(ctx, o, opts...)
}

// testClock is a clock a test moves forward.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// TestDriftCheckWritesOnlyWhatDrifted: a restarted operator looks at an Active tenant
// and writes none of its objects (dry runs are not writes); objects edited or deleted by
// hand are re-applied at the next drift check, they alone, with an event naming them,
// and hold the bundle again.
func TestDriftCheckWritesOnlyWhatDrifted(t *testing.T) {
	ctx := context.Background()
	ns := newTestNamespace(t)
	op := startOperator(t, "")
	tn := newTenant(ns, "DRIFTY", evav1.TierEnterprise)
	createTenant(t, tn)
	startStandIn(t)
	got := waitPhase(t, tn, evav1.PhaseActive)
	op.stop()

	tenantNS := tenant.Namespace(tn.Spec.CapsuleCode)
	log := &writeLog{ns: tenantNS}
	clock := &testClock{}
	var restarted *EvaTenantReconciler
	startOperatorWith(t, "", func(r *EvaTenantReconciler, _ ctrl.Manager) {
		r.Client = recordingClient{r.Client, log}
		r.Now = clock.now
		restarted = r
	})
	eventually(t, time.Minute, "the restarted operator's first look", func() error {
		if _, ok := restarted.lastApply.Load(got.UID); !ok {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if w := log.list(); len(w) > 0 {
		t.Fatalf("the restarted operator wrote to an unchanged tenant: %v", w)
	}

	// Drift: a limit raised by hand, a label removed, the isolation narrowed to some
	// pods (every other pod open), a service account deleted.
	var lr corev1.LimitRange
	key := types.NamespacedName{Namespace: tenantNS, Name: render.LimitRangeName}
	if err := k8s.Get(ctx, key, &lr); err != nil {
		t.Fatal(err)
	}
	want := lr.Spec.Limits[0].Default[corev1.ResourceCPU]
	lr.Spec.Limits[0].Default[corev1.ResourceCPU] = resource.MustParse("900m") // within every tier's max
	if err := k8s.Update(ctx, &lr, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	var hr helmv2.HelmRelease
	if err := k8s.Get(ctx, refKey(t, got, "HelmRelease"), &hr); err != nil {
		t.Fatal(err)
	}
	delete(hr.Labels, tenant.LabelTier)
	if err := k8s.Update(ctx, &hr, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	np := &networkingv1.NetworkPolicy{}
	if err := k8s.Get(ctx, refKey(t, got, "NetworkPolicy"), np); err != nil {
		t.Fatal(err)
	}
	np.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"isolated": "yes"}}
	if err := k8s.Update(ctx, np, client.FieldOwner("kubectl-edit")); err != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{}
	if err := k8s.Get(ctx, refKey(t, got, "ServiceAccount"), sa); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, sa); err != nil {
		t.Fatal(err)
	}

	// Not due yet: a reconcile (woken by an annotation) leaves them.
	poke(t, tn, "1")
	consistently(t, "no check before it is due", func() error {
		if w := log.list(); len(w) > 0 {
			return fmt.Errorf("wrote %v", w)
		}
		return nil
	})

	clock.advance(ResyncActive + time.Minute)
	poke(t, tn, "2") // stands for the resync timer, which runs on the real clock
	wantWrites := []string{"patch LimitRange " + render.LimitRangeName, "patch NetworkPolicy " + np.Name,
		"patch HelmRelease " + hr.Name, "patch ServiceAccount " + sa.Name}
	slices.Sort(wantWrites)
	eventually(t, time.Minute, "the drifted objects re-applied", func() error {
		if w := log.list(); !slices.Equal(w, wantWrites) {
			return fmt.Errorf("writes %v, want %v", w, wantWrites)
		}
		return nil
	})
	if err := k8s.Get(ctx, key, &lr); err != nil {
		t.Fatal(err)
	}
	if cpu := lr.Spec.Limits[0].Default[corev1.ResourceCPU]; cpu.Cmp(want) != 0 {
		t.Errorf("LimitRange default cpu %s, want %s", cpu.String(), want.String())
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: hr.Namespace, Name: hr.Name}, &hr); err != nil {
		t.Fatal(err)
	}
	if hr.Labels[tenant.LabelTier] != string(evav1.TierEnterprise) {
		t.Errorf("HelmRelease labels %v: the tier label is not back", hr.Labels)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenantNS, Name: np.Name}, np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.PodSelector.MatchLabels) > 0 {
		t.Errorf("NetworkPolicy still selects only %v", np.Spec.PodSelector.MatchLabels)
	}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: tenantNS, Name: sa.Name}, sa); err != nil {
		t.Errorf("ServiceAccount not re-created: %v", err)
	}
	eventually(t, 30*time.Second, "a DriftCorrected event", func() error {
		if !slices.Contains(eventReasons(t, tn), "DriftCorrected") {
			return fmt.Errorf("events %v", eventReasons(t, tn))
		}
		return nil
	})
	consistently(t, "nothing more written", func() error {
		if w := log.list(); len(w) != len(wantWrites) {
			return fmt.Errorf("writes %v", w)
		}
		return nil
	})
}

// refKey finds the tenant's object of a kind in its inventory.
func refKey(t *testing.T, tn *evav1.EvaTenant, kind string) types.NamespacedName {
	t.Helper()
	for _, ref := range tn.Status.Inventory {
		if ref.Kind == kind {
			return types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}
		}
	}
	t.Fatalf("no %s in the inventory of %s: %v", kind, tn.Name, tn.Status.Inventory)
	return types.NamespacedName{}
}

// poke changes an annotation of the tenant, which wakes its reconcile without changing
// what it renders.
func poke(t *testing.T, tn *evav1.EvaTenant, value string) {
	t.Helper()
	cur := getTenant(t, tn)
	patch := client.MergeFrom(cur.DeepCopy())
	if cur.Annotations == nil {
		cur.Annotations = map[string]string{}
	}
	cur.Annotations["test.example.com/poke"] = value
	if err := k8s.Patch(context.Background(), cur, patch); err != nil {
		t.Fatal(err)
	}
}

package e2e

import (
	"context"
	"fmt"
	authorizationv1 "k8s.io/api/authorization/v1"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/tenant"
)

// TestRequesterBacklogDoesNotHoldTheRelease: on the real cluster, with the chart's
// policies and real helm-controller, a requester's tenant in wave 1 whose workload keeps
// a backlog once the release reaches it (messages published into its own JetStream
// stream, measured by the operator) is set aside after readyTimeout: the rollout says
// so (setAsideAt, a TenantSetAside event) and waves 2 and 3 get the release. Before, it
// halted there for every tenant of the namespace. The requester may not annotate its
// tenant with an operator version either (the chart's eva-tenant-metadata-guard).
func TestRequesterBacklogDoesNotHoldTheRelease(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := tenantNamespace(t, "e2e-fair")
	pushCrmVersions(t)
	startOperator(t, ns, "--nats-url="+cluster.MessagingURL, "--queue-depth-interval=1s")
	waveOf := map[string]int{"FAIRPA": 1, "FAIRRQ": 1, "FAIRWB": 2, "FAIRWC": 3}
	var tenants []*unstructured.Unstructured
	for code, w := range waveOf {
		tn := evaTenant(ns, code, evav1.TierStarter)
		if err := unstructured.SetNestedField(tn.Object, int64(w), "spec", "wave"); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Client.Create(ctx, tn); err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, tn)
	}
	kubectlWaitReady(t, 5*time.Minute, tenants...)
	requesterMayNotClaimAnOperatorVersion(t, ns, "fairrq")

	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eva.aidonow.com/v1alpha1", "kind": "EvaRollout",
		"metadata": map[string]any{"namespace": ns, "name": "crm-fair"},
		"spec": map[string]any{"versions": map[string]any{"crm": crmFixed},
			"gates": map[string]any{"readyTimeout": "30s", "maxQueueDepth": int64(10)},
			"waves": []any{map[string]any{"wave": int64(1), "bakeTime": "20s"}, map[string]any{"wave": int64(2)}, map[string]any{"wave": int64(3)}}},
	}}
	if err := cluster.Client.Create(ctx, ro); err != nil {
		t.Fatal(err)
	}
	poll(t, "the platform's wave-1 tenant judged Ready on the release", 4*time.Minute, func() error {
		st := rolloutStatus(t, ns, "crm-fair")
		for _, e := range firstWave(st).Updated {
			if e.Code == "FAIRPA" && e.ReadyAt != nil {
				return nil
			}
		}
		return fmt.Errorf("%s: %s", st.Phase, st.Message)
	})
	publishBacklog(t, "FAIRRQ", 50) // the requester's workload stops consuming

	done := waitRollout(t, ns, "crm-fair", 5*time.Minute, evav1.RolloutComplete)
	var aside *evav1.RolloutTenant
	for i, e := range firstWave(done).Updated {
		if e.Code == "FAIRRQ" {
			aside = &firstWave(done).Updated[i]
		}
	}
	if aside == nil || aside.SetAsideAt == nil || !strings.Contains(aside.Reason, "FAIRRQ queue depth 50 above 10") {
		t.Fatalf("the requester's tenant in wave 1: %+v", aside)
	}
	for code, v := range crmVersions(t, waveOf) {
		if v != crmFixed {
			t.Errorf("%s (wave %d): crm %s, want %s", code, waveOf[code], v, crmFixed)
		}
	}
	var events eventsv1.EventList
	if err := cluster.Client.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range events.Items {
		if e.Regarding.Name == "crm-fair" {
			reasons = append(reasons, e.Reason)
		}
	}
	if !strings.Contains(strings.Join(reasons, ","), "TenantSetAside") || strings.Contains(strings.Join(reasons, ","), "RolloutHalted") {
		t.Errorf("the rollout's events %v: want TenantSetAside and no RolloutHalted", reasons)
	}
}

func firstWave(st evav1.EvaRolloutStatus) *evav1.WaveStatus {
	if len(st.Waves) == 0 {
		return &evav1.WaveStatus{}
	}
	return &st.Waves[0]
}

// publishBacklog publishes n messages on the tenant's own events subject, into its
// events stream, which nothing consumes.
func publishBacklog(t *testing.T, code string, n int) {
	t.Helper()
	nc, err := nats.Connect(cluster.MessagingURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	subject := strings.TrimSuffix(tenant.EventsSubject(code), ">") + "orders"
	for i := range n {
		if _, err := js.Publish(subject, fmt.Appendf(nil, "order %d", i)); err != nil {
			t.Fatalf("publishing into %s: %v", tenant.EventsStream(code), err)
		}
	}
}

// requesterMayNotClaimAnOperatorVersion: a requester allowed to edit the namespace's
// EvaTenants is refused, by the chart's policy on the real API server, an annotation
// naming the operator version that serves its tenant.
func requesterMayNotClaimAnOperatorVersion(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	grantTenantEditing(t, ns, "rita")
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "rita", Groups: []string{"eva:tenant-requesters", "system:authenticated"}}
	rita, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tn := &unstructured.Unstructured{}
	tn.SetAPIVersion("eva.aidonow.com/v1alpha1")
	tn.SetKind("EvaTenant")
	if err := rita.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tn); err != nil {
		t.Fatal(err)
	}
	tn.SetAnnotations(map[string]string{tenant.AnnotationOperatorVersion: "9.9.9"})
	err = rita.Update(ctx, tn)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "eva-tenant-metadata-guard") {
		t.Fatalf("a requester annotating its tenant with an operator version: %v", err)
	}
}

// grantTenantEditing lets user edit the EvaTenants of namespace ns, as a platform gives
// a team its requester namespace.
func grantTenantEditing(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-editor"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{evav1.GroupVersion.Group}, Resources: []string{"evatenants"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evatenant-editor-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := cluster.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// The API server's authorizer learns of the binding through an informer: ask it
	// until it agrees, so that the user's first request is not refused for want of it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update",
				Group: evav1.GroupVersion.Group, Resource: "evatenants"}}}
		if err := cluster.Client.Create(ctx, review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s may not update EvaTenants of %s 30s after the binding: %s", user, ns, review.Status.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

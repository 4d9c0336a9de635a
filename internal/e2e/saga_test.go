package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/testcluster"
)

// sagaOrder watches tenants being decommissioned and records every moment the saga's
// order is broken: a release deleted while the tenant's Stream objects still exist, or
// the namespace deleted while a HelmRelease is still there (its uninstall runs as the
// deployer account in that namespace); in GitOps mode also the tenant leaving the tree
// (Flux deleting its foundation Kustomization) while a HelmRelease is still there.
type sagaOrder struct {
	gitOps     bool
	mu         sync.Mutex
	violations []string
	stop       context.CancelFunc
	done       chan struct{}
}

// watchSagaOrder starts watching the tenants' namespaces every 200 ms.
func watchSagaOrder(gitOps bool, codes ...string) *sagaOrder {
	ctx, cancel := context.WithCancel(context.Background())
	w := &sagaOrder{gitOps: gitOps, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			for _, code := range codes {
				if v := checkSagaOrder(ctx, code, gitOps); v != "" {
					w.mu.Lock()
					w.violations = append(w.violations, v)
					w.mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return w
}

// check stops watching and fails the test with what broke the order.
func (w *sagaOrder) check(t *testing.T) {
	t.Helper()
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, v := range w.violations {
		if i == 5 {
			t.Errorf("... and %d more", len(w.violations)-5)
			break
		}
		t.Errorf("decommission out of order: %s", v)
	}
}

// checkSagaOrder reads what must go later before what must be gone by then: the
// namespace and the foundation Kustomization first, then the HelmReleases, then the
// Stream objects. Nothing of a tenant being decommissioned comes back, so an object seen
// after a later step was seen was also there when that step began; read the other way
// round, the last release leaving and the namespace deletion between two reads would
// look like a violation that never happened.
func checkSagaOrder(ctx context.Context, code string, gitOps bool) string {
	ns := tenant.Namespace(code)
	var namespace corev1.Namespace
	nsErr := cluster.Client.Get(ctx, client.ObjectKey{Name: ns}, &namespace)
	nsDeleting := nsErr == nil && namespace.DeletionTimestamp != nil
	leftTree := false
	if gitOps {
		ks := &unstructured.Unstructured{}
		ks.SetAPIVersion("kustomize.toolkit.fluxcd.io/v1")
		ks.SetKind("Kustomization")
		err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: testcluster.FluxNamespace, Name: render.FoundationName(code)}, ks)
		leftTree = apierrors.IsNotFound(err) || err == nil && ks.GetDeletionTimestamp() != nil
	}
	releases := &unstructured.UnstructuredList{}
	releases.SetGroupVersionKind(helmReleaseGVK.GroupVersion().WithKind("HelmReleaseList"))
	if err := cluster.Client.List(ctx, releases, client.InNamespace(ns)); err != nil {
		return ""
	}
	streams := &unstructured.UnstructuredList{}
	streams.SetAPIVersion("jetstream.nats.io/v1beta2")
	streams.SetKind("StreamList")
	if err := cluster.Client.List(ctx, streams, client.InNamespace(ns)); err != nil {
		return ""
	}
	deleting := 0
	for _, hr := range releases.Items {
		if hr.GetDeletionTimestamp() != nil {
			deleting++
		}
	}
	if deleting > 0 && len(streams.Items) > 0 {
		return fmt.Sprintf("%s: %d HelmRelease(s) being deleted while %d Stream object(s) remain", code, deleting, len(streams.Items))
	}
	if nsDeleting && len(releases.Items) > 0 {
		return fmt.Sprintf("%s: namespace being deleted while %d HelmRelease(s) remain", code, len(releases.Items))
	}
	if leftTree && len(releases.Items) > 0 {
		return fmt.Sprintf("%s: the tenant left the tree (Kustomization %s deleted) while %d HelmRelease(s) remain",
			code, render.FoundationName(code), len(releases.Items))
	}
	return ""
}

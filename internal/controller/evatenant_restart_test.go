package controller

import (
	"context"
	"fmt"
	"testing"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	nackv1beta2 "github.com/aidonow/eva/internal/nack/v1beta2"
	"github.com/aidonow/eva/internal/tenant"
)

const chaosRounds = 10

var starterModules = []string{"crm", "itsm"}

// assertConverged checks a tenant has exactly its objects, once.
func assertConverged(t *testing.T, code string) {
	t.Helper()
	ctx := context.Background()
	ns := tenant.Namespace(code)
	byLabel := client.MatchingLabels{tenant.LabelCapsule: code}
	var namespaces corev1.NamespaceList
	if err := k8s.List(ctx, &namespaces, byLabel); err != nil {
		t.Fatal(err)
	}
	var hrs helmv2.HelmReleaseList
	var jobs batchv1.JobList
	var streams nackv1beta2.StreamList
	var ings networkingv1.IngressList
	for _, l := range []client.ObjectList{&hrs, &jobs, &streams, &ings} {
		if err := k8s.List(ctx, l, client.InNamespace(ns), byLabel); err != nil {
			t.Fatal(err)
		}
	}
	got := fmt.Sprintf("namespaces=%d releases=%d jobs=%d streams=%d ingresses=%d",
		len(namespaces.Items), len(hrs.Items), len(jobs.Items), len(streams.Items), len(ings.Items))
	if want := "namespaces=1 releases=2 jobs=1 streams=2 ingresses=1"; got != want {
		t.Fatalf("%s: %s, want %s", code, got, want)
	}
}

func chaosCode(checkpoint byte, round int) string {
	return fmt.Sprintf("CHS%c%c%c", checkpoint, 'A'+round/26, 'A'+round%26)
}

// TestRestartChaos kills the operator at a checkpoint and lets a fresh one finish: the
// tenant converges with exactly one of each object, every time.
func TestRestartChaos(t *testing.T) {
	ns := newTestNamespace(t)
	checkpoints := map[string]struct {
		letter byte
		reach  func(t *testing.T, tn *evav1.EvaTenant)
	}{
		"after NamespaceReady": {'N', func(t *testing.T, tn *evav1.EvaTenant) {
			eventually(t, waitFor, "NamespaceReady", func() error {
				if condition(getTenant(t, tn), evav1.ConditionNamespaceReady).Status != "True" {
					return errNot("NamespaceReady")
				}
				return nil
			})
		}},
		"after Provisioned": {'P', func(t *testing.T, tn *evav1.EvaTenant) {
			markStreamsReady(t, tn.Spec.CapsuleCode)
			eventually(t, waitFor, "Provisioned", func() error {
				if condition(getTenant(t, tn), evav1.ConditionProvisioned).Status != "True" {
					return errNot("Provisioned")
				}
				return nil
			})
		}},
	}
	for name, cp := range checkpoints {
		t.Run(name, func(t *testing.T) {
			for round := range chaosRounds {
				code := chaosCode(cp.letter, round)
				tn := newTenant(ns, code, evav1.TierStarter)
				first := startOperator(t, "")
				createTenant(t, tn)
				cp.reach(t, tn)
				first.stop()
				startOperator(t, "").stopAtCleanup()
				playFlux(t, tn, starterModules)
				waitPhase(t, tn, evav1.PhaseActive)
				assertConverged(t, code)
				removeTenant(t, tn) // keep each round's operator work constant
			}
		})
	}
	t.Run("in the middle of the saga", func(t *testing.T) {
		for round := range chaosRounds {
			code := chaosCode('S', round)
			tn := newTenant(ns, code, evav1.TierStarter)
			first := startOperator(t, "")
			createTenant(t, tn)
			playFlux(t, tn, starterModules)
			waitPhase(t, tn, evav1.PhaseActive)
			holdReleases(t, code, starterModules)
			if err := k8s.Delete(context.Background(), getTenant(t, tn)); err != nil {
				t.Fatal(err)
			}
			waitPhase(t, tn, evav1.PhaseDecommissioning)
			first.stop()
			uninstallReleases(t, code, starterModules)
			startOperator(t, "").stopAtCleanup()
			eventually(t, waitFor, code+" gone", func() error {
				err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: tn.Name}, &evav1.EvaTenant{})
				if !apierrors.IsNotFound(err) {
					return errNot("tenant deleted")
				}
				var n corev1.Namespace
				if err := k8s.Get(context.Background(), types.NamespacedName{Name: tenant.Namespace(code)}, &n); err == nil && n.DeletionTimestamp == nil {
					return errNot("namespace deleted")
				}
				return nil
			})
		}
	})
}

// removeTenant deletes a tenant and waits until the saga let it go.
func removeTenant(t *testing.T, tn *evav1.EvaTenant) {
	t.Helper()
	if err := k8s.Delete(context.Background(), getTenant(t, tn)); err != nil {
		t.Fatal(err)
	}
	eventually(t, waitFor, tn.Spec.CapsuleCode+" removed", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: tn.Namespace, Name: tn.Name}, &evav1.EvaTenant{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errNot("removed")
	})
}

// TestReconcileIsIdempotent restarts the operator over an Active tenant: the new one
// re-applies the whole bundle, and no object (nor the tenant) changes.
func TestReconcileIsIdempotent(t *testing.T) {
	ns := newTestNamespace(t)
	op := startOperator(t, "")
	tn := newTenant(ns, "IDEMPO", evav1.TierEnterprise)
	createTenant(t, tn)
	playFlux(t, tn, []string{"crm", "itsm", "whisper", "forge", "shell", "gateway"})
	got := waitPhase(t, tn, evav1.PhaseActive)
	versions := map[string]string{"tenant": got.ResourceVersion}
	for _, ref := range got.Status.Inventory {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(ref.APIVersion)
		u.SetKind(ref.Kind)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
			t.Fatal(err)
		}
		versions[refString(ref)] = u.GetResourceVersion()
	}
	op.stop()
	startOperator(t, "")
	consistently(t, "nothing rewritten", func() error {
		if v := getTenant(t, tn).ResourceVersion; v != versions["tenant"] {
			return fmt.Errorf("tenant resourceVersion %s → %s", versions["tenant"], v)
		}
		for _, ref := range got.Status.Inventory {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(ref.APIVersion)
			u.SetKind(ref.Kind)
			if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, u); err != nil {
				return err
			}
			if u.GetResourceVersion() != versions[refString(ref)] {
				return fmt.Errorf("%s rewritten", refString(ref))
			}
		}
		return nil
	})
}

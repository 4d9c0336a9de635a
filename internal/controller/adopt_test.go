package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	evav1 "github.com/aidonow/eva/api/v1alpha1"
	"github.com/aidonow/eva/internal/claim"
	"github.com/aidonow/eva/internal/render"
	"github.com/aidonow/eva/internal/status"
	"github.com/aidonow/eva/internal/tenant"
)

// TestUnstampedNamespaceIsNotAdopted is issue 32.6's one owner per code: a tenant file's
// namespace (what Flux applies from the published tree: the capsule label, no owner
// stamp) is not taken over by an EvaTenant applied with kubectl under the same code. The
// EvaTenant is Stalled with NamespaceInUse, saying how to hand the namespace over, and
// the operator writes nothing into it; once a person annotates the namespace with the
// tenant's UID (the explicit, audited step), the operator applies the tenant there.
// Before, a namespace carrying the code's label but no stamp was adopted silently.
func TestUnstampedNamespaceIsNotAdopted(t *testing.T) {
	ctx := context.Background()
	startOperator(t, "")
	const code = "FILETT"
	ns := tenant.Namespace(code)
	fileTenants := restrictedNamespace(ns)
	fileTenants.Labels[tenant.LabelCapsule] = code
	if err := k8s.Create(ctx, fileTenants); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), fileTenants) })

	kubectl := newTenant(newTestNamespace(t), code, evav1.TierStarter)
	createTenant(t, kubectl)
	var msg string
	eventually(t, waitFor, "the EvaTenant refused the unstamped namespace", func() error {
		got := getTenant(t, kubectl)
		c := condition(got, evav1.ConditionStalled)
		if c.Status != "True" || c.Reason != status.ReasonNamespaceInUse {
			return fmt.Errorf("Stalled: %s %s %q", c.Status, c.Reason, c.Message)
		}
		msg = c.Message
		return nil
	})
	if want := claim.AnnotationOwnerUID + "=" + string(getTenant(t, kubectl).UID); !strings.Contains(msg, want) {
		t.Errorf("NamespaceInUse %q does not say how to hand the namespace over (%s)", msg, want)
	}
	deployer := types.NamespacedName{Namespace: ns, Name: render.DeployerName}
	if err := k8s.Get(ctx, deployer, &corev1.ServiceAccount{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the operator wrote into the namespace it refused: ServiceAccount %s: %v", deployer, err)
	}

	// The explicit step: a person hands the namespace to this EvaTenant.
	var current corev1.Namespace
	if err := k8s.Get(ctx, types.NamespacedName{Name: ns}, &current); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(current.DeepCopy())
	metav1.SetMetaDataAnnotation(&current.ObjectMeta, claim.AnnotationOwnerUID, string(getTenant(t, kubectl).UID))
	if err := k8s.Patch(ctx, &current, patch); err != nil {
		t.Fatal(err)
	}
	poke(t, kubectl, "adopted")
	eventually(t, waitFor, "the tenant applied into the namespace handed to it", func() error {
		return k8s.Get(ctx, deployer, &corev1.ServiceAccount{})
	})
}

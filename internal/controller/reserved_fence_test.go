package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidonow/eva/internal/tenant"
)

// TestReservedCodesHoldTheOperator: evactl and the operator refuse to render a tenant
// whose code is reserved (its host names a platform service), and the cluster holds any
// writer to it too: as the operator's account, an Ingress of the shape Eva renders, in
// a namespace of a reserved code, is refused by eva-tenant-ingresses, naming the code.
func TestReservedCodesHoldTheOperator(t *testing.T) {
	applyOperatorBase(t)
	ctx := context.Background()
	op := asOperator(t)
	for _, code := range []string{"STATUS", "SHAPER"} {
		ns := tenant.Namespace(code)
		if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		lower := strings.ToLower(code)
		ingress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tenant.IngressName(code),
			Annotations: map[string]string{tenant.AnnotationFence: devFenceDigest(), "nginx.ingress.kubernetes.io/ssl-redirect": "false"}},
			Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("nginx"), Rules: []networkingv1.IngressRule{{Host: lower + ".dev.eva.example.com"}}}}
		create := func() error { return op.Create(ctx, ingress.DeepCopy(), client.DryRunAll) }
		if code == "SHAPER" {
			eventually(t, 10*time.Second, "an Ingress of a code not reserved", create)
			continue
		}
		err := untilFenced(10*time.Second, create)
		if !fenced(err) || !strings.Contains(err.Error(), "the code STATUS is reserved") {
			t.Fatalf("an Ingress for the reserved code STATUS, as the operator: %v", err)
		}
	}
}

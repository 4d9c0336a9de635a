package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestDeployerIsFenced: a tenant's deployer account (helm-controller installs the
// module charts as it) writes what a module chart needs and nothing that acts beyond the
// namespace: no Service on external IPs or a node port, no token Secret, no workload
// running as eva-deployer itself or bound to a node by name (a helper's attacker's read
// of issue 32's fences). The same holds for a tenant's applier holding the deployer's
// rights, as Argo CD's does (it applies the module charts itself): the fence matched
// only eva-deployer, so an applier wrote LoadBalancer Services and pinned Deployments.
func TestDeployerIsFenced(t *testing.T) {
	applyOperatorBase(t)
	for _, id := range []struct{ name, namespace, account string }{
		{"helm-controller's deployer", "eva-tenant-deplfe", "eva-deployer"},
		{"Argo CD's applier", "argocd", "eva-tenant-deplfa"},
	} {
		t.Run(id.name, func(t *testing.T) { assertDeployerFenced(t, id.namespace, id.account) })
	}
}

// assertDeployerFenced binds the deployer's rights, in the tenant namespace named after
// the account's tenant, to account (of namespace saNS) and makes the fence's cases as it.
func assertDeployerFenced(t *testing.T, saNS, account string) {
	ctx := context.Background()
	ns := "eva-tenant-" + strings.TrimPrefix(strings.TrimPrefix(account, "eva-tenant-"), "eva-deployer")
	if account == "eva-deployer" {
		ns = saNS
	}
	if err := k8s.Create(ctx, restrictedNamespace(ns)); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deployer-" + account},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "eva-tenant-deployer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: saNS}}}
	if err := k8s.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deployer := impersonating(t, saNS, account)
	service := func(mutate func(*corev1.Service)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
				Selector: map[string]string{"app": "crm"}}}
		if mutate != nil {
			mutate(s)
		}
		return s
	}
	secret := func(typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s" + strings.ReplaceAll(strings.ToLower(string(typ)), "/", "-"),
			Annotations: map[string]string{corev1.ServiceAccountNameKey: "eva-deployer"}}, Type: typ}
	}
	deployment := func(account string) *appsv1.Deployment {
		labels := map[string]string{"app": "crm"}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crm-x" + account},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{ServiceAccountName: account, Containers: []corev1.Container{{Name: "crm", Image: "crm"}}}}}}
	}
	pinned := deployment("default")
	pinned.Name = "crm-pinned"
	pinned.Spec.Template.Spec.NodeName = "control-plane"
	allowed := map[string]client.Object{
		"a ClusterIP Service":      service(nil),
		"an Opaque Secret":         secret(corev1.SecretTypeOpaque),
		"Helm's release record":    secret("helm.sh/release.v1"),
		"a Deployment as default":  deployment("default"),
		"a Deployment, no account": deployment(""),
	}
	if account != "eva-deployer" {
		// Argo CD renders charts itself and keeps no Helm release records; the applier
		// fence allows only Opaque Secrets.
		delete(allowed, "Helm's release record")
	}
	for what, obj := range allowed {
		eventually(t, 10*time.Second, what, func() error {
			return deployer.Create(ctx, obj.DeepCopyObject().(client.Object), client.DryRunAll)
		})
	}
	denied := map[string]client.Object{
		"a Service on external IPs": service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"10.0.0.1"} }),
		"a NodePort Service":        service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort }),
		"an ExternalName Service": service(func(s *corev1.Service) {
			s.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "crm.eva-tenant-other.svc.cluster.local"}
		}),
		"a token Secret":               secret(corev1.SecretTypeServiceAccountToken),
		"a Deployment as eva-deployer": deployment("eva-deployer"),
		"a Deployment bound to a node": pinned,
	}
	for what, obj := range denied {
		t.Run("denied: "+what, func(t *testing.T) {
			err := deployer.Create(ctx, obj, client.DryRunAll)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
				t.Fatalf("want the deployer fence to refuse, got %v", err)
			}
		})
	}
}

// Package quota says when a tenant's ResourceQuota is enforced. The API server's quota
// admission charges a namespace's pods against a ResourceQuota only once
// kube-controller-manager has copied the quota's spec.hard into its status.hard: a pod
// created before that is admitted whatever it asks for. A tenant's workloads (its
// releases and seed Job) are therefore applied only after its quota is enforced, by the
// operator in pure-cluster mode (Enforced) and by Flux's health check of the tenant's
// foundation in GitOps mode (HealthCheckExpr), or a tenant could briefly run more than
// its tier allows.
package quota

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// HealthCheckExpr is the CEL expression, for a Flux Kustomization's healthCheckExprs,
// that holds once a ResourceQuota is enforced at its current spec: every hard limit of
// the spec is in the status with the same value (kube-controller-manager copies the
// quantities as they are, so their strings compare). It is the same rule as Enforced.
const HealthCheckExpr = "has(status.hard) && has(spec.hard) && " +
	"spec.hard.all(k, k in status.hard && status.hard[k] == spec.hard[k])"

// Enforced reports whether the quota admission enforces rq at its spec: every hard
// limit of the spec is in the status with an equal quantity. When it is not, the reason
// names what is not yet enforced.
func Enforced(rq *corev1.ResourceQuota) (bool, string) {
	var pending []string
	for name, want := range rq.Spec.Hard {
		got, ok := rq.Status.Hard[name]
		if !ok || got.Cmp(want) != 0 {
			pending = append(pending, string(name))
		}
	}
	if len(pending) == 0 {
		return true, ""
	}
	slices.Sort(pending)
	return false, fmt.Sprintf("ResourceQuota %s/%s: %s not yet enforced (kube-controller-manager has not recorded the hard limits in its status)",
		rq.Namespace, rq.Name, strings.Join(pending, ", "))
}

package tenant

import (
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValueLimits bound what a tenant's Helm values may ask for, per tier. Every tier has
// them, the unrestricted ones (no ResourceQuota) included: the bound is what keeps one
// tenant's values from asking for a node.
type ValueLimits struct {
	// MaxReplicas bounds replicaCount (and replicas, minReplicas, maxReplicas).
	MaxReplicas int64 `json:"maxReplicas"`
	// MaxCPU bounds resources.requests.cpu and resources.limits.cpu of a container.
	MaxCPU resource.Quantity `json:"maxCPU"`
	// MaxMemory bounds resources.requests.memory and resources.limits.memory of a container.
	MaxMemory resource.Quantity `json:"maxMemory"`
	// MaxEphemeralStorage bounds resources.requests and resources.limits of
	// ephemeral-storage of a container: the node's disk a container may fill.
	MaxEphemeralStorage resource.Quantity `json:"maxEphemeralStorage"`
}

// replicaKeys are the folded keys whose value is a replica count, at any depth: charts
// name sub-deployments' counts (worker.replicaCount) and autoscalers' bounds alike.
var replicaKeys = map[string]bool{"replicacount": true, "replicas": true, "minreplicas": true, "maxreplicas": true}

// resourceNames are the container resources a tenant may set; extended resources
// (GPUs, huge pages) are not offered to tenants at all.
var resourceNames = map[string]bool{"cpu": true, "memory": true, "ephemeral-storage": true}

// isLimitedKey reports whether a folded key is bounded by the tier's ValueLimits.
func isLimitedKey(folded string) bool { return replicaKeys[folded] || folded == "resources" }

// checkLimits checks a value under a limited key (see isLimitedKey) against the tier.
func checkLimits(folded string, v any, p *field.Path, tier string, lim ValueLimits, lr LimitRangeDefaults) field.ErrorList {
	if replicaKeys[folded] {
		return checkReplicas(v, p, tier, lim)
	}
	if v == nil {
		return nil // deletes the chart's resources; the namespace LimitRange defaults apply
	}
	res, ok := v.(map[string]any)
	if !ok {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be an object with requests and limits")}
	}
	var errs field.ErrorList
	for _, kind := range sortedKeys(res) {
		kp := p.Child(kind)
		if kind != "requests" && kind != "limits" {
			errs = append(errs, field.NotSupported(kp, field.OmitValueType{}, []string{"requests", "limits"}))
			continue
		}
		if res[kind] == nil {
			continue
		}
		amounts, ok := res[kind].(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(kp, field.OmitValueType{}, "must be an object of resource quantities"))
			continue
		}
		for _, name := range sortedKeys(amounts) {
			errs = append(errs, checkQuantity(name, amounts[name], kp.Child(name), tier, lim)...)
		}
	}
	if len(errs) == 0 {
		errs = checkRequestsAndLimits(res, p, lr)
	}
	return errs
}

func checkReplicas(v any, p *field.Path, tier string, lim ValueLimits) field.ErrorList {
	n, ok := v.(float64)
	if !ok || n != math.Trunc(n) || n < 0 {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be a whole number of replicas")}
	}
	if n > float64(lim.MaxReplicas) {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{},
			fmt.Sprintf("must be at most %d: the limit of the %s tier", lim.MaxReplicas, tier))}
	}
	return nil
}

func checkQuantity(name string, v any, p *field.Path, tier string, lim ValueLimits) field.ErrorList {
	if !resourceNames[name] {
		return field.ErrorList{field.NotSupported(p, field.OmitValueType{}, []string{"cpu", "memory", "ephemeral-storage"})}
	}
	q, ok := quantityOf(v)
	if !ok || q.Sign() < 0 {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "must be a quantity such as 500m or 1Gi")}
	}
	bound := map[string]resource.Quantity{"cpu": lim.MaxCPU, "memory": lim.MaxMemory, "ephemeral-storage": lim.MaxEphemeralStorage}
	if max, ok := bound[name]; ok && q.Cmp(max) > 0 {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{},
			fmt.Sprintf("must be at most %s: the limit of the %s tier", max.String(), tier))}
	}
	return nil
}

// checkValueLimits checks a tier's limits in the catalog.
func checkValueLimits(prefix string, lim ValueLimits) []string {
	if lim.MaxReplicas < 1 || lim.MaxCPU.Sign() <= 0 || lim.MaxMemory.Sign() <= 0 || lim.MaxEphemeralStorage.Sign() <= 0 {
		return []string{prefix + ": maxReplicas, maxCPU, maxMemory and maxEphemeralStorage are required and must be positive"}
	}
	return nil
}

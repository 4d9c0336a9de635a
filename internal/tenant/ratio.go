package tenant

import (
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// RequestRatio is the most a container's limit may be over its request, per resource.
type RequestRatio struct {
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
}

// check checks the LimitRange bounds of the catalog: the defaults (a container that sets
// nothing) must satisfy them, or the API server would refuse such a container.
func (lr LimitRangeDefaults) check() []string {
	var problems []string
	if lr.MaxLimitRequestRatio.CPU.Cmp(resource.MustParse("1")) < 0 || lr.MaxLimitRequestRatio.Memory.Cmp(resource.MustParse("1")) < 0 {
		problems = append(problems, "limitRange.maxLimitRequestRatio: cpu and memory must be at least 1")
	}
	if lr.MinCPU.Sign() <= 0 || lr.MinMemory.Sign() <= 0 || lr.MinCPU.Cmp(lr.DefaultCPU) > 0 || lr.MinMemory.Cmp(lr.DefaultMemory) > 0 {
		problems = append(problems, "limitRange: minCPU and minMemory must be positive and at most defaultCPU and defaultMemory")
	}
	return problems
}

// checkRequestsAndLimits holds one container's resources (a values object of requests
// and limits, each already a valid quantity within the tier's bounds) to the namespace
// LimitRange: no request below the minimum, no limit more than maxLimitRequestRatio times
// its request. What the tenant's values leave to the chart's defaults is the LimitRange's
// to refuse at admission; what they set is refused here, at its path.
func checkRequestsAndLimits(res map[string]any, p *field.Path, lr LimitRangeDefaults) field.ErrorList {
	requests, _ := res["requests"].(map[string]any)
	limits, _ := res["limits"].(map[string]any)
	var errs field.ErrorList
	for _, r := range []struct {
		name       string
		min, ratio resource.Quantity
	}{{"cpu", lr.MinCPU, lr.MaxLimitRequestRatio.CPU}, {"memory", lr.MinMemory, lr.MaxLimitRequestRatio.Memory}} {
		req, hasReq := quantityOf(requests[r.name])
		if hasReq && req.Cmp(r.min) < 0 {
			errs = append(errs, field.Invalid(p.Child("requests", r.name), field.OmitValueType{},
				fmt.Sprintf("must be at least %s: the least a container may request", r.min.String())))
			continue
		}
		lim, hasLim := quantityOf(limits[r.name])
		if !hasReq || !hasLim || req.Sign() == 0 {
			continue
		}
		if float64(lim.MilliValue()) > r.ratio.AsApproximateFloat64()*float64(req.MilliValue()) {
			errs = append(errs, field.Invalid(p.Child("limits", r.name), field.OmitValueType{},
				fmt.Sprintf("must be at most %s times the request (%s): a container's limit over its request is bounded", r.ratio.String(), req.String())))
		}
	}
	return errs
}

// quantityOf reads a values quantity (a string, or a number of whole units).
func quantityOf(v any) (resource.Quantity, bool) {
	var text string
	switch x := v.(type) {
	case string:
		text = x
	case float64:
		text = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(text)
	return q, err == nil
}

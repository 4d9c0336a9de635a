package tenant

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// valuesScan carries what a walk over one module's helmValues checks against.
type valuesScan struct {
	owned  []ownedPath
	tier   string
	limits ValueLimits
	// ranges are the namespace LimitRange's bounds on each container (catalog.limitRange).
	ranges LimitRangeDefaults
	// limited is false when the tier is unknown: its error already explains the tenant.
	limited bool
}

// scan walks a values tree and reports, each at the exact path of the key at fault:
// keys the platform owns, values that look like secrets, values above the tier's
// limits, and excessive nesting. keys holds the folded map keys from the module's values
// root to v (list indices left out).
func (s *valuesScan) scan(v any, p *field.Path, keys []string, depth int) field.ErrorList {
	if depth > MaxValuesDepth {
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("values nested deeper than %d levels", MaxValuesDepth))}
	}
	var errs field.ErrorList
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			kp := p.Child(k)
			child := x[k]
			folded := FoldKey(k)
			path := append(keys[:len(keys):len(keys)], folded)
			_, isMap := child.(map[string]any)
			if msg := ownedVerdict(s.owned, path, isMap); msg != "" {
				errs = append(errs, field.Forbidden(kp, msg))
				continue
			}
			reason, descend := judge(k, child)
			if reason != "" {
				errs = append(errs, secretError(kp, reason))
				continue
			}
			if s.limited && isLimitedKey(folded) {
				// checkLimits checks the whole subtree (resources.limits.cpu, ...).
				errs = append(errs, checkLimits(folded, child, kp, s.tier, s.limits, s.ranges)...)
				continue
			}
			if descend {
				errs = append(errs, s.scanItems(k, child, kp, path, depth+1)...)
			}
		}
	case []any:
		errs = append(errs, s.scanItems("", x, p, keys, depth)...)
	}
	return errs
}

// scanItems descends into a map, or into each item of a list; a list's items are judged
// as secrets under the list's own key (passwords: [a, b] holds passwords).
func (s *valuesScan) scanItems(key string, v any, p *field.Path, keys []string, depth int) field.ErrorList {
	list, ok := v.([]any)
	if !ok {
		return s.scan(v, p, keys, depth)
	}
	if depth > MaxValuesDepth {
		return s.scan(v, p, keys, depth) // reports the depth
	}
	var errs field.ErrorList
	for i, item := range list {
		ip := p.Index(i)
		if reason, descend := judge(key, item); reason != "" {
			errs = append(errs, secretError(ip, reason))
			continue
		} else if !descend {
			continue
		}
		errs = append(errs, s.scan(item, ip, keys, depth+1)...)
	}
	return errs
}

func secretError(p *field.Path, reason string) *field.Error {
	return field.Forbidden(p, "looks like a secret ("+reason+
		"): secrets must not be written in helmValues; put them in a Secret and hand it to the module with spec.secretMounts")
}

package chartcheck

import (
	"encoding/json"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/aidonow/eva/internal/tenant"
)

// group is what the first release of a templateKey left for the others: the templates'
// verdict, and the values Helm coalesced for it (the chart's defaults under the release's
// own values), which every release of the group shares but for its capsule identity.
//
// Coalescing is Helm's deep copy of the chart's defaults and of the release's values
// (reflection over every map), done for each of a fleet's releases only to validate
// them against the schema: it was most of a verified render's chart check. A release of
// a group whose templates rendered takes the group's coalesced values with its own
// identity put in at the same places instead, and validates those; anything that does
// not line up with the first release's identity goes through Helm's own coalescing.
type group struct {
	// err is the templates' verdict for the group.
	err error
	// values are the values Helm coalesced for the group's first release; nil when the
	// chart is left to Helm's own validation (subcharts, no schema) or the first
	// release has no identity map.
	values map[string]any
	// identity is that release's capsule identity, as Helm saw it (through JSON).
	identity map[string]any
}

// newGroup starts the group of a release whose values passed the schema; the caller
// sets the templates' verdict. The group keeps a coalescing of its own of the release's
// values, never given to the templates, which may change the maps they are given
// (sprig's set).
func newGroup(ch *chart.Chart, r Release) *group {
	g := &group{}
	if len(ch.Dependencies()) > 0 || ch.Schema == nil {
		return g
	}
	identity, ok := jsonIdentity(r)
	if !ok {
		return g
	}
	rv, err := releaseValues(ch, r)
	if err != nil {
		return g
	}
	values, ok := rv["Values"].(chartutil.Values)
	if !ok {
		return g
	}
	g.values, g.identity = values.AsMap(), identity
	return g
}

// valuesFor returns the values Helm would coalesce for r, a release of the group: the
// group's values with r's identity in place of the first release's, leaf for leaf. ok
// is false when r's identity does not have the first one's shape (the same maps and
// keys, a string, number or boolean at every leaf), or the coalesced values do not hold
// the first identity's leaves where it had them.
func (g *group) valuesFor(r Release) (map[string]any, bool) {
	if g.values == nil {
		return nil, false
	}
	identity, ok := jsonIdentity(r)
	if !ok {
		return nil, false
	}
	return withLeaves(g.values, map[string]any{tenant.ReservedValuesKey: g.identity},
		map[string]any{tenant.ReservedValuesKey: identity})
}

// jsonIdentity returns a release's capsule identity as it reaches Helm: through JSON
// (numbers become float64), as releaseValues passes every value.
func jsonIdentity(r Release) (map[string]any, bool) {
	ident, ok := r.Values[tenant.ReservedValuesKey].(map[string]any)
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(ident)
	if err != nil {
		return nil, false
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, false
	}
	return out, true
}

// withLeaves returns a copy of coalesced (the values Helm coalesced from the identity
// from) with each leaf of from replaced by to's leaf at the same path. Only the maps on
// the way to a leaf are copied; the rest is shared, read-only.
//
// It holds because of how Helm coalesces a release's values over the defaults of a chart
// without subcharts (newGroup keeps no values for one with them): a value the release
// sets that is not null stays, whatever the default at the same path (a map the release
// sets is merged key by key with a default map, and stands alone over a default leaf).
// Only a null can remove or add a key, and no identity leaf may be null. So the leaves
// the release sets are found unchanged in the coalesced values, and everything else
// there comes from the defaults, the same for both identities when they have the same
// shape.
func withLeaves(coalesced any, from, to map[string]any) (map[string]any, bool) {
	cm, ok := coalesced.(map[string]any)
	if !ok || len(from) != len(to) {
		return nil, false
	}
	out := make(map[string]any, len(cm))
	for k, v := range cm {
		out[k] = v
	}
	for k, fv := range from {
		tv, ok := to[k]
		if !ok {
			return nil, false
		}
		if fm, isMap := fv.(map[string]any); isMap {
			tm, ok := tv.(map[string]any)
			if !ok {
				return nil, false
			}
			if out[k], ok = withLeaves(cm[k], fm, tm); !ok {
				return nil, false
			}
			continue
		}
		if !isScalar(fv) || !isScalar(tv) || cm[k] != fv {
			return nil, false
		}
		out[k] = tv
	}
	return out, true
}

// isScalar reports whether v is a JSON string, number or boolean.
func isScalar(v any) bool {
	switch v.(type) {
	case string, float64, bool:
		return true
	}
	return false
}

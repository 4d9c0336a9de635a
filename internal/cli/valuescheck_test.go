package cli

import "testing"

func TestValuesPathMapsPointersToTenantFields(t *testing.T) {
	merged := map[string]any{
		"replicaCount": 2,
		"env":          []any{map[string]any{"name": "A"}, map[string]any{"name": "B"}},
		"image":        map[string]any{"repository": "r"},
		"a/b":          map[string]any{"0": 1},
	}
	own := map[string]any{"replicaCount": 2, "env": []any{map[string]any{"name": "A"}}}
	for name, tc := range map[string]struct {
		tokens []string
		want   string
		own    bool
	}{
		"scalar set by the tenant": {[]string{"replicaCount"}, "spec.helmValues[crm].replicaCount", true},
		"list item by index":       {[]string{"env", "0", "name"}, "spec.helmValues[crm].env[0].name", true},
		"list item only merged":    {[]string{"env", "1", "name"}, "spec.helmValues[crm].env[1].name", false},
		"catalog value":            {[]string{"image", "repository"}, "spec.helmValues[crm].image.repository", false},
		"root of the values":       {nil, "spec.helmValues[crm]", true},
		"numeric key of a map":     {[]string{"a/b", "0"}, "spec.helmValues[crm].a/b.0", false},
		"index out of range":       {[]string{"env", "9"}, "spec.helmValues[crm].env.9", false},
	} {
		t.Run(name, func(t *testing.T) {
			p, mine := valuesPath("crm", tc.tokens, merged, own)
			if p.String() != tc.want || mine != tc.own {
				t.Errorf("valuesPath(%v) = %s, %v; want %s, %v", tc.tokens, p, mine, tc.want, tc.own)
			}
		})
	}
}

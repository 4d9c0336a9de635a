package treediff

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aidonow/eva/internal/safetext"
	"github.com/aidonow/eva/internal/tenant"
	"github.com/aidonow/eva/internal/yamldoc"
)

// ObjectChange is one object a render adds, removes or changes, with the fields that
// differ: what a reviewer reads before the file diffs.
type ObjectChange struct {
	Tenant string `json:"tenant,omitempty"` // capsule code; "" for shared files
	Path   string `json:"path"`             // the file holding it
	Object string `json:"object"`           // "HelmRelease eva-devusr/crm"
	Status string `json:"status"`           // added, changed, removed
	// Fields are the changed fields of a changed object, bookkeeping left out.
	Fields []FieldChange `json:"fields,omitempty"`
	// Bookkeeping lists the changed fields that are Eva's own bookkeeping (spec
	// digests, Flux reconcile requests): they change with whatever they track.
	Bookkeeping []FieldChange `json:"bookkeeping,omitempty"`
}

// FieldChange is one field's value on each side; "" where the field is absent.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new,omitempty"`
}

// bookkeeping are the annotations Eva writes to track what it rendered, not to say
// anything a reviewer decides on.
var bookkeeping = []string{
	tenant.AnnotationSpecDigest,
	tenant.AnnotationOperatorVersion,
	"reconcile.fluxcd.io/requestedAt",
	"reconcile.fluxcd.io/resetAt",
}

// isBookkeeping says whether a field path is one of the bookkeeping annotations.
func isBookkeeping(field string) bool {
	for _, a := range bookkeeping {
		if field == "metadata.annotations["+strconv.Quote(a)+"]" {
			return true
		}
	}
	return false
}

// compareObjects lists the objects of one file that differ between its two sides.
// Values go through the redactor and are escaped and shortened; a side that is not
// YAML is reported as one change of the whole file.
func compareObjects(path, tenantCode string, a, b []byte, redact Redactor) []ObjectChange {
	oldObjs, errOld := objectsOf(a)
	newObjs, errNew := objectsOf(b)
	shownPath := safetext.Escape(path)
	if errOld != nil || errNew != nil {
		return []ObjectChange{{Tenant: tenantCode, Path: shownPath, Object: "(not YAML: see the file diff)", Status: "changed"}}
	}
	keys := map[string]bool{}
	for k := range oldObjs {
		keys[k] = true
	}
	for k := range newObjs {
		keys[k] = true
	}
	var out []ObjectChange
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		o, inOld := oldObjs[k]
		n, inNew := newObjs[k]
		c := ObjectChange{Tenant: tenantCode, Path: shownPath, Object: safetext.Escape(k)}
		switch {
		case !inOld:
			c.Status = "added"
		case !inNew:
			c.Status = "removed"
		default:
			var fields []FieldChange
			diffValues("", "", o, n, redact, &fields)
			if len(fields) == 0 {
				continue
			}
			c.Status = "changed"
			for _, f := range fields {
				if isBookkeeping(f.Field) {
					c.Bookkeeping = append(c.Bookkeeping, f)
				} else {
					c.Fields = append(c.Fields, f)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// objectsOf reads the YAML documents of a file, keyed "Kind namespace/name"; a document
// that is not an object is keyed by its position.
func objectsOf(data []byte) (map[string]any, error) {
	docs, err := yamldoc.Documents(data)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for i, doc := range docs {
		var v any
		if err := doc.Decode(&v); err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		out[objectKey(v, i)] = v
	}
	return out, nil
}

func objectKey(v any, i int) string {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("document %d", i+1)
	}
	kind, _ := m["kind"].(string)
	meta, _ := m["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	switch {
	case kind == "":
		return fmt.Sprintf("document %d", i+1)
	case name == "" && i == 0:
		return kind // kustomization.yaml
	case name == "":
		return fmt.Sprintf("%s (document %d)", kind, i+1)
	}
	if ns != "" {
		name = ns + "/" + name
	}
	return kind + " " + name
}

// diffValues appends the leaves that differ under field (key is its last part, for the
// redactor).
func diffValues(field, key string, a, b any, redact Redactor, out *[]FieldChange) {
	if wholly(key, a, redact) || wholly(key, b, redact) {
		// A container named as a secret is one value: nothing under it is shown.
		leaf(field, key, a, b, redact, out)
		return
	}
	am, aMap := a.(map[string]any)
	bm, bMap := b.(map[string]any)
	if aMap && bMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			diffValues(join(field, k), k, am[k], bm[k], redact, out)
		}
		return
	}
	al, aList := a.([]any)
	bl, bList := b.([]any)
	if aList && bList && len(al) == len(bl) {
		for i := range al {
			diffValues(fmt.Sprintf("%s[%d]", field, i), key, al[i], bl[i], redact, out)
		}
		return
	}
	leaf(field, key, a, b, redact, out)
}

// wholly says whether v, under key, is redacted as one value: the redactor flags it
// and, for a map or list, none of its children on its own (the key itself names a
// secret: credentials: {user: admin}). A container flagged for a child is searched
// for the flagged values themselves, as Redact searches a file: one secret-looking
// value hides itself, never its neighbours.
func wholly(key string, v any, redact Redactor) bool {
	if redact == nil || redact(key, v) == "" {
		return false
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			if redact(k, child) != "" {
				return false
			}
		}
	case []any:
		for _, item := range x {
			if redact(key, item) != "" { // a list's items stand under its key
				return false
			}
		}
	}
	return true
}

// leaf appends field when its two values differ.
func leaf(field, key string, a, b any, redact Redactor, out *[]FieldChange) {
	if canonical(a) == canonical(b) {
		return
	}
	as, bs := shown(key, a, redact), shown(key, b, redact)
	if as == bs {
		as, bs = as+" (redacted)", bs+" (redacted, changed)"
	}
	*out = append(*out, FieldChange{Field: safetext.Escape(field), Old: as, New: bs})
}

// join appends a key to a field path: dotted when it is a plain name, quoted in
// brackets otherwise (annotation keys hold dots and slashes).
func join(field, k string) string {
	plain := k != "" && !strings.ContainsAny(k, "./[]\" ")
	switch {
	case plain && field == "":
		return k
	case plain:
		return field + "." + k
	}
	return field + "[" + strconv.Quote(k) + "]"
}

// canonical is a value in a form whose printing is stable (maps sorted by JSON).
func canonical(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// shown is a value as the summary prints it: "" when absent, redacted when the redactor
// flags it, compact JSON for maps and lists, escaped and shortened to 80 characters.
func shown(key string, v any, redact Redactor) string {
	if v == nil {
		return ""
	}
	if redact != nil {
		if reason := redact(key, v); reason != "" {
			return "<redacted: " + reason + ">"
		}
	}
	var s string
	switch v := v.(type) {
	case string:
		s = strconv.Quote(v)
		if !strings.ContainsAny(v, "\n\"\\ :#") && v != "" {
			s = v
		}
	case map[string]any, []any:
		s = canonical(v)
	default:
		s = fmt.Sprint(v)
	}
	return safetext.Limit(safetext.Escape(s), 80)
}

package manifest

// This file holds the field plans toPlain converts typed objects by: each struct type's
// JSON fields (name, omitempty, omitzero, inline) and how each type converts, worked out
// once per type rather than once per value.

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// fieldInfo is one JSON field of a struct type.
type fieldInfo struct {
	name      string
	index     int
	omitempty bool
	omitzero  bool
	inline    bool
	// kind is how the field's type converts, or for a pointer field (elemKind) how the
	// type it points to does: looked up once per struct type, not per value.
	kind, elemKind typeKind
}

var fieldCache sync.Map // reflect.Type → []fieldInfo

// fieldsOf returns the JSON fields of a struct type, in declaration order, as
// encoding/json and the apimachinery converter name them: the tag's name, else the Go
// name; an embedded struct without a tag name is inline; "-" is left out.
func fieldsOf(t reflect.Type) []fieldInfo {
	if cached, ok := fieldCache.Load(t); ok {
		return cached.([]fieldInfo)
	}
	var out []fieldInfo
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		info := fieldInfo{name: name, index: i, kind: kindOf(f.Type)}
		if f.Type.Kind() == reflect.Pointer {
			info.elemKind = kindOf(f.Type.Elem())
		}
		for _, o := range strings.Split(opts, ",") {
			info.omitempty = info.omitempty || o == "omitempty"
			info.omitzero = info.omitzero || o == "omitzero"
		}
		if name == "" {
			if !f.Anonymous {
				info.name = f.Name
			} else {
				info.inline = true
			}
		}
		out = append(out, info)
	}
	fieldCache.Store(t, out)
	return out
}

// omits says whether the field's omitempty or omitzero tag leaves its value out.
func (f *fieldInfo) omits(fv reflect.Value) bool {
	return f.omitempty && isEmpty(fv) || f.omitzero && fv.IsZero()
}

// isEmpty is omitempty's test, as encoding/json and the converter apply it.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Map, reflect.Slice:
		return v.IsNil() || v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// inlined is the struct an inline (embedded) field holds, if it holds one.
func inlined(fv reflect.Value) (reflect.Value, bool) {
	for fv.Kind() == reflect.Pointer && !fv.IsNil() {
		fv = fv.Elem()
	}
	return fv, fv.Kind() == reflect.Struct
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// typeKind says how a type converts; cached per type.
type typeKind int

const (
	kindPlain        typeKind = iota // from its own fields or kind
	kindQuantity                     // resource.Quantity
	kindDuration                     // metav1.Duration
	kindIntOrString                  // intstr.IntOrString
	kindTime                         // metav1.Time
	kindRawJSON                      // apiextensionsv1.JSON (Helm values)
	kindMarshaler                    // any other json.Marshaler (value receiver)
	kindPtrMarshaler                 // a json.Marshaler on the pointer receiver
)

var (
	kindCache    sync.Map // reflect.Type → typeKind
	quantityType = reflect.TypeFor[resource.Quantity]()
	durationType = reflect.TypeFor[metav1.Duration]()
	intstrType   = reflect.TypeFor[intstr.IntOrString]()
	timeType     = reflect.TypeFor[metav1.Time]()
	rawJSONType  = reflect.TypeFor[apiextensionsv1.JSON]()
)

func kindOf(t reflect.Type) typeKind {
	if k, ok := kindCache.Load(t); ok {
		return k.(typeKind)
	}
	k := kindPlain
	switch {
	case t == quantityType:
		k = kindQuantity
	case t == durationType:
		k = kindDuration
	case t == intstrType:
		k = kindIntOrString
	case t == timeType:
		k = kindTime
	case t == rawJSONType:
		k = kindRawJSON
	case t.Implements(marshalerType):
		k = kindMarshaler
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		k = kindPtrMarshaler
	}
	kindCache.Store(t, k)
	return k
}

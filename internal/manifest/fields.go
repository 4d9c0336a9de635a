package manifest

// This file holds the field plans toPlain converts typed objects with: each struct
// type's JSON fields (name, omitempty, inline) and how each type is written, looked up
// once per type; the values of types with their own JSON encoding resolved to plain data.

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// arena holds the fields being written, as a stack: each struct's fields are
// appended while it is written and dropped after, so encoding allocates no per-struct
// slices.
type arena struct {
	items []namedValue
}

var arenaPool = sync.Pool{New: func() any { return &arena{items: make([]namedValue, 0, 256)} }}

func getArena() *arena { return arenaPool.Get().(*arena) }

func (e *arena) release() {
	e.items = e.items[:0]
	arenaPool.Put(e)
}

// value is a field value ready to write: either still typed, or plain data (from a
// type with its own JSON encoding).
type value struct {
	v       reflect.Value
	plain   any
	isPlain bool
}

type namedValue struct {
	name string
	value
}

type fieldInfo struct {
	name      string
	index     int
	omitempty bool
	omitzero  bool
	inline    bool
	// kind is how the field's type is written, and elemKind how its pointer's element
	// type is (for a pointer field): looked up once per struct type, not per value.
	kind, elemKind typeKind
}

var fieldCache sync.Map // reflect.Type → []fieldInfo

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

var marshalerType = reflect.TypeFor[json.Marshaler]()

// typeKind says how a type is written; cached per type.
type typeKind int

const (
	kindPlain        typeKind = iota // written from its own fields or kind
	kindQuantity                     // resource.Quantity
	kindDuration                     // metav1.Duration
	kindIntOrString                  // intstr.IntOrString
	kindTime                         // metav1.Time
	kindRawJSON                      // apiextensionsv1.JSON (Helm values), or a pointer to one
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
	case t == rawJSONType || t == reflect.PointerTo(rawJSONType):
		k = kindRawJSON
	case t.Implements(marshalerType):
		k = kindMarshaler
	case t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(marshalerType):
		k = kindPtrMarshaler
	}
	kindCache.Store(t, k)
	return k
}

// resolve turns a field value into something writable: types with their own JSON
// encoding (quantities, times, durations, int-or-strings, raw JSON) become plain data,
// as their MarshalJSON would write them; pointers and interfaces are followed.
//
// What a MarshalJSON writes is decoded as the apimachinery converter decodes it (whole
// numbers as int64, others as float64).
func (e *arena) resolve(v reflect.Value) (value, error) {
	return e.resolveKind(v, kindOf(v.Type()))
}

// resolveField is resolve for a struct field, with its type's kinds known.
func (e *arena) resolveField(v reflect.Value, f *fieldInfo) (value, error) {
	if f.kind == kindPlain && v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return value{isPlain: true}, nil
		}
		return e.resolveKind(v.Elem(), f.elemKind)
	}
	return e.resolveKind(v, f.kind)
}

// resolveKind is resolve with k, the kind of v's type, known.
func (e *arena) resolveKind(v reflect.Value, k typeKind) (value, error) {
	for {
		switch k {
		case kindQuantity:
			q := v.Interface().(resource.Quantity)
			return value{plain: q.String(), isPlain: true}, nil
		case kindDuration:
			return value{plain: time.Duration(v.Field(0).Int()).String(), isPlain: true}, nil
		case kindIntOrString:
			x := v.Interface().(intstr.IntOrString)
			if x.Type == intstr.Int {
				return value{plain: int64(x.IntVal), isPlain: true}, nil
			}
			return value{plain: x.StrVal, isPlain: true}, nil
		case kindTime:
			x := v.Interface().(metav1.Time)
			if x.IsZero() {
				return value{isPlain: true}, nil
			}
			return value{plain: x.UTC().Format(time.RFC3339), isPlain: true}, nil
		case kindRawJSON:
			// What its MarshalJSON writes (Raw, or null when empty) decoded, without
			// the encoder's copy and validation pass: the decoder validates it too.
			if v.Kind() == reflect.Pointer {
				if v.IsNil() {
					return value{isPlain: true}, nil
				}
				v = v.Elem()
			}
			raw := v.Interface().(apiextensionsv1.JSON).Raw
			if len(raw) == 0 {
				return value{isPlain: true}, nil
			}
			var plain any
			if err := utiljson.Unmarshal(raw, &plain); err != nil {
				return value{}, err
			}
			cleanTemplates(plain) // as ToMap's Clean leaves no null creationTimestamp
			return value{plain: plain, isPlain: true}, nil
		case kindMarshaler, kindPtrMarshaler:
			if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
				return value{isPlain: true}, nil
			}
			m := v.Interface()
			if kindOf(v.Type()) == kindPtrMarshaler {
				if !v.CanAddr() {
					c := reflect.New(v.Type())
					c.Elem().Set(v)
					v = c.Elem()
				}
				m = v.Addr().Interface()
			}
			raw, err := json.Marshal(m)
			if err != nil {
				return value{}, err
			}
			var plain any
			if err := utiljson.Unmarshal(raw, &plain); err != nil {
				return value{}, err
			}
			cleanTemplates(plain)
			return value{plain: plain, isPlain: true}, nil
		}
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if v.IsNil() {
				return value{isPlain: true}, nil
			}
			v = v.Elem()
			k = kindOf(v.Type())
			continue
		}
		return value{v: v}, nil
	}
}

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

// collect lists the fields a struct writes, sorted by name, following what ToMap and
// Clean keep: omitempty fields that are empty, status and an empty spec at the top, and
// null creationTimestamps are left out.
func (e *arena) collect(v reflect.Value, top bool) ([]namedValue, error) {
	start := len(e.items)
	var walk func(v reflect.Value) error
	walk = func(v reflect.Value) error {
		fields := fieldsOf(v.Type())
		for i := range fields {
			f := &fields[i]
			fv := v.Field(f.index)
			if f.omits(fv) {
				continue
			}
			if f.inline {
				if inner, ok := inlined(fv); ok {
					if err := walk(inner); err != nil {
						return err
					}
				}
				continue
			}
			if top && f.name == "status" {
				continue
			}
			r, err := e.resolveField(fv, f)
			if err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			if f.name == "creationTimestamp" && isNull(r) {
				continue
			}
			if top && f.name == "spec" && !r.isPlain && r.v.Kind() == reflect.Struct {
				if has, err := e.hasFields(r.v); err != nil || !has {
					if err != nil {
						return err
					}
					continue
				}
			}
			e.items = append(e.items, namedValue{name: f.name, value: r})
		}
		return nil
	}
	if err := walk(v); err != nil {
		return nil, err
	}
	out := e.items[start:len(e.items):len(e.items)]
	slices.SortFunc(out, func(a, b namedValue) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// omits says whether the field's omitempty or omitzero tag leaves its value out.
func (f *fieldInfo) omits(fv reflect.Value) bool {
	return f.omitempty && isEmpty(fv) || f.omitzero && fv.IsZero()
}

// inlined is the struct an inline (embedded) field holds, if it holds one.
func inlined(fv reflect.Value) (reflect.Value, bool) {
	for fv.Kind() == reflect.Pointer && !fv.IsNil() {
		fv = fv.Elem()
	}
	return fv, fv.Kind() == reflect.Struct
}

// hasFields says whether collect would list any field of a struct, without resolving
// the fields that are certainly listed (Helm values are neither decoded nor copied for it).
func (e *arena) hasFields(v reflect.Value) (bool, error) {
	fields := fieldsOf(v.Type())
	for i := range fields {
		f := &fields[i]
		fv := v.Field(f.index)
		if f.omits(fv) {
			continue
		}
		if f.inline {
			if inner, ok := inlined(fv); ok {
				if has, err := e.hasFields(inner); err != nil || has {
					return has, err
				}
			}
			continue
		}
		if f.name != "creationTimestamp" {
			return true, nil // listed whatever it holds
		}
		r, err := e.resolveField(fv, f)
		if err != nil {
			return false, fmt.Errorf("%s: %w", f.name, err)
		}
		if !isNull(r) {
			return true, nil
		}
	}
	return false, nil
}

// isNull says whether a resolved value is null in the plain form: nil, or a nil typed
// map or slice.
func isNull(r value) bool {
	if r.isPlain {
		return r.plain == nil
	}
	switch r.v.Kind() {
	case reflect.Map, reflect.Slice:
		return r.v.IsNil()
	}
	return false
}

func scalarOf(v reflect.Value) (any, error) {
	switch v.Kind() {
	case reflect.String:
		return v.String(), nil
	case reflect.Bool:
		return v.Bool(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int64(v.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return v.Float(), nil
	}
	return nil, fmt.Errorf("cannot write a value of type %s", v.Type())
}

package manifest

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
)

// Edits are an environment's patches folded into changes of a typed object's fields,
// written in while the object is written (EncodeTypedEdited): byte for byte what Encode
// writes for the object's plain form patched the same way, without building that form.
// A map-only strategic-merge patch (Merge) and the adds, replaces and removes of a JSON
// 6902 patch (Op) fold in, in order, as long as every field they go through is a typed
// struct the object holds; Helm values (plain data) are changed on a copy. Anything
// else makes a fold return false, and the caller takes the plain path for the object
// with all its patches: the Edits are then of no use.
type Edits struct {
	obj  reflect.Value
	root editNode
	e    *arena
}

// editNode is what happens to one field: set to a plain value (whatever it held), left
// out, or (children) changed field by field inside the typed struct it holds.
type editNode struct {
	set      bool
	value    any
	unset    bool
	children map[string]*editNode
}

func (n *editNode) child(name string) *editNode {
	if n.children == nil {
		n.children = map[string]*editNode{}
	}
	c := n.children[name]
	if c == nil {
		c = &editNode{}
		n.children[name] = c
	}
	return c
}

// NewEdits starts the edits of a typed object; known is as for EncodeTypedKnown.
func NewEdits(obj any, known KnownJSON) (*Edits, error) {
	v, err := structOf(obj)
	if err != nil {
		return nil, err
	}
	// An arena of its own: values read while folding are copies (copyKnown), never the
	// known maps themselves.
	e := &arena{known: known, copyKnown: true}
	return &Edits{obj: v, e: e}, nil
}

// listed is the field name of struct v as collect lists it: found false when collect
// leaves it out (an empty spec at the top included).
func (ed *Edits) listed(v reflect.Value, top bool, name string) (value, bool, error) {
	val, found, err := ed.e.field(v, top, name)
	if err != nil || !found {
		return value{}, false, err
	}
	if top && name == "spec" && !val.isPlain && val.v.Kind() == reflect.Struct {
		has, err := ed.e.hasFields(val.v)
		if err != nil || !has {
			return value{}, false, err
		}
	}
	return val, true, nil
}

// Merge folds a map-only strategic-merge patch in (overlay's mergeMaps on the plain
// form: a scalar replaces, a map merges into a map or fills a missing field).
func (ed *Edits) Merge(patch map[string]any) bool {
	ok, err := ed.merge(&ed.root, ed.obj, true, patch)
	return err == nil && ok
}

func (ed *Edits) merge(n *editNode, v reflect.Value, top bool, patch map[string]any) (bool, error) {
	for _, k := range sortedKeys(patch) {
		pv := patch[k]
		pm, patchIsMap := pv.(map[string]any)
		if c := n.children[k]; c != nil && (c.set || c.unset) {
			// The field holds plain data an earlier patch set (or nothing, removed).
			switch cur := c.value; {
			case c.unset || cur == nil:
				c.set, c.unset, c.value = true, false, pv
			case patchIsMap:
				return false, nil // a map into plain data: the plain path merges it
			default:
				switch cur.(type) {
				case map[string]any, []any:
					return false, nil // a scalar meeting a map or a list: refused
				}
				c.value = pv
			}
			continue
		}
		val, found, err := ed.listed(v, top, k)
		if err != nil {
			return false, err
		}
		if !found {
			if c := n.children[k]; c != nil {
				return false, nil // changed inside, yet not listed: not expected
			}
			n.child(k).set, n.child(k).value = true, pv
			continue
		}
		switch mergeStepOf(val, pv) {
		case mergeReplace:
			c := n.child(k)
			c.set, c.value, c.children = true, pv, nil
		case mergeInto:
			if ok, err := ed.merge(n.child(k), val.v, false, pm); err != nil || !ok {
				return false, err
			}
		default:
			return false, nil
		}
	}
	return true, nil
}

// Op folds one add, replace or remove of a JSON 6902 patch in: path is its pointer split,
// value what an add or replace puts there. inPlain applies the operation to doc, a copy
// of the plain data found after the first depth segments of the path (Helm values, or
// what an earlier patch set), copying what it changes; false when it does not apply.
func (ed *Edits) Op(kind string, path []string, value any, inPlain func(doc any, depth int) (any, bool)) bool {
	ok, err := ed.op(kind, path, value, inPlain)
	return err == nil && ok
}

func (ed *Edits) op(kind string, path []string, value any, inPlain func(doc any, depth int) (any, bool)) (bool, error) {
	if len(path) == 0 {
		return false, nil
	}
	n, v, top := &ed.root, ed.obj, true
	for i, seg := range path[:len(path)-1] {
		c := n.children[seg]
		if c != nil && c.unset {
			return false, nil // its parent is gone
		}
		if c != nil && c.set {
			out, ok := inPlain(c.value, i+1)
			if ok {
				c.value = out
			}
			return ok, nil
		}
		val, found, err := ed.listed(v, top, seg)
		if err != nil || !found {
			return false, err
		}
		if val.isPlain {
			if val.plain == nil {
				return false, nil
			}
			out, ok := inPlain(val.plain, i+1) // val.plain is a copy of its own
			if ok {
				c := n.child(seg)
				c.set, c.value = true, out
			}
			return ok, nil
		}
		if val.v.Kind() != reflect.Struct {
			return false, nil // a typed map or list: the plain path
		}
		n, v, top = n.child(seg), val.v, false
	}
	last := path[len(path)-1]
	c := n.children[last]
	if kind != "add" {
		// A replace or remove needs the field; an add sets it either way.
		exists := c != nil && !c.unset
		if c == nil {
			_, found, err := ed.listed(v, top, last)
			if err != nil {
				return false, err
			}
			exists = found
		}
		if !exists {
			return false, nil // the plain way decides
		}
	}
	c = n.child(last)
	c.children = nil
	switch kind {
	case "add", "replace":
		c.set, c.unset, c.value = true, false, value
	case "remove":
		c.set, c.unset, c.value = false, true, nil
	default:
		return false, nil
	}
	return true, nil
}

// EncodeTypedEdited writes a typed object with its edits (nil: none) written in, as
// Encode writes its plain form patched the same way; known is as for EncodeTypedKnown.
func EncodeTypedEdited(buf *bytes.Buffer, obj any, ed *Edits, known KnownJSON) error {
	v, err := structOf(obj)
	if err != nil {
		return err
	}
	root := &editNode{}
	if ed != nil {
		root = &ed.root
	}
	e := getArena(known)
	defer e.release()
	fields, err := e.collect(v, true)
	if err != nil {
		return err
	}
	if !writesAny(fields, root) {
		buf.WriteString("{}\n")
		return nil
	}
	return e.writeEdited(buf, fields, root, 0)
}

// writesAny says whether a struct's fields with n's edits write any entry.
func writesAny(fields []namedValue, n *editNode) bool {
	for _, f := range fields {
		if c := n.children[f.name]; c == nil || !c.unset {
			return true
		}
	}
	for _, c := range n.children {
		if c.set {
			return true
		}
	}
	return false
}

func (e *arena) writeEdited(buf *bytes.Buffer, fields []namedValue, n *editNode, depth int) error {
	keys := make([]string, 0, len(n.children))
	for k := range n.children {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, j := 0, 0; i < len(fields) || j < len(keys); {
		var name string
		var f *namedValue
		var c *editNode
		switch {
		case j == len(keys) || i < len(fields) && fields[i].name < keys[j]:
			f, name = &fields[i], fields[i].name
			i++
		case i == len(fields) || keys[j] < fields[i].name:
			c, name = n.children[keys[j]], keys[j]
			j++
		default:
			f, c, name = &fields[i], n.children[keys[j]], keys[j]
			i++
			j++
		}
		switch {
		case c == nil:
			indent(buf, depth)
			if err := e.writeTypedEntry(buf, name, f.value, depth); err != nil {
				return err
			}
		case c.unset:
		case c.set:
			indent(buf, depth)
			if err := writeEntry(buf, name, c.value, depth); err != nil {
				return err
			}
		case f == nil || f.isPlain || f.v.Kind() != reflect.Struct:
			return fmt.Errorf("%s: edited inside, but not a typed struct the object holds", name)
		default:
			if err := e.writeEditedStruct(buf, name, f.v, c, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *arena) writeEditedStruct(buf *bytes.Buffer, name string, v reflect.Value, n *editNode, depth int) error {
	mark := len(e.items)
	defer func() { e.items = e.items[:mark] }()
	fields, err := e.collect(v, false)
	if err != nil {
		return err
	}
	indent(buf, depth)
	writeString(buf, name)
	if !writesAny(fields, n) {
		buf.WriteString(": {}\n")
		return nil
	}
	buf.WriteString(":\n")
	return e.writeEdited(buf, fields, n, depth+1)
}

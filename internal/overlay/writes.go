package overlay

import "slices"

// Writes reports whether the patch, applied to the object id names, sets the field at
// path (keys from the object's root, such as spec, values, image, digest) or a field
// that holds it: the patch an error about that field's value points at.
func (p *Patch) Writes(id Identity, path []string) bool {
	if !p.Targets(id) {
		return false
	}
	if p.ops != nil {
		for _, op := range p.ops {
			switch op.Kind() {
			case "add", "replace", "copy", "move":
			default:
				continue
			}
			pointer, err := op.Path()
			if err != nil || pointer == "" {
				continue
			}
			if keys := splitPointer(pointer); len(keys) <= len(path) && slices.Equal(keys, path[:len(keys)]) {
				return true
			}
		}
		return false
	}
	merge := p.merge
	if merge == nil && p.smp != nil {
		var err error
		if merge, err = p.smp.Map(); err != nil {
			return false
		}
	}
	// A strategic merge sets what it names down to a value that is not a map: that value
	// replaces everything under it.
	var cur any = merge
	for _, key := range path {
		m, isMap := cur.(map[string]any)
		if !isMap {
			return cur != nil
		}
		if cur = m[key]; cur == nil {
			return false
		}
	}
	return true
}

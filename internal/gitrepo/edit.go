package gitrepo

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// View reads a tree lazily: only the directories asked about are decoded, so looking
// at a few tenants of a large repository costs a few tree objects, not the whole tree.
type View struct {
	s     storer.EncodedObjectStorer
	root  plumbing.Hash
	trees map[string]*object.Tree // by directory path ("" is the root)
}

// NewView reads the tree root (a zero hash is an empty tree).
func NewView(s storer.EncodedObjectStorer, root plumbing.Hash) *View {
	return &View{s: s, root: root, trees: map[string]*object.Tree{}}
}

// dir returns the tree of a directory, nil when it does not exist.
func (v *View) dir(p string) (*object.Tree, error) {
	if t, ok := v.trees[p]; ok {
		return t, nil
	}
	var t *object.Tree
	if p == "" {
		if !v.root.IsZero() {
			var err error
			if t, err = object.GetTree(v.s, v.root); err != nil {
				return nil, fmt.Errorf("reading tree %s: %w", v.root, err)
			}
		}
	} else {
		parent, err := v.dir(parentDir(p))
		if err != nil || parent == nil {
			return nil, err
		}
		for _, e := range parent.Entries {
			if e.Name == path.Base(p) && e.Mode == filemode.Dir {
				if t, err = object.GetTree(v.s, e.Hash); err != nil {
					return nil, fmt.Errorf("reading tree %s: %w", p, err)
				}
				break
			}
		}
	}
	v.trees[p] = t
	return t, nil
}

func parentDir(p string) string {
	if d := path.Dir(p); d != "." {
		return d
	}
	return ""
}

// Lookup returns the entry of a file.
func (v *View) Lookup(p string) (Entry, bool, error) {
	t, err := v.dir(parentDir(p))
	if err != nil || t == nil {
		return Entry{}, false, err
	}
	name := path.Base(p)
	for _, e := range t.Entries {
		if e.Name == name && e.Mode != filemode.Dir {
			return Entry{Hash: e.Hash, Mode: e.Mode}, true, nil
		}
	}
	return Entry{}, false, nil
}

// List returns the entries of a directory: name to entry (directories have mode Dir).
func (v *View) List(dir string) (map[string]Entry, error) {
	t, err := v.dir(dir)
	if err != nil || t == nil {
		return map[string]Entry{}, err
	}
	out := make(map[string]Entry, len(t.Entries))
	for _, e := range t.Entries {
		out[e.Name] = Entry{Hash: e.Hash, Mode: e.Mode}
	}
	return out, nil
}

// Files returns every file under dir (recursively), with paths relative to the root.
func (v *View) Files(dir string) (Files, error) {
	out := Files{}
	entries, err := v.List(dir)
	if err != nil {
		return nil, err
	}
	for name, e := range entries {
		p := path.Join(dir, name)
		if e.Mode == filemode.Dir {
			sub, err := v.Files(p)
			if err != nil {
				return nil, err
			}
			for sp, se := range sub {
				out[sp] = se
			}
			continue
		}
		out[p] = e
	}
	return out, nil
}

// Edit writes a new root tree that is the view's tree with changes applied (a path
// mapped to nil is deleted). Only the trees on the changed paths are rebuilt and stored;
// empty directories disappear. It returns the new root and every tree it built.
func (v *View) Edit(changes map[string]*Entry) (plumbing.Hash, []plumbing.Hash, error) {
	byDir := map[string]map[string]*Entry{}
	for p, e := range changes {
		dir := parentDir(p)
		if byDir[dir] == nil {
			byDir[dir] = map[string]*Entry{}
		}
		byDir[dir][path.Base(p)] = e
		// Every ancestor must be rebuilt.
		for d := dir; d != ""; d = parentDir(d) {
			if byDir[parentDir(d)] == nil {
				byDir[parentDir(d)] = map[string]*Entry{}
			}
		}
	}
	var built []plumbing.Hash
	h, _, err := v.rebuild("", byDir, &built)
	return h, built, err
}

// rebuild writes the tree of dir with its changes and its rebuilt subdirectories. It
// returns the zero hash (and false) when the directory ends up empty.
func (v *View) rebuild(dir string, byDir map[string]map[string]*Entry, built *[]plumbing.Hash) (plumbing.Hash, bool, error) {
	current, err := v.List(dir)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	for name, e := range byDir[dir] {
		if e == nil {
			delete(current, name)
		} else {
			current[name] = *e
		}
	}
	// Subdirectories with changes below them.
	for sub := range byDir {
		if sub == "" || parentDir(sub) != dir {
			continue
		}
		h, ok, err := v.rebuild(sub, byDir, built)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if ok {
			current[path.Base(sub)] = Entry{Hash: h, Mode: filemode.Dir}
		} else {
			delete(current, path.Base(sub))
		}
	}
	if len(current) == 0 {
		return plumbing.ZeroHash, false, nil
	}
	h, err := storeTree(v.s, current)
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	*built = append(*built, h)
	return h, true, nil
}

func storeTree(s storer.EncodedObjectStorer, entries map[string]Entry) (plumbing.Hash, error) {
	list := make([]object.TreeEntry, 0, len(entries))
	for name, e := range entries {
		list = append(list, object.TreeEntry{Name: name, Mode: e.Mode, Hash: e.Hash})
	}
	slices.SortFunc(list, compareTreeEntries)
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: list}).Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h := obj.Hash()
	if s.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := s.SetEncodedObject(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("storing tree: %w", err)
	}
	return h, nil
}

// compareTreeEntries orders a tree's entries as git does: by name, a directory's name
// compared as if it ended in "/". It builds no string: a tenants folder holds thousands
// of directories, sorted at every commit.
func compareTreeEntries(a, b object.TreeEntry) int {
	n := min(len(a.Name), len(b.Name))
	if c := strings.Compare(a.Name[:n], b.Name[:n]); c != 0 {
		return c
	}
	// One name is a prefix of the other (or they are equal): the byte after it decides,
	// the implied "/" of a directory counting as one.
	for i := n; ; i++ {
		x, y := sortByte(a, i), sortByte(b, i)
		if x != y || x < 0 {
			return cmp.Compare(x, y)
		}
	}
}

// sortByte is the i-th byte of an entry's sort key (its name, then "/" for a
// directory), or -1 past its end.
func sortByte(e object.TreeEntry, i int) int {
	switch {
	case i < len(e.Name):
		return int(e.Name[i])
	case i == len(e.Name) && e.Mode == filemode.Dir:
		return '/'
	}
	return -1
}

package publish

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/aidonow/eva/internal/render"
)

// Dir writes a render into a plain folder (no git): files are written as they are
// rendered, unchanged files are left alone, and files of tenants no longer rendered
// are removed at the end. The safety checks run before anything is written, from the
// tenant codes about to be rendered.
type Dir struct {
	dir     string
	mu      sync.Mutex
	written map[string]bool
	// dirs are the folders Put has made sure of, each made sure of once (by whichever
	// Put comes first; the others wait for it). Those this render created hold nothing
	// but what it writes: their files need no reading first, nor Finish a look inside.
	dirs map[string]*folderState
}

// folderState is what one folder's first Put found: whether this render created the
// folder, or the error making it.
type folderState struct {
	once    sync.Once
	created bool
	err     error
}

// OpenDir checks the removals a render of codes would make in dir and prepares it.
func OpenDir(dir string, codes []string, safety Safety) (*Dir, error) {
	existing, err := existingTenants(dir)
	if err != nil {
		return nil, err
	}
	rendered := map[string]bool{}
	for _, c := range codes {
		rendered[render.DirName(c)] = true
	}
	plan := &Plan{Published: len(existing), Rendered: len(rendered)}
	for _, d := range existing {
		if !rendered[d] {
			plan.Removed = append(plan.Removed, d)
		}
	}
	err = plan.Check(safety, func(p string) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
	})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	top := &folderState{}
	top.once.Do(func() {}) // made (or found) above, not by this render
	return &Dir{dir: dir, written: map[string]bool{}, dirs: map[string]*folderState{dir: top}}, nil
}

func existingTenants(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, render.TenantsDir))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, render.TenantsDir, e.Name(), render.ManifestsFile)); e.IsDir() && err == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Put writes one file unless it already holds the same bytes. It is safe for
// concurrent use.
func (d *Dir) Put(f render.File) error {
	if err := checkFilePath(f.Path); err != nil {
		return err
	}
	full := filepath.Join(d.dir, filepath.FromSlash(f.Path))
	d.mu.Lock()
	d.written[f.Path] = true
	d.mu.Unlock()
	created, err := d.folder(filepath.Dir(full))
	if err != nil {
		return err
	}
	if !created {
		if cur, err := os.ReadFile(full); err == nil && bytes.Equal(cur, f.Data) {
			return nil
		}
	}
	if err := overwriteFile(full, f.Data); err != nil {
		return fmt.Errorf("writing %s: %w", full, err)
	}
	return nil
}

// folder makes sure dir exists and reports whether this render created it: a render
// into an empty folder then costs one system call per file less to look for what is
// there, and one per file less to make its folder. A folder made by another Put of
// this render a moment ago counts as created by this render too.
func (d *Dir) folder(dir string) (created bool, err error) {
	d.mu.Lock()
	st, known := d.dirs[dir]
	if !known {
		st = &folderState{}
		d.dirs[dir] = st
	}
	d.mu.Unlock()
	st.once.Do(func() {
		err := os.Mkdir(dir, 0o755)
		if os.IsNotExist(err) {
			if _, err = d.folder(filepath.Dir(dir)); err != nil {
				st.err = err
				return
			}
			err = os.Mkdir(dir, 0o755)
		}
		switch {
		case err == nil:
			st.created = true
		case os.IsExist(err):
			// Made before this render: files in it are read before they are written.
		default:
			st.err = err
		}
	})
	return st.created, st.err
}

// Finish removes files under flux/ and tenants/ that this render did not write. The
// folders it made are not read: they hold only what it wrote.
func (d *Dir) Finish() error {
	var stale []string
	for _, top := range append([]string{render.TenantsDir}, render.DeliveryDirs...) {
		root := filepath.Join(d.dir, top)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err != nil {
				return err
			}
			if e.IsDir() {
				// A folder this render made holds only what it wrote.
				if st := d.dirs[p]; st != nil && st.created {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(d.dir, p)
			if rel = filepath.ToSlash(rel); !d.written[rel] {
				stale = append(stale, p)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	slices.Sort(stale)
	for _, p := range stale {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("removing %s: %w", p, err)
		}
		removeEmptyParents(d.dir, filepath.Dir(p))
	}
	return nil
}

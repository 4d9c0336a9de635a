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
	// dirs are the folders Put has made sure of: true for those this render created,
	// which hold nothing but what it writes, so their files need no reading first.
	dirs map[string]bool
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
	return &Dir{dir: dir, written: map[string]bool{}, dirs: map[string]bool{dir: false}}, nil
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
// there, and one per file less to make its folder.
func (d *Dir) folder(dir string) (created bool, err error) {
	d.mu.Lock()
	created, known := d.dirs[dir]
	d.mu.Unlock()
	if known {
		return created, nil
	}
	err = os.Mkdir(dir, 0o755)
	if os.IsNotExist(err) {
		if _, err := d.folder(filepath.Dir(dir)); err != nil {
			return false, err
		}
		err = os.Mkdir(dir, 0o755)
	}
	switch {
	case err == nil:
		created = true
	case os.IsExist(err):
		// Made before this render, or by a concurrent Put a moment ago: either way,
		// files in it are read before they are written.
	default:
		return false, err
	}
	d.mu.Lock()
	if prev, ok := d.dirs[dir]; ok {
		created = prev && created
	}
	d.dirs[dir] = created
	d.mu.Unlock()
	return created, nil
}

// Finish removes files under flux/ and tenants/ that this render did not write.
func (d *Dir) Finish() error {
	var stale []string
	for _, top := range append([]string{render.TenantsDir}, render.DeliveryDirs...) {
		root := filepath.Join(d.dir, top)
		err := filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if os.IsNotExist(err) {
				return filepath.SkipDir
			}
			if err != nil || e.IsDir() {
				return err
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
